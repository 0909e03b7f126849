"""Dynamic provisioning on the Storage server: csi-driver-nfs and the
request's StorageClasses, applied with kubectl on a Master.

Looks first and changes only what differs, as the static PVs do: the
manifests go through ``kubectl apply`` (which reports each object
unchanged or configured), the classes are compared with the live ones by
``plan_classes``. A StorageClass's parameters cannot be updated: a class
whose server or share changed (a Storage server that came back at another
address) is deleted and created again, which claims already provisioned
do not notice (each PV carries its own volumeHandle).
"""

import dataclasses
import json

import yaml

from kubernetes_mgmt_pv import exceptions
from kubernetes_mgmt_pv.storage import csi_driver

DRIVER_STEP = 'csi-driver-nfs installation'
NODE_PLUGIN_STEP = 'csi-driver-nfs node plugin check'
CLASSES_STEP = 'StorageClass registration'
# What a StorageClass holds that the driver sets; the API server adds
# defaults (allowVolumeExpansion, ...) that do not count.
_CLASS_FIELDS = ('provisioner', 'parameters', 'reclaimPolicy',
                 'volumeBindingMode', 'mountOptions')


@dataclasses.dataclass(frozen=True)
class ClassPlan(object):
    """What ``plan_classes`` decided, by class name."""
    apply: tuple = ()  # documents to apply (new, or changeable fields)
    replace: tuple = ()  # documents whose class must be deleted first
    unchanged: tuple = ()  # names


def plan_classes(desired, live_output):
    """The ClassPlan of the ``desired`` StorageClass documents against
    ``kubectl get storageclass -o json`` output."""
    try:
        items = json.loads(live_output)['items']
        live = {item['metadata']['name']: item for item in items}
    except (ValueError, KeyError, TypeError):
        raise exceptions.ClusterInstallError(
            'kubectl get storageclasses -o json did not return a list')
    apply, replace, unchanged = [], [], []
    for document in desired:
        name = document['metadata']['name']
        current = live.get(name)
        if current is None:
            apply.append(document)
        elif _fields(current) == _fields(document) and \
                _default(current) == _default(document):
            unchanged.append(name)
        elif _fields(current) == _fields(document):
            apply.append(document)  # only the default annotation changed
        else:
            replace.append(document)
    return ClassPlan(tuple(apply), tuple(replace), tuple(unchanged))


def _fields(document):
    return {key: document.get(key) for key in _CLASS_FIELDS}


def _default(document):
    annotations = (document.get('metadata') or {}).get('annotations') or {}
    return annotations.get(csi_driver.DEFAULT_CLASS_ANNOTATION) == 'true'


def install_driver(kubectl, manifests, mirror_url, timeout, report):
    """Apply csi-driver-nfs (its images from ``mirror_url`` if given) and
    wait, with watches, until its controllers are available and its node
    plugin runs on every node."""
    documents = csi_driver.mirrored(manifests.documents, mirror_url)
    apply(kubectl, documents, report)
    for kind, workloads in (('deployment', manifests.controllers),
                            ('daemonset', manifests.node_daemonsets)):
        for namespace, name in workloads:
            wait_rolled_out(kubectl, kind, namespace, name, timeout)


def wait_rolled_out(kubectl, kind, namespace, name, timeout):
    """``kubectl rollout status`` (a watch) of one workload."""
    result = kubectl.run(['rollout', 'status', '%s/%s' % (kind, name),
                          '-n', namespace, '--timeout=%ds' % timeout],
                         check=False, timeout=timeout + 60)
    if not result.ok:
        raise exceptions.ClusterInstallError(
            '%s %s/%s of csi-driver-nfs is not rolled out after %ds: %s' % (
                kind, namespace, name, timeout,
                kubectl.failure('kubectl rollout status', result)))


def register_classes(kubectl, specs, server, report):
    """The StorageClasses of ``specs`` on the NFS server at ``server``."""
    desired = [csi_driver.storage_class(spec, server) for spec in specs]
    plan = plan_classes(desired, kubectl.run(
        ['get', 'storageclasses', '-o', 'json']).stdout)
    for name in plan.unchanged:
        report.record(kubectl.host, 'StorageClass %s' % name, False,
                      'unchanged')
    if plan.replace:
        kubectl.run(['delete', 'storageclass', '--ignore-not-found'] +
                    [d['metadata']['name'] for d in plan.replace])
    if plan.apply or plan.replace:
        apply(kubectl, plan.apply + plan.replace, report)


def apply(kubectl, documents, report):
    """kubectl apply of the documents in one call, on its standard input;
    each object recorded as kubectl reports it (created, configured,
    unchanged)."""
    stream = yaml.safe_dump_all(list(documents), default_flow_style=False,
                                sort_keys=False)
    output = kubectl.run(['apply', '-f', '-'],
                         stdin=stream.encode('utf-8')).stdout
    for line in output.splitlines()[:len(documents)]:
        resource, _, action = line.strip().partition(' ')
        report.record(kubectl.host, resource[:253], action != 'unchanged',
                      action[:40])
