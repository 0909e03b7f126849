"""The process-wide caps: hook slots, SSH session permits, node threads.

Waits are bounded by events: a test that would deadlock fails after
WAIT seconds instead of hanging.
"""

import logging
import threading
import types

import pytest

from kubernetes_mgmt_pv.doors import tacker_v1
from kubernetes_mgmt_pv import exceptions
from kubernetes_mgmt_pv.remote import capacity
from kubernetes_mgmt_pv.remote import parallel

WAIT = 5.0


def caps(hooks=8, sessions=64, threads=32):
    return capacity.Limits(types.SimpleNamespace(
        max_concurrent_hooks=hooks, max_ssh_sessions=sessions,
        max_node_threads=threads))


class Session(object):
    """A stand-in for an executor: detach() gives what to close."""

    def __init__(self, name):
        self.name = name
        self.closed = threading.Event()

    def __repr__(self):
        return self.name

    def detach(self):
        return self

    def close(self):
        self.closed.set()


def in_thread(function, *args):
    """Run function in a thread; the event is set when it returned."""
    finished = threading.Event()

    def run():
        function(*args)
        finished.set()
    threading.Thread(target=run, daemon=True).start()
    return finished


class Peak(object):
    """The highest number of callers inside ``with peak:`` at once."""

    def __init__(self):
        self.now = self.highest = 0
        self.lock = threading.Lock()

    def __enter__(self):
        with self.lock:
            self.now += 1
            self.highest = max(self.highest, self.now)

    def __exit__(self, *exc_info):
        with self.lock:
            self.now -= 1


# -- hook slots ---------------------------------------------------------------

def test_a_hook_beyond_the_cap_waits_for_a_slot_and_logs_once(caplog):
    caplog.set_level(logging.INFO, logger='kubernetes_mgmt_pv')
    limits = caps(hooks=2)
    limits.acquire_hook('a')
    limits.acquire_hook('b')
    third = in_thread(limits.acquire_hook, 'instantiate_end of c')
    assert not third.wait(0.2)
    limits.release_hook()
    assert third.wait(WAIT)
    waits = [r for r in caplog.records if 'instantiate_end of c' in
             r.getMessage()]
    assert len(waits) == 1


# -- sessions -----------------------------------------------------------------

@pytest.mark.parametrize('open_first, busy, victim', [
    # (sessions opened in this order, those running a command, closed)
    (['a', 'b'], [], 'a'),           # least recently used first
    (['a', 'b'], ['a'], 'b'),        # never one running a command
    (['a', 'b', 'c'], ['a', 'c'], 'b'),
])
def test_a_login_at_the_cap_closes_the_longest_idle_session(
        open_first, busy, victim):
    limits = caps(sessions=len(open_first))
    sessions = {name: Session(name) for name in open_first}
    for name in open_first:
        limits.open_session(sessions[name])
    holds = [limits.session_in_use(sessions[name]) for name in busy]
    for hold in holds:
        hold.__enter__()

    limits.open_session(Session('new'))

    assert [n for n, s in sessions.items() if s.closed.is_set()] == [victim]


def test_using_a_session_makes_it_the_most_recently_used():
    limits = caps(sessions=2)
    a, b = Session('a'), Session('b')
    limits.open_session(a)
    limits.open_session(b)
    with limits.session_in_use(a):
        pass
    limits.open_session(Session('new'))
    assert b.closed.is_set() and not a.closed.is_set()


def test_a_login_waits_while_every_session_runs_a_command():
    limits = caps(sessions=1)
    a = Session('a')
    limits.open_session(a)
    command = limits.session_in_use(a)
    command.__enter__()
    login = in_thread(limits.open_session, Session('b'))
    assert not login.wait(0.2)
    command.__exit__(None, None, None)  # the command ended
    assert login.wait(WAIT)
    assert a.closed.is_set()


def test_a_closed_session_gives_its_permit_back_to_a_waiting_login():
    limits = caps(sessions=1)
    a = Session('a')
    limits.open_session(a)
    with limits.session_in_use(a):
        login = in_thread(limits.open_session, Session('b'))
        assert not login.wait(0.2)
        limits.close_session(a)  # its hook returned
        assert login.wait(WAIT)
    assert not a.closed.is_set()  # closed by its owner, not by the cap


def test_hooks_needing_more_sessions_than_the_cap_all_finish():
    """Three hooks of five hosts each, two sessions for all: every
    command runs, never more than two sessions are open."""
    limits = caps(sessions=2)
    peak, lock = Peak(), threading.Lock()
    opened = set()

    class Counted(Session):
        def close(self):
            with lock:
                opened.discard(self)
            super().close()

    def hook(number):
        sessions = [Counted('h%d-%d' % (number, host)) for host in range(5)]
        for _ in range(2):  # every host twice, as a hook's steps do
            for session in sessions:
                with limits.session_in_use(session):
                    limits.open_session(session)
                    with lock:
                        opened.add(session)
                        peak.highest = max(peak.highest, len(opened))
        for session in sessions:
            limits.close_session(session)
            session.close()

    done = [in_thread(hook, n) for n in range(3)]
    assert all(event.wait(WAIT) for event in done)
    assert peak.highest <= 2


# -- node threads ---------------------------------------------------------

def test_steps_share_the_thread_cap_and_all_nodes_run():
    limits = caps(threads=2)
    peak, started = Peak(), threading.Barrier(3, timeout=WAIT)
    ran, lock = [], threading.Lock()

    def node_work(node):
        with peak:
            with lock:
                ran.append(node)

    def step(number):
        started.wait()
        parallel.run_on_nodes('step %d' % number, node_work,
                              {'%d-%d' % (number, n): n for n in range(6)},
                              max_workers=6, limits=limits)

    done = [in_thread(step, n) for n in range(3)]
    assert all(event.wait(WAIT) for event in done)
    assert len(ran) == 18
    # Helpers within the cap, plus one calling thread per step.
    assert peak.highest <= 2 + 3
    assert limits.try_thread() and limits.try_thread()
    assert not limits.try_thread()  # every helper gave its thread back


def test_a_step_progresses_with_no_free_thread_at_all():
    limits = caps(threads=1)
    assert limits.try_thread()  # taken by someone else for good
    ran = []
    parallel.run_on_nodes('step', ran.append, {n: n for n in 'abc'},
                          max_workers=3, limits=limits)
    assert sorted(ran) == ['a', 'b', 'c']


def test_nested_steps_finish_with_one_thread():
    limits = caps(threads=1)
    ran, lock = [], threading.Lock()

    def inner(node):
        with lock:
            ran.append(node)

    def outer(node):
        parallel.run_on_nodes('inner', inner,
                              {'%s%d' % (node, n): n for n in range(3)},
                              max_workers=3, limits=limits)

    done = in_thread(parallel.run_on_nodes, 'outer', outer,
                     {n: n for n in 'ab'}, 2, limits)
    assert done.wait(WAIT)
    assert len(ran) == 6


def test_failures_of_helper_and_calling_threads_are_all_reported():
    def fail(node):
        raise RuntimeError('broken %s' % node)

    with pytest.raises(exceptions.NodeStepError) as caught:
        parallel.run_on_nodes('step', fail, {n: n for n in 'abcd'},
                              max_workers=4, limits=caps(threads=2))
    assert sorted(caught.value.failures) == list('abcd')


# -- the hook boundary ----------------------------------------------------

def test_a_failing_hook_gives_back_its_slot_and_closes_its_sessions(
        monkeypatch):
    limits = caps(hooks=1)
    monkeypatch.setattr(capacity, '_PROCESS', limits)
    closed = []

    class Driver(tacker_v1.KubernetesMgmtDriver):
        def terminate_end(self, *args, **kwargs):
            pool = self.hook_sessions()
            monkeypatch.setattr(pool, 'close', lambda: closed.append(pool))
            raise RuntimeError('broken')

    for _ in range(2):  # the second hook finds the slot free again
        hook = in_thread(lambda: pytest.raises(
            exceptions.MgmtDriverError, Driver().terminate_end,
            None, None, None, None, None))
        assert hook.wait(WAIT)
    assert len(closed) == 2


def test_a_hook_without_remote_work_takes_no_slot(monkeypatch):
    limits = caps(hooks=1)
    limits.acquire_hook('busy elsewhere')
    monkeypatch.setattr(capacity, '_PROCESS', limits)
    hook = in_thread(tacker_v1.KubernetesMgmtDriver().instantiate_start,
                     None, None, None, None, None)
    assert hook.wait(WAIT)
