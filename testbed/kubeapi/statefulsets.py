"""StatefulSets in the test API server: the kind's defaults and status,
the StatefulSet controller, and the ``scale`` subresource of the
workloads (autoscaling/v1 Scale), which Tacker's Kubernetes infra driver
patches to scale a VDU.

The controller keeps pods ``<set>-<ordinal>`` for ordinals below
``replicas``, created one at a time in order (OrderedReady: the next
when every lower one runs), each with a claim ``<template>-<set>-<ordinal>``
per volumeClaimTemplate, made before the pod and kept when the set
scales in or goes (the default retention policy, Retain). Scaling in
deletes the highest ordinal first. The controller itself and the
scheduler that binds the pods are in testbed/kubeapi/replication.py.
"""

import copy
from typing import Optional

from testbed.kubeapi import deployments
from testbed.kubeapi import model
from testbed.kubeapi import workloads

POD_NAME_LABEL = 'statefulset.kubernetes.io/pod-name'
POD_INDEX_LABEL = 'apps.kubernetes.io/pod-index'


def prepare_stateful_set(obj: dict, old: Optional[dict]) -> None:
    spec = workloads.prepare_template(obj)
    spec.setdefault('replicas', 1)
    spec.setdefault('podManagementPolicy', 'OrderedReady')
    spec.setdefault('updateStrategy', {
        'type': 'RollingUpdate', 'rollingUpdate': {'partition': 0}})
    spec.setdefault('revisionHistoryLimit', 10)
    spec.setdefault('persistentVolumeClaimRetentionPolicy', {
        'whenDeleted': 'Retain', 'whenScaled': 'Retain'})
    for template in spec.get('volumeClaimTemplates') or []:
        if isinstance(template, dict):
            template.setdefault('spec', {}).setdefault('volumeMode',
                                                       'Filesystem')


def new_status(obj: dict) -> dict:
    return {'replicas': 0, 'availableReplicas': 0}


def stateful_set_status(stateful_set: dict, pods: list) -> dict:
    ready = sum(map(workloads.pod_ready, pods))
    revision = f'{stateful_set["metadata"]["name"]}-' \
        f'{stateful_set["metadata"]["generation"]}'
    return {'replicas': len(pods), 'readyReplicas': ready,
            'currentReplicas': len(pods), 'updatedReplicas': len(pods),
            'availableReplicas': ready, 'collisionCount': 0,
            'currentRevision': revision, 'updateRevision': revision,
            'observedGeneration': stateful_set['metadata']['generation']}


def claim_name(template: dict, stateful_set: dict, ordinal: int) -> str:
    return (f'{template["metadata"]["name"]}-'
            f'{stateful_set["metadata"]["name"]}-{ordinal}')


def claim_for(stateful_set: dict, template: dict, ordinal: int) -> dict:
    labels = dict((stateful_set['spec']['selector'].get('matchLabels')
                   or {}), **((template.get('metadata') or {}).get('labels')
                              or {}))
    return {'apiVersion': 'v1', 'kind': 'PersistentVolumeClaim',
            'metadata': {'name': claim_name(template, stateful_set, ordinal),
                         'namespace': stateful_set['metadata']['namespace'],
                         'labels': labels},
            'spec': copy.deepcopy(template['spec'])}


def pod_for(stateful_set: dict, ordinal: int) -> dict:
    meta, spec = stateful_set['metadata'], stateful_set['spec']
    template = spec['template']
    name = f'{meta["name"]}-{ordinal}'
    pod_spec = copy.deepcopy(template['spec'])
    pod_spec['hostname'] = name
    if spec.get('serviceName'):
        pod_spec['subdomain'] = spec['serviceName']
    pod_spec['volumes'] = list(pod_spec.get('volumes') or []) + [
        {'name': claim['metadata']['name'], 'persistentVolumeClaim': {
            'claimName': claim_name(claim, stateful_set, ordinal)}}
        for claim in spec.get('volumeClaimTemplates') or []]
    labels = dict((template.get('metadata') or {}).get('labels') or {})
    labels.update({POD_NAME_LABEL: name, POD_INDEX_LABEL: str(ordinal)})
    return {'apiVersion': 'v1', 'kind': 'Pod',
            'metadata': {'name': name, 'namespace': meta['namespace'],
                         'labels': labels,
                         'ownerReferences': [
                             deployments.owner_reference(stateful_set)]},
            'spec': pod_spec}


def ordinal_of(pod: dict, stateful_set: dict) -> Optional[int]:
    prefix = stateful_set['metadata']['name'] + '-'
    suffix = pod['metadata']['name'][len(prefix):]
    return int(suffix) if pod['metadata']['name'].startswith(prefix) and \
        suffix.isdigit() else None


def scale_of(obj: dict) -> dict:
    """The autoscaling/v1 Scale of a workload."""
    meta = obj['metadata']
    selector = (obj.get('spec') or {}).get('selector') or {}
    return {'apiVersion': 'autoscaling/v1', 'kind': 'Scale',
            'metadata': {key: meta[key] for key in (
                'name', 'namespace', 'uid', 'resourceVersion',
                'creationTimestamp') if key in meta},
            'spec': {'replicas': obj['spec'].get('replicas', 1)},
            'status': {'replicas': (obj.get('status') or {}).get(
                'replicas', 0), 'selector': ','.join(
                    f'{key}={value}' for key, value in sorted(
                        (selector.get('matchLabels') or {}).items()))}}


def scaled(obj: dict, scale: dict) -> dict:
    """The workload with the replicas of a client's Scale."""
    replicas = (scale.get('spec') or {}).get('replicas')
    if not isinstance(replicas, int) or isinstance(replicas, bool) or \
            replicas < 0:
        raise model.ApiError(422, 'Invalid', 'Scale.autoscaling is invalid: '
                             'spec.replicas: Invalid value: '
                             f'{replicas!r}: must be greater than or equal '
                             'to 0')
    new = copy.deepcopy(obj)
    new['spec']['replicas'] = replicas
    return new
