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
import contextlib
import functools
import logging
import os
import sys
import threading
import time

import paramiko

from kubernetes_mgmt_pv import remote
from testbed import cluster as cluster_mod
from testbed import hosts

SCALING_TARGET = 1.5
RERUN_TARGET = 0.25


def _busy_cpu_seconds():
    """CPU seconds the whole machine (all test hosts included) has spent
    busy since boot, from /proc/stat."""
    with open('/proc/stat') as stream:
        fields = [int(v) for v in stream.readline().split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    return (sum(fields[:8]) - idle) / os.sysconf('SC_CLK_TCK')


@contextlib.contextmanager
def counting_ssh():
    """Count the successful SSH logins (at paramiko's connect) and the
    driver's remote commands made inside the block, by wrapping both here:
    the driver carries no counters."""
    counts = {'logins': 0, 'commands': 0}
    lock = threading.Lock()

    def counted(name, method):
        @functools.wraps(method)
        def wrapper(*args, **kwargs):
            result = method(*args, **kwargs)
            with lock:
                counts[name] += 1
            return result
        return wrapper

    wrapped = [(paramiko.SSHClient, 'connect', 'logins'),
               (remote.RemoteCommandExecutor, 'run', 'commands')]
    originals = [(owner, name, getattr(owner, name))
                 for owner, name, _ in wrapped]
    for owner, name, count in wrapped:
        setattr(owner, name, counted(count, getattr(owner, name)))
    try:
        yield counts
    finally:
        for owner, name, method in originals:
            setattr(owner, name, method)


def timed_run(cluster):
    """Seconds, SSH logins, remote commands, driver CPU seconds and machine
    CPU load of one instantiate_end call. The test hosts share this
    machine's cores, so a load near 100% means the run was limited by CPU,
    not by waiting."""
    busy = _busy_cpu_seconds()
    driver_cpu = time.process_time()
    started = time.monotonic()
    with counting_ssh() as counts:
        cluster.instantiate_end()
    wall = time.monotonic() - started
    return {'seconds': wall, 'logins': counts['logins'],
            'commands': counts['commands'],
            'driver_cpu': time.process_time() - driver_cpu,
            'load': (_busy_cpu_seconds() - busy) / (wall * os.cpu_count())}


def measure(workers):
    with cluster_mod.VirtualCluster(masters=1, workers=workers,
                                    volumes=1) as cluster:
        host_count = len(cluster.testbed.hosts)
        first = timed_run(cluster)
        rerun = timed_run(cluster)
    return {'workers': workers, 'hosts': host_count, 'first': first,
            'rerun': rerun}


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
    ok = True
    print()
    for name, value, target in checks:
        passed = value <= target
        ok &= passed
        print('%-32s %6.2f  target <= %.2f  %s' % (
            name, value, target, 'ok' if passed else 'MISSED'))
    logins_ok = all(row['first']['logins'] == row['hosts'] ==
                    row['rerun']['logins'] for row in rows)
    ok &= logins_ok
    print('%-32s %s' % ('one SSH login per host per hook',
                        'ok' if logins_ok else 'MISSED'))
    return 0 if ok else 1


if __name__ == '__main__':
    sys.exit(main())
