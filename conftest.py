"""pytest-xdist groups and the tests that run alone (tox.ini runs the
testbed, functional and tacker envs with ``-n 2 --dist loadgroup``);
the rules are in testbed/run_groups.py.

The groups are given to xdist as its scheduler's scopes: xdist's own
``xdist_group`` marker works by rewriting a test's node id, which pytest 9
no longer allows, so the marker would be silently ignored.
"""

import shutil
import tempfile

import pytest
from xdist import scheduler

from testbed import run_groups

LOCK_DIR = 'run_lock_dir'  # workerinput: the controller's directory
LOCK_DIR_KEY = pytest.StashKey()
RUN_LOCK_KEY = pytest.StashKey()


class RunGroupScheduling(scheduler.LoadScopeScheduling):
    """One group at a time per worker, in collection order."""

    def _split_scope(self, nodeid):
        return run_groups.xdist_group(nodeid)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    if config.getvalue('dist') == 'loadgroup':
        return RunGroupScheduling(config, log)
    return None


def pytest_configure(config):
    worker_input = getattr(config, 'workerinput', None)
    if worker_input is not None:
        config.stash[RUN_LOCK_KEY] = run_groups.RunLock(
            worker_input[LOCK_DIR])


def pytest_unconfigure(config):
    if LOCK_DIR_KEY in config.stash:
        shutil.rmtree(config.stash[LOCK_DIR_KEY], ignore_errors=True)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node):
    """On the controller: each worker gets the run's lock directory."""
    stash = node.config.stash
    if LOCK_DIR_KEY not in stash:
        stash[LOCK_DIR_KEY] = tempfile.mkdtemp(prefix='pytest-run-lock-')
    node.workerinput[LOCK_DIR] = stash[LOCK_DIR_KEY]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    lock = item.config.stash.get(RUN_LOCK_KEY, None)
    if lock is None:
        yield
        return
    with lock.hold(exclusive=run_groups.runs_alone(item.nodeid)):
        yield
