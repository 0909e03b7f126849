"""Process-wide caps shared by every hook of one tacker-conductor process.

Tacker runs the hooks of different VNF instances at the same time in one
process, so the driver caps what they use together (options
``max_concurrent_hooks``, ``max_ssh_sessions``, ``max_node_threads``).
Work beyond a cap waits its turn; the rules below keep every hook able to
progress, so no combination of hooks deadlocks:

* Hook slots: a hook takes its slot before its first remote step, in its
  own thread, holding nothing else, and keeps it until it returns.
* SSH sessions: each hook's pool holds permits, one per open session,
  plus those it reserved for the hosts it is about to log in to. A pool
  holding none waits (in arrival order, holding nothing else) until the
  permits it asks for are free: as many as its hosts, at most the cap. A
  pool holding some never waits for another hook: it takes a free permit
  nobody waits for, else closes its own idle session used most recently
  (``session_to_close``), else waits for one of its own commands to end
  (commands have timeouts). Sessions of other hooks are never closed, so
  a hook whose hosts fit in the cap logs in once per host, however many
  hooks run; a hook with more hosts than the cap (a warning names the
  option) logs in again to hosts it had to close. Permits go back when
  the hook's pool is closed (errors included).
* Node threads: a step's extra threads are taken only when free, never
  waited for; the calling thread works on the step's nodes itself, so a
  step progresses with no free thread at all.

The caps are read from the options at each use: a changed option applies
to the next wait.
"""

import collections
import contextlib
import itertools
import threading

from oslo_log import log as logging

from kubernetes_mgmt_pv import config

LOG = logging.getLogger(__name__)


class Limits(object):
    """The caps' bookkeeping; ``conf`` has the three options as attributes."""

    def __init__(self, conf=None):
        self._conf = conf
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._tickets = itertools.count()
        self._hook_queue = collections.deque()
        self._session_queue = collections.deque()
        self._hooks = 0
        self._threads = 0
        # Session permits each owner (a hook's pool) holds, and its open
        # sessions, least recently used first.
        self._held = collections.Counter()
        self._open = {}
        # Commands running on each session (holding a permit or not yet).
        self._busy = collections.Counter()

    @property
    def conf(self):
        return self._conf or config.options()

    # -- hook slots --------------------------------------------------------

    def acquire_hook(self, name):
        """Wait for a hook slot (in arrival order); ``name`` is logged if
        the hook has to wait."""
        with self._changed:
            self._wait_turn(self._hook_queue,
                            lambda: (self._hooks <
                                     self.conf.max_concurrent_hooks),
                            '%s waits: %d hooks do remote work '
                            '(max_concurrent_hooks = %d)', name,
                            lambda: (self._hooks,
                                     self.conf.max_concurrent_hooks))
            self._hooks += 1

    def release_hook(self):
        with self._changed:
            self._hooks -= 1
            self._changed.notify_all()

    # -- SSH sessions -------------------------------------------------------

    def reserve_sessions(self, owner, count):
        """Hold permits for ``count`` sessions of ``owner`` (a hook's pool),
        at most the cap: a pool holding none waits for them all at once; a
        pool holding some takes only those free now."""
        with self._changed:
            def wanted():
                return min(count, self.conf.max_ssh_sessions) - \
                    self._held[owner]
            if wanted() <= 0:
                return
            if count > self.conf.max_ssh_sessions:
                LOG.warning('%s needs %d SSH sessions, more than '
                            'max_ssh_sessions (%d): it logs in again to '
                            'hosts whose session it closed to make room; '
                            'raise max_ssh_sessions to at least %d for one '
                            'login per host', owner, count,
                            self.conf.max_ssh_sessions, count)
            if self._held[owner]:
                self._held[owner] += max(0, min(wanted(), self._spare()))
                return
            self._wait_turn(self._session_queue,
                            lambda: wanted() <= self._free(),
                            '%s waits for %d SSH session(s): %d of %d '
                            'taken (max_ssh_sessions)', owner,
                            lambda: (wanted(), self._taken(),
                                     self.conf.max_ssh_sessions))
            self._held[owner] += wanted()

    def open_session(self, owner, session):
        """Take a permit for ``session`` of ``owner`` (``session`` has
        ``detach()``: drop its connection, returning what to close):
        waits (or closes one of the owner's idle sessions) as the module
        says."""
        if not self._held[owner]:
            self.reserve_sessions(owner, 1)
        to_close = None
        with self._changed:
            sessions = self._open.setdefault(owner, collections.OrderedDict())
            if session in sessions:
                return

            def room():
                return (len(sessions) < self._held[owner] or
                        self._spare() > 0 or
                        session_to_close(sessions, self._busy) is not None)
            if not room():
                LOG.info('%s waits for an SSH session: its %d sessions run '
                         'commands (max_ssh_sessions = %d)', session,
                         len(sessions), self.conf.max_ssh_sessions)
                while not room():
                    self._changed.wait()
            if len(sessions) >= self._held[owner]:
                if self._spare() > 0:
                    self._held[owner] += 1
                else:
                    victim = session_to_close(sessions, self._busy)
                    del sessions[victim]
                    to_close = victim.detach()
                    LOG.info('Closing the idle SSH session %s to make room '
                             '(max_ssh_sessions = %d); it logs in again '
                             'when next used', victim,
                             self.conf.max_ssh_sessions)
            sessions[session] = True
        if to_close is not None:
            to_close.close()

    def close_session(self, owner, session):
        """A session of ``owner`` was closed; its permit stays with the
        owner until ``release_sessions``."""
        with self._changed:
            if self._open.get(owner, {}).pop(session, None) is not None:
                self._changed.notify_all()

    def release_sessions(self, owner):
        """Give back every permit of ``owner``, whose sessions are closed."""
        with self._changed:
            self._open.pop(owner, None)
            if self._held.pop(owner, 0):
                self._changed.notify_all()

    @contextlib.contextmanager
    def session_in_use(self, owner, session):
        """Mark ``session`` busy for one command: it is not closed to make
        room meanwhile."""
        with self._lock:
            self._busy[session] += 1
        try:
            yield
        finally:
            with self._changed:
                self._busy[session] -= 1
                if not self._busy[session]:
                    del self._busy[session]
                sessions = self._open.get(owner, {})
                if session in sessions:
                    sessions.move_to_end(session)
                self._changed.notify_all()

    def _taken(self):
        return sum(self._held.values())

    def _free(self):
        return self.conf.max_ssh_sessions - self._taken()

    def _spare(self):
        """Free permits a pool that holds some may take: none while a
        pool holding none waits for them."""
        return 0 if self._session_queue else self._free()

    # -- node threads -------------------------------------------------------

    def try_thread(self):
        """Take a node-thread permit if one is free (never waits)."""
        with self._lock:
            if self._threads >= self.conf.max_node_threads:
                return False
            self._threads += 1
            return True

    def release_thread(self):
        with self._lock:
            self._threads -= 1

    # -- helpers --------------------------------------------------------------

    def _wait_turn(self, queue, can_go, message, subject, figures):
        """Wait, in arrival order among the waiters of ``queue``, until
        ``can_go()``, logging once if not at first; called holding the
        lock. Every release notifies, so no polling is needed."""
        ticket = next(self._tickets)
        queue.append(ticket)

        def ready():
            return queue[0] == ticket and can_go()
        try:
            if not ready():
                LOG.info(message, subject, *figures())
            while not ready():
                self._changed.wait()
        finally:
            queue.remove(ticket)
            self._changed.notify_all()


def session_to_close(sessions, busy):
    """The session of a hook to close for another of its logins: the one
    used most recently (``sessions`` in order of last use) that runs no
    command (``busy`` counts them); None when all run one.

    A hook's steps each walk its hosts in the same order, so the session
    idle the longest is the one the step needs next (closing it would
    make every login of the step close the next one needed), while the
    one just used is done with until the next step."""
    return next((s for s in reversed(sessions) if not busy[s]), None)


_PROCESS = Limits()


def process_limits():
    """The limits every hook of this process shares."""
    return _PROCESS
