#!/usr/bin/env python3
"""Benchmark of the persistent-volume phase of instantiate_end.

For N workers (default 1, 4, 16) it brings up a virtual cluster (storage
server + 1 Master + N Workers, real sshd hosts), then times
``instantiate_end`` (which on this driver is exactly the PV phase: storage
server, NFS clients, PersistentVolumes) on the fresh hosts and once more on
the configured hosts, and counts the SSH logins and remote commands of each
run. It prints a table, the ratios T(N_max)/T(N_min) and
T(re-run)/T(first), and whether the targets hold:

* T(16)/T(1) <= 1.5        (nodes are handled concurrently)
* T(re-run) <= 25% of T(first run)
* one SSH connection per host per hook

Usage (as root, after ``tools/bootstrap.sh``)::

    .venv/bin/python -m tools.benchmark_pv [--workers 1 4 16]

Exit status 0 when every target holds, 1 otherwise.
"""

import argparse
import os
import sys

from testbed import virtual_vnf
from tools import bench_common
from tools.bench_common import print_checks
from tools.bench_common import RERUN_TARGET
from tools.bench_common import SCALING_TARGET
from tools.bench_common import timed_run


def measure(workers):
    with virtual_vnf.VirtualCluster(masters=1, workers=workers, volumes=1,
                                    **virtual_vnf.STOCK_IMAGE) as cluster:
        host_count = len(cluster.testbed.hosts)
        first = timed_run(cluster)
        rerun = timed_run(cluster)
    return {'workers': workers, 'hosts': host_count, 'first': first,
            'rerun': rerun}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--workers', type=int, nargs='+', default=[1, 4, 16])
    args = parser.parse_args()
    missing = bench_common.testbed_missing(max_concurrent_nodes=64)
    if missing:
        return missing

    rows = []
    for workers in args.workers:
        print('measuring %d worker(s)...' % workers, file=sys.stderr,
              flush=True)
        rows.append(measure(workers))

    print('%-8s %-6s %-37s %-37s' % ('', '', 'first run', 're-run'))
    print('%-8s %-6s %s %s' % ('workers', 'hosts', *[
        '%8s %6s %8s %6s %5s ' % ('seconds', 'logins', 'commands', 'drvCPU',
                                  'load')] * 2))
    for row in rows:
        cells = ['%8.2f %6d %8d %6.2f %4.0f%% ' % (
            run['seconds'], run['logins'], run['commands'],
            run['driver_cpu'], 100 * run['load'])
            for run in (row['first'], row['rerun'])]
        print('%-8d %-6d %s %s' % (row['workers'], row['hosts'], *cells))
    print('(drvCPU: CPU seconds of the driver process; load: busy share of '
          'all %d cores, test hosts included)' % os.cpu_count())

    smallest, largest = rows[0], rows[-1]
    checks = []
    if len(rows) > 1:
        for run in ('first', 'rerun'):
            checks.append(('T(%d)/T(%d) %s' % (
                largest['workers'], smallest['workers'], run),
                largest[run]['seconds'] / smallest[run]['seconds'],
                SCALING_TARGET))
    for row in rows:
        checks.append(('T(re-run)/T(first) at N=%d' % row['workers'],
                       row['rerun']['seconds'] / row['first']['seconds'],
                       RERUN_TARGET))
    print()
    ok = print_checks(checks)
    logins_ok = all(row['first']['logins'] == row['hosts'] ==
                    row['rerun']['logins'] for row in rows)
    ok &= logins_ok
    bench_common.print_login_check(logins_ok)
    return 0 if ok else 1


if __name__ == '__main__':
    sys.exit(main())
