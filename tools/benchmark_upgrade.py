"""Benchmark of the Kubernetes minor upgrade (cluster/upgrade.py): the
wall time of each node's upgrade and of the whole run, with the machine's
load, on a testbed cluster (default: three Masters behind the VIP, one
Worker) upgraded from the install script's minor to the next from the
test apt repository.

No target is checked: the numbers say where the time goes (apt, the
control plane restarts, the drain, the waits for the Nodes) on this
machine, whose cores the test hosts share. Run it alone (not with a test
run): ``.venv/bin/python -m tools.benchmark_upgrade [--masters 3]
[--workers 1]``.
"""

import argparse
import functools
import os
import sys
import time

from kubernetes_mgmt_pv.cluster import upgrade
from testbed import apt_repo
from testbed import standins
from testbed import virtual_vnf
from tools import bench_common


def timing_nodes(seconds):
    """Wrap _Upgrade._upgrade_node to append (Node name, action, wall
    seconds, machine load) of each node to ``seconds``."""
    def wrap(original):
        @functools.wraps(original)
        def wrapper(self, sessions, kubectl, step):
            busy = bench_common._busy_cpu_seconds()
            started = time.monotonic()
            try:
                return original(self, sessions, kubectl, step)
            finally:
                wall = time.monotonic() - started
                seconds.append((step.name, step.action, wall, (
                    bench_common._busy_cpu_seconds() - busy) /
                    (wall * os.cpu_count())))
        return wrapper
    return wrap


def measure(masters, workers):
    """(per-node rows, timed_call of the whole upgrade)."""
    nodes = []
    patches = bench_common.Patches()
    with apt_repo.AptRepository() as repository, \
            virtual_vnf.VirtualCluster(masters=masters, workers=workers,
                                       volumes=1,
                                       install_cluster=True) as cluster:
        apt_repo.use_in(cluster, repository, virtual_vnf.CALICO_STAND_IN)
        for node in cluster.nodes():
            repository.route_from(node, cluster.testbed.bridge_ip)
        cluster.instantiate_end()
        patches.patch(upgrade._Upgrade, '_upgrade_node', timing_nodes(nodes))
        try:
            run = bench_common.timed_call(
                lambda: cluster.upgrade(standins.next_minor()))
        finally:
            patches.restore()
    return nodes, run


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--masters', type=int, default=3)
    parser.add_argument('--workers', type=int, default=1)
    args = parser.parse_args()
    missing = bench_common.testbed_missing()
    if missing:
        return missing
    nodes, run = measure(args.masters, args.workers)
    print('Upgrade %s -> %s, %d Master(s), %d Worker(s), %d core(s)' % (
        standins.kubernetes_version(),
        standins.kubernetes_version(standins.next_minor()), args.masters,
        args.workers, os.cpu_count()))
    for name, action, seconds, load in nodes:
        print('%-12s %-7s %7.1f s  machine load %3.0f%%' % (
            name, action, seconds, load * 100))
    print('%-20s %7.1f s  machine load %3.0f%%, %d remote commands, '
          'driver CPU %.1f s' % ('whole upgrade', run['seconds'],
                                 run['load'] * 100, run['commands'],
                                 run['driver_cpu']))
    return 0


if __name__ == '__main__':
    sys.exit(main())
