"""A VM powered off under a running cluster, as Kubernetes sees it.

On a real cluster, when a node's kubelet stops posting its status the node
lifecycle controller sets the Node's Ready condition to Unknown and taints
it ``node.kubernetes.io/unreachable``; the pods on it stay, and one that
is evicted or deleted stays Terminating, because only its kubelet could
confirm that its containers stopped. ``power_off`` gives the testbed that
state at once (no 40 s grace period to wait for); the test API server
(testbed.kubeapi) keeps the pods of such a Node as the missing kubelet
would (see ``kubelet_gone``).
"""

import copy
import datetime

UNREACHABLE = 'node.kubernetes.io/unreachable'
REASON = 'NodeStatusUnknown'
MESSAGE = 'Kubelet stopped posting node status.'


def _now():
    return datetime.datetime.now(datetime.timezone.utc).strftime(
        '%Y-%m-%dT%H:%M:%SZ')


def kubelet_gone(node):
    """Whether the Node is tainted unreachable: no kubelet ends its pods."""
    return any(taint.get('key') == UNREACHABLE
               for taint in (node.get('spec') or {}).get('taints') or [])


def unreachable(node):
    """A copy of the Node as the node lifecycle controller leaves it once
    its kubelet is silent: every condition Unknown, the unreachable taints
    (NoSchedule and NoExecute)."""
    lost = copy.deepcopy(node)
    now = _now()
    for condition in lost.setdefault('status', {}).get('conditions') or []:
        condition.update(status='Unknown', reason=REASON, message=MESSAGE,
                         lastTransitionTime=now)
    taints = lost.setdefault('spec', {}).setdefault('taints', [])
    for effect in ('NoSchedule', 'NoExecute'):
        if not any(taint.get('key') == UNREACHABLE and
                   taint.get('effect') == effect for taint in taints):
            taints.append({'key': UNREACHABLE, 'effect': effect,
                           'timeAdded': now})
    return lost


def internal_ip(node):
    return next((entry.get('address') for entry in
                 (node.get('status') or {}).get('addresses') or []
                 if entry.get('type') == 'InternalIP'), None)


def power_off(testbed, kube, name):
    """Power the testbed host ``name`` off (Nova's os-stop): its processes
    die, its address and disks stay; the Node at its address, if ``kube``
    has one, becomes unreachable."""
    address = testbed.hosts[name].ip
    testbed.power_off(name)
    if kube is None:
        return
    for node in kube.nodes():
        if internal_ip(node) == address:
            kube.lose_node(node['metadata']['name'])
