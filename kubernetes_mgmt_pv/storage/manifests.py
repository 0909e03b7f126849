"""PersistentVolume manifests of the VNF package: load, check, render.

Manifests are read and validated before any host is touched, through
``safe_yaml`` and its manifest limits; ``validate`` calls ``load`` too, so
it accepts exactly what the hooks accept. The NFS server address is set by
editing the parsed document, so whatever the package wrote there (0.0.0.0,
an IPv6 address, a host name) is replaced.
"""

import dataclasses
import os
import re

from kubernetes_mgmt_pv import exceptions
from kubernetes_mgmt_pv import safe_yaml

# metadata.name of a PersistentVolume: an RFC 1123 DNS subdomain.
_DNS_SUBDOMAIN = re.compile(
    r'(?=.{1,253}\Z)[a-z0-9]([-a-z0-9]*[a-z0-9])?'
    r'(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')


@dataclasses.dataclass(frozen=True)
class PvManifest(object):
    """One validated PersistentVolume and where its NFS server comes from."""
    name: str
    nfs_path: str
    nfs_server_cp: str
    document: dict = dataclasses.field(repr=False, compare=False)
    source: str = ''

    def rendered(self, nfs_server):
        """The document with ``spec.nfs.server`` set to nfs_server."""
        document = _deep_copy(self.document)
        document['spec']['nfs']['server'] = nfs_server
        return document


def _deep_copy(value):
    if isinstance(value, dict):
        return {k: _deep_copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_deep_copy(v) for v in value]
    return value


def load(package_dir, registrations):
    """Read every registration's manifest from the VNF package.

    Raises ``ParameterErrors`` naming each bad manifest by the JSON path of
    its ``pv_manifest_file_path``.
    """
    errors = []
    manifests = []
    names = {}
    root = os.path.realpath(package_dir)
    for registration in registrations:
        where = registration.json_path + '.pv_manifest_file_path'
        try:
            manifest = _load_one(root, registration)
        except ValueError as error:
            errors.append(exceptions.ParameterError(where, str(error)))
            continue
        if manifest.name in names:
            errors.append(exceptions.ParameterError(
                where, 'PersistentVolume %r is already defined by %s'
                % (manifest.name, names[manifest.name])))
            continue
        names[manifest.name] = registration.manifest_path
        manifests.append(manifest)
    if errors:
        raise exceptions.ParameterErrors(errors)
    return manifests


def load_documents(root, relative):
    """The YAML documents of the package file ``relative`` (under the
    resolved package directory ``root``); ValueError naming it if it
    lies outside the package or does not load."""
    path = os.path.realpath(os.path.join(root, relative))
    if os.path.commonpath([root, path]) != root:
        raise ValueError('%r resolves outside the VNF package' % relative)
    try:
        # The path is resolved: a symbolic link here is a swap since then.
        return [d for d in safe_yaml.load_all(
            path, safe_yaml.MANIFEST_LIMITS, follow_symlinks=False)
            if d is not None]
    except safe_yaml.LoadError as error:
        raise ValueError('%r %s' % (relative, error))


def _load_one(root, registration):
    relative = registration.manifest_path
    documents = load_documents(root, relative)
    if len(documents) != 1:
        raise ValueError('%r must hold exactly one YAML document, found %d'
                         % (relative, len(documents)))
    return _check_document(documents[0], relative, registration.nfs_server_cp)


def _check_document(document, relative, nfs_server_cp):
    if not isinstance(document, dict):
        raise ValueError('%r is not a Kubernetes object' % relative)
    if document.get('kind') != 'PersistentVolume' or \
            document.get('apiVersion') != 'v1':
        raise ValueError('%r must be a v1 PersistentVolume, found apiVersion '
                         '%s and kind %s' % (
                             relative, _shown(document.get('apiVersion')),
                             _shown(document.get('kind'))))
    metadata = document.get('metadata')
    name = metadata.get('name') if isinstance(metadata, dict) else None
    if not isinstance(name, str) or not _DNS_SUBDOMAIN.fullmatch(name):
        raise ValueError('%r: metadata.name must be a DNS subdomain name, '
                         'got %s' % (relative, _shown(name)))
    spec = document.get('spec')
    nfs = spec.get('nfs') if isinstance(spec, dict) else None
    if not isinstance(nfs, dict):
        raise ValueError('%r: PersistentVolume %s has no spec.nfs; only NFS '
                         'volumes can be served by the storage server'
                         % (relative, name))
    nfs_path = nfs.get('path')
    if not isinstance(nfs_path, str) or not nfs_path.startswith('/'):
        raise ValueError('%r: spec.nfs.path of %s must be an absolute path'
                         % (relative, name))
    return PvManifest(name=name, nfs_path=nfs_path,
                      nfs_server_cp=nfs_server_cp, document=document,
                      source=relative)


def _shown(value, limit=80):
    """repr of a value from the manifest, short enough for a message."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + '...'
