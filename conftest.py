"""pytest-xdist groups and the tests that run alone (tox.ini runs the
testbed, functional and tacker envs with ``--dist loadgroup``); the rules
are in testbed/run_groups.py.

The groups are given to xdist as its scheduler's scopes: xdist's own
``xdist_group`` marker works by rewriting a test's node id, which pytest 9
no longer allows, so the marker would be silently ignored.

The run lock is shared by every pytest run that names the same directory
in ``TEST_RUN_LOCK_DIR`` (``make test`` runs the tox envs side by side and
gives them one), else by the workers of this run only.
"""

import contextlib
import os
import shutil
import tempfile

import pytest
from xdist import scheduler

from testbed import run_groups

LOCK_DIR = 'run_lock_dir'  # workerinput: the controller's directory
LOCK_DIR_ENV = 'TEST_RUN_LOCK_DIR'
OWN_LOCK_DIR_KEY = pytest.StashKey()  # a directory this run must remove
RUN_LOCK_KEY = pytest.StashKey()
ALONE_HOLD_KEY = pytest.StashKey()


class RunGroupScheduling(scheduler.LoadScopeScheduling):
    """One group at a time per worker, in collection order: the longest
    groups first (pytest_collection_modifyitems), which xdist's own
    reordering by test count would undo."""

    def schedule(self):
        self.config.option.loadscopereorder = False
        super().schedule()

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
    if OWN_LOCK_DIR_KEY in config.stash:
        shutil.rmtree(config.stash[OWN_LOCK_DIR_KEY], ignore_errors=True)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node):
    """On the controller: each worker gets the run's lock directory."""
    stash = node.config.stash
    directory = os.environ.get(LOCK_DIR_ENV)
    if directory:
        os.makedirs(directory, exist_ok=True)
    else:
        if OWN_LOCK_DIR_KEY not in stash:
            stash[OWN_LOCK_DIR_KEY] = tempfile.mkdtemp(
                prefix='pytest-run-lock-')
        directory = stash[OWN_LOCK_DIR_KEY]
    node.workerinput[LOCK_DIR] = directory


def pytest_collection_modifyitems(config, items):
    problems = [run_groups.shared_fixture_problem(item.nodeid, {
        name: definitions[-1].scope for name, definitions in
        item._fixtureinfo.name2fixturedefs.items()}) for item in items]
    problems = [problem for problem in problems if problem]
    if problems:
        raise pytest.UsageError('\n'.join(problems))
    # An xdist worker of a --dist loadgroup run (xdist sets the option).
    if getattr(config.option, 'loadgroup', False):
        order = run_groups.longest_groups_first(
            [item.nodeid for item in items], run_groups.load_durations())
        position = {nodeid: index for index, nodeid in enumerate(order)}
        items.sort(key=lambda item: position[item.nodeid])


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    lock = item.config.stash.get(RUN_LOCK_KEY, None)
    if lock is None:
        yield
        return
    if not run_groups.runs_alone(item.nodeid):
        with lock.hold(exclusive=False):
            yield
        return
    # A module that runs alone keeps the lock from its first test to its
    # last: it waits once for the tests in flight, not once per test.
    stash = item.config.stash
    if ALONE_HOLD_KEY not in stash:
        held = contextlib.ExitStack()
        held.enter_context(lock.hold(exclusive=True))
        stash[ALONE_HOLD_KEY] = held
    yield
    if nextitem is None or (run_groups.module_of(nextitem.nodeid) !=
                            run_groups.module_of(item.nodeid)):
        stash[ALONE_HOLD_KEY].close()
        del stash[ALONE_HOLD_KEY]
