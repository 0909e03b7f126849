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


@contextlib.contextmanager
def counting_ssh():
    """Count the successful SSH logins (at paramiko's connect) and the
    driver's remote commands made inside the block, by wrapping both here:
    the driver carries no counters.

    The yielded dict has the totals ``logins`` and ``commands``, plus
    ``hosts`` (a Counter of logins by host address) and ``runs``: one
    ``(host, description, seconds)`` per remote command, ``description``
    being what the driver passed (or the argument list)."""
    counts = {'logins': 0, 'commands': 0,
              'hosts': collections.Counter(), 'runs': []}
    lock = threading.Lock()

    def counted_connect(method):
        @functools.wraps(method)
        def wrapper(client, hostname, *args, **kwargs):
            result = method(client, hostname, *args, **kwargs)
            with lock:
                counts['logins'] += 1
                counts['hosts'][hostname] += 1
            return result
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
    busy = _busy_cpu_seconds()
    driver_cpu = time.process_time()
    started = time.monotonic()
    with counting_ssh() as counts:
        function()
    wall = time.monotonic() - started
    return {'seconds': wall, 'logins': counts['logins'],
            'commands': counts['commands'],
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
