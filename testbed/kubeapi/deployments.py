"""Deployments and what their controllers make of them, as pure
functions: defaults and status of a Deployment, the ReplicaSet of its
current pod template, the Pods of a ReplicaSet (named as Kubernetes names
them) and the Node the scheduler picks for a Pod."""

import copy
import json
import secrets
from typing import Optional

from testbed.kubeapi import model
from testbed.kubeapi import patches
from testbed.kubeapi import workloads
from testbed import node_lifecycle

HASH_LABEL = 'pod-template-hash'
REVISION = 'deployment.kubernetes.io/revision'
# Kubernetes' alphabet for generated names (no vowels, no 0, 1, 3).
NAME_ALPHABET = 'bcdfghjklmnpqrstvwxz2456789'
# The template hash keeps to the letters of NAME_ALPHABET that are also
# hexadecimal: Tacker matches a Deployment's pods by
# "<name>-[0-9a-f]{1,10}-[0-9a-z]{5}".
_HASH_ALPHABET = 'bcdf2456789'
_FNV_OFFSET, _FNV_PRIME = 0x811c9dc5, 0x01000193


def prepare_deployment(obj: dict, old: Optional[dict]) -> None:
    """The API server's defaults of an apps/v1 Deployment."""
    spec = obj.setdefault('spec', {})
    template = spec.get('template')
    if isinstance(template, dict):
        workloads.prepare_pod(template, None)
    spec.setdefault('replicas', 1)
    spec.setdefault('strategy', {
        'type': 'RollingUpdate',
        'rollingUpdate': {'maxUnavailable': '25%', 'maxSurge': '25%'}})
    spec.setdefault('revisionHistoryLimit', 10)
    spec.setdefault('progressDeadlineSeconds', 600)


def template_hash(template: dict) -> str:
    """The pod-template-hash of a pod template: FNV-1a of its JSON,
    spelt in hexadecimal-safe letters of NAME_ALPHABET."""
    value = _FNV_OFFSET
    for byte in json.dumps(template, sort_keys=True,
                           separators=(',', ':')).encode():
        value = ((value ^ byte) * _FNV_PRIME) & 0xffffffff
    return ''.join(_HASH_ALPHABET[int(digit)] for digit in str(value))


def replica_set_for(deployment: dict, revision: int) -> dict:
    """The ReplicaSet a Deployment's controller creates for its current
    template: "<deployment>-<hash>", selecting the hash label too."""
    meta, spec = deployment['metadata'], deployment['spec']
    digest = template_hash(spec['template'])
    template = copy.deepcopy(spec['template'])
    template.setdefault('metadata', {})
    template['metadata']['labels'] = {
        **(template['metadata'].get('labels') or {}), HASH_LABEL: digest}
    selector = copy.deepcopy(spec['selector'])
    selector['matchLabels'] = {**(selector.get('matchLabels') or {}),
                               HASH_LABEL: digest}
    return {'apiVersion': 'apps/v1', 'kind': 'ReplicaSet',
            'metadata': {
                'name': f'{meta["name"]}-{digest}',
                'namespace': meta['namespace'],
                'labels': template['metadata']['labels'],
                'annotations': {REVISION: str(revision)},
                'ownerReferences': [owner_reference(deployment)]},
            'spec': {'replicas': 0, 'selector': selector,
                     'template': template}}


def owner_reference(owner: dict) -> dict:
    """A controller ownerReference, as controllers set them."""
    return {'apiVersion': owner['apiVersion'], 'kind': owner['kind'],
            'name': owner['metadata']['name'],
            'uid': owner['metadata']['uid'], 'controller': True,
            'blockOwnerDeletion': True}


def is_current(replica_set: dict, deployment: dict) -> bool:
    """Whether the ReplicaSet runs the Deployment's current template."""
    return model.labels(replica_set).get(HASH_LABEL) == \
        template_hash(deployment['spec']['template'])


def pod_for(replica_set: dict) -> dict:
    """A new Pod of a ReplicaSet, "<replica set>-<5 letters>"."""
    template = replica_set['spec']['template']
    suffix = ''.join(secrets.choice(NAME_ALPHABET) for _ in range(5))
    return {'apiVersion': 'v1', 'kind': 'Pod',
            'metadata': {
                'name': f'{replica_set["metadata"]["name"]}-{suffix}',
                'namespace': replica_set['metadata']['namespace'],
                'labels': dict((template.get('metadata') or {}).get(
                    'labels') or {}),
                'ownerReferences': [owner_reference(replica_set)]},
            'spec': copy.deepcopy(template['spec'])}


def scale_targets(deployment: dict, replica_sets: list) -> dict:
    """name -> replicas for the Deployment's ReplicaSets: the current one
    gets them all at once; the old ones give up as many as the current
    one has ready (a rolling replacement that never lowers the ready
    pods)."""
    wanted = deployment['spec'].get('replicas', 1)
    current = [rs for rs in replica_sets if is_current(rs, deployment)]
    ready = sum((rs.get('status') or {}).get('readyReplicas', 0)
                for rs in current)
    old_left = max(0, wanted - ready)
    targets = {rs['metadata']['name']: wanted for rs in current}
    for rs in replica_sets:
        if rs in current:
            continue
        keep = min(rs['spec'].get('replicas', 0), old_left)
        targets[rs['metadata']['name']] = keep
        old_left -= keep
    return targets


def deployment_status(deployment: dict, replica_sets: list) -> dict:
    """A Deployment's status from its ReplicaSets' statuses."""
    def total(key, sets=replica_sets):
        return sum((rs.get('status') or {}).get(key, 0) for rs in sets)
    current = [rs for rs in replica_sets if is_current(rs, deployment)]
    wanted = deployment['spec'].get('replicas', 1)
    status = {'observedGeneration': deployment['metadata']['generation'],
              'replicas': total('replicas'),
              'updatedReplicas': total('replicas', current),
              'readyReplicas': total('readyReplicas'),
              'availableReplicas': total('availableReplicas')}
    unavailable = max(0, wanted - status['availableReplicas'])
    if unavailable:
        status['unavailableReplicas'] = unavailable
    status = {key: value for key, value in status.items()
              if value or key in ('observedGeneration', 'replicas')}
    status['conditions'] = [{
        'type': 'Available',
        'status': 'True' if not unavailable else 'False',
        'reason': 'MinimumReplicasAvailable' if not unavailable
        else 'MinimumReplicasUnavailable'}]
    return status


def tolerated(taint: dict, pod: dict) -> bool:
    return any(
        toleration.get('operator') == 'Exists' and not toleration.get('key')
        or (toleration.get('key') == taint.get('key')
            and toleration.get('effect') in (None, '', taint.get('effect')))
        for toleration in pod['spec'].get('tolerations') or [])


def fits(pod: dict, node: dict) -> bool:
    """Whether the scheduler may put the Pod on the Node: Ready,
    schedulable, its NoSchedule taints tolerated, its labels matching the
    pod's nodeSelector."""
    spec = node.get('spec') or {}
    ready = any(condition.get('type') == 'Ready'
                and condition.get('status') == 'True'
                for condition in (node.get('status') or {}).get(
                    'conditions') or [])
    selector = pod['spec'].get('nodeSelector') or {}
    return (ready and not spec.get('unschedulable')
            and not node_lifecycle.kubelet_gone(node)
            and all(tolerated(taint, pod) for taint in spec.get('taints')
                    or [] if taint.get('effect') in ('NoSchedule',
                                                     'NoExecute'))
            and patches.selects({'matchLabels': selector},
                                model.labels(node)))


def pick_node(pod: dict, nodes: list, pods: list) -> Optional[str]:
    """The Node the scheduler binds the Pod to: of those it fits, the one
    running the fewest pods (then by name); None if none fits."""
    load = {}
    for other in pods:
        name = (other.get('spec') or {}).get('nodeName')
        load[name] = load.get(name, 0) + 1
    candidates = sorted(
        (load.get(node['metadata']['name'], 0), node['metadata']['name'])
        for node in nodes if fits(pod, node))
    return candidates[0][1] if candidates else None
