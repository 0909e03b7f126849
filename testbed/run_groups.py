"""Which tests share a pytest-xdist worker, and which run alone
(the hooks are in the top-level conftest.py).

A group runs on one worker, in file order. A functional test whose
fixtures are all its own (a fresh virtual cluster per test) is a group by
itself, so the workers share the slow modules test by test; any other
module is one group, so a module-scoped fixture (a testbed, a shared
cluster) is built once and tests that lean on their module's earlier
steps keep their order. ``SHARED_FIXTURE_MODULES`` names the functional
modules that share fixtures; ``shared_fixture_problem`` keeps that list
true at collection.
The tests/tacker_rest modules are in two groups, one with v1's
lifecycle and one with v2's: a worker starts one TackerLab (MariaDB,
RabbitMQ, tacker-server, tacker-conductor) for the session, so the two
lifecycles each have a lab and run side by side, each in file order;
the modules in LAB_FREE need no lab and are groups of their own.

The modules in ALONE time what they test (SSH silence detection,
stand-in start-up budgets): each of their tests runs while no
other worker of the run is in a test. ``RunLock`` does it: every other
test holds it shared, these hold it exclusively, and a turnstile keeps a
waiting exclusive holder from being starved.
"""

import collections
import contextlib
import fcntl
import json
import os

TACKER_LAB_GROUP = 'tacker-lab'
# The second lab's modules: the v2 lifecycle, and what makes its chain
# about as long as the first lab's (v1's lifecycle, HA, the v2 upgrades).
TACKER_V2_LAB_GROUP = 'tacker-lab-v2'
V2_LAB_MODULES = frozenset((
    'tests/tacker_rest/test_lifecycle_v2.py',
    'tests/tacker_rest/test_two_conductors.py',
    'tests/tacker_rest/test_v2_hooks.py',
))
LAB_FREE = frozenset((
    'tests/tacker_rest/test_heat_engine.py',  # its own Heat engine only
))
PER_TEST_DIR = 'tests/functional/'
SHARED_FIXTURE_MODULES = frozenset((
    'tests/functional/test_cert_renewal.py',
    'tests/functional/test_concurrency.py',
    'tests/functional/test_dynamic_provisioning.py',
    'tests/functional/test_faults.py',
    'tests/functional/test_ha.py',
    'tests/functional/test_host_keys.py',
    'tests/functional/test_key_logins.py',
    'tests/functional/test_node_identity.py',
    'tests/functional/test_node_preparation.py',
    'tests/functional/test_remote.py',
    'tests/functional/test_upgrade.py',
))
SHARED_SCOPES = frozenset(('class', 'module', 'package'))
ALONE = frozenset((
    'testbed/tests/test_standins.py',
    'tests/functional/test_remote.py',
))


def module_of(nodeid):
    return nodeid.split('::', 1)[0]


def xdist_group(nodeid):
    """The group of a test, by its node id."""
    module = module_of(nodeid)
    if module in V2_LAB_MODULES:
        return TACKER_V2_LAB_GROUP
    if module.startswith('tests/tacker_rest/') and module not in LAB_FREE:
        return TACKER_LAB_GROUP
    if module.startswith(PER_TEST_DIR) and module not in \
            SHARED_FIXTURE_MODULES:
        return nodeid
    return module


def shared_fixture_problem(nodeid, fixture_scopes):
    """Why a test that runs as a group by itself would break, or None:
    a fixture of a wider scope than the test ({name: scope}) would be
    built once per worker that runs one of its module's tests, and
    tests built on their module's earlier steps would lose their order."""
    if xdist_group(nodeid) != nodeid:
        return None
    shared = sorted(name for name, scope in fixture_scopes.items()
                    if scope in SHARED_SCOPES)
    if not shared:
        return None
    return (f'{nodeid} uses the shared fixtures {", ".join(shared)}: add '
            f'{module_of(nodeid)} to run_groups.SHARED_FIXTURE_MODULES')


# {test id: seconds} of a recent run (tools/slowest_tests.py
# --write-durations): only the order of the groups depends on it.
DURATIONS_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                              'test_durations.json')
# A test the file does not know yet: about a functional test with a
# cluster of its own, so that a new slow test is not left for last.
UNKNOWN_TEST_SECONDS = 30.0


def load_durations(path=DURATIONS_FILE):
    try:
        with open(path) as handle:
            return json.load(handle)
    except FileNotFoundError:
        return {}


def longest_groups_first(nodeids, durations):
    """The node ids with the groups expected to take longest first, each
    group's tests in their order: xdist hands the groups out in this
    order, and a long group handed out last keeps its worker busy while
    the others are done."""
    groups = [xdist_group(nodeid) for nodeid in nodeids]
    expected = collections.Counter()
    first = {}
    for index, (nodeid, group) in enumerate(zip(nodeids, groups)):
        expected[group] += durations.get(nodeid, UNKNOWN_TEST_SECONDS)
        first.setdefault(group, index)
    order = sorted(range(len(nodeids)), key=lambda index: (
        -expected[groups[index]], first[groups[index]], index))
    return [nodeids[index] for index in order]


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
