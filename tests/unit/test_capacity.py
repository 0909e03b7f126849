"""The process-wide caps: hook slots, SSH session permits, node threads.

Waits are bounded by events: a test that would deadlock fails after
WAIT seconds instead of hanging.
"""

import collections
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

@pytest.mark.parametrize('used_in_order, busy, victim', [
    # (a hook's open sessions, least recently used first; those running
    #  a command; the one closed for its next login)
    (['a', 'b'], [], 'b'),
    (['a', 'b'], ['b'], 'a'),
    (['a', 'b', 'c'], ['a', 'c'], 'b'),
    (['a', 'b'], ['a', 'b'], None),
    ([], [], None),
])
def test_session_to_close(used_in_order, busy, victim):
    assert capacity.session_to_close(
        used_in_order, collections.Counter(busy)) == victim


def test_a_hook_at_its_cap_closes_its_own_most_recently_used_session():
    limits = caps(sessions=2)
    a, b = Session('a'), Session('b')
    limits.open_session('hook', a)
    limits.open_session('hook', b)
    with limits.session_in_use('hook', a):
        pass  # a is the most recently used now
    limits.open_session('hook', Session('new'))
    assert a.closed.is_set() and not b.closed.is_set()


def test_steps_walking_more_hosts_than_the_cap_log_in_again_to_few():
    """Each step walks the hook's hosts in the same order: a step after
    the first logs in again to hosts - cap of them (closing the session
    idle the longest would log in again to every host)."""
    limits = caps(sessions=3)
    hosts = [Session(name) for name in 'abcd']
    logins = collections.Counter()
    for _ in range(3):
        for host in hosts:
            with limits.session_in_use('hook', host):
                if host.closed.is_set() or host.name not in logins:
                    host.closed.clear()
                    limits.open_session('hook', host)
                    logins[host.name] += 1
    assert sum(logins.values()) == 4 + 2 * (4 - 3)


def test_a_hook_needing_more_sessions_than_the_cap_is_told_the_option(
        caplog):
    limits = caps(sessions=2)
    limits.reserve_sessions('instantiate_end of vnf-1', 5)
    warnings = [r.getMessage() for r in caplog.records
                if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert 'max_ssh_sessions' in warnings[0] and '5' in warnings[0]


def test_a_login_never_closes_the_session_of_another_hook():
    """The first hook's idle sessions stay open: the second hook waits
    for a permit instead, until the first hook gives its permits back."""
    limits = caps(sessions=2)
    a, b = Session('a'), Session('b')
    limits.open_session('first', a)
    limits.open_session('first', b)
    login = in_thread(limits.open_session, 'second', Session('c'))
    assert not login.wait(0.2)
    limits.close_session('first', a)
    assert not login.wait(0.2)  # the permit stays with its hook
    limits.close_session('first', b)
    limits.release_sessions('first')  # the first hook returned
    assert login.wait(WAIT)
    assert not a.closed.is_set() and not b.closed.is_set()


def test_a_reservation_waits_for_all_its_permits_at_once():
    limits = caps(sessions=4)
    limits.reserve_sessions('first', 3)
    reserved = in_thread(limits.reserve_sessions, 'second', 3)
    assert not reserved.wait(0.2)  # one free: it waits for three
    limits.release_sessions('first')
    assert reserved.wait(WAIT)
    for name in 'abc':  # its own permits: no wait, nothing closed
        limits.open_session('second', Session(name))


def test_a_reservation_beyond_the_cap_takes_the_cap():
    limits = caps(sessions=2)
    limits.reserve_sessions('hook', 5)
    opened = [Session(name) for name in 'abc']
    for session in opened:
        limits.open_session('hook', session)
    assert [s.closed.is_set() for s in opened] == [False, True, False]


def test_a_login_waits_while_every_session_of_its_hook_runs_a_command():
    limits = caps(sessions=1)
    a = Session('a')
    limits.open_session('hook', a)
    command = limits.session_in_use('hook', a)
    command.__enter__()
    login = in_thread(limits.open_session, 'hook', Session('b'))
    assert not login.wait(0.2)
    command.__exit__(None, None, None)  # the command ended
    assert login.wait(WAIT)
    assert a.closed.is_set()


def test_a_hook_holding_permits_takes_a_free_one_nobody_waits_for():
    limits = caps(sessions=3)
    a = Session('a')
    limits.open_session('hook', a)
    limits.open_session('hook', Session('b'))
    assert not a.closed.is_set()


def test_free_permits_go_to_the_hook_waiting_for_them_first():
    limits = caps(sessions=3)
    a = Session('a')
    limits.open_session('first', a)
    waiting = in_thread(limits.reserve_sessions, 'second', 3)
    assert not waiting.wait(0.2)
    limits.open_session('first', Session('b'))  # closes a, takes no permit
    assert a.closed.is_set()
    limits.release_sessions('first')
    assert waiting.wait(WAIT)


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
        limits.reserve_sessions(number, len(sessions))
        for _ in range(2):  # every host twice, as a hook's steps do
            for session in sessions:
                with limits.session_in_use(number, session):
                    limits.open_session(number, session)
                    with lock:
                        opened.add(session)
                        peak.highest = max(peak.highest, len(opened))
        for session in sessions:
            limits.close_session(number, session)
            session.close()
        limits.release_sessions(number)

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
