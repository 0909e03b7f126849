"""Offline checks of an Instantiate request that need little or nothing
of the package: a request for the other kind of package (a CNF's on a VNF
package or the other way round), the samples' placeholder ids, NFS exports
that leave the nodes' network out, and the key files the logins name.

``found`` is a package_check._Findings; each finding names the request's
JSON path.
"""

import collections
import ipaddress
import os

from kubernetes_mgmt_pv.openstack import vnf_topology
from kubernetes_mgmt_pv.remote import ssh_keys
from kubernetes_mgmt_pv.request import param_model
from kubernetes_mgmt_pv.storage import export_access
from kubernetes_mgmt_pv.vnf_package import cnf_check

# The ids the sample requests carry, to be replaced by the site's.
PLACEHOLDER_IDS = frozenset((
    cnf_check.PLACEHOLDER_VIM_ID,
    '8d8373fe-6977-49ff-83ac-7756572ed186',  # the samples' vimId
    'f0c82461-36b5-4d86-8322-b0bc19cda65f',  # the samples' network
))
_VNF_PACKAGE_DIR = 'BaseHOT'
_ROLES = ('master_node', 'worker_node', 'storage_server')


def wrong_package_kind(package_dir, request, found):
    """One finding, and True, when a CNF's request meets a VNF package
    (one with BaseHOT/) or a VNF's request (k8s_cluster_installation_param)
    a CNF's package: every other finding would follow from that."""
    vnf_package = os.path.isdir(os.path.join(package_dir, _VNF_PACKAGE_DIR))
    params = request.get('additionalParams')
    if cnf_check.is_cnf_request(request) and vnf_package:
        found.error('request-package-kind',
                    'additionalParams.' + cnf_check.DEF_FILES,
                    'a CNF\'s Instantiate request, but the package is a '
                    'VNF package (it has %s/): validate it against the '
                    'CNF\'s package (`kubernetes-mgmt-pv package --api cnf`)'
                    % _VNF_PACKAGE_DIR)
        return True
    if (isinstance(params, dict) and param_model.ROOT in params and
            not vnf_package):
        found.error('request-package-kind',
                    'additionalParams.' + param_model.ROOT,
                    'a VNF\'s Instantiate request (the cluster\'s '
                    'parameters), but the package has no %s/: it is not '
                    'the Kubernetes cluster VNF package (samples/'
                    'kubernetes_pv_vnf)' % _VNF_PACKAGE_DIR)
        return True
    return False


def placeholders(request, found):
    """The samples' ids in vimConnectionInfo and the links' resourceId."""
    vims = request.get('vimConnectionInfo')
    entries = (sorted(vims.items()) if isinstance(vims, dict) else
               enumerate(vims) if isinstance(vims, list) else ())
    for key, vim in entries:
        where = ('vimConnectionInfo.%s' % key if isinstance(vims, dict)
                 else 'vimConnectionInfo[%d]' % key)
        if isinstance(vim, dict) and vim.get('vimId') in PLACEHOLDER_IDS:
            found.warning('vim-placeholder', where + '.vimId',
                          'still the sample\'s placeholder: put the id of '
                          'the OpenStack VIM the VNF is deployed on')
    for links in ('extVirtualLinks', 'extManagedVirtualLinks'):
        items = request.get(links)
        for index, link in enumerate(items if isinstance(items, list)
                                     else ()):
            if isinstance(link, dict) and \
                    link.get('resourceId') in PLACEHOLDER_IDS:
                found.warning('resource-placeholder',
                              '%s[%d].resourceId' % (links, index),
                              'still the sample\'s placeholder: put the id '
                              'of the Neutron network of this link')


def _networks(export_to):
    """The network of an address or network client; None for the forms
    that cannot be told offline (names, wildcards, netgroups, "*")."""
    if export_access.client_form(export_to) in ('address', 'network'):
        return ipaddress.ip_network(export_to, strict=False)
    return None


def export_coverage(model, found):
    """Each export directory must grant the nodes' network
    (proxy.k8s_node_cidr), as the driver checks with the nodes' real
    addresses before it changes a host."""
    nodes = [ipaddress.ip_network(entry, strict=False) for entry in
             (model.proxy.k8s_node_cidr or '').split(',') if entry]
    exports = model.storage.exports if model.storage else ()
    if not nodes or not exports:
        return
    targets = collections.OrderedDict()
    for export in exports:
        targets.setdefault(export.export_dir, []).append(export)
    for directory, entries in targets.items():
        networks = [_networks(entry.export_to) for entry in entries]
        if None in networks:
            continue
        pairs = [(node, net) for node in nodes for net in networks
                 if node.version == net.version]
        if any(node.subnet_of(net) for node, net in pairs):
            continue
        overlapping = any(node.overlaps(net) for node, net in pairs)
        report = found.warning if overlapping else found.error
        report('export-misses-nodes', entries[0].json_path + '.export_to',
               '%s is exported to %s, which %s k8s_node_cidr %s: nodes '
               'there could never mount its PersistentVolumes, and '
               'instantiate refuses before changing any host' % (
                   directory, ', '.join(e.export_to for e in entries),
                   'covers only part of' if overlapping else 'leaves out',
                   model.proxy.k8s_node_cidr))


def key_files(model, key_dir, found):
    """On the conductor host (``key_dir``, an ``ssh_keys.KeyPlace``,
    known), each ssh_key the instantiate parameters name is checked as
    the hooks check it."""
    _load_keys(vnf_topology.named_key_files(model), key_dir, found)


def body_key_files(params, key_dir, found):
    """The same for a scale or heal body's logins: Tacker v2's nested
    ``k8s_cluster_installation_param.<role>.ssh_key`` and the flat
    ``<role>_ssh_key`` of both APIs."""
    if not isinstance(params, dict):
        return
    root = params.get(param_model.ROOT)
    named = [('additionalParams.%s.%s.ssh_key' % (param_model.ROOT, role),
              root[role]['ssh_key']) for role in _ROLES
             if isinstance(root, dict) and isinstance(root.get(role), dict)
             and isinstance(root[role].get('ssh_key'), str)]
    named += [('additionalParams.%s_ssh_key' % role,
               params['%s_ssh_key' % role]) for role in _ROLES
              if isinstance(params.get('%s_ssh_key' % role), str)]
    _load_keys(named, key_dir, found)


def _load_keys(named, key_dir, found):
    for where, name in named:
        try:
            ssh_keys.load(key_dir.directory, name, key_dir.project)
        except ssh_keys.KeyFileError as error:
            found.error('ssh-key-unusable', where,
                        '%s (checked as uid %d on this host)'
                        % (error, os.geteuid()))


def auto_heal(params, api, found):
    """Tacker v2's automatic heal sends no additionalParams: a login that
    is a password, or a proxy URL with user info, which Tacker v2 keeps
    nowhere, rules it out for the instance (the heal would be refused)."""
    if api != 'v2':
        return
    paths = param_model.password_logins(params)
    paths += ['%s.%s' % (param_model.PROXY_PATH, key)
              for key in ('http_proxy', 'https_proxy')
              if param_model.has_user_info(getattr(params.proxy, key))]
    for path in paths:
        found.warning('auto-heal-impossible', path,
                      'Tacker v2 heals by itself (Prometheus plugin) with '
                      'no additionalParams, and keeps no password or proxy '
                      'credentials between operations: each automatic heal '
                      'of this instance would be refused; log in with '
                      'ssh_key and use a proxy without user info to allow '
                      'it')
