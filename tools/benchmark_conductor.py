#!/usr/bin/env python3
"""Benchmark of one conductor serving many VNFs: instantiate_end of K VNFs
at once in one process.

Each VNF is 1 Master + 1 Worker + a storage server with 1 volume, with
its own testbed hosts and fake Heat/Nova/Kubernetes API; the real driver
installs the cluster (the sample install script on the kubeadm stand-ins)
and the persistent volumes. The guests come with nfs-common, so the
driver's own cost is measured, not apt's. The K hooks start together on
K threads, as Tacker's conductor runs hooks of different VNF instances.

For each K (default 1, 5, 20) it reports the wall time until the last
hook returned, the machine load (busy share of all cores: the test hosts
and the fake servers share them), the peaks of the driver's node threads,
of all threads of the process, of open SSH sessions and of VNFs with an
open session (hooks doing remote work), the peak RSS growth of the
process (the fake API servers included) and the CPU seconds of the
driver's threads (hook threads, node threads, SSH transports). Targets:

* T(K_max)/T(K_min) <= 3, unless the K_max run was CPU-bound (load >= 85%)
* node threads, SSH sessions and hooks never above their caps
* RSS growth <= 5 MB per concurrently running VNF
* one SSH login per host per hook

Usage (as root, after ``tools/bootstrap.sh``)::

    .venv/bin/python -m tools.benchmark_conductor [--vnfs 1 5 20]

Exit status 0 when every target holds, 1 otherwise.
"""

import argparse
import os
import sys
import threading
import time

import paramiko

from kubernetes_mgmt_pv import config
from testbed import virtual_vnf
from tools import bench_common

SCALING_TARGET = 3.0
CPU_BOUND_LOAD = 0.85
RSS_PER_VNF_TARGET_MB = 5.0
HOOK_THREAD = 'vnf-hook'
NODE_THREAD = 'k8s-mgmt'


def _status_kb(field):
    """A field of /proc/self/status, in kB (VmRSS, VmHWM)."""
    with open('/proc/self/status') as stream:
        for line in stream:
            if line.startswith(field + ':'):
                return int(line.split()[1])
    raise KeyError(field)


def _reset_peak_rss():
    """Make VmHWM restart from the current RSS (Linux >= 4.0)."""
    with open('/proc/self/clear_refs', 'w') as stream:
        stream.write('5')


class Observer(object):
    """Peaks and driver CPU seen from outside, by wrapping paramiko's
    connect and close, thread starts and runs: the driver keeps no
    counters."""

    def __init__(self, vnf_of_address):
        self.lock = threading.Lock()
        self.vnf_of_address = vnf_of_address
        self.open = {}  # SSH client -> VNF number
        self.sessions = self.vnfs = self.node_threads = self.threads = 0
        self.cpu = 0.0
        self.transports = []
        self._patches = bench_common.Patches()

    def __enter__(self):
        observer = self

        patch = self._patches.patch

        def connect(original):
            def wrapper(client, hostname, *args, **kwargs):
                original(client, hostname, *args, **kwargs)
                with observer.lock:
                    observer.open[client] = observer.vnf_of_address.get(
                        hostname)
                    observer.sessions = max(observer.sessions,
                                            len(observer.open))
                    observer.vnfs = max(observer.vnfs,
                                        len(set(observer.open.values())))
            return wrapper

        def close(original):
            def wrapper(client):
                with observer.lock:
                    observer.open.pop(client, None)
                return original(client)
            return wrapper

        def start(original):
            def wrapper(thread):
                original(thread)
                alive = threading.enumerate()
                nodes = sum(1 for t in alive
                            if t.name.startswith(NODE_THREAD))
                with observer.lock:
                    observer.node_threads = max(observer.node_threads, nodes)
                    observer.threads = max(observer.threads, len(alive))
            return wrapper

        def timed_run(original):
            def wrapper(thread):
                cpu = time.thread_time()
                try:
                    return original(thread)
                finally:
                    if isinstance(thread, paramiko.Transport) or \
                            thread.name.startswith((NODE_THREAD,
                                                    HOOK_THREAD)):
                        with observer.lock:
                            observer.cpu += time.thread_time() - cpu
                            if isinstance(thread, paramiko.Transport):
                                observer.transports.append(thread)
            return wrapper

        patch(paramiko.SSHClient, 'connect', connect)
        patch(paramiko.SSHClient, 'close', close)
        patch(threading.Thread, 'start', start)
        patch(threading.Thread, 'run', timed_run)
        patch(paramiko.Transport, 'run', timed_run)
        return self

    def __exit__(self, *exc_info):
        self._patches.restore()


def run_hooks(clusters):
    """instantiate_end of every cluster at once, one thread each; the
    errors of those that failed."""
    errors = []
    start = threading.Barrier(len(clusters))

    def hook(cluster):
        start.wait()
        try:
            cluster.instantiate_end()
        except Exception as error:  # reported, the others still run
            errors.append(error)

    threads = [threading.Thread(target=hook, args=(cluster,),
                                name='%s-%d' % (HOOK_THREAD, number))
               for number, cluster in enumerate(clusters)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return errors


def measure(count):
    clusters = []
    try:
        for _ in range(count):
            clusters.append(virtual_vnf.VirtualCluster(
                masters=1, workers=1, volumes=1,
                install_cluster=True).__enter__())
        vnf_of_address = {host.ip: number
                          for number, cluster in enumerate(clusters)
                          for host in cluster.testbed.hosts.values()}
        rss_before = _status_kb('VmRSS')
        _reset_peak_rss()
        errors = []
        with Observer(vnf_of_address) as observer:
            run = bench_common.timed_call(lambda: errors.extend(
                run_hooks(clusters)))
            for transport in observer.transports:
                transport.join(5)  # closed at hook end: count all its CPU
        run.update(rss_growth_mb=(_status_kb('VmHWM') - rss_before) / 1024,
                   observer=observer, vnfs=count, errors=errors,
                   expected_ips=sorted(vnf_of_address))
        return run
    finally:
        for cluster in clusters:
            cluster.stop()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--vnfs', type=int, nargs='+', default=[1, 5, 20],
                        help='how many VNFs run instantiate_end at once')
    args = parser.parse_args()
    missing = bench_common.testbed_missing()
    if missing:
        return missing
    caps = config.options()

    runs = []
    for count in args.vnfs:
        print('measuring instantiate_end of %d VNF(s) at once...' % count,
              file=sys.stderr, flush=True)
        runs.append(measure(count))
        if runs[-1]['errors']:
            print('hooks failed: %s' % '; '.join(
                map(str, runs[-1]['errors'])), file=sys.stderr)
            return 1

    print('instantiate_end of K VNFs at once in one process (each 1 Master '
          '+ 1 Worker + storage server); caps: max_concurrent_hooks=%d, '
          'max_ssh_sessions=%d, max_node_threads=%d'
          % (caps.max_concurrent_hooks, caps.max_ssh_sessions,
             caps.max_node_threads))
    print('%4s %8s %5s %7s %7s %8s %5s %7s %7s %7s' % (
        'K', 'seconds', 'load', 'nodeThr', 'allThr', 'sessions', 'hooks',
        'RSS+MB', 'drvCPU', 'logins'))
    for run in runs:
        observer = run['observer']
        print('%4d %8.2f %4.0f%% %7d %7d %8d %5d %7.1f %7.2f %7d' % (
            run['vnfs'], run['seconds'], 100 * run['load'],
            observer.node_threads, observer.threads, observer.sessions,
            observer.vnfs, run['rss_growth_mb'], observer.cpu,
            run['logins']))
    print('(load: busy share of all %d cores during the run, test hosts, '
          'fake servers and other users included; nodeThr: the driver\'s '
          'node threads; allThr: every thread of the process, fake servers '
          'and SSH transports included; hooks: VNFs with an open SSH '
          'session; RSS+MB: peak RSS growth of the process, fake servers '
          'included; drvCPU: CPU seconds of the driver\'s threads)'
          % os.cpu_count())

    print()
    checks = []
    smallest, largest = runs[0], runs[-1]
    if len(runs) > 1:
        name = 'T(%d)/T(%d)' % (largest['vnfs'], smallest['vnfs'])
        ratio = largest['seconds'] / smallest['seconds']
        note = '(load %.0f%% vs %.0f%%)' % (
            100 * largest['load'], 100 * smallest['load'])
        if ratio > SCALING_TARGET and largest['load'] >= CPU_BOUND_LOAD:
            print('%-32s %6.2f  target waived: CPU-bound %s'
                  % (name, ratio, note))
        else:
            checks.append((name, ratio, SCALING_TARGET, note))
    for run in runs:
        observer = run['observer']
        running = min(run['vnfs'], caps.max_concurrent_hooks)
        checks += [
            ('node threads at K=%d' % run['vnfs'], observer.node_threads,
             caps.max_node_threads),
            ('SSH sessions at K=%d' % run['vnfs'], observer.sessions,
             caps.max_ssh_sessions),
            ('hooks with sessions at K=%d' % run['vnfs'], observer.vnfs,
             caps.max_concurrent_hooks),
            ('RSS MB per running VNF at K=%d' % run['vnfs'],
             run['rss_growth_mb'] / running, RSS_PER_VNF_TARGET_MB,
             '(%d running at once)' % running)]
    ok = bench_common.print_checks(checks)
    logins = all(run['logins_by_host'] == dict.fromkeys(
        run['expected_ips'], 1) for run in runs)
    ok &= logins
    bench_common.print_login_check(logins)
    return 0 if ok else 1


if __name__ == '__main__':
    sys.exit(main())
