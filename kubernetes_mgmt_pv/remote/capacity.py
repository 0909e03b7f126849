"""Process-wide caps shared by every hook of one tacker-conductor process.

Tacker runs the hooks of different VNF instances at the same time in one
process, so the driver caps what they use together (options
``max_concurrent_hooks``, ``max_ssh_sessions``, ``max_node_threads``).
Work beyond a cap waits its turn; the rules below keep every hook able to
progress, so no combination of hooks deadlocks:

* Hook slots: a hook takes its slot before its first remote step, in its
  own thread, holding nothing else, and keeps it until it returns.
* SSH sessions: a session takes a permit when it logs in and gives it
  back when it is closed (at the latest when its hook returns, errors
  included). When all permits are taken, the session idle for the longest
  time (no command running on it, whichever hook owns it) is closed and
  its permit handed over; its host is logged in to again at its next
  command. A session is busy only while one command runs, and a thread
  waits for a permit holding no busy session, so running commands always
  end (they have timeouts) and free a permit: a hook needing more sessions
  than the cap still progresses, at the cost of extra logins.
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
        # Sessions holding a permit, least recently used first.
        self._sessions = collections.OrderedDict()
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

    def open_session(self, session):
        """Wait for a session permit for ``session`` (which has
        ``detach()``: drop its connection, returning what to close),
        closing the longest idle session if the cap is reached."""
        to_close = None
        with self._changed:
            if session in self._sessions:
                return
            self._wait_turn(self._session_queue,
                            lambda: (len(self._sessions) <
                                     self.conf.max_ssh_sessions or
                                     self._idle() is not None),
                            '%s waits for an SSH session: %d open '
                            '(max_ssh_sessions = %d)', session,
                            lambda: (len(self._sessions),
                                     self.conf.max_ssh_sessions))
            if len(self._sessions) >= self.conf.max_ssh_sessions:
                victim = self._idle()
                del self._sessions[victim]
                to_close = victim.detach()
                LOG.info('Closing the idle SSH session %s to make room '
                         '(max_ssh_sessions = %d); it logs in again when '
                         'next used', victim, self.conf.max_ssh_sessions)
            self._sessions[session] = True
        if to_close is not None:
            to_close.close()

    def close_session(self, session):
        """Give back the permit of a closed session (no-op if it has none)."""
        with self._changed:
            if self._sessions.pop(session, None) is not None:
                self._changed.notify_all()

    @contextlib.contextmanager
    def session_in_use(self, session):
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
                if session in self._sessions:
                    self._sessions.move_to_end(session)
                self._changed.notify_all()

    def _idle(self):
        """The least recently used session that runs no command."""
        return next((s for s in self._sessions if not self._busy[s]), None)

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


_PROCESS = Limits()


def process_limits():
    """The limits every hook of this process shares."""
    return _PROCESS
