"""testbed/run_groups.py: the xdist groups and the run lock."""

import fcntl

import pytest

from testbed import run_groups


@pytest.mark.parametrize('nodeid, group', [
    ('tests/functional/test_ha.py::test_vip', 'tests/functional/test_ha.py'),
    ('tests/functional/test_faults.py::test_fault[a::b]',
     'tests/functional/test_faults.py'),
    ('tests/tacker_rest/test_lifecycle.py::test_instantiate', 'tacker-lab'),
    ('tests/tacker_rest/test_v2_hooks.py::test_hooks', 'tacker-lab'),
    ('tests/tacker_rest/test_heat_engine.py::test_x',
     'tests/tacker_rest/test_heat_engine.py'),
    ('tests/tacker_integration/test_v2_vim.py::test_x',
     'tests/tacker_integration/test_v2_vim.py'),
])
def test_a_module_is_a_group_and_tacker_rest_is_one(nodeid, group):
    assert run_groups.xdist_group(nodeid) == group


def test_the_timing_modules_run_alone():
    assert run_groups.runs_alone(
        'tests/functional/test_faults.py::test_x[y]@tests/functional/'
        'test_faults.py')
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
