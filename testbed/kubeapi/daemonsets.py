"""The DaemonSet controller: a pod of each DaemonSet on every Node it may
run on, bound there at once, and none left on a Node it may not.

As the real controller, a DaemonSet's pods tolerate the taints of a Node
that is unschedulable, not ready or unreachable, and ignore a cordon; a
Node's other NoSchedule and NoExecute taints need a toleration, and its
labels must match the pod's nodeSelector. A test that places a
DaemonSet's pods itself (the tests of drain do, as they do a
ReplicaSet's, see testbed/kubeapi/replication.py) annotates the DaemonSet
with CLIENT_PODS, and the controller leaves it alone.
"""

import copy
import secrets

from testbed.kubeapi import deployments
from testbed.kubeapi import kinds
from testbed.kubeapi import model
from testbed.kubeapi import patches
from testbed.kubeapi import workloads
from testbed import node_lifecycle

CLIENT_PODS = 'testbed.kubeapi/pods-placed-by-client'
# The tolerations the DaemonSet controller adds to every pod it makes.
AUTOMATIC_TOLERATIONS = tuple(
    {'key': key, 'operator': 'Exists', 'effect': effect}
    for key, effect in (
        ('node.kubernetes.io/not-ready', 'NoExecute'),
        ('node.kubernetes.io/unreachable', 'NoExecute'),
        ('node.kubernetes.io/disk-pressure', 'NoSchedule'),
        ('node.kubernetes.io/memory-pressure', 'NoSchedule'),
        ('node.kubernetes.io/pid-pressure', 'NoSchedule'),
        ('node.kubernetes.io/unschedulable', 'NoSchedule')))


def pod_for(daemon_set: dict, node: str) -> dict:
    """A new pod of the DaemonSet bound to ``node``."""
    template = daemon_set['spec']['template']
    meta = daemon_set['metadata']
    suffix = ''.join(secrets.choice(deployments.NAME_ALPHABET)
                     for _ in range(5))
    spec = copy.deepcopy(template['spec'])
    spec['tolerations'] = list(spec.get('tolerations') or []) + [
        dict(toleration) for toleration in AUTOMATIC_TOLERATIONS]
    spec['nodeName'] = node
    return {'apiVersion': 'v1', 'kind': 'Pod',
            'metadata': {
                'name': f'{meta["name"]}-{suffix}',
                'generateName': f'{meta["name"]}-',
                'namespace': meta['namespace'],
                'labels': dict((template.get('metadata') or {}).get(
                    'labels') or {}),
                'ownerReferences': [deployments.owner_reference(daemon_set)]},
            'spec': spec}


def runs_on(pod_spec: dict, node: dict) -> bool:
    """Whether a pod of the DaemonSet (with its automatic tolerations)
    belongs on the Node: not going away, taints tolerated, labels
    matching the nodeSelector; a cordon does not count."""
    pod = {'spec': dict(pod_spec, tolerations=list(
        pod_spec.get('tolerations') or []) + list(AUTOMATIC_TOLERATIONS))}
    taints = [taint for taint in (node.get('spec') or {}).get('taints') or []
              if taint.get('effect') in ('NoSchedule', 'NoExecute')]
    selector = pod_spec.get('nodeSelector') or {}
    return (not node['metadata'].get('deletionTimestamp')
            and not node_lifecycle.kubelet_gone(node)
            and all(deployments.tolerated(taint, pod) for taint in taints)
            and patches.selects({'matchLabels': selector},
                                model.labels(node)))


def managed(daemon_set: dict) -> bool:
    """Whether this controller makes the DaemonSet's pods."""
    return CLIENT_PODS not in (daemon_set['metadata'].get('annotations')
                               or {})


class DaemonSets:
    """Mixed into KubeApiServer; its method is an entry of
    controllers.CONTROLLERS (the caller holds the server's lock)."""

    def _reconcile_daemon_sets(self, now: float) -> None:
        nodes = list(self._objects[kinds.NODE].values())
        for daemon_set in list(self._objects[kinds.DAEMON_SET].values()):
            if daemon_set['metadata'].get('deletionTimestamp') or \
                    not managed(daemon_set):
                continue
            pods = [pod for pod in self._owned_by(kinds.POD, daemon_set)
                    if not pod['metadata'].get('deletionTimestamp')
                    and pod['status'].get('phase')
                    not in workloads.TERMINAL_PHASES]
            spec = daemon_set['spec']['template']['spec']
            wanted = {node['metadata']['name'] for node in nodes
                      if runs_on(spec, node)}
            placed = {pod['spec'].get('nodeName') for pod in pods}
            for node in sorted(wanted - placed):
                self._create(kinds.POD, daemon_set['metadata']['namespace'],
                             pod_for(daemon_set, node))
            for pod in pods:
                if pod['spec'].get('nodeName') not in wanted:
                    self._mark_deleted(kinds.POD, pod)
