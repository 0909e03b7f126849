"""PodDisruptionBudgets and the drains that must respect them.

Which budgets cover the pods a drain evicts is a pure function of the API
server's listings (``kubectl get pods,poddisruptionbudgets -A -o json``).
The Workers of an upgrade wave are drained at once, and two of them with
pods of one budget would race for the disruptions it allows: kubectl drain
retries a refused eviction every five seconds until its timeout. So each
drain takes its turn on the budgets covering its pods (``WaveGate``) and,
where a budget allows no disruption, waits for its DisruptionAllowed
condition with a watch (kubectl wait) before it evicts, all within the
drain's timeout. The listings come from a VM: a name must be a Kubernetes
name before it goes into an argv.
"""

import dataclasses
import json
import math
import re
import threading
import time

from kubernetes_mgmt_pv import exceptions

_NAME = re.compile(r'[a-z0-9](?:[-a-z0-9.]{0,251}[a-z0-9])?')
MIRROR_ANNOTATION = 'kubernetes.io/config.mirror'
_FINISHED = ('Succeeded', 'Failed')  # evicted regardless of any budget


def selects(selector, labels):
    """A LabelSelector (matchLabels, matchExpressions) matches labels."""
    if not isinstance(selector, dict):
        return False
    if any(labels.get(k) != v
           for k, v in (selector.get('matchLabels') or {}).items()):
        return False
    for expression in selector.get('matchExpressions') or []:
        key, values = expression.get('key'), expression.get('values') or []
        operator = expression.get('operator')
        if operator == 'In' and labels.get(key) not in values or \
                operator == 'NotIn' and labels.get(key) in values or \
                operator == 'Exists' and key not in labels or \
                operator == 'DoesNotExist' and key in labels:
            return False
    return True


def _items(output, kind):
    try:
        items = json.loads(output)['items']
        if isinstance(items, list) and all(isinstance(item, dict)
                                           for item in items):
            return items
    except (ValueError, KeyError, TypeError):
        pass
    raise exceptions.ClusterInstallError(
        'kubectl get %s -A -o json did not return a list' % kind)


def _key(item):
    """'namespace/name' of an object, None unless both are names."""
    meta = item.get('metadata') or {}
    namespace, name = meta.get('namespace'), meta.get('name')
    if all(isinstance(word, str) and _NAME.fullmatch(word)
           for word in (namespace, name)):
        return '%s/%s' % (namespace, name)
    return None


def listed_any(budgets_output):
    """Whether the poddisruptionbudgets listing has any budget."""
    return bool(_items(budgets_output, 'poddisruptionbudgets'))


def blocking_budgets(pods_output, budgets_output, pods):
    """namespace/name of the PodDisruptionBudgets that allow no disruption
    and cover one of ``pods`` (namespace/name), from ``kubectl get pods``
    and ``kubectl get poddisruptionbudgets`` (-A -o json) output: kubectl
    drain names the pods, not the budgets. [] if either is unreadable."""
    try:
        labels = {_key(p): (p.get('metadata') or {}).get('labels') or {}
                  for p in _items(pods_output, 'pods')}
        budgets = _items(budgets_output, 'poddisruptionbudgets')
    except exceptions.ClusterInstallError:
        return []
    found = []
    for budget in budgets:
        key, spec = _key(budget), budget.get('spec') or {}
        if not key or (budget.get('status') or {}).get(
                'disruptionsAllowed', 0) > 0:
            continue
        namespace = key.split('/', 1)[0]
        if any(pod.split('/', 1)[0] == namespace and pod in labels and
               selects(spec.get('selector'), labels[pod]) for pod in pods):
            found.append(key)
    return found


def _evicted(pod):
    """A drain evicts the pod (not a DaemonSet's, a mirror or finished)."""
    meta = pod.get('metadata') or {}
    owners = meta.get('ownerReferences') or []
    return not (
        any(isinstance(o, dict) and o.get('kind') == 'DaemonSet'
            for o in owners) or
        MIRROR_ANNOTATION in (meta.get('annotations') or {}) or
        (pod.get('status') or {}).get('phase') in _FINISHED)


@dataclasses.dataclass(frozen=True)
class Coverage(object):
    """The budgets covering the pods a drain of each Node evicts: by_node
    {Node: sorted budgets}, pods {(Node, budget): sorted pods} and
    allowed {budget: disruptionsAllowed when listed}."""
    by_node: dict
    pods: dict
    allowed: dict


def coverage(pods_output, budgets_output, nodes):
    """The Coverage of the Nodes ``nodes``, from the listings."""
    budgets = [(key, budget) for key, budget in (
        (_key(b), b) for b in _items(budgets_output, 'poddisruptionbudgets'))
        if key]
    by_node, pods = {node: set() for node in nodes}, {}
    for pod in _items(pods_output, 'pods'):
        node, key = (pod.get('spec') or {}).get('nodeName'), _key(pod)
        if node not in by_node or not key or not _evicted(pod):
            continue
        labels = (pod.get('metadata') or {}).get('labels') or {}
        for budget_key, budget in budgets:
            if budget_key.split('/', 1)[0] == key.split('/', 1)[0] and \
                    selects((budget.get('spec') or {}).get('selector'),
                            labels):
                by_node[node].add(budget_key)
                pods.setdefault((node, budget_key), set()).add(key)
    allowed = {key: (budget.get('status') or {}).get('disruptionsAllowed', 0)
               for key, budget in budgets}
    return Coverage({node: tuple(sorted(keys)) for node, keys
                     in by_node.items()},
                    {pair: tuple(sorted(keys)) for pair, keys
                     in pods.items()}, allowed)


def wait_argv(budget, seconds):
    """kubectl wait (a watch) until ``budget`` allows a disruption."""
    namespace, name = budget.split('/', 1)
    return ['wait', '--for=condition=DisruptionAllowed',
            '--timeout=%ds' % seconds, '-n', namespace,
            'poddisruptionbudget/%s' % name]


def timeout_error(node, budget, pods, timeout):
    return exceptions.ClusterInstallError(
        'kubectl drain of Node %s did not start within %ds: '
        'PodDisruptionBudget %s allowed no disruption of pod(s) %s '
        '(drain_force deletes such pods regardless); the node stays in '
        'the cluster, cordoned' % (node, timeout, budget, ', '.join(pods)))


class WaveGate(object):
    """The turns of one wave's drains on the budgets they share: a drain
    holds each budget covering its pods (in name order, so no two wait on
    each other) until it ends; the first turn on a budget trusts the
    wave's listing, each later one watches for DisruptionAllowed."""

    def __init__(self, covered, timeout):
        self.coverage = covered
        self.timeout = timeout
        self._locks = {budget: threading.Lock() for budget in covered.allowed}
        # Turns taken on each budget, counted under its lock.
        self._turns = dict.fromkeys(covered.allowed, 0)

    def drain(self, kubectl, node, run_drain):
        """``run_drain(seconds left)`` once the budgets of ``node`` allow,
        within the drain's timeout; raises timeout_error otherwise."""
        deadline = time.monotonic() + self.timeout
        held = []
        try:
            for budget in self.coverage.by_node.get(node, ()):
                lock = self._locks[budget]
                if not lock.acquire(timeout=_left(deadline)):
                    raise self._timed_out(node, budget)
                held.append(lock)
                self._turns[budget] += 1
                if self._turns[budget] > 1 or \
                        self.coverage.allowed[budget] < 1:
                    self._wait_allowed(kubectl, node, budget, deadline)
            return run_drain(_seconds(deadline))
        finally:
            for lock in held:
                lock.release()

    def _wait_allowed(self, kubectl, node, budget, deadline):
        """Watch until the budget allows a disruption or is deleted."""
        seconds = _seconds(deadline)
        result = kubectl.run(wait_argv(budget, seconds), check=False,
                             timeout=seconds + 60)
        if result.ok:
            return
        namespace, name = budget.split('/', 1)
        still = kubectl.run(['get', '-n', namespace, '--ignore-not-found',
                             '-o', 'name', 'poddisruptionbudget/%s' % name],
                            check=False)
        if not (still.ok and still.stdout.strip() == ''):
            raise self._timed_out(node, budget)

    def _timed_out(self, node, budget):
        return timeout_error(node, budget,
                             self.coverage.pods.get((node, budget), ()),
                             self.timeout)


def _left(deadline):
    return max(0.0, deadline - time.monotonic())


def _seconds(deadline):
    """Whole seconds left, at least one: a kubectl --timeout."""
    return max(1, math.ceil(_left(deadline)))
