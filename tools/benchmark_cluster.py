#!/usr/bin/env python3
"""Benchmark of the whole cluster install: instantiate_end and scale-out.

1. instantiate_end with the cluster feature (the sample install script on
   the kubeadm stand-ins, the VIM registration, then the storage server,
   NFS clients and PVs) for 1 Master + N Workers (default N = 1, 4, 16) and
   a storage server with 1 volume: once on fresh hosts, once more on the
   installed cluster (a re-run).
2. scale_end of a SCALE_OUT on an instantiated 1 Master + 1 Worker
   cluster, for 1 new Worker and, on another such cluster, for 8.

With ``--fresh`` the Masters and Workers boot with nothing of Kubernetes
(testbed.fresh_nodes) and the install script prepares them from the
testbed's signed apt repository (testbed.apt_repo), as on an air-gapped
site: the first run includes the node preparation (apt, containerd's
configuration, the held packages), the re-run finds it done. Each
node's preparation is CPU work of its own (apt's solver, dpkg unpacking
some 90 MB: kubectl, containerd), which real VMs do on their own CPUs
while the test hosts share this machine's: with few cores T(16)/T(1) of
the first run measures the machine (see its load), not the driver.

Each run reports its wall time, the machine load (busy CPU seconds of the
whole machine during the run / wall time / cores: the test hosts share
this machine's cores, so near 100% the run was limited by CPU, not by
waiting), the CPU seconds of the driver's own threads and of the whole
benchmark process (which also runs the fake Heat and Kubernetes API
servers), the SSH logins per host and the remote commands. Targets:

* T(16)/T(1) <= 1.5        (Workers join concurrently; N <= 16 only)
* T(re-run) <= 25% of T(first run)
* scale-out T(8)/T(1) <= 1.5
* one SSH login per host per hook (cluster and storage features share
  one session pool per hook)

Tacker's sample driver installs the Workers one after another; the
benchmark prints what that would cost here, from the measured time of the
install script on one Worker.

Each run also reports the SSH sessions and threads open at once, the
bytes written to the hosts (the /etc/hosts blocks grow with N on every
node) and the RSS of the process (targets: RSS growth within 1 MiB per
host added to the smallest run; for large clusters, ``--workers 1 64
128``, T(128)/T(64) <= 2.2 when the run is CPU-bound, load >= 85 %,
else <= 1.5, and a re-run at N=128 within 15 s; CI does not run it).

Usage (as root, after ``tools/bootstrap.sh``)::

    .venv/bin/python -m tools.benchmark_cluster [--workers 1 4 16]
                                                [--scale-out 1 8] [--fresh]
                                                [--max-concurrent-nodes 16]
                                                [--max-ssh-sessions 256]

Exit status 0 when every target holds, 1 otherwise.
"""

import argparse
import collections
import contextlib
import functools
import os
import re
import statistics
import sys
import threading
import time

import paramiko

from kubernetes_mgmt_pv.cluster import cluster_feature
from kubernetes_mgmt_pv import config
from kubernetes_mgmt_pv.remote import parallel
from kubernetes_mgmt_pv import step_report
from kubernetes_mgmt_pv.storage import storage_feature
from testbed import apt_repo
from testbed import standins
from testbed import virtual_vnf
from tools import bench_common

SCALING_TARGET = bench_common.SCALING_TARGET
RERUN_TARGET = bench_common.RERUN_TARGET
SCRIPT = 'install_k8s_cluster.sh on '  # the driver's description of a run
MIB = 1024.0 * 1024
# T(largest)/T(next) for a doubling of N: CPU-bound runs (load >= 85%)
# grow with the hosts' own work, which shares this machine's cores.
DOUBLING_TARGET_CPU_BOUND = 2.2
RSS_PER_HOST_TARGET = 1024 * 1024
ONE_WAVE_WORKERS = 16  # T(N)/T(1) <= SCALING_TARGET up to this N
IP_ADDRESS = re.compile(r'\b\d{1,3}(\.\d{1,3}){3}\b')
# A re-run on 128 Workers (or more) finds everything done within this.
LARGE_RERUN_WORKERS, LARGE_RERUN_SECONDS = 128, 15.0


# -- where the time and the CPU go -------------------------------------------

class _Trace(object):
    """What the driver did during one hook, seen from outside: the wall
    time of its steps (``step_report.step`` blocks, per-host steps run at once
    by ``parallel.run_on_nodes`` and the cluster and storage halves of the
    hook) and the CPU seconds of its own threads (the hook's thread, the
    per-node task threads and the SSH transport threads)."""

    def __init__(self):
        self.lock = threading.Lock()
        # (start, end, kind, name, on the hook's thread, [task seconds])
        self.events = []
        self.cpu = 0.0
        self.transports = []
        self.hook_thread = threading.current_thread()

    def add_cpu(self, seconds):
        with self.lock:
            self.cpu += seconds

    def add_event(self, start, kind, name, tasks=None):
        event = (start, time.monotonic(), kind, name,
                 threading.current_thread() is self.hook_thread, tasks)
        with self.lock:
            self.events.append(event)

    def top_level(self, kind=None):
        """The steps the hook's thread went through, outermost only."""
        events = sorted((e for e in self.events if e[4]),
                        key=lambda e: (e[0], -e[1]))
        kept = []
        for event in events:
            if kept and event[1] <= kept[-1][1] and kept[-1][2] != 'half':
                continue  # nested in the previous step
            kept.append(event)
        return [e for e in kept if kind in (None, e[2])]


@contextlib.contextmanager
def tracing():
    trace = _Trace()
    patches = bench_common.Patches()
    patch = patches.patch

    def on_nodes(original):
        @functools.wraps(original)
        def wrapper(step, function, nodes, max_workers, limits=None):
            walls = []

            def task(node):
                cpu, wall = time.thread_time(), time.monotonic()
                try:
                    return function(node)
                finally:
                    # The hook's thread works on nodes too: its CPU is
                    # counted once, when the hook returns.
                    if threading.current_thread() is not trace.hook_thread:
                        trace.add_cpu(time.thread_time() - cpu)
                    with trace.lock:
                        walls.append(time.monotonic() - wall)
            started = time.monotonic()
            try:
                return original(step, task, nodes, max_workers, limits)
            finally:
                trace.add_event(started, 'parallel', step, walls)
        return wrapper

    def step(original):
        @contextlib.contextmanager
        def wrapper(host, name):
            started = time.monotonic()
            try:
                with original(host, name):
                    yield
            finally:
                trace.add_event(started, 'step', name)
        return wrapper

    def half(name):
        def wrap(original):
            @functools.wraps(original)
            def wrapper(*args, **kwargs):
                started = time.monotonic()
                try:
                    return original(*args, **kwargs)
                finally:
                    trace.add_event(started, 'half', name)
            return wrapper
        return wrap

    def transport_run(original):
        @functools.wraps(original)
        def wrapper(transport):
            with trace.lock:
                trace.transports.append(transport)
            cpu = time.thread_time()
            try:
                return original(transport)
            finally:
                trace.add_cpu(time.thread_time() - cpu)
        return wrapper

    patch(parallel, 'run_on_nodes', on_nodes)
    patch(step_report, 'step', step)
    patch(paramiko.Transport, 'run', transport_run)
    for hook in ('instantiate_end', 'scale_end'):
        patch(cluster_feature.ClusterFeature, hook, half('cluster'))
        patch(storage_feature.StorageFeature, hook, half('storage'))
    cpu = time.thread_time()
    try:
        yield trace
    finally:
        trace.add_cpu(time.thread_time() - cpu)
        patches.restore()
        # The pool closes its sessions when the hook returns; let their
        # transport threads finish, so their CPU is counted.
        for transport in trace.transports:
            transport.join(5)


def timed_hook(function):
    """bench_common.timed_call() of a hook, with the driver's thread CPU
    and its step trace."""
    epoch = time.time()
    with tracing() as trace:
        run = bench_common.timed_call(function)
    run.update(epoch=epoch, trace=trace, driver_threads_cpu=trace.cpu)
    return run


def script_seconds(run, nodes):
    """Seconds of the install script on each of ``nodes`` in this run."""
    wanted = {SCRIPT + node.ip for node in nodes}
    return [seconds for _, description, seconds in run['runs']
            if description in wanted]


def join_starts(nodes, since):
    """Epoch times of the `kubeadm join` calls made on ``nodes`` since
    ``since``, from the stand-ins' call log (one timestamp per call)."""
    starts = {}
    for node in nodes:
        for call in standins.call_log(node):
            if call['argv'][1:2] == ['join'] and call['time'] >= since:
                starts[node.name] = call['time']
    return starts


def logins_ok(run, expected_ips):
    """Exactly one login on each expected host, none elsewhere."""
    return run['logins_by_host'] == dict.fromkeys(expected_ips, 1)


def describe_logins(run):
    """'18x1': 18 hosts logged in to once each; else 'min-max/host'."""
    counts = list(run['logins_by_host'].values())
    if not counts:
        return '-'
    if min(counts) == max(counts):
        return '%dx%d' % (len(counts), counts[0])
    return '%d-%d/host' % (min(counts), max(counts))


# -- measurements -------------------------------------------------------------

def measure_instantiate(workers, repository=None):
    """instantiate_end twice; with ``repository`` (an apt_repo.
    AptRepository) on fresh nodes prepared from it."""
    with virtual_vnf.VirtualCluster(masters=1, workers=workers, volumes=1,
                                    install_cluster=True,
                                    fresh_nodes=repository is not None,
                                    **virtual_vnf.STOCK_IMAGE) as cluster:
        if repository is not None:
            apt_repo.use_in(cluster, repository,
                            virtual_vnf.CALICO_STAND_IN)
            for node in cluster.nodes():
                repository.route_from(node, cluster.testbed.bridge_ip)
        all_ips = [h.ip for h in cluster.testbed.hosts.values()]
        new_workers = cluster.nodes('worker')
        runs = {}
        for name in ('first', 'rerun'):
            run = runs[name] = timed_hook(cluster.instantiate_end)
            run['expected_ips'] = all_ips
            run['worker_scripts'] = script_seconds(run, new_workers)
            run['leader_script'] = sum(script_seconds(
                run, cluster.nodes('master')))
            run['joins'] = join_starts(new_workers, run['epoch'])
        missing = sorted({w.name for w in new_workers} -
                         set(runs['first']['joins']))
        if missing:
            raise RuntimeError('no kubeadm join on %s in the first run'
                               % ', '.join(missing))
    return {'workers': workers, 'hosts': len(all_ips), **runs}


def measure_scale_out(new_count):
    """scale_end of a SCALE_OUT by ``new_count`` Workers on an instantiated
    1 Master + 1 Worker cluster; the new VMs boot before it, as Heat
    creates them before Tacker calls the hook."""
    with virtual_vnf.VirtualCluster(masters=1, workers=1, volumes=1,
                                    install_cluster=True,
                                    **virtual_vnf.STOCK_IMAGE) as cluster:
        cluster.instantiate_end()
        new = [cluster.add_node('worker') for _ in range(new_count)]
        run = timed_hook(lambda: cluster.scale_end(new))
        run['expected_ips'] = [h.ip for h in cluster.nodes()]
        run['worker_scripts'] = script_seconds(run, new)
        run['joins'] = join_starts(new, run['epoch'])
        missing = sorted({w.name for w in new} - set(run['joins']))
        if missing:
            raise RuntimeError('no kubeadm join on %s in the scale-out'
                               % ', '.join(missing))
        hosts_total = len(cluster.testbed.hosts)
    return {'new': new_count, 'hosts': hosts_total, 'run': run}


# -- output -------------------------------------------------------------------

RUN_HEADER = '%8s %5s %6s %6s %9s %8s' % (
    'seconds', 'load', 'drvCPU', 'prcCPU', 'logins', 'commands')


def run_cells(run):
    return '%8.2f %4.0f%% %6.2f %6.2f %9s %8d' % (
        run['seconds'], 100 * run['load'], run['driver_threads_cpu'],
        run['driver_cpu'], describe_logins(run), run['commands'])


def resource_cells(run, hosts):
    growth = run['rss_peak'] - run['rss_before']
    return 'sessions %3d threads %3d/%3d %8.0f KiB RSS %4.0f->%4.0f ' \
        '(%4.0f/host)' % (
            run['peak_sessions'], run['peak_node_threads'],
            run['peak_threads'], run['bytes'] / 1024.0,
            run['rss_before'] / MIB, run['rss_peak'] / MIB,
            growth / 1024.0 / hosts)


def rss_growth(row):
    return row['first']['rss_peak'] - row['first']['rss_before']


def rss_per_host(row, smaller=None):
    """RSS growth of the first run per host; with ``smaller`` (a run on
    fewer hosts), per host added to it, so that the growth every hook has
    (the first use of the driver's modules) is not counted per host."""
    if smaller is None:
        return rss_growth(row) / row['hosts']
    return (rss_growth(row) - rss_growth(smaller)) / (
        row['hosts'] - smaller['hosts'])


def spread(joins):
    return max(joins.values()) - min(joins.values()) if joins else 0.0


def scripts_text(seconds):
    if not seconds:
        return 'no Worker install script'
    return 'Worker script %d x median %.2fs (min %.2f, max %.2f)' % (
        len(seconds), statistics.median(seconds), min(seconds), max(seconds))


def breakdown(run):
    """The hook's top-level steps in order, with their wall seconds."""
    trace = run['trace']
    parts = []
    for start, end, kind, name, _, _ in trace.top_level():
        if kind == 'half':
            inner = [e for e in trace.top_level()
                     if e[2] != 'half' and start <= e[0] and e[1] <= end]
            rest = (end - start) - sum(e[1] - e[0] for e in inner)
            parts.append('[%s half %.2f: %s; other %.2f]' % (
                name, end - start, ', '.join(
                    step_text(e) for e in inner), rest))
    return parts


def step_text(event):
    """'name 1.23', and for a step run on several hosts at once the
    time each host took."""
    start, end, _, name, _, tasks = event
    text = '%s %.2f' % (name, end - start)
    if tasks and len(tasks) > 1:
        text += ' (%d hosts: med %.2f, max %.2f)' % (
            len(tasks), statistics.median(tasks), max(tasks))
    return text


def largest_first(rows):
    return rows[-1]['first']


def command_totals(run, top=6):
    """The ``top`` remote commands by their seconds summed over all
    hosts, the host addresses in their descriptions left out: [(text,
    [seconds of each call])]."""
    totals = collections.defaultdict(list)
    for _, description, seconds in run['runs']:
        totals[IP_ADDRESS.sub('HOST', description)[:70]].append(seconds)
    return sorted(totals.items(), key=lambda item: -sum(item[1]))[:top]


def print_breakdown(label, run):
    print('  %s:' % label)
    for part in breakdown(run):
        print('    ' + part)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--workers', type=int, nargs='+', default=[1, 4, 16],
                        help='Workers of the instantiated clusters')
    parser.add_argument('--scale-out', type=int, nargs='*', default=[1, 8],
                        help='new Workers of the scale-outs (none: skip)')
    parser.add_argument('--max-concurrent-nodes', type=int, default=None,
                        help="nodes handled at once (default: the "
                             "driver's)")
    parser.add_argument('--max-ssh-sessions', type=int, default=None,
                        help='the cap on open SSH sessions (default: the '
                             "driver's)")
    parser.add_argument('--fresh', action='store_true',
                        help='instantiate on fresh nodes, prepared from the '
                             "testbed's apt repository")
    args = parser.parse_args()
    options = {name: value for name, value in (
        ('max_concurrent_nodes', args.max_concurrent_nodes),
        ('max_ssh_sessions', args.max_ssh_sessions)) if value is not None}
    missing = bench_common.testbed_missing(**options)
    if missing:
        return missing
    driver_options = config.options()

    rows, scales = [], []
    with contextlib.ExitStack() as stack:
        repository = (stack.enter_context(apt_repo.AptRepository())
                      if args.fresh else None)
        for workers in args.workers:
            print('measuring instantiate_end, 1 Master + %d Worker(s)%s...'
                  % (workers, ', fresh nodes' if args.fresh else ''),
                  file=sys.stderr, flush=True)
            rows.append(measure_instantiate(workers, repository))
    for count in args.scale_out:
        print('measuring scale_end, 1+1 -> 1+%d Workers...' % (1 + count),
              file=sys.stderr, flush=True)
        scales.append(measure_scale_out(count))

    cores = os.cpu_count()
    print('instantiate_end with the cluster feature: 1 Master + N Workers, '
          'storage server with 1 volume (max_concurrent_nodes=%d, '
          'max_ssh_sessions=%d, max_node_threads=%d)%s'
          % (driver_options.max_concurrent_nodes,
             driver_options.max_ssh_sessions,
             driver_options.max_node_threads,
             '; fresh nodes, node preparation from the apt repository '
             'included in the first run' if args.fresh else ''))
    width = len(RUN_HEADER)
    print('%-7s %-5s | %-*s | %-*s' % ('', '', width,
                                       'first run (fresh hosts)', width,
                                       're-run'))
    print('%-7s %-5s | %s | %s' % ('workers', 'hosts', RUN_HEADER,
                                   RUN_HEADER))
    for row in rows:
        print('%-7d %-5d | %s | %s' % (row['workers'], row['hosts'],
                                       run_cells(row['first']),
                                       run_cells(row['rerun'])))
    print('(load: busy share of all %d cores during the run, test hosts and '
          'other users included; drvCPU: CPU seconds of the driver\'s '
          'threads; prcCPU: of the whole benchmark process, which also runs '
          'the fake Heat and Kubernetes API servers; logins: hosts x logins '
          'per host)' % cores)

    print()
    print('resources (first run | re-run): SSH sessions open at once, '
          'threads of the driver\'s steps / of the process at once, KiB '
          'written to the hosts, RSS of the process before the hook and '
          'at its peak (MiB), RSS growth per host (KiB)')
    for row in rows:
        print('%-7d %-5d | %s | %s' % (
            row['workers'], row['hosts'],
            resource_cells(row['first'], row['hosts']),
            resource_cells(row['rerun'], row['hosts'])))

    print()
    print('Worker joins (first run):')
    for row in rows:
        first = row['first']
        print('  N=%-3d leader script %.2fs; %s; kubeadm joins started '
              'within %.2fs' % (row['workers'], first['leader_script'],
                                scripts_text(first['worker_scripts']),
                                spread(first['joins'])))
    base = rows[0]
    per_worker = statistics.median(base['first']['worker_scripts'])
    print('  sequential install (Tacker\'s sample: one Worker after another),'
          ' from the install script on one Worker at N=%d (%.2fs):'
          % (base['workers'], per_worker))
    for row in rows:
        first = row['first']
        join_wall = sum(e[1] - e[0] for e in first['trace'].top_level(
            'parallel') if e[3] == 'Worker join')
        sequential = first['seconds'] - join_wall + row['workers'] * \
            per_worker
        print('    N=%-3d T = %.2fs measured - %.2fs concurrent join + '
              '%d x %.2fs = %.2fs, i.e. %.2f x T(%d) (measured: %.2f x)'
              % (row['workers'], first['seconds'], join_wall, row['workers'],
                 per_worker, sequential,
                 sequential / base['first']['seconds'], base['workers'],
                 first['seconds'] / base['first']['seconds']))

    if scales:
        print()
        print('scale_end of a SCALE_OUT on an instantiated 1 Master + 1 '
              'Worker cluster')
        print('%-7s %-5s | %s | %s' % ('new', 'hosts', RUN_HEADER,
                                       'Worker joins'))
        for scale in scales:
            run = scale['run']
            print('%-7d %-5d | %s | %s, joins started within %.2fs' % (
                scale['new'], scale['hosts'], run_cells(run),
                scripts_text(run['worker_scripts']), spread(run['joins'])))
        print('(logins: the Masters and all Workers; the storage server is '
              'not contacted by a scale-out)')

    print()
    print('where the time goes (top-level steps of the hook, wall seconds):')
    for row in rows:
        print_breakdown('N=%d first run' % row['workers'], row['first'])
        print_breakdown('N=%d re-run' % row['workers'], row['rerun'])
    for scale in scales:
        print_breakdown('scale-out by %d' % scale['new'], scale['run'])
    print('remote commands of the largest first run by total seconds (all '
          'hosts; commands of different hosts overlap):')
    for description, seconds in command_totals(largest_first(rows)):
        print('    %7.1fs %4d x  %s' % (sum(seconds), len(seconds),
                                        description))

    def load_note(*runs):
        return '(load %s)' % ' vs '.join('%.0f%%' % (100 * r['load'])
                                         for r in runs)

    checks = []
    smallest, largest = rows[0], rows[-1]
    # Workers join concurrently: up to max_concurrent_nodes' default they
    # all join in one wave; beyond it the doubling target applies.
    if len(rows) > 1 and largest['workers'] <= ONE_WAVE_WORKERS:
        for run in ('first', 'rerun'):
            checks.append(('T(%d)/T(%d) %s' % (
                largest['workers'], smallest['workers'], run),
                largest[run]['seconds'] / smallest[run]['seconds'],
                SCALING_TARGET, load_note(largest[run], smallest[run])))
    if len(rows) > 1 and largest['workers'] == 2 * rows[-2]['workers']:
        half = rows[-2]['first']
        bound = largest['first']['load'] >= 0.85
        checks.append(('T(%d)/T(%d) first run' % (
            largest['workers'], rows[-2]['workers']),
            largest['first']['seconds'] / half['seconds'],
            DOUBLING_TARGET_CPU_BOUND if bound else SCALING_TARGET,
            load_note(largest['first'], half)))
    for row in rows[1:] or rows:
        checks.append(('RSS growth/host at N=%d (MiB)' % row['workers'],
                       rss_per_host(row, smallest if row is not smallest
                                    else None) / MIB,
                       RSS_PER_HOST_TARGET / MIB))
    for row in rows:
        checks.append(('T(re-run)/T(first) at N=%d' % row['workers'],
                       row['rerun']['seconds'] / row['first']['seconds'],
                       RERUN_TARGET, load_note(row['rerun'], row['first'])))
        if row['workers'] >= LARGE_RERUN_WORKERS:
            checks.append(('T(re-run) at N=%d (s)' % row['workers'],
                           row['rerun']['seconds'], LARGE_RERUN_SECONDS,
                           load_note(row['rerun'])))
    if len(scales) > 1:
        few, many = scales[0], scales[-1]
        checks.append(('scale-out T(%d)/T(%d)' % (many['new'], few['new']),
                       many['run']['seconds'] / few['run']['seconds'],
                       SCALING_TARGET, load_note(many['run'], few['run'])))
    print()
    ok = bench_common.print_checks(checks)
    all_runs = [row[name] for row in rows for name in ('first', 'rerun')] + \
        [scale['run'] for scale in scales]
    logins = all(logins_ok(run, run['expected_ips']) for run in all_runs)
    ok &= logins
    bench_common.print_login_check(logins)
    return 0 if ok else 1


if __name__ == '__main__':
    sys.exit(main())
