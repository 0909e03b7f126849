"""Run one step on many nodes at once and report every node that failed.

Native threads (``concurrent.futures``) are concurrent in both runtimes
Tacker uses: plain threads under tacker-conductor's threading backend, and
green threads when an older conductor has monkey-patched the process with
eventlet. The driver itself never calls ``eventlet.monkey_patch()``.
"""

from concurrent import futures

from oslo_log import log as logging

from kubernetes_mgmt_pv import exceptions

LOG = logging.getLogger(__name__)


def run_on_nodes(step, function, nodes, max_workers):
    """Call ``function(node)`` for every node, at most max_workers at a time.

    ``nodes`` maps a display name (the host address) to the node argument.
    All nodes run to completion; afterwards a ``NodeStepError`` names every
    node that failed, with its error.
    """
    failures = {}
    if not nodes:
        return
    workers = max(1, min(max_workers, len(nodes)))
    with futures.ThreadPoolExecutor(max_workers=workers,
                                    thread_name_prefix='k8s-mgmt') as pool:
        pending = {pool.submit(function, node): name
                   for name, node in nodes.items()}
        for future in futures.as_completed(pending):
            name = pending[future]
            error = future.exception()
            if error is not None:
                LOG.error('%s failed on %s: %s', step, name,
                          exceptions.failure_reason(error, name))
                failures[name] = error
    if failures:
        raise exceptions.NodeStepError(step, failures)
