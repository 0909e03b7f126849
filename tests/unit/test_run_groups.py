"""testbed/run_groups.py: the xdist groups and the run lock."""

import fcntl

import pytest

from testbed import run_groups


@pytest.mark.parametrize('nodeid, group', [
    ('tests/functional/test_ha.py::test_vip', 'tests/functional/test_ha.py'),
    ('tests/functional/test_faults.py::test_fault[a::b]',
     'tests/functional/test_faults.py'),
    ('tests/tacker_rest/test_lifecycle.py::test_instantiate', 'tacker-lab'),
    ('tests/tacker_rest/test_lifecycle_ha.py::test_x', 'tacker-lab'),
    # v2, but on v1's lab, and v1 on v2's: two chains about as long.
    ('tests/tacker_rest/test_upgrade_v2.py::test_x', 'tacker-lab'),
    ('tests/tacker_rest/test_two_conductors.py::test_x', 'tacker-lab-v2'),
    ('tests/tacker_rest/test_v2_hooks.py::test_hooks', 'tacker-lab-v2'),
    ('tests/tacker_rest/test_lifecycle_v2.py::test_x', 'tacker-lab-v2'),
    ('tests/tacker_rest/test_heat_engine.py::test_x',
     'tests/tacker_rest/test_heat_engine.py'),
    ('tests/tacker_integration/test_v2_vim.py::test_x',
     'tests/tacker_integration/test_v2_vim.py'),
    ('tests/functional/test_cluster.py::test_x[a::b]',
     'tests/functional/test_cluster.py::test_x[a::b]'),
    ('testbed/tests/test_hosts.py::test_x', 'testbed/tests/test_hosts.py'),
])
def test_groups(nodeid, group):
    """A module is a group, tacker_rest is two (a lab each), and a
    functional test with fixtures of its own only is a group by itself."""
    assert run_groups.xdist_group(nodeid) == group


@pytest.mark.parametrize('nodeid, scopes, problem', [
    ('tests/functional/test_cluster.py::test_x',
     {'cluster': 'function', 'tmp_path_factory': 'session'}, False),
    ('tests/functional/test_cluster.py::test_x',
     {'cluster': 'module'}, True),
    ('tests/functional/test_cluster.py::test_x', {'cluster': 'class'}, True),
    ('tests/functional/test_ha.py::test_x', {'bed': 'module'}, False),
    ('testbed/tests/test_hosts.py::test_x', {'bed': 'module'}, False),
])
def test_a_test_alone_in_its_group_has_no_shared_fixture(
        nodeid, scopes, problem):
    found = run_groups.shared_fixture_problem(nodeid, scopes)
    assert bool(found) is problem
    if problem:
        assert 'tests/functional/test_cluster.py' in found
        assert 'cluster' in found


def test_the_timing_modules_run_alone():
    assert run_groups.runs_alone(
        'tests/functional/test_remote.py::test_x[y]@tests/functional/'
        'test_remote.py')
    # Its faults are injected commands, HTTP errors and cut connections,
    # none a deadline: it shares the machine.
    assert not run_groups.runs_alone(
        'tests/functional/test_faults.py::test_x[y]')
    assert not run_groups.runs_alone('tests/functional/test_ha.py::test_x')


def try_lock(path, mode):
    """Whether another holder could take `mode` on `path` right now."""
    with open(path, 'a') as probe:
        try:
            fcntl.flock(probe, mode | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return True


def test_shared_holders_exclude_only_an_exclusive_one(tmp_path):
    lock = run_groups.RunLock(str(tmp_path))
    with lock.hold(exclusive=False), lock.hold(exclusive=False):
        assert try_lock(lock.tests, fcntl.LOCK_SH)
        assert not try_lock(lock.tests, fcntl.LOCK_EX)
        assert try_lock(lock.gate, fcntl.LOCK_EX)  # the turnstile is open
    assert try_lock(lock.tests, fcntl.LOCK_EX)


def test_an_exclusive_holder_excludes_everyone(tmp_path):
    lock = run_groups.RunLock(str(tmp_path))
    with lock.hold(exclusive=True):
        assert not try_lock(lock.tests, fcntl.LOCK_SH)
        assert try_lock(lock.gate, fcntl.LOCK_EX)
    assert try_lock(lock.tests, fcntl.LOCK_SH)


def test_the_groups_expected_to_take_longest_come_first():
    ha = ['tests/functional/test_ha.py::test_%s' % name for name in 'abc']
    alone = ['tests/functional/test_cluster.py::test_%s' % name
             for name in ('slow', 'quick', 'new')]
    lab = ['tests/tacker_rest/test_lifecycle.py::test_x',
           'tests/tacker_rest/test_lifecycle_ha.py::test_y']
    durations = {ha[0]: 10, ha[1]: 10, ha[2]: 10, alone[0]: 100,
                 alone[1]: 1, lab[0]: 20, lab[1]: 20}
    order = run_groups.longest_groups_first(
        [ha[0], alone[0], lab[0], ha[1], alone[1], alone[2], lab[1], ha[2]],
        durations)
    # An unknown test counts UNKNOWN_TEST_SECONDS (30): a tie with the
    # module, which came first; a group's tests keep their order.
    assert order == [alone[0], lab[0], lab[1], ha[0], ha[1], ha[2],
                     alone[2], alone[1]]
