"""Manifests for tests: a Pod, an owner reference."""

from typing import Optional


def owner_reference(owner: dict, controller: bool = True) -> dict:
    """An ownerReference to a stored object (as create() returns it), for
    a Pod's metadata.ownerReferences; ``controller`` makes the owner its
    controller, which is what drain and the workload status go by."""
    meta = owner['metadata']
    return {'apiVersion': owner['apiVersion'], 'kind': owner['kind'],
            'name': meta['name'], 'uid': meta['uid'],
            'controller': controller, 'blockOwnerDeletion': True}


def pod_manifest(name: str, node_name: Optional[str] = None, *,
                 namespace: str = 'default', labels: Optional[dict] = None,
                 owner: Optional[dict] = None, empty_dir: bool = False,
                 image: str = 'registry.k8s.io/pause:3.10') -> dict:
    """A Pod for create(): bound to ``node_name`` (it runs once that Node
    exists), controlled by ``owner`` (a stored ReplicaSet or DaemonSet,
    as create() returned it), with an emptyDir volume if ``empty_dir``."""
    container = {'name': 'main', 'image': image}
    spec = {'containers': [container]}
    if node_name:
        spec['nodeName'] = node_name
    if empty_dir:
        spec['volumes'] = [{'name': 'scratch', 'emptyDir': {}}]
        container['volumeMounts'] = [{'name': 'scratch',
                                      'mountPath': '/scratch'}]
    meta = {'name': name, 'namespace': namespace}
    if labels:
        meta['labels'] = dict(labels)
    if owner:
        meta['ownerReferences'] = [owner_reference(owner)]
    return {'apiVersion': 'v1', 'kind': 'Pod', 'metadata': meta,
            'spec': spec}
