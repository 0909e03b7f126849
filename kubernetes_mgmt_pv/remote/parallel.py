"""Run one step on many nodes at once and report every node that failed.

Native threads are concurrent in both runtimes Tacker uses: plain threads
under tacker-conductor's threading backend, and green threads when an
older conductor has monkey-patched the process with eventlet. The driver
itself never calls ``eventlet.monkey_patch()``.

The threads a step starts count against the process-wide
``max_node_threads`` (``capacity.Limits``): they are started only while
that cap allows, and the calling thread works on the nodes too, so a step
always progresses, even when every thread of the process is taken.
"""

import collections
import threading

from oslo_log import log as logging

from kubernetes_mgmt_pv import exceptions
from kubernetes_mgmt_pv.remote import capacity

LOG = logging.getLogger(__name__)


class _Step(object):
    """The nodes of one step not started yet, and the threads on them."""

    def __init__(self, step, function, nodes, max_workers, limits):
        self.step = step
        self.function = function
        self.pending = collections.deque(nodes.items())
        self.max_workers = max(1, max_workers)
        self.limits = limits
        self.failures = {}
        self.helpers = 0
        self.done = threading.Condition()
        self.refused_logged = False

    def next_node(self):
        """The next node to work on (None when none is left), starting
        extra threads for the rest while the caps allow."""
        with self.done:
            if not self.pending:
                return None
            item = self.pending.popleft()
            while (self.pending and self.helpers + 1 < self.max_workers):
                if not self.limits.try_thread():
                    if not self.refused_logged:
                        self.refused_logged = True
                        LOG.info('%s: %d node(s) wait for a thread '
                                 '(max_node_threads reached)', self.step,
                                 len(self.pending))
                    break
                try:
                    threading.Thread(target=self.helper, daemon=True,
                                     name='k8s-mgmt-%s' % self.step).start()
                except RuntimeError:  # the system's thread limit
                    self.limits.release_thread()
                    break
                self.helpers += 1
            return item

    def work(self):
        """Run nodes until none is left."""
        item = self.next_node()
        while item is not None:
            name, node = item
            try:
                self.function(node)
            except Exception as error:
                LOG.error('%s failed on %s: %s', self.step, name,
                          exceptions.failure_reason(error, name))
                with self.done:
                    self.failures[name] = error
            item = self.next_node()

    def helper(self):
        try:
            self.work()
        finally:
            self.limits.release_thread()
            with self.done:
                self.helpers -= 1
                self.done.notify_all()

    def wait_for_helpers(self):
        with self.done:
            while self.helpers:
                self.done.wait()


def run_on_nodes(step, function, nodes, max_workers, limits=None):
    """Call ``function(node)`` for every node, at most max_workers at a time.

    ``nodes`` maps a display name (the host address) to the node argument.
    All nodes run to completion; afterwards a ``NodeStepError`` names every
    node that failed, with its error. ``limits``: the thread cap's
    bookkeeping (default: the process's).
    """
    if not nodes:
        return
    state = _Step(step, function, nodes, min(max_workers, len(nodes)),
                  limits or capacity.process_limits())
    try:
        state.work()
    finally:
        state.wait_for_helpers()
    if state.failures:
        raise exceptions.NodeStepError(step, state.failures)
