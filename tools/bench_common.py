"""Helpers shared by the benchmarks (``tools.benchmark_pv``,
``tools.benchmark_cluster``): machine load, SSH login and remote command
counts, and the timing of one driver hook call.

The driver carries no counters: everything is measured by wrapping
paramiko and the driver's executor from here, for the duration of a block.
"""

import collections
import contextlib
import functools
import logging
import os
import sys
import threading
import time

import paramiko

from kubernetes_mgmt_pv.remote import remote
from testbed import hosts
from testbed import virtual_vnf

SCALING_TARGET = 1.5
RERUN_TARGET = 0.25


class Patches(object):
    """Methods replaced by wrappers until ``restore`` puts the originals
    back (in reverse order): the benchmarks measure the driver this way,
    as it carries no counters."""

    def __init__(self):
        self._originals = []

    def patch(self, owner, name, wrap):
        original = getattr(owner, name)
        self._originals.append((owner, name, original))
        setattr(owner, name, wrap(original))

    def restore(self):
        while self._originals:
            owner, name, original = self._originals.pop()
            setattr(owner, name, original)


def testbed_missing(**options):
    """Why the testbed cannot run here (printed; the exit code 2), or
    None once the driver's test options (plus ``options``) are set."""
    reason = hosts.require_testbed()
    if reason:
        print('benchmark: %s' % reason, file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.ERROR)
    virtual_vnf.use_test_options(**options)
    return None


def print_login_check(ok):
    """Print the verdict of 'one SSH login per host per hook'; ``ok``."""
    print('%-32s %s' % ('one SSH login per host per hook',
                        'ok' if ok else 'MISSED'))
    return ok


def _busy_cpu_seconds():
    """CPU seconds the whole machine (all test hosts included) has spent
    busy since boot, from /proc/stat."""
    with open('/proc/stat') as stream:
        fields = [int(v) for v in stream.readline().split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    return (sum(fields[:8]) - idle) / os.sysconf('SC_CLK_TCK')


def _memory(field):
    """A memory figure of this process in bytes (/proc/self/status)."""
    with open('/proc/self/status') as status:
        for line in status:
            if line.startswith(field + ':'):
                return int(line.split()[1]) * 1024
    return 0


def _reset_peak_rss():
    """Reset the process's peak RSS (VmHWM) to its RSS now; that RSS."""
    with open('/proc/self/clear_refs', 'w') as clear_refs:
        clear_refs.write('5')
    return _memory('VmRSS')


@contextlib.contextmanager
def counting_ssh():
    """Count the successful SSH logins (at paramiko's connect) and the
    driver's remote commands made inside the block, by wrapping both here:
    the driver carries no counters.

    The yielded dict has the totals ``logins`` and ``commands``, plus
    ``hosts`` (a Counter of logins by host address) and ``runs``: one
    ``(host, description, seconds)`` per remote command, ``description``
    being what the driver passed (or the argument list); ``bytes``: what
    the commands wrote to the hosts (command lines and standard input);
    ``peak_sessions``: SSH clients connected at once; ``peak_threads``
    and ``peak_node_threads``: threads of the process and of the driver's
    steps at once, seen at each login and command."""
    counts = {'logins': 0, 'commands': 0, 'bytes': 0,
              'hosts': collections.Counter(), 'runs': [],
              'peak_sessions': 0, 'peak_threads': 0, 'peak_node_threads': 0}
    lock = threading.Lock()
    connected = set()

    def sample_threads():
        threads = threading.enumerate()
        node_threads = sum(1 for t in threads
                           if t.name.startswith('k8s-mgmt'))
        with lock:
            counts['peak_threads'] = max(counts['peak_threads'],
                                         len(threads))
            counts['peak_node_threads'] = max(counts['peak_node_threads'],
                                              node_threads)

    def counted_connect(method):
        @functools.wraps(method)
        def wrapper(client, hostname, *args, **kwargs):
            result = method(client, hostname, *args, **kwargs)
            with lock:
                counts['logins'] += 1
                counts['hosts'][hostname] += 1
                connected.add(client)
                counts['peak_sessions'] = max(counts['peak_sessions'],
                                              len(connected))
            sample_threads()
            return result
        return wrapper

    def counted_close(method):
        @functools.wraps(method)
        def wrapper(client):
            with lock:
                connected.discard(client)
            return method(client)
        return wrapper

    def counted_execute(method):
        @functools.wraps(method)
        def wrapper(executor, command, stdin, timeout):
            with lock:
                counts['bytes'] += len(command.encode()) + len(stdin or b'')
            sample_threads()
            return method(executor, command, stdin, timeout)
        return wrapper

    def counted_run(method):
        @functools.wraps(method)
        def wrapper(executor, argv, *args, **kwargs):
            started = time.monotonic()
            try:
                return method(executor, argv, *args, **kwargs)
            finally:
                seconds = time.monotonic() - started
                description = kwargs.get('description') or ' '.join(
                    str(a) for a in argv)
                with lock:
                    counts['commands'] += 1
                    counts['runs'].append((executor.host, description,
                                           seconds))
        return wrapper

    patches = Patches()
    patches.patch(paramiko.SSHClient, 'connect', counted_connect)
    patches.patch(paramiko.SSHClient, 'close', counted_close)
    patches.patch(remote.RemoteCommandExecutor, '_execute', counted_execute)
    patches.patch(remote.RemoteCommandExecutor, 'run', counted_run)
    try:
        yield counts
    finally:
        patches.restore()


def timed_call(function):
    """Seconds, SSH logins (total and by host), remote commands, CPU
    seconds of this process and machine CPU load of one call of
    ``function`` (a driver hook). The test hosts share this machine's
    cores, so a load near 100% means the run was limited by CPU, not by
    waiting."""
    rss_before = _reset_peak_rss()
    busy = _busy_cpu_seconds()
    driver_cpu = time.process_time()
    started = time.monotonic()
    with counting_ssh() as counts:
        function()
    wall = time.monotonic() - started
    return {'seconds': wall, 'logins': counts['logins'],
            'commands': counts['commands'], 'bytes': counts['bytes'],
            'peak_sessions': counts['peak_sessions'],
            'peak_threads': counts['peak_threads'],
            'peak_node_threads': counts['peak_node_threads'],
            'rss_before': rss_before, 'rss_peak': _memory('VmHWM'),
            'logins_by_host': dict(counts['hosts']), 'runs': counts['runs'],
            'driver_cpu': time.process_time() - driver_cpu,
            'load': (_busy_cpu_seconds() - busy) / (wall * os.cpu_count())}


def timed_run(cluster):
    """timed_call() of instantiate_end on a
    testbed.virtual_vnf.VirtualCluster."""
    return timed_call(cluster.instantiate_end)


def print_checks(checks):
    """Print (name, value, target[, note]) rows with their verdict (value
    <= target) and the note (e.g. the machine load) after it; True when
    all hold."""
    ok = True
    for name, value, target, *note in checks:
        passed = value <= target
        ok &= passed
        print(' '.join(['%-32s %6.2f  target <= %.2f  %s' % (
            name, value, target, 'ok' if passed else 'MISSED')] + note))
    return ok
