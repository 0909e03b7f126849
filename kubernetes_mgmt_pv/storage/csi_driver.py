"""csi-driver-nfs from the VNF package, and the StorageClasses on it.

The package pins one release of csi-driver-nfs (its controller
Deployment, node DaemonSet, CSIDriver and RBAC); the driver applies those
manifests on a Master, with every container image moved to the request's
registry mirror when one is given, so an air-gapped site works. The
StorageClasses are rendered from the request with the Storage server's
real address. Everything here is a pure function of the package's
documents (read as the PV manifests are, manifests.load_documents) and
the request, before any host is touched; ``validate`` calls ``load``
too.
"""

import dataclasses
import os
import urllib.parse

from kubernetes_mgmt_pv import exceptions
from kubernetes_mgmt_pv.storage import manifests as pv_manifests

PROVISIONER = 'nfs.csi.k8s.io'
DEFAULT_CLASS_ANNOTATION = 'storageclass.kubernetes.io/is-default-class'
# What a csi-driver-nfs release deploys; anything else in these files is
# not the driver's to apply.
KINDS = ('ServiceAccount', 'ClusterRole', 'ClusterRoleBinding', 'Role',
         'RoleBinding', 'CSIDriver', 'Deployment', 'DaemonSet')
# One subdirectory per claim, named by its namespace and name, so an
# operator finds a claim's data on the Storage server's volume.
SUB_DIR = '${pvc.metadata.namespace}/${pvc.metadata.name}'


@dataclasses.dataclass(frozen=True)
class CsiManifests(object):
    """The documents of the package's csi-driver-nfs manifests, in file
    order, and the workloads to wait for: (namespace, name)."""
    documents: tuple = dataclasses.field(repr=False)
    controllers: tuple = ()  # Deployments
    node_daemonsets: tuple = ()  # DaemonSets


def load(package_dir, files, json_path):
    """The CsiManifests of ``files`` (ManifestFiles of the package);
    ``json_path``: where the request names them. ParameterErrors name a
    bad file by its item's JSON path, what is missing by ``json_path``."""
    root = os.path.realpath(package_dir)
    documents, errors = [], []
    for manifest in files:
        try:
            documents += _load_file(root, manifest.path)
        except ValueError as error:
            errors.append(exceptions.ParameterError(manifest.json_path,
                                                    str(error)))
    if errors:
        raise exceptions.ParameterErrors(errors)
    manifests = _classify(documents)
    problems = _missing(manifests, documents)
    if problems:
        raise exceptions.ParameterErrors([exceptions.ParameterError(
            json_path, problem) for problem in problems])
    return manifests


def _load_file(root, relative):
    loaded = pv_manifests.load_documents(root, relative)
    for document in loaded:
        kind = document.get('kind') if isinstance(document, dict) else None
        name = _name(document)
        if kind not in KINDS or not name:
            raise ValueError(
                '%r holds a %s%s, not one of what csi-driver-nfs deploys '
                '(%s, each with metadata.name)' % (
                    relative, kind if isinstance(kind, str) else 'document',
                    ' without metadata.name' if kind in KINDS else '',
                    ', '.join(KINDS)))
    return loaded


def _name(document):
    metadata = document.get('metadata') if isinstance(document,
                                                      dict) else None
    name = metadata.get('name') if isinstance(metadata, dict) else None
    return name if isinstance(name, str) and name else None


def _workload(document):
    metadata = document['metadata']
    namespace = metadata.get('namespace')
    return (namespace if isinstance(namespace, str) and namespace
            else 'default', metadata['name'])


def _classify(documents):
    return CsiManifests(
        documents=tuple(documents),
        controllers=tuple(_workload(d) for d in documents
                          if d['kind'] == 'Deployment'),
        node_daemonsets=tuple(_workload(d) for d in documents
                              if d['kind'] == 'DaemonSet'))


def _missing(manifests, documents):
    problems = []
    if not any(d['kind'] == 'CSIDriver' and _name(d) == PROVISIONER
               for d in documents):
        problems.append('no CSIDriver %s among the manifests: they are not '
                        'csi-driver-nfs' % PROVISIONER)
    if not manifests.controllers:
        problems.append('no Deployment (csi-driver-nfs\'s controller) '
                        'among the manifests')
    if not manifests.node_daemonsets:
        problems.append('no DaemonSet (csi-driver-nfs\'s node plugin) '
                        'among the manifests')
    return problems


def mirrored(documents, mirror_url):
    """The documents with each container image of their pod templates
    pulled from ``mirror_url`` (registry host and path prefix) instead of
    its registry; unchanged without a mirror."""
    if not mirror_url:
        return documents
    split = urllib.parse.urlsplit(mirror_url)
    prefix = (split.netloc + split.path).rstrip('/')
    return tuple(_with_images(document, prefix) for document in documents)


def _with_images(document, prefix):
    spec = ((document.get('spec') or {}).get('template') or {}).get('spec')
    if not isinstance(spec, dict):
        return document
    changed = dict(spec)
    for key in ('initContainers', 'containers'):
        if isinstance(spec.get(key), list):
            changed[key] = [
                dict(c, image=mirror_image(c['image'], prefix))
                if isinstance(c, dict) and isinstance(c.get('image'), str)
                else c for c in spec[key]]
    template = dict(document['spec']['template'], spec=changed)
    return dict(document, spec=dict(document['spec'], template=template))


def mirror_image(image, prefix):
    """``image`` from registry ``prefix``: its registry (a first path part
    with a dot or a port, or localhost) replaced, docker.io's implicit
    one too."""
    first, _, rest = image.partition('/')
    if rest and ('.' in first or ':' in first or first == 'localhost'):
        return '%s/%s' % (prefix, rest)
    return '%s/%s' % (prefix, image if rest else 'library/' + image)


def storage_class(spec, server):
    """The StorageClass of ``spec`` (a StorageClassSpec) provisioning on
    the NFS server at ``server``: csi-driver-nfs deletes the PV object
    with the claim, and what it does with the claim's directory is the
    class's ``on_delete``."""
    document = {
        'apiVersion': 'storage.k8s.io/v1', 'kind': 'StorageClass',
        'metadata': {'name': spec.name},
        'provisioner': PROVISIONER,
        'parameters': {'server': server, 'share': spec.export_dir,
                       'subDir': SUB_DIR, 'onDelete': spec.on_delete},
        'reclaimPolicy': 'Delete',
        'volumeBindingMode': 'Immediate',
        'mountOptions': list(spec.mount_options)}
    if spec.default_class:
        document['metadata']['annotations'] = {
            DEFAULT_CLASS_ANNOTATION: 'true'}
    return document
