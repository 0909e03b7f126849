"""Benchmark of the Kubernetes upgrade (cluster/upgrade.py): the Workers
one at a time (``upgrade_max_unavailable`` 1) against the default waves
(the option's 10 %, at least one Worker), on testbed clusters (default:
three Masters behind the VIP) upgraded from the test apt repository.

For each Worker count (``--workers 1 8 32``) one cluster is built and
upgraded twice: first one Worker at a time, from the install script's
minor to the next (1.35.4 -> 1.36.1), then in the default waves to the
next patch release of that minor (1.36.1 -> 1.36.2, which this benchmark
adds to the repository). A Worker's steps are the same in both (cordon,
drain, ``-U`` packages, ``kubeadm upgrade node``, kubelet restart,
Ready, uncordon); the Masters are upgraded one at a time in both, so the
Workers' part is printed on its own too.

Printed per run: the time and machine load of each wave (a Master is a
wave of its own) with its slowest node, the whole upgrade, the Workers'
part, the busy CPU seconds of the machine and the CPU-bound floor (those
seconds / cores: the least wall time that work takes on this machine).
The load is the whole machine's (the test hosts share its cores): run it
alone, on a quiet machine; the cluster's idle load, measured before the
upgrades, is printed for reference.

Target (issue 38), at 32 Workers or more: the default waves take under a
third of the one-at-a-time time, unless the waves' load shows the run is
CPU-bound (>= 85 %), and then no more than 1.2 times the CPU-bound floor.
The ideal ratio (waves / Workers, every wave as fast as one Worker) is
printed next to it: with 10 % rounded up it is a quarter at 32.

Usage (as root, after ``tools/bootstrap.sh``; exit status 1 when a target
is missed)::

    .venv/bin/python -m tools.benchmark_upgrade [--workers 1 8 32]
                                                [--masters 3]
"""

import argparse
import functools
import math
import os
import sys
import time

from kubernetes_mgmt_pv.cluster import upgrade
from testbed import apt_repo
from testbed import standins
from testbed import virtual_vnf
from tools import bench_common

WAVES_TARGET = 1 / 3  # waves / one at a time
FLOOR_TARGET = 1.2  # waves / CPU-bound floor, when CPU-bound
CPU_BOUND_LOAD = 0.85
TARGET_WORKERS = 32  # the counts from which the target is checked
IDLE_SECONDS = 5.0
# (label, upgrade_max_unavailable): None is the driver's option default.
MODES = (('one at a time', 1), ('default waves', None))


def next_patch(package_version):
    """'1.36.2-1.1' after '1.36.1-1.1': the same minor's next patch."""
    version, revision = package_version.split('-', 1)
    major, minor, patch = version.split('.')
    return '%s.%s.%d-%s' % (major, minor, int(patch) + 1, revision)


def serve_version(repository, package_version):
    """Add ``package_version``'s kubeadm, kubelet and kubectl to its
    minor's directory of the started testbed.apt_repo.AptRepository."""
    directory = os.path.join(repository.directory, 'k8s',
                             apt_repo.minor_path(package_version))
    apt_repo.populate(directory, version=package_version)
    apt_repo.write_index(directory, repository.key)


def busy_load(function):
    """(result of ``function()``, wall seconds, machine load meanwhile)."""
    busy = bench_common._busy_cpu_seconds()
    started = time.monotonic()
    result = function()
    wall = time.monotonic() - started
    return result, wall, (bench_common._busy_cpu_seconds() - busy) / (
        wall * os.cpu_count())


def timing_waves(waves, nodes):
    """Wrappers of _Upgrade._upgrade_wave and _upgrade_node appending one
    (names, action, wall seconds, load, slowest node's seconds) per wave
    to ``waves``; ``nodes`` ({name: seconds}) collects the nodes'."""
    def wrap_node(original):
        @functools.wraps(original)
        def wrapper(self, sessions, kubectl, step, **kwargs):
            started = time.monotonic()
            try:
                return original(self, sessions, kubectl, step, **kwargs)
            finally:
                nodes[step.name] = time.monotonic() - started
        return wrapper

    def wrap_wave(original):
        @functools.wraps(original)
        def wrapper(self, sessions, kubectl, wave):
            wall, load = None, 0.0
            try:
                _, wall, load = busy_load(functools.partial(
                    original, self, sessions, kubectl, wave))
            finally:
                waves.append((tuple(s.name for s in wave), wave[0].action,
                              wall, load, max(nodes.get(s.name, 0.0)
                                              for s in wave)))
        return wrapper
    return wrap_node, wrap_wave


def run_mode(cluster, version, max_unavailable):
    """One upgrade of ``cluster`` to ``version``: {waves, seconds, load,
    busy (CPU seconds of the machine), wave_size, commands}."""
    waves, nodes, plans = [], {}, []
    wrap_node, wrap_wave = timing_waves(waves, nodes)
    patches = bench_common.Patches()
    patches.patch(upgrade._Upgrade, '_upgrade_node', wrap_node)
    patches.patch(upgrade._Upgrade, '_upgrade_wave', wrap_wave)
    try:
        run = bench_common.timed_call(lambda: plans.append(cluster.upgrade(
            version, max_unavailable=max_unavailable)[0]))
    finally:
        patches.restore()
    return {'waves': waves, 'seconds': run['seconds'], 'load': run['load'],
            'busy': run['load'] * run['seconds'] * os.cpu_count(),
            'wave_size': plans[0].wave_size, 'commands': run['commands']}


def measure(repository, masters, workers):
    """Build one cluster, measure its idle load, then upgrade it once per
    MODES entry (each to the next version): (idle load, [(label, from,
    to, run_mode result)])."""
    with virtual_vnf.VirtualCluster(masters=masters, workers=workers,
                                    volumes=1,
                                    install_cluster=True) as cluster:
        apt_repo.use_in(cluster, repository, virtual_vnf.CALICO_STAND_IN)
        for node in cluster.nodes():
            repository.route_from(node, cluster.testbed.bridge_ip)
        cluster.instantiate_end()
        idle = busy_load(lambda: time.sleep(IDLE_SECONDS))[2]
        current, runs = standins.k8s_package_version(), []
        for label, max_unavailable in MODES:
            target = (standins.next_minor(current) if not runs
                      else next_patch(current))
            runs.append((label, current, target, run_mode(
                cluster, target, max_unavailable)))
            current = target
    return idle, runs


def workers_seconds(run):
    """Wall seconds of the run's Worker waves."""
    return sum(wall or 0.0 for _, action, wall, _, _ in run['waves']
               if action in ('worker', 'uncordon'))


def wave_rows(waves):
    """The printed lines of a run's waves."""
    rows = []
    for number, (names, action, wall, load, slowest) in enumerate(waves, 1):
        who = names[0] if len(names) == 1 else '%d Workers (%s..%s)' % (
            len(names), names[0], names[-1])
        rows.append('  wave %2d  %-7s %-32s %7s  load %3.0f%%  slowest '
                    'node %6.1f s' % (number, action, who, 'failed'
                                      if wall is None else '%.1f s' % wall,
                                      load * 100, slowest))
    return rows


def judge(workers, one, waves, cores):
    """The comparison of a one-at-a-time run and a waves run (run_mode
    results) on ``workers`` Workers: {ratio, ideal (waves / Workers when
    every wave takes one Worker's time), floor (CPU-bound floor of the
    waves run: its busy CPU seconds / cores), floor_ratio, cpu_bound,
    checked (the target applies), ok}."""
    ratio = waves['seconds'] / one['seconds']
    floor = waves['busy'] / cores
    floor_ratio = waves['seconds'] / floor if floor else math.inf
    cpu_bound = waves['load'] >= CPU_BOUND_LOAD
    return {'ratio': ratio, 'floor': floor, 'floor_ratio': floor_ratio,
            'ideal': math.ceil(workers / waves['wave_size']) / workers,
            'cpu_bound': cpu_bound, 'checked': workers >= TARGET_WORKERS,
            'ok': ratio < WAVES_TARGET or (
                cpu_bound and floor_ratio <= FLOOR_TARGET)}


def verdict_lines(verdict):
    """The printed lines of ``judge``'s result."""
    lines = ['  waves / one at a time %.2f (target < %.2f; ideal %.2f)' % (
        verdict['ratio'], WAVES_TARGET, verdict['ideal']),
        '  waves: CPU-bound floor %.1f s, waves / floor %.2f (target <= '
        '%.1f when CPU-bound), %s' % (
            verdict['floor'], verdict['floor_ratio'], FLOOR_TARGET,
            'CPU-bound (load >= %.0f%%)' % (CPU_BOUND_LOAD * 100)
            if verdict['cpu_bound'] else 'not CPU-bound')]
    if verdict['checked']:
        lines.append('  target: %s' % ('ok' if verdict['ok'] else 'MISSED'))
    return lines


def print_runs(masters, workers, idle, runs):
    """Print one Worker count's runs and comparison; True unless its
    target is missed."""
    print('== %d Master(s), %d Worker(s), %d core(s); idle load of the '
          'cluster %.0f%%' % (masters, workers, os.cpu_count(), idle * 100))
    for label, old, new, run in runs:
        print('%s (%d Worker(s) at once): %s -> %s' % (
            label, run['wave_size'], standins.kubernetes_version(old),
            standins.kubernetes_version(new)))
        for row in wave_rows(run['waves']):
            print(row)
        print('  whole upgrade %.1f s, load %.0f%%, Workers %.1f s, busy '
              'CPU %.1f s, %d remote commands' % (
                  run['seconds'], run['load'] * 100, workers_seconds(run),
                  run['busy'], run['commands']))
    verdict = judge(workers, runs[0][3], runs[1][3], os.cpu_count())
    for line in verdict_lines(verdict):
        print(line)
    return verdict['ok'] or not verdict['checked']


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--masters', type=int, default=3)
    parser.add_argument('--workers', type=int, nargs='+', default=[1, 8, 32])
    args = parser.parse_args()
    missing = bench_common.testbed_missing()
    if missing:
        return missing
    ok = True
    with apt_repo.AptRepository() as repository:
        serve_version(repository, next_patch(standins.next_minor()))
        for workers in args.workers:
            idle, runs = measure(repository, args.masters, workers)
            ok &= print_runs(args.masters, workers, idle, runs)
            sys.stdout.flush()
    return 0 if ok else 1


if __name__ == '__main__':
    sys.exit(main())
