"""additionalParams -> a validated, immutable model of the whole
``k8s_cluster_installation_param``: the cluster keys and the PV keys.

Everything is checked before any host is touched, and all problems are
reported at once, each named by its JSON path, e.g.
``k8s_cluster_installation_param.storage_server.nfs_server_setup_params[1].export_to``.
This is the one parser of these parameters: the hooks use ``parse`` and
``validate`` uses ``parse_partially``, so both accept exactly the same
requests. Mappings the PV half owns (``storage_server`` and the list
items) refuse unknown keys; the mappings Tacker's own sample driver shares
(the root, ``master_node``, ``worker_node``, ``proxy``) accept extra keys
with a warning, so a request written for that driver still parses.
Whatever the input (wrong types, control characters, lone surrogates,
20 000-deep nesting), the only exception is ``ParameterErrors``, and every
string of the model can be sent to a host as it is.
"""

import dataclasses
import urllib.parse

from kubernetes_mgmt_pv import exceptions
from kubernetes_mgmt_pv.request import offline_params
from kubernetes_mgmt_pv.request import param_checks
from kubernetes_mgmt_pv.request import storage_class_params

ROOT = 'k8s_cluster_installation_param'
# JSON paths of the mappings that occur once; validate names findings by
# them. Items of lists carry their own ``json_path``.
MASTER_PATH = ROOT + '.master_node'
WORKER_PATH = ROOT + '.worker_node'
PROXY_PATH = ROOT + '.proxy'
STORAGE_PATH = ROOT + '.storage_server'
CSI_MANIFESTS_PATH = STORAGE_PATH + '.csi_driver_manifest_file_paths'
# One fix round needs the first problems, not a hundred thousand of them.
MAX_REPORTED = 100

# kubeadm and the API server refuse a service CIDR with more host bits,
# which would make the service IP allocator too large to store in etcd.
MAX_SERVICE_HOST_BITS = 20
# kubeadm gives each node a /24 of an IPv4 pod CIDR and refuses a pod CIDR
# more than 16 bits larger than that.
IPV4_NODE_MASK = 24
IPV4_MIN_POD_PREFIX = IPV4_NODE_MASK - 16


@dataclasses.dataclass(frozen=True)
class NodeAccess(object):
    """How to reach the Master or Worker nodes of one kind; the login is
    a key file of the conductor host (``ssh_key``) or a password."""
    ssh_cp_name: str
    nic_cp_name: str
    username: str
    password: str = dataclasses.field(default=None, repr=False)
    aspect_id: str = None
    ssh_key: str = None


@dataclasses.dataclass(frozen=True)
class VolumeSetup(object):
    volume_resource_id: str
    mount_to: str
    # Where validate names a package problem; not part of the value.
    json_path: str = dataclasses.field(default=None, compare=False)


@dataclasses.dataclass(frozen=True)
class NfsExport(object):
    export_dir: str
    export_to: str
    json_path: str = dataclasses.field(default=None, compare=False)


@dataclasses.dataclass(frozen=True)
class StorageServer(object):
    ssh_cp_name: str
    nic_cp_name: str
    username: str
    password: str = dataclasses.field(default=None, repr=False)
    volumes: tuple = ()
    exports: tuple = ()
    ssh_key: str = None
    # storage_class_params.StorageClassSpec, and csi-driver-nfs's
    # manifests in the package (dynamic provisioning).
    storage_classes: tuple = ()
    csi_manifests: tuple = ()


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
    # The network of the nodes' NICs, for the cluster half's no_proxy.
    k8s_node_cidr: str = None

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
class ClusterNetwork(object):
    """The cluster-wide keys given with master_node. CIDRs are kept as the
    user wrote them (kubeadm accepts host bits); each may be a dual-stack
    pair "IPv4,IPv6". None means kubeadm's default."""
    pod_cidr: str = None
    cluster_cidr: str = None  # the Service CIDR
    cluster_cp_name: str = None  # the CP holding the API server address
    cluster_fip_name: str = None  # its floating IP, for the VIM's URL


@dataclasses.dataclass(frozen=True)
class ClusterParams(object):
    master: NodeAccess = None
    worker: NodeAccess = None
    proxy: Proxy = Proxy()
    storage: StorageServer = None
    pv_registrations: tuple = ()
    # Relative path of the cluster install script inside the VNF package.
    script_path: str = None
    # Name of the Kubernetes VIM; None lets the cluster half choose one.
    vim_name: str = None
    network: ClusterNetwork = ClusterNetwork()
    offline: offline_params.OfflineSources = offline_params.OfflineSources()
    warnings: tuple = dataclasses.field(default=(), compare=False)

    @property
    def pv_enabled(self):
        return self.storage is not None


@dataclasses.dataclass(frozen=True)
class ParseResult(object):
    """What ``parse_partially`` found: the model, with its warnings, of
    every valid value (an invalid one is None, a list item that is not an
    object is left out) and the errors, capped at MAX_REPORTED."""
    params: ClusterParams
    errors: tuple


def parse(additional_params):
    """Validate additionalParams and return a ``ClusterParams``.

    Raises ``ParameterErrors`` listing every problem found (the first
    MAX_REPORTED of them), and nothing else whatever the input.
    """
    result = parse_partially(additional_params)
    if result.errors:
        raise exceptions.ParameterErrors(result.errors)
    return result.params


def parse_partially(additional_params):
    """A ``ParseResult`` even for an invalid request, so that ``validate``
    can also check what is valid of it against the package. Never raises."""
    check = param_checks.Checker()
    top = check.mapping(additional_params, 'additionalParams')
    params = ClusterParams()
    if top is not None:
        param_checks.check_depth(check, top)
        root = check.mapping(top.get(ROOT), ROOT)
        if root is not None:
            params = _parse_root(check, root)
    return ParseResult(
        dataclasses.replace(params,
                            warnings=tuple(check.warnings[:MAX_REPORTED])),
        tuple(_capped(check.errors)))


def _capped(errors):
    if len(errors) <= MAX_REPORTED:
        return errors
    return errors[:MAX_REPORTED] + [exceptions.ParameterError(
        'additionalParams', '%d more problems are not listed'
        % (len(errors) - MAX_REPORTED))]


_ROOT_KEYS = ('script_path', 'vim_name', 'master_node', 'worker_node',
              'proxy', 'storage_server', 'pv_registration_params',
              'offline')


def _parse_root(check, root):
    check.unused_keys(root, ROOT, _ROOT_KEYS)
    storage = None
    if root.get('storage_server') is not None:
        storage = _parse_storage(check, root['storage_server'], STORAGE_PATH)
    registrations = _parse_registrations(check, root)
    if registrations and storage is None:
        check.fail(ROOT + '.pv_registration_params',
                   'requires storage_server: without it the persistent '
                   'volume feature is disabled')
    # Both features reach the cluster through a Master.
    master_value = root.get('master_node')
    master = _parse_node(check, master_value, MASTER_PATH,
                         required=storage is not None or
                         root.get('script_path') is not None,
                         known=_NODE_KEYS + _NETWORK_KEYS)
    worker = _parse_node(check, root.get('worker_node'), WORKER_PATH,
                         required=False, known=_NODE_KEYS)
    proxy, node_networks = _parse_proxy(check, root.get('proxy'), PROXY_PATH)
    network = ClusterNetwork()
    if isinstance(master_value, dict):
        network = _parse_network(check, master_value, node_networks)
    return ClusterParams(
        master=master, worker=worker, proxy=proxy, storage=storage,
        pv_registrations=tuple(registrations),
        script_path=check.package_path(root, 'script_path', ROOT,
                                       required=False),
        vim_name=check.name(root, 'vim_name', ROOT),
        network=network,
        offline=offline_params.parse(check, root.get('offline')))


_NODE_KEYS = ('aspect_id', 'ssh_cp_name', 'nic_cp_name', 'username',
              'password', 'ssh_key')
_NETWORK_KEYS = ('pod_cidr', 'cluster_cidr', 'cluster_cp_name',
                 'cluster_fip_name')


def _parse_node(check, value, path, required, known):
    node = check.mapping(value, path, required=required)
    if node is None:
        return None
    check.unused_keys(node, path, known)
    ssh_cp_name = check.resource_name(node, 'ssh_cp_name', path)
    nic_cp_name = check.resource_name(node, 'nic_cp_name', path,
                                      required=False)
    return NodeAccess(
        ssh_cp_name=ssh_cp_name,
        nic_cp_name=nic_cp_name or ssh_cp_name,
        username=check.text(node, 'username', path),
        aspect_id=check.resource_name(node, 'aspect_id', path,
                                      required=False),
        **_login(check, node, path))


def _login(check, value, path):
    """{'password': ..., 'ssh_key': ...}, exactly one of them given. A
    key file is preferred: a password shows in Tacker's API."""
    password = check.text(value, 'password', path, required=False)
    ssh_key = check.key_file_name(value, 'ssh_key', path)
    given = [key for key in ('password', 'ssh_key')
             if value.get(key) is not None]
    if len(given) == 2:
        check.fail(path + '.ssh_key', 'give either ssh_key or password, '
                                      'not both')
    elif not given:
        check.fail(path + '.ssh_key', 'required: the file name of an SSH '
                                      'private key in ssh_key_dir of the '
                                      'conductor host (or a password)')
    return {'password': password, 'ssh_key': ssh_key}


def has_user_info(url):
    """Whether a proxy URL carries credentials (user info), which Tacker
    v2 keeps nowhere between operations; an unparseable one counts."""
    try:
        return bool(isinstance(url, str) and
                    urllib.parse.urlsplit(url).username is not None)
    except ValueError:
        return True


def password_logins(params):
    """JSON paths of the logins of ``params`` that are passwords: Tacker
    shows them in its API and sends them to the NFVO."""
    return ['%s.password' % path for path, access in (
        (MASTER_PATH, params.master), (WORKER_PATH, params.worker),
        (STORAGE_PATH, params.storage))
        if access is not None and access.password is not None]


def _parse_network(check, master, node_networks):
    """The cluster keys of master_node; the pod, Service and node CIDRs
    must not overlap, or kube-proxy and the CNI would route one network's
    addresses into another."""
    pod_cidr, pod_networks = check.cidrs(master, 'pod_cidr', MASTER_PATH)
    cluster_cidr, service_networks = check.cidrs(master, 'cluster_cidr',
                                                 MASTER_PATH)
    pod_path = MASTER_PATH + '.pod_cidr'
    service_path = MASTER_PATH + '.cluster_cidr'
    for network in pod_networks:
        if network.version == 4 and not (
                IPV4_MIN_POD_PREFIX <= network.prefixlen <= IPV4_NODE_MASK):
            check.fail(pod_path, 'an IPv4 pod CIDR needs a prefix length '
                                 'from /%d to /%d (kubeadm gives each node '
                                 'a /%d), got /%d' % (
                                     IPV4_MIN_POD_PREFIX, IPV4_NODE_MASK,
                                     IPV4_NODE_MASK, network.prefixlen))
    for network in service_networks:
        if network.max_prefixlen - network.prefixlen > MAX_SERVICE_HOST_BITS:
            check.fail(service_path, 'a Service CIDR may have at most %d '
                                     'host bits (/%d or longer), got /%d' % (
                                         MAX_SERVICE_HOST_BITS,
                                         network.max_prefixlen -
                                         MAX_SERVICE_HOST_BITS,
                                         network.prefixlen))
    _reject_overlap(check, service_path, service_networks, 'pod_cidr',
                    pod_networks)
    _reject_overlap(check, pod_path, pod_networks, 'proxy.k8s_node_cidr',
                    node_networks)
    _reject_overlap(check, service_path, service_networks,
                    'proxy.k8s_node_cidr', node_networks)
    return ClusterNetwork(
        pod_cidr=pod_cidr, cluster_cidr=cluster_cidr,
        cluster_cp_name=check.resource_name(master, 'cluster_cp_name',
                                            MASTER_PATH, required=False),
        cluster_fip_name=check.resource_name(master, 'cluster_fip_name',
                                             MASTER_PATH, required=False))


def _reject_overlap(check, path, networks, other_key, others):
    for network in networks:
        for other in others:
            if network.version == other.version and network.overlaps(other):
                check.fail(path, '%s overlaps %s %s' % (network, other_key,
                                                        other))


_STORAGE_KEYS = ('ssh_cp_name', 'nic_cp_name', 'username', 'password',
                 'ssh_key', 'cinder_volume_setup_params',
                 'nfs_server_setup_params', 'storage_classes',
                 'csi_driver_manifest_file_paths')


def _parse_storage(check, value, path):
    storage = check.mapping(value, path)
    if storage is None:
        return None
    check.no_unknown_keys(storage, path, _STORAGE_KEYS)
    ssh_cp_name = check.resource_name(storage, 'ssh_cp_name', path)
    nic_cp_name = check.resource_name(storage, 'nic_cp_name', path,
                                      required=False)
    volumes, all_mounts_valid = _parse_volumes(check, storage, path)
    exports = _parse_exports(check, storage, path)
    if all_mounts_valid:
        mounts = [volume.mount_to for _, volume in volumes]
        for item_path, export in exports:
            if export.export_dir and not any(
                    param_checks.is_within(export.export_dir, mount)
                    for mount in mounts):
                check.fail(item_path + '.export_dir',
                           '%r is not inside any mount_to (%s): it would '
                           'export a directory of the root disk, not of a '
                           'Cinder volume' % (export.export_dir,
                                              ', '.join(mounts)))
    classes, csi_manifests = storage_class_params.parse(
        check, storage, path, [export for _, export in exports])
    return StorageServer(
        ssh_cp_name=ssh_cp_name,
        nic_cp_name=nic_cp_name or ssh_cp_name,
        username=check.text(storage, 'username', path),
        volumes=tuple(v for _, v in volumes),
        exports=tuple(e for _, e in exports),
        storage_classes=classes, csi_manifests=csi_manifests,
        **_login(check, storage, path))


def _parse_volumes(check, storage, path):
    """(json path, VolumeSetup) pairs, and whether every mount_to is valid
    (only then can exports be checked against them)."""
    volumes = []
    items = check.items(storage, 'cinder_volume_setup_params', path,
                        minimum=1)
    for item_path, item in items:
        item = check.mapping(item, item_path)
        if item is None:
            continue
        check.no_unknown_keys(item, item_path,
                              ('volume_resource_id', 'mount_to'))
        volumes.append((item_path, VolumeSetup(
            check.resource_name(item, 'volume_resource_id', item_path),
            check.absolute_path(item, 'mount_to', item_path),
            json_path=item_path)))
    _reject_duplicates(check, volumes, 'volume_resource_id')
    _reject_duplicates(check, volumes, 'mount_to')
    all_valid = bool(items) and len(volumes) == len(items) and all(
        volume.mount_to for _, volume in volumes)
    return volumes, all_valid


def _parse_exports(check, storage, path):
    exports = []
    for item_path, item in check.items(storage, 'nfs_server_setup_params',
                                       path, minimum=1):
        item = check.mapping(item, item_path)
        if item is None:
            continue
        check.no_unknown_keys(item, item_path, ('export_dir', 'export_to'))
        exports.append((item_path, NfsExport(
            check.absolute_path(item, 'export_dir', item_path),
            check.export_target(item, 'export_to', item_path),
            json_path=item_path)))
    seen = set()
    for item_path, export in exports:
        if export in seen and export.export_dir:
            check.fail(item_path, 'duplicates an earlier export of %s to %s'
                       % (export.export_dir, export.export_to))
        seen.add(export)
    return exports


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
            nfs_server_cp=check.resource_name(item, 'nfs_server_cp',
                                              item_path),
            json_path=item_path))
    return registrations


def _parse_proxy(check, value, path):
    """The Proxy, and the networks of k8s_node_cidr for the overlap check."""
    proxy = check.mapping(value, path, required=False)
    if proxy is None:
        return Proxy(), ()
    check.unused_keys(proxy, path, ('http_proxy', 'https_proxy', 'no_proxy',
                                    'k8s_node_cidr'))
    no_proxy = check.text(proxy, 'no_proxy', path, required=False)
    if no_proxy is not None:
        for entry in no_proxy.split(','):
            entry = entry.strip()
            if not (param_checks.is_network(entry) or
                    param_checks.HOSTNAME.fullmatch(entry.lstrip('.'))):
                check.fail(path + '.no_proxy',
                           'entry %s is not a host name, address or CIDR'
                           % param_checks.shown(entry))
    k8s_node_cidr, node_networks = check.cidrs(proxy, 'k8s_node_cidr', path)
    return Proxy(http_proxy=check.proxy_url(proxy, 'http_proxy', path),
                 https_proxy=check.proxy_url(proxy, 'https_proxy', path),
                 no_proxy=no_proxy,
                 k8s_node_cidr=k8s_node_cidr), node_networks
