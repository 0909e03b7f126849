#!/usr/bin/env python3
"""Benchmark of the persistent-volume phase of instantiate_end.

For N workers (default 1, 4, 16) it brings up a virtual cluster (storage
server + 1 Master + N Workers, real sshd hosts), then times
``instantiate_end`` (which on this driver is exactly the PV phase: storage
server, NFS clients, PersistentVolumes) on the fresh hosts and once more on
the configured hosts, and counts the SSH logins of each run. It prints a
table, the ratios T(N_max)/T(N_min) and T(re-run)/T(first), and whether
the targets hold:

* T(16)/T(1) <= 1.5        (nodes are handled concurrently)
* T(re-run) <= 25% of T(first run)
* one SSH connection per host per hook

Usage (as root, after ``tools/bootstrap.sh``)::

    .venv/bin/python tools/benchmark_pv.py [--workers 1 4 16]

Exit status 0 when every target holds, 1 otherwise.
"""

import argparse
import logging
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                '..'))

from kubernetes_mgmt_pv import remote  # noqa: E402
from tests.testbed import cluster as cluster_mod  # noqa: E402
from tests.testbed import hosts  # noqa: E402

SCALING_TARGET = 1.5
RERUN_TARGET = 0.25


def timed_run(cluster):
    """Seconds and SSH logins of one instantiate_end call."""
    logins = remote.RemoteCommandExecutor.connections_opened
    started = time.monotonic()
    cluster.instantiate_end()
    return (time.monotonic() - started,
            remote.RemoteCommandExecutor.connections_opened - logins)


def measure(workers):
    with cluster_mod.VirtualCluster(masters=1, workers=workers,
                                    volumes=1) as cluster:
        host_count = len(cluster.testbed.hosts)
        first, first_logins = timed_run(cluster)
        rerun, rerun_logins = timed_run(cluster)
    return {'workers': workers, 'hosts': host_count, 'first': first,
            'rerun': rerun, 'first_logins': first_logins,
            'rerun_logins': rerun_logins}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--workers', type=int, nargs='+', default=[1, 4, 16])
    args = parser.parse_args()
    reason = hosts.require_testbed()
    if reason:
        print('benchmark: %s' % reason, file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.ERROR)
    cluster_mod.use_test_options(max_concurrent_nodes=64)

    rows = []
    for workers in args.workers:
        print('measuring %d worker(s)...' % workers, file=sys.stderr,
              flush=True)
        rows.append(measure(workers))

    print('%8s %6s %10s %10s %8s %12s' % (
        'workers', 'hosts', 'first [s]', 'rerun [s]', 'rerun/', 'SSH logins'))
    print('%8s %6s %10s %10s %8s %12s' % ('', '', '', '', 'first',
                                           'first/rerun'))
    for row in rows:
        print('%8d %6d %10.2f %10.2f %8.2f %6d/%d' % (
            row['workers'], row['hosts'], row['first'], row['rerun'],
            row['rerun'] / row['first'], row['first_logins'],
            row['rerun_logins']))

    smallest, largest = rows[0], rows[-1]
    checks = []
    if len(rows) > 1:
        checks.append(('T(%d)/T(%d) first run' % (largest['workers'],
                                                  smallest['workers']),
                       largest['first'] / smallest['first'], SCALING_TARGET))
        checks.append(('T(%d)/T(%d) re-run' % (largest['workers'],
                                               smallest['workers']),
                       largest['rerun'] / smallest['rerun'], SCALING_TARGET))
    for row in rows:
        checks.append(('T(re-run)/T(first) at N=%d' % row['workers'],
                       row['rerun'] / row['first'], RERUN_TARGET))
    ok = True
    print()
    for name, value, target in checks:
        passed = value <= target
        ok &= passed
        print('%-32s %6.2f  target <= %.2f  %s' % (
            name, value, target, 'ok' if passed else 'MISSED'))
    logins_ok = all(row['first_logins'] == row['hosts'] ==
                    row['rerun_logins'] for row in rows)
    ok &= logins_ok
    print('%-32s %s' % ('one SSH login per host per hook',
                        'ok' if logins_ok else 'MISSED'))
    return 0 if ok else 1


if __name__ == '__main__':
    sys.exit(main())
