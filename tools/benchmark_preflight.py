#!/usr/bin/env python3
"""Where the time of the cluster pre-flight goes, host by host.

On 1 Master + N Workers (default 16: 17 hosts) it runs instantiate_end up
to the end of its pre-flight (login to every Master and Worker and the OS
check; the hook is stopped there), with host_key_policy "console" (the
console read through the fake Nova) and "warn" (no Nova), several times
each. Per host it shows when its task started and how long its host key
policy took to build, its console read, its SSH login and its OS check;
then, for the whole step, the wall time, the most console reads and
logins in flight at once (1 means they ran one after another), this
process's CPU seconds per wall second (near 1.0: this process, the driver
and the fake servers it also runs, is bound by Python's global
interpreter lock) and the machine load.

Usage (as root)::

    .venv/bin/python -m tools.benchmark_preflight [--workers 16] [--runs 3]
"""

import argparse
import collections
import contextlib
import functools
import statistics
import sys
import threading
import time

import paramiko

from kubernetes_mgmt_pv import config
from kubernetes_mgmt_pv import flow
from kubernetes_mgmt_pv.remote import dpkg
from kubernetes_mgmt_pv.remote import host_keys
from testbed import virtual_vnf
from tools import bench_common

PARTS = ('policy', 'console', 'login', 'check')


class _Stop(BaseException):
    """Ends the hook after its pre-flight (passes the hook boundary)."""


class Trace(object):
    def __init__(self):
        self.lock = threading.Lock()
        self.spans = collections.defaultdict(dict)  # host -> part -> span
        self.policy_host = {}
        self.step = None

    def add(self, host, part, start):
        """The first span of each part: a repeated call (the console
        policy's prepare, answered from its cache) adds nothing."""
        with self.lock:
            self.spans[host].setdefault(part, (start, time.monotonic()))


@contextlib.contextmanager
def tracing():
    trace = Trace()
    patches = bench_common.Patches()
    patch = patches.patch

    def timed(part, host_of):
        def make(original):
            @functools.wraps(original)
            def wrapper(*args, **kwargs):
                start = time.monotonic()
                try:
                    result = original(*args, **kwargs)
                finally:
                    trace.add(host_of(*args), part, start)
                if part == 'policy' and result is not None:
                    trace.policy_host[result] = args[1]
                return result
            return wrapper
        return make

    def preflight(original):
        @functools.wraps(original)
        def wrapper(*args, **kwargs):
            start = time.monotonic()
            trace.step = bench_common.timed_call(
                functools.partial(original, *args, **kwargs))
            trace.step['start'] = start
            raise _Stop()
        return wrapper

    patch(flow.Flow, '_host_key_policy',
          timed('policy', lambda self, address: address))
    patch(host_keys.ConsoleHostKeyPolicy, 'prepare',
          timed('console', lambda policy: trace.policy_host.get(policy)))
    patch(paramiko.SSHClient, 'connect',
          timed('login', lambda client, hostname, *a, **k: hostname))
    patch(dpkg, 'check_supported_os',
          timed('check', lambda executor, supported: executor.host))
    patch(flow.Flow, 'preflight', preflight)
    try:
        yield trace
    finally:
        patches.restore()


def most_at_once(spans):
    """The most spans in flight at the same moment."""
    edges = sorted([(s, 1) for s, _ in spans] + [(e, -1) for _, e in spans])
    running = peak = 0
    for _, delta in edges:
        running += delta
        peak = max(peak, running)
    return peak


def measure(cluster, policy):
    config.CONF.set_override('host_key_policy', policy, config.GROUP_NAME)
    with tracing() as trace:
        try:
            cluster.instantiate_end()
        except _Stop:
            pass
    return trace


def report(trace, policy, node_count):
    step = trace.step
    origin = step['start']
    print('host_key_policy=%s: pre-flight of %d hosts %.2fs, %.2f CPU s/s '
          'in this process, load %.0f%%' % (
              policy, node_count, step['seconds'],
              step['driver_cpu'] / step['seconds'],
              100 * step['load']))
    print('  %-15s %6s %6s %7s %6s %6s %6s' % (
        'host', 'start', 'policy', 'console', 'login', 'check', 'end'))
    for host, spans in sorted(trace.spans.items(), key=lambda item: min(
            s for s, _ in item[1].values())):
        begin = min(s for s, _ in spans.values()) - origin
        end = max(e for _, e in spans.values()) - origin
        cells = ['%6.3f' % (spans[p][1] - spans[p][0]) if p in spans
                 else '%6s' % '-' for p in PARTS]
        print('  %-15s %6.3f %s %6.3f' % (host, begin, ' '.join(cells), end))
    for part in ('console', 'login', 'check'):
        spans = [s[part] for s in trace.spans.values() if part in s]
        if spans:
            seconds = [e - s for s, e in spans]
            print('  %-8s median %.3fs max %.3fs; at most %d of %d in '
                  'flight at once' % (part, statistics.median(seconds),
                                      max(seconds), most_at_once(spans),
                                      len(spans)))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--workers', type=int, default=16)
    parser.add_argument('--runs', type=int, default=3)
    args = parser.parse_args()
    missing = bench_common.testbed_missing(max_concurrent_nodes=64)
    if missing:
        return missing
    with virtual_vnf.VirtualCluster(masters=1, workers=args.workers,
                                    volumes=1,
                                    install_cluster=True) as cluster:
        for run in range(args.runs):
            for policy in ('console', 'warn'):
                print('run %d' % (run + 1))
                report(measure(cluster, policy), policy, 1 + args.workers)
    return 0


if __name__ == '__main__':
    sys.exit(main())
