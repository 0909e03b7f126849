"""A VM powered off under a running cluster, as Kubernetes sees it.

On a real cluster, when a node's kubelet stops posting its status the node
lifecycle controller sets the Node's Ready condition to Unknown and taints
it ``node.kubernetes.io/unreachable``; the pods on it stay, and one that
is evicted or deleted stays Terminating, because only its kubelet could
confirm that its containers stopped. The controller does so once the
kubelet has been silent for its grace period (kube-controller-manager's
``--node-monitor-grace-period``, GRACE_PERIOD); ``power_off`` gives the
testbed that state after the grace period it is given, at once by default,
for the tests that do not depend on it. The test API server
(testbed.kubeapi) keeps the pods of a Node tainted so as the missing
kubelet would (see ``kubelet_gone``).
"""

import copy
import datetime
import threading

UNREACHABLE = 'node.kubernetes.io/unreachable'
REASON = 'NodeStatusUnknown'
MESSAGE = 'Kubelet stopped posting node status.'
# --node-monitor-grace-period's default since Kubernetes 1.32 (40 s before).
GRACE_PERIOD = 50.0


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


def power_off(testbed, kube, name, grace_period=0.0):
    """Power the testbed host ``name`` off (Nova's os-stop): its processes
    die, its address and disks stay; the Node at its address, if ``kube``
    has one, becomes unreachable ``grace_period`` seconds later, unless it
    was deleted or registered anew meanwhile."""
    address = testbed.hosts[name].ip
    testbed.power_off(name)
    if kube is None:
        return
    silent = [(node['metadata']['name'], node['metadata'].get('uid'))
              for node in kube.nodes() if internal_ip(node) == address]

    def lose():
        for node_name, uid in silent:
            kube.lose_node(node_name, uid=uid)
    if grace_period:
        timer = threading.Timer(grace_period, lose)
        timer.daemon = True
        timer.start()
    else:
        lose()
