"""Which tests share a pytest-xdist worker, and which run alone
(the hooks are in the top-level conftest.py).

A group runs on one worker, in file order. Each module is its own group,
so a module-scoped fixture (a testbed, a shared cluster) is built once
and tests that lean on their module's earlier steps keep their order.
Every tests/tacker_rest module is in one group: they share the session's
one TackerLab (MariaDB, RabbitMQ, tacker-server, tacker-conductor), which
a second worker would start a second time; the modules in LAB_FREE need
no lab and are groups of their own.

The modules in ALONE time what they test (fault timeouts, SSH silence
detection, stand-in start-up budgets): each of their tests runs while no
other worker of the run is in a test. ``RunLock`` does it: every other
test holds it shared, these hold it exclusively, and a turnstile keeps a
waiting exclusive holder from being starved.
"""

import contextlib
import fcntl
import os

TACKER_LAB_GROUP = 'tacker-lab'
LAB_FREE = frozenset((
    'tests/tacker_rest/test_heat_engine.py',  # its own Heat engine only
))
ALONE = frozenset((
    'testbed/tests/test_standins.py',
    'tests/functional/test_faults.py',
    'tests/functional/test_remote.py',
))


def module_of(nodeid):
    return nodeid.split('::', 1)[0]


def xdist_group(nodeid):
    """The group of a test, by its node id."""
    module = module_of(nodeid)
    if module.startswith('tests/tacker_rest/') and module not in LAB_FREE:
        return TACKER_LAB_GROUP
    return module


def runs_alone(nodeid):
    return module_of(nodeid) in ALONE


class RunLock:
    """A readers-writer lock between the workers of one run (flock on two
    files in a directory the run's controller made)."""

    def __init__(self, directory):
        self.gate = os.path.join(directory, 'gate')
        self.tests = os.path.join(directory, 'tests')

    @contextlib.contextmanager
    def hold(self, exclusive):
        with open(self.gate, 'a') as gate, open(self.tests, 'a') as tests:
            fcntl.flock(gate, fcntl.LOCK_EX)
            try:
                fcntl.flock(tests, fcntl.LOCK_EX if exclusive
                            else fcntl.LOCK_SH)
            finally:
                fcntl.flock(gate, fcntl.LOCK_UN)
            yield  # closing `tests` releases it
