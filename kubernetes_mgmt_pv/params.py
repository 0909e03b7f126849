"""additionalParams -> a validated, immutable model of what the PV flows need.

Everything is checked before any host is touched, and all problems are
reported at once, each named by its JSON path, e.g.
``k8s_cluster_installation_param.storage_server.nfs_server_setup_params[1].export_to``.
Only the keys the persistent-volume flows use are modelled; the cluster
installation keys (pod_cidr, script_path, ...) are left to the cluster half.
"""

import dataclasses
import ipaddress
import posixpath
import re
import urllib.parse

from kubernetes_mgmt_pv import exceptions

ROOT = 'k8s_cluster_installation_param'

# Conservative on purpose: these strings end up in /etc/exports, /etc/fstab
# and command lines; anything outside this set is refused, not escaped.
_SAFE_PATH = re.compile(r'^(/[A-Za-z0-9._@+=,:-]+)+$')
_HOSTNAME_LABEL = r'[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?'
_HOSTNAME = re.compile(r'^%s(?:\.%s)*$' % (_HOSTNAME_LABEL, _HOSTNAME_LABEL))
_SYSTEM_DIRS = ('/bin', '/boot', '/dev', '/etc', '/lib', '/lib32', '/lib64',
                '/proc', '/run', '/sbin', '/sys', '/usr')


@dataclasses.dataclass(frozen=True)
class NodeAccess(object):
    """How to reach the Master or Worker nodes of one kind."""
    ssh_cp_name: str
    nic_cp_name: str
    username: str
    password: str = dataclasses.field(repr=False)
    aspect_id: str = None


@dataclasses.dataclass(frozen=True)
class VolumeSetup(object):
    volume_resource_id: str
    mount_to: str


@dataclasses.dataclass(frozen=True)
class NfsExport(object):
    export_dir: str
    export_to: str


@dataclasses.dataclass(frozen=True)
class StorageServer(object):
    ssh_cp_name: str
    nic_cp_name: str
    username: str
    password: str = dataclasses.field(repr=False)
    volumes: tuple = ()
    exports: tuple = ()


@dataclasses.dataclass(frozen=True)
class PvRegistration(object):
    manifest_path: str
    nfs_server_cp: str
    json_path: str


@dataclasses.dataclass(frozen=True)
class Proxy(object):
    http_proxy: str = None
    https_proxy: str = None
    no_proxy: str = None

    def environment(self):
        """Variables for apt-get; empty when no proxy is configured."""
        env = {}
        for name in ('http_proxy', 'https_proxy', 'no_proxy'):
            value = getattr(self, name)
            if value:
                env[name] = value
        return env

    def secrets(self):
        """Proxy URLs may carry credentials: hide them from logs."""
        return tuple(v for v in (self.http_proxy, self.https_proxy) if v)


@dataclasses.dataclass(frozen=True)
class ClusterParams(object):
    master: NodeAccess = None
    worker: NodeAccess = None
    proxy: Proxy = Proxy()
    storage: StorageServer = None
    pv_registrations: tuple = ()

    @property
    def pv_enabled(self):
        return self.storage is not None


class _Checker(object):
    """Collects problems while walking the parameter tree."""

    def __init__(self):
        self.errors = []

    def fail(self, path, reason):
        self.errors.append(exceptions.ParameterError(path, reason))

    def mapping(self, value, path, required=True):
        if value is None:
            if required:
                self.fail(path, 'is required')
            return None
        if not isinstance(value, dict):
            self.fail(path, 'must be an object, got %s' % type(value).__name__)
            return None
        return value

    def no_unknown_keys(self, value, path, known):
        for key in sorted(set(value) - set(known)):
            self.fail('%s.%s' % (path, key),
                      'unknown key; expected one of: %s'
                      % ', '.join(sorted(known)))

    def text(self, parent, key, path, required=True):
        value = parent.get(key)
        where = '%s.%s' % (path, key)
        if value is None:
            if required:
                self.fail(where, 'is required')
            return None
        if not isinstance(value, str) or not value.strip():
            self.fail(where, 'must be a non-empty string')
            return None
        return value

    def items(self, parent, key, path, minimum):
        value = parent.get(key)
        where = '%s.%s' % (path, key)
        if value is None:
            if minimum:
                self.fail(where, 'is required')
            return []
        if not isinstance(value, list):
            self.fail(where, 'must be a list')
            return []
        if len(value) < minimum:
            self.fail(where, 'must have at least %d item(s)' % minimum)
        return [('%s[%d]' % (where, index), item)
                for index, item in enumerate(value)]

    def absolute_path(self, parent, key, path):
        value = self.text(parent, key, path)
        where = '%s.%s' % (path, key)
        if value is None:
            return None
        if not value.startswith('/'):
            self.fail(where, 'must be an absolute path, got %r' % value)
        elif posixpath.normpath(value) != value:
            self.fail(where, 'must be a normalised path (no "..", "." or '
                             'repeated or trailing "/"), got %r' % value)
        elif not _SAFE_PATH.match(value):
            self.fail(where, 'may only contain letters, digits and . _ @ + = '
                             ', : - between "/", got %r' % value)
        elif _is_system_dir(value):
            self.fail(where, '%r is a system directory' % value)
        else:
            return value
        return None

    def export_target(self, parent, key, path):
        value = self.text(parent, key, path)
        if value is None:
            return None
        if _is_network(value) or _HOSTNAME.match(value):
            return value
        self.fail('%s.%s' % (path, key),
                  'must be an IP address, a network in CIDR notation or a '
                  'host name, got %r' % value)
        return None

    def package_path(self, parent, key, path):
        value = self.text(parent, key, path)
        where = '%s.%s' % (path, key)
        if value is None:
            return None
        if value.startswith('/') or '\\' in value:
            self.fail(where, 'must be a relative path inside the VNF package, '
                             'got %r' % value)
        elif posixpath.normpath(value) != value or '..' in value.split('/'):
            self.fail(where, 'must be a normalised path inside the VNF '
                             'package (no ".."), got %r' % value)
        else:
            return value
        return None

    def proxy_url(self, parent, key, path):
        value = self.text(parent, key, path, required=False)
        if value is None:
            return None
        parsed = urllib.parse.urlsplit(value)
        if parsed.scheme not in ('http', 'https') or not parsed.hostname:
            # Not echoed: a malformed URL may still contain a password.
            self.fail('%s.%s' % (path, key),
                      'must be an http:// or https:// URL with a host')
            return None
        return value


def _is_system_dir(path):
    return path == '/' or any(path == d or path.startswith(d + '/')
                              for d in _SYSTEM_DIRS)


def _is_network(value):
    try:
        ipaddress.ip_network(value, strict=False)
    except ValueError:
        return False
    return True


def parse(additional_params):
    """Validate additionalParams and return a ``ClusterParams``.

    Raises ``ParameterErrors`` listing every problem found.
    """
    check = _Checker()
    top = check.mapping(additional_params, 'additionalParams')
    params = ClusterParams()
    if top is not None:
        root = check.mapping(top.get(ROOT), ROOT)
        if root is not None:
            params = _parse_root(check, root)
    if check.errors:
        raise exceptions.ParameterErrors(check.errors)
    return params


def _parse_root(check, root):
    storage = None
    if root.get('storage_server') is not None:
        storage = _parse_storage(check, root['storage_server'],
                                 ROOT + '.storage_server')
    registrations = _parse_registrations(check, root)
    if registrations and storage is None:
        check.fail(ROOT + '.pv_registration_params',
                   'requires storage_server: without it the persistent '
                   'volume feature is disabled')
    master = worker = None
    if storage is not None:
        master = _parse_node(check, root.get('master_node'),
                             ROOT + '.master_node', required=True)
        worker = _parse_node(check, root.get('worker_node'),
                             ROOT + '.worker_node', required=False)
    proxy = _parse_proxy(check, root.get('proxy'), ROOT + '.proxy')
    return ClusterParams(master=master, worker=worker, proxy=proxy,
                         storage=storage,
                         pv_registrations=tuple(registrations))


def _parse_node(check, value, path, required):
    node = check.mapping(value, path, required=required)
    if node is None:
        return None
    ssh_cp_name = check.text(node, 'ssh_cp_name', path)
    nic_cp_name = check.text(node, 'nic_cp_name', path, required=False)
    return NodeAccess(
        ssh_cp_name=ssh_cp_name,
        nic_cp_name=nic_cp_name or ssh_cp_name,
        username=check.text(node, 'username', path),
        password=check.text(node, 'password', path),
        aspect_id=check.text(node, 'aspect_id', path, required=False))


_STORAGE_KEYS = ('ssh_cp_name', 'nic_cp_name', 'username', 'password',
                 'cinder_volume_setup_params', 'nfs_server_setup_params')


def _parse_storage(check, value, path):
    storage = check.mapping(value, path)
    if storage is None:
        return None
    check.no_unknown_keys(storage, path, _STORAGE_KEYS)
    ssh_cp_name = check.text(storage, 'ssh_cp_name', path)
    nic_cp_name = check.text(storage, 'nic_cp_name', path, required=False)
    volumes = []
    for item_path, item in check.items(storage, 'cinder_volume_setup_params',
                                       path, minimum=1):
        item = check.mapping(item, item_path)
        if item is None:
            continue
        check.no_unknown_keys(item, item_path,
                              ('volume_resource_id', 'mount_to'))
        volumes.append((item_path, VolumeSetup(
            check.text(item, 'volume_resource_id', item_path),
            check.absolute_path(item, 'mount_to', item_path))))
    _reject_duplicates(check, volumes, 'volume_resource_id')
    _reject_duplicates(check, volumes, 'mount_to')
    exports = []
    for item_path, item in check.items(storage, 'nfs_server_setup_params',
                                       path, minimum=1):
        item = check.mapping(item, item_path)
        if item is None:
            continue
        check.no_unknown_keys(item, item_path, ('export_dir', 'export_to'))
        exports.append((item_path, NfsExport(
            check.absolute_path(item, 'export_dir', item_path),
            check.export_target(item, 'export_to', item_path))))
    seen = set()
    for item_path, export in exports:
        if export in seen and export.export_dir:
            check.fail(item_path, 'duplicates an earlier export of %s to %s'
                       % (export.export_dir, export.export_to))
        seen.add(export)
    return StorageServer(
        ssh_cp_name=ssh_cp_name,
        nic_cp_name=nic_cp_name or ssh_cp_name,
        username=check.text(storage, 'username', path),
        password=check.text(storage, 'password', path),
        volumes=tuple(v for _, v in volumes),
        exports=tuple(e for _, e in exports))


def _reject_duplicates(check, entries, field):
    seen = {}
    for item_path, entry in entries:
        value = getattr(entry, field)
        if value is None:
            continue
        if value in seen:
            check.fail('%s.%s' % (item_path, field),
                       '%r is already used by %s' % (value, seen[value]))
        seen.setdefault(value, item_path)


def _parse_registrations(check, root):
    registrations = []
    for item_path, item in check.items(root, 'pv_registration_params', ROOT,
                                       minimum=0):
        item = check.mapping(item, item_path)
        if item is None:
            continue
        check.no_unknown_keys(item, item_path,
                              ('pv_manifest_file_path', 'nfs_server_cp'))
        registrations.append(PvRegistration(
            manifest_path=check.package_path(item, 'pv_manifest_file_path',
                                             item_path),
            nfs_server_cp=check.text(item, 'nfs_server_cp', item_path),
            json_path=item_path))
    return registrations


def _parse_proxy(check, value, path):
    proxy = check.mapping(value, path, required=False)
    if proxy is None:
        return Proxy()
    no_proxy = check.text(proxy, 'no_proxy', path, required=False)
    if no_proxy is not None:
        for entry in no_proxy.split(','):
            entry = entry.strip()
            if not (_is_network(entry) or _HOSTNAME.match(entry.lstrip('.'))):
                check.fail(path + '.no_proxy',
                           'entry %r is not a host name, address or CIDR'
                           % entry)
    return Proxy(http_proxy=check.proxy_url(proxy, 'http_proxy', path),
                 https_proxy=check.proxy_url(proxy, 'https_proxy', path),
                 no_proxy=no_proxy)
