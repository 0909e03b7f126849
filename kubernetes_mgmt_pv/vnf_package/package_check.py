"""Offline checks of a VNF package against an LCM request: Instantiate
requests here, the other bodies in ``lcm_bodies``.

Everything here would otherwise surface much later: at upload (TOSCA.meta
hashes), at the first LCM hook (Tacker's driver hash check, a VNFD that
does not route a hook to the driver) or in the middle of instantiate_end
(a CP or volume name the BaseHOT does not define, a manifest that is not
an NFS PersistentVolume, an install script the package lacks). The request
is read by ``param_model`` alone; these checks only cross its model with the
package. Each problem becomes a ``Finding`` naming where it is: a JSON
path of the request, or a file of the package.
"""

import dataclasses
import os

from kubernetes_mgmt_pv import feature_hooks
from kubernetes_mgmt_pv.request import param_checks
from kubernetes_mgmt_pv.request import param_model
from kubernetes_mgmt_pv import safe_yaml
from kubernetes_mgmt_pv.vnf_package import cnf_check
from kubernetes_mgmt_pv.vnf_package import csar
from kubernetes_mgmt_pv.vnf_package import driver_artifact
from kubernetes_mgmt_pv.vnf_package import k8s_releases
from kubernetes_mgmt_pv.vnf_package import lcm_bodies
from kubernetes_mgmt_pv.vnf_package import request_checks
from kubernetes_mgmt_pv.vnf_package import vnfd
from kubernetes_mgmt_pv.vnf_package import volume_check

ERROR, WARNING, NOTE = 'error', 'warning', 'note'
_CP_TYPES = ('OS::Neutron::Port', 'OS::Neutron::FloatingIP')
_VOLUME_TYPES = ('OS::Cinder::Volume',)
_GROUP_TYPES = ('OS::Heat::AutoScalingGroup',)
_SCALING_ASPECTS = 'tosca.policies.nfv.ScalingAspects'
_mapping = vnfd.mapping
_load_yaml = vnfd.load_yaml
_yaml_files = vnfd.yaml_files


@dataclasses.dataclass(frozen=True)
class Finding(object):
    """One problem: ``code`` is stable for scripts, ``message`` for people."""
    severity: str
    code: str
    where: str
    message: str


class _Findings(list):
    """Collects every finding, so one run reports all problems at once."""

    def error(self, code, where, message):
        self.append(Finding(ERROR, code, where, message))

    def warning(self, code, where, message):
        self.append(Finding(WARNING, code, where, message))

    def note(self, code, where, message):
        """What cannot be checked offline."""
        self.append(Finding(NOTE, code, where, message))


def validate(package_path, request_path, kind=None, key_dir=None):
    """Findings for the package (a directory or a zip) and the request file.

    ``kind`` is one of lcm_bodies.KINDS, None to tell it from the body's
    keys; ``key_dir``, the conductor's ssh_key_dir, checks the key files
    the request names (None: not on the conductor host, not checked).
    Every file is read through ``safe_yaml`` and the manifests through
    ``manifests.load``, as the hooks read them: a bad input is a finding,
    never an exception.
    """
    found = _Findings()
    request = _load_request(request_path, found)
    try:
        with csar.opened(package_path) as package_dir:
            check(package_dir, request, found, kind, key_dir)
    except csar.PackageError as error:
        found.error('package-unreadable', package_path, str(error))
    return list(found)


def check(package_dir, request, found, kind=None, key_dir=None):
    """Add the findings for an extracted package and a parsed request (or
    None when the request could not be read: package checks only)."""
    _check_meta(package_dir, found)
    if request is None:
        return
    kind = kind or lcm_bodies.kind_of(request)
    if kind is None:
        lcm_bodies.unknown_kind(request, found)
    elif kind != 'instantiate':
        lcm_bodies.check(package_dir, kind, request, found, key_dir)
    elif not request_checks.wrong_package_kind(package_dir, request, found):
        _check_instantiate(package_dir, request, found, key_dir)


def _check_instantiate(package_dir, request, found, key_dir):
    flavour = request.get('flavourId')
    if not isinstance(flavour, str) or not flavour:
        found.error('flavour-missing', 'flavourId',
                    'an Instantiate request needs a flavourId')
        return
    if cnf_check.is_cnf_request(request):
        cnf_check.check(package_dir, request, found)
        return
    if not param_checks.is_resource_name(flavour):
        # It names the directory BaseHOT/<flavourId> of the package.
        found.error('flavour-unknown', 'flavourId',
                    'flavourId must be letters, digits and _ . -, got %r'
                    % flavour[:80])
        return
    request_checks.placeholders(request, found)
    parsed = param_model.parse_partially(request.get('additionalParams'))
    _check_params(parsed, found)
    request_checks.export_coverage(parsed.params, found)
    if key_dir is not None:
        request_checks.key_files(parsed.params, key_dir, found)
    # The cross-checks see only the values that parsed: an invalid one is
    # already a param-invalid finding, and cannot name a file or resource.
    invalid_paths = {error.path for error in parsed.errors}
    _check_script(package_dir, parsed.params, invalid_paths, found)
    _check_offline_files(package_dir, parsed.params, found)
    volume_check.check_manifests(package_dir, parsed.params, found)
    volume_check.check_storage_classes(package_dir, parsed.params, found)
    _check_heat(package_dir, flavour, parsed.params, invalid_paths, found)
    api = _check_vnfd(package_dir, flavour, parsed.params, found)
    if api is not None:
        _check_request_api(request, api, found)
        request_checks.auto_heal(parsed.params, api, found)
        _check_user_data(package_dir, flavour, request, api, found)


def _check_params(parsed, found):
    for error in parsed.errors:
        found.error('param-invalid', error.path, error.reason)
    for warning in parsed.params.warnings:
        found.warning('param-warning', warning.path, warning.reason)
    for path in param_model.password_logins(parsed.params):
        found.warning('password-login', path,
                      'Tacker shows additionalParams in plain text in its '
                      'API (GET /vnf_lcm_op_occs) and sends them to the '
                      'NFVO in grant requests; give ssh_key, the file name '
                      'of a private key in ssh_key_dir of the conductor '
                      'host, instead')


def _load_request(path, found):
    try:
        request = safe_yaml.load_json(path)
    except safe_yaml.LoadError as error:
        found.error('request-unreadable', path, str(error))
        return None
    if not isinstance(request, dict):
        found.error('request-unreadable', path, 'not a JSON object')
        return None
    return request


# -- TOSCA.meta ---------------------------------------------------------------

def _check_meta(package_dir, found):
    path = os.path.join(package_dir, csar.META_PATH)
    if not os.path.lexists(path):
        found.error('meta-missing', csar.META_PATH,
                    'the package has no TOSCA.meta')
        return
    try:
        meta = csar.parse_meta(safe_yaml.read_text(
            path, safe_yaml.DEFINITION_LIMITS.max_bytes))
    except safe_yaml.LoadError as error:
        found.error('meta-invalid', csar.META_PATH, '%s %s'
                    % (csar.META_PATH, error))
        return
    except csar.PackageError as error:
        found.error('meta-invalid', csar.META_PATH, str(error))
        return
    entry = meta.header.get('Entry-Definitions')
    if not entry or not os.path.isfile(os.path.join(package_dir, entry)):
        found.error('meta-missing', csar.META_PATH + ': Entry-Definitions',
                    'Entry-Definitions %r is not a file of the package'
                    % entry)
    for block in meta.artifacts:
        _check_artifact_hash(package_dir, block, found)


def _check_artifact_hash(package_dir, block, found):
    source = csar.artifact_source(block)
    algorithm, expected = block.get('Algorithm'), block.get('Hash')
    where = '%s: %s' % (csar.META_PATH, source)
    if not (source and algorithm and expected):
        found.error('meta-invalid', where, 'an artifact entry needs Source, '
                    'Algorithm and Hash, got %s' % ', '.join(sorted(block)))
        return
    if algorithm.lower() not in csar.HASH_FUNCTIONS:
        found.error('meta-invalid', where,
                    'Algorithm %s is not one Tacker accepts (%s)' % (
                        algorithm, ', '.join(sorted(csar.HASH_FUNCTIONS))))
        return
    if '://' in source:
        found.warning('meta-source-remote', where,
                      'a remote Source is fetched by Tacker at upload and '
                      'is not checked offline')
        return
    path = os.path.join(package_dir, source)
    if source.startswith('/') or '..' in source.split('/') or \
            not os.path.isfile(path):
        found.error('meta-source-missing', where,
                    'TOSCA.meta lists %s, which is not a file of the package'
                    % source)
        return
    try:
        actual = csar.file_hash(path, algorithm)
    except OSError as error:
        found.error('meta-source-missing', where, 'TOSCA.meta lists %s, '
                    'which cannot be read: %s' % (source, error.strerror))
        return
    if actual != expected:
        found.error('hash-mismatch', where,
                    'TOSCA.meta says %s %s but the file hashes to %s: Tacker '
                    'refuses the upload; rebuild with `kubernetes-mgmt-pv '
                    'package`' % (algorithm, expected, actual))


# -- the install script, PersistentVolume manifests and NFS exports ----------

def _check_script(package_dir, model, invalid_paths, found):
    where = param_model.ROOT + '.script_path'
    if model.script_path is None:
        if where not in invalid_paths:
            found.warning('script-absent', where,
                          'not given: the driver installs no Kubernetes, so '
                          'the Masters must already run it (only the '
                          'persistent volumes are set up)')
        return
    root = os.path.realpath(package_dir)
    path = os.path.realpath(os.path.join(root, model.script_path))
    if not (csar.within(path, root) and os.path.isfile(path)):
        found.error('script-missing', where,
                    '%s is not a file of the package; the cluster install '
                    'uploads it to every node' % model.script_path)
        return
    warning = k8s_releases.script_warning(path)
    if warning:
        found.warning(warning[0], model.script_path, warning[1])


def _check_offline_files(package_dir, model, found):
    root = os.path.realpath(package_dir)
    for where, relative, _ in model.offline.package_files():
        path = os.path.realpath(os.path.join(root, relative))
        if not (csar.within(path, root) and os.path.isfile(path)):
            found.error('offline-file-missing', where,
                        '%s is not a file of the package; the cluster '
                        'install uploads it to every node' % relative)


# -- BaseHOT ------------------------------------------------------------------

class _BaseHot(object):
    """The top template of BaseHOT/<flavour> and its nested templates."""

    def __init__(self, directory, top_name, top, nested):
        self.directory = directory
        self.top_name = top_name
        self.resources = _mapping(top.get('resources'))
        self.nested = nested

    def nested_holding(self, name):
        return sorted(f for f, t in self.nested.items()
                      if name in _mapping(t.get('resources')))


def _load_base_hot(package_dir, flavour, found):
    relative = 'BaseHOT/%s' % flavour
    directory = os.path.join(package_dir, relative)
    tops = _yaml_files(directory)
    if not tops:
        found.error('basehot-missing', relative,
                    'flavour %s has no top-level Heat template in %s/'
                    % (flavour, relative))
        return None
    if len(tops) > 1:
        found.error('basehot-ambiguous', relative,
                    'Tacker uses one of %s at random: keep a single '
                    'top-level template (nested ones go in nested/)'
                    % ', '.join(tops))
        return None
    templates = {}
    for name in [tops[0]] + ['nested/' + f for f in
                             _yaml_files(os.path.join(directory, 'nested'))]:
        try:
            templates[name] = _mapping(_load_yaml(
                os.path.join(directory, name)))
        except safe_yaml.LoadError as error:
            found.error('yaml-invalid', '%s/%s' % (relative, name),
                        '%s/%s %s' % (relative, name, error))
            return None
    top = templates.pop(tops[0])
    nested = {name[len('nested/'):]: t for name, t in templates.items()}
    return _BaseHot(relative, tops[0], top, nested)


def _check_heat(package_dir, flavour, model, invalid_paths, found):
    hot = _load_base_hot(package_dir, flavour, found)
    if hot is None:
        return
    storage = model.storage
    if storage is not None:
        for where, name in _cp_names(param_model.STORAGE_PATH, storage):
            _top_resource(hot, found, where, name, _CP_TYPES)
        for volume in storage.volumes:
            _top_resource(hot, found, volume.json_path + '.volume_resource_id',
                          volume.volume_resource_id, _VOLUME_TYPES)
    for registration in model.pv_registrations:
        _top_resource(hot, found, registration.json_path + '.nfs_server_cp',
                      registration.nfs_server_cp, _CP_TYPES)
    for path, access in ((param_model.MASTER_PATH, model.master),
                         (param_model.WORKER_PATH, model.worker)):
        # Without its (invalid) aspect_id a node's CPs would be looked up
        # on the top-level stack, where they are not.
        if access is not None and path + '.aspect_id' not in invalid_paths:
            _check_node_cps(hot, found, path, access)
    if model.master is not None:
        _check_cluster_addresses(hot, found, model)


def _check_cluster_addresses(hot, found, model):
    """A flavour that starts with several Masters names the port of their
    VIP, a top-level resource; the VIP's floating IP is one too. With one
    Master the driver uses its own address (the user guide's simple
    request names the Master's CP there, in the member template), yet a
    name that no template of the BaseHOT defines is a typo all the same."""
    network = model.network
    masters = _initial_masters(hot, model.master.aspect_id)
    where = param_model.MASTER_PATH + '.cluster_cp_name'
    if network.cluster_cp_name and masters > 1:
        _top_resource(hot, found, where, network.cluster_cp_name,
                      _CP_TYPES[:1])
    elif network.cluster_cp_name:
        _any_resource(hot, found, where, network.cluster_cp_name,
                      _CP_TYPES[:1])
    if network.cluster_fip_name:
        _top_resource(hot, found,
                      param_model.MASTER_PATH + '.cluster_fip_name',
                      network.cluster_fip_name, _CP_TYPES[1:])
    if (model.script_path is not None and masters > 1
            and not network.cluster_cp_name):
        found.error('vip-missing',
                    param_model.MASTER_PATH + '.cluster_cp_name',
                    'is required: scaling group %s of %s/%s starts with %d '
                    'Masters, which share the virtual IP of that port'
                    % (model.master.aspect_id, hot.directory, hot.top_name,
                       masters))


def _initial_masters(hot, aspect_id):
    """How many Masters the flavour is instantiated with: the scaling
    group's desired capacity (else its minimum size); 1 outside a group
    or when the sizes are not plain numbers."""
    group = _mapping(hot.resources.get(aspect_id)) if aspect_id else {}
    sizes = _mapping(group.get('properties'))
    for key in ('desired_capacity', 'min_size'):
        if isinstance(sizes.get(key), int):
            return sizes[key]
    return 1


def _cp_names(path, access):
    """(JSON path, name) of the CPs of a node or the Storage server; one
    name when nic_cp_name is ssh_cp_name (also when it defaulted to it)."""
    names = [(path + '.ssh_cp_name', access.ssh_cp_name)]
    if access.nic_cp_name != access.ssh_cp_name:
        names.append((path + '.nic_cp_name', access.nic_cp_name))
    return names


def _top_resource(hot, found, where, name, types):
    """The top-level resource `name` if it has one of `types`, else None
    (with a finding). The driver looks these up on the top-level stack.
    A name that is not a resource name is left to the parameter check."""
    if not param_checks.is_resource_name(name):
        return None
    resource = hot.resources.get(name)
    if resource is None:
        nested = hot.nested_holding(name)
        hint = ''
        if nested:
            hint = (' (only nested/%s has it, but the driver looks it up on '
                    'the top-level stack)' % ', nested/'.join(nested))
        found.error('hot-resource-missing', where, '%s is not a resource of '
                    '%s/%s%s' % (name, hot.directory, hot.top_name, hint))
        return None
    kind = _mapping(resource).get('type')
    if kind not in types:
        found.error('hot-resource-type', where, '%s is a %s in %s/%s; '
                    'expected %s' % (name, kind, hot.directory, hot.top_name,
                                     ' or '.join(types)))
        return None
    return _mapping(resource)


def _any_resource(hot, found, where, name, types):
    """A finding unless `name` is a resource of one of `types` in the top
    template or a nested one."""
    if not param_checks.is_resource_name(name):
        return
    holders = [(hot.top_name, hot.resources)] + [
        ('nested/' + f, _mapping(hot.nested[f].get('resources')))
        for f in hot.nested_holding(name)]
    kinds = {template: _mapping(resources[name]).get('type')
             for template, resources in holders if name in resources}
    if not kinds:
        found.error('hot-resource-missing', where, '%s is not a resource of '
                    'any template of %s' % (name, hot.directory))
    elif not set(kinds.values()) & set(types):
        template, kind = sorted(kinds.items())[0]
        found.error('hot-resource-type', where, '%s is a %s in %s/%s; '
                    'expected %s' % (name, kind, hot.directory, template,
                                     ' or '.join(types)))


def _check_node_cps(hot, found, path, access):
    """Master/Worker CPs: in the member template of the aspect's scaling
    group, or on the top-level stack for nodes outside any group."""
    names = _cp_names(path, access)
    aspect = access.aspect_id
    if aspect is None:
        for where, name in names:
            _top_resource(hot, found, where, name, _CP_TYPES)
        return
    group = _top_resource(hot, found, path + '.aspect_id', aspect,
                          _GROUP_TYPES)
    if group is None:
        return
    member = _mapping(_mapping(group.get('properties')).get('resource'))
    member_type = member.get('type')
    template = hot.nested.get(member_type) if isinstance(member_type, str) \
        else None
    if template is None:
        found.error('hot-resource-missing', path + '.aspect_id',
                    'the members of scaling group %s are %s, which is not a '
                    'template in %s/nested/' % (aspect, member_type,
                                                hot.directory))
        return
    resources = _mapping(template.get('resources'))
    for where, name in names:
        if not param_checks.is_resource_name(name):
            continue
        kind = _mapping(resources.get(name)).get('type')
        if name not in resources:
            found.error('hot-resource-missing', where,
                        '%s is not a resource of %s/nested/%s, the member '
                        'template of scaling group %s' % (
                            name, hot.directory, member_type, aspect))
        elif kind not in _CP_TYPES:
            found.error('hot-resource-type', where,
                        '%s is a %s in %s/nested/%s; expected %s' % (
                            name, kind, hot.directory, member_type,
                            ' or '.join(_CP_TYPES)))


# -- VNFD ---------------------------------------------------------------------

def _flavour_definition(package_dir, flavour, found):
    """(file, template) of the flavour, found as Tacker finds it: the YAML
    file whose substitution_mappings has this flavour_id."""
    for relative, template in vnfd.templates(package_dir, found):
        if vnfd.flavour_of(template) == flavour:
            return relative, template
    return None, None


def _check_vnfd(package_dir, flavour, model, found):
    relative, template = _flavour_definition(package_dir, flavour, found)
    if template is None:
        found.error('flavour-unknown', 'flavourId',
                    'no VNFD file of the package defines flavour %s '
                    '(substitution_mappings.properties.flavour_id)' % flavour)
        return
    vnf = _mapping(_mapping(_mapping(template.get('topology_template')).get(
        'node_templates')).get('VNF'))
    where = '%s: VNF' % relative
    hooks = _mapping(_mapping(vnf.get('interfaces')).get('Vnflcm'))
    wanted = _check_feature_hooks(where, hooks, model, found)
    _check_master_aspect(relative, template, model, found)
    if not _driver_used(where, hooks, found):
        return None
    api = driver_artifact.check(package_dir, where, _mapping(
        _mapping(vnf.get('artifacts')).get(feature_hooks.DRIVER_NAME)), found)
    if api == 'v2' and model.script_path is not None:
        _check_v2_cluster_hooks(where, hooks, found)
    for hook in (feature_hooks.GUARDS if api == 'v2' else
                 feature_hooks.V1_GUARDS) if wanted else ():
        if hook not in hooks:
            found.error('interface-missing', '%s.interfaces.Vnflcm.%s' % (
                where, hook), 'the driver refuses in %s requests that would '
                'change the cluster; without it Tacker runs them unchecked'
                % hook)
    return api


def _check_feature_hooks(where, hooks, model, found):
    """The (hook, feature) the request's features run in, each an error
    when the VNFD does not route it."""
    wanted = [(hook, 'cluster') for hook in feature_hooks.CLUSTER
              if model.script_path is not None]
    wanted += [(hook, 'persistent-volume')
               for hook in feature_hooks.PERSISTENT_VOLUME
               if model.pv_enabled and hook not in dict(wanted)]
    for hook, feature in wanted:
        if hook not in hooks:
            found.error('interface-missing',
                        '%s.interfaces.Vnflcm.%s' % (where, hook),
                        'the driver runs %s steps in %s; without it Tacker '
                        'calls vnflcm_noop instead' % (feature, hook))
    return wanted


def _driver_used(where, hooks, found):
    """Whether a hook names the driver; each hook naming another
    implementation is an error."""
    driver_used = False
    # Sorted by text: YAML keys may be numbers, which do not compare to str.
    for hook, operation in sorted(hooks.items(),
                                  key=lambda item: str(item[0])):
        implementation = _mapping(operation).get('implementation')
        if isinstance(implementation, dict):
            implementation = implementation.get('primary')
        if implementation == feature_hooks.DRIVER_NAME:
            driver_used = True
        else:
            found.error('interface-not-driver',
                        '%s.interfaces.Vnflcm.%s' % (where, hook),
                        'implementation is %r, not %s' % (
                            implementation, feature_hooks.DRIVER_NAME))
    return driver_used


def _check_v2_cluster_hooks(where, hooks, found):
    """The rollback hooks a v2 cluster needs, and the package change's."""
    for hook in feature_hooks.CLUSTER_V2_ROLLBACK:
        if hook not in hooks:
            found.error('interface-missing', '%s.interfaces.Vnflcm.%s' % (
                where, hook), 'Tacker v2 rolls back without terminate or '
                'scale_start: without %s its rollback leaves the '
                "cluster's VIM or Nodes behind" % hook)
    for hook in feature_hooks.CLUSTER_V2_UPGRADE:
        if hook not in hooks:
            found.warning('interface-missing', '%s.interfaces.Vnflcm.%s'
                          % (where, hook), 'without it a change of the '
                          'VNF package (change_vnfpkg) does not upgrade '
                          'the cluster to its script\'s version')


def _check_master_aspect(relative, template, model, found):
    """The driver refuses to scale the Masters (etcd and the control plane
    change by heals, one Master at a time): a VNFD aspect that lets them
    grow is a scale request Tacker accepts and scale_start fails."""
    aspect_id = model.master.aspect_id if model.master is not None else None
    policies = _mapping(template.get('topology_template')).get('policies')
    if not aspect_id or not isinstance(policies, list):
        return
    for entry in policies:
        for name, policy in sorted(_mapping(entry).items(),
                                   key=lambda item: str(item[0])):
            policy = _mapping(policy)
            aspects = _mapping(_mapping(policy.get('properties')).get(
                'aspects'))
            if (policy.get('type') != _SCALING_ASPECTS
                    or aspect_id not in aspects):
                continue
            level = _mapping(aspects[aspect_id]).get('max_scale_level')
            if level != 0:
                found.warning(
                    'master-aspect-scalable',
                    '%s: policies.%s.properties.aspects.%s' % (
                        relative, name, aspect_id),
                    'the Master aspect has max_scale_level %r: the driver '
                    'refuses to scale the Masters (heal replaces one), so '
                    'a scale request for it fails in scale_start; remove '
                    'the aspect or set max_scale_level to 0' % (level,))


# -- Tacker v2 ----------------------------------------------------------------

# The nfv keys of a BaseHOT that Tacker v2's default UserData fills in
# (tacker/sol_refactored/infra_drivers/openstack/userdata_default.py).
V2_DEFAULT_NFV_KEYS = {
    'VDU': ('computeFlavourId', 'vcImageId', 'desired_capacity',
            'locationConstraints'),
    'CP': ('network', 'fixed_ips')}
_USER_DATA = 'lcm-operation-user-data'


def _check_request_api(request, api, found):
    """v1 requests list vimConnectionInfo, v2 ones map ids to entries; a
    v2 cluster's OpenStack VIM must be a registered one."""
    infos = request.get('vimConnectionInfo')
    shape = {list: 'v1', dict: 'v2'}.get(type(infos))
    cluster = 'script_path' in _mapping(_mapping(
        request.get('additionalParams')).get(param_model.ROOT))
    for key, entry in sorted(infos.items()) if shape == api == 'v2' else ():
        if cluster and 'OPENSTACK' in str(_mapping(entry).get(
                'vimType')).upper() and not _mapping(entry).get('vimId'):
            found.error('vim-unregistered', 'vimConnectionInfo.' + key,
                        'an inline OpenStack VIM has no vimId: the cluster\'s'
                        ' Kubernetes VIM goes to the project of a VIM of '
                        'Tacker\'s VIM registry; give its "vimId"')
    if shape is not None and shape != api:
        found.error('request-api-mismatch', 'vimConnectionInfo',
                    'is the %s request shape (%s), but the package is for '
                    'Tacker %s (/vnflcm/%s): build the package with '
                    '`kubernetes-mgmt-pv package --api %s`, or send the '
                    'request to /vnflcm/%s' % (
                        shape, 'a list' if shape == 'v1' else
                        'an object of entries', api, api, shape, shape))


def _check_user_data(package_dir, flavour, request, api, found):
    """The UserData script the request names must be in the package;
    without one, Tacker v2 fills only V2_DEFAULT_NFV_KEYS of the BaseHOT
    and what the request's additionalParams.nfv gives (a key_name)."""
    additional = _mapping(request.get('additionalParams'))
    user_data = additional.get(_USER_DATA)
    if isinstance(user_data, str):
        root = os.path.realpath(package_dir)
        path = os.path.realpath(os.path.join(root, user_data))
        if not (csar.within(path, root) and os.path.isfile(path)):
            found.error('userdata-missing', 'additionalParams.' + _USER_DATA,
                        '%s is not a file of the package' % user_data)
        return
    if api != 'v2':
        return
    hot = _load_base_hot(package_dir, flavour, _Findings())
    if hot is None:
        return
    paths = _nfv_parameters([hot.resources] + list(hot.nested.values()))
    given = _mapping(additional.get('nfv'))
    for key, in sorted(path for path in paths if len(path) == 1):
        if given.get(key) in (None, ''):
            found.error('heat-nfv-unfilled', 'additionalParams.nfv.' + key,
                        'the BaseHOT reads nfv.%s, which only the request '
                        'gives (Tacker merges additionalParams.nfv into '
                        'nfv): set it' % key)
    for kind, name, key in sorted(p for p in paths if len(p) == 3):
        if key not in V2_DEFAULT_NFV_KEYS.get(kind, ()) and \
                _mapping(_mapping(given.get(kind)).get(name)).get(
                    key) is None:
            found.error('heat-nfv-unfilled', '%s/%s' % (hot.directory,
                                                        hot.top_name),
                        'reads nfv.%s.%s.%s, which Tacker v2 leaves empty '
                        'without %s or additionalParams.nfv.%s.%s.%s in the '
                        'request (it fills %s)' % (
                            kind, name, key, _USER_DATA, kind, name, key,
                            ', '.join(
                                V2_DEFAULT_NFV_KEYS.get(kind, ()))))


def _nfv_parameters(node):
    """The path below nfv of every get_param [nfv, ...]: (kind, name, key)
    or (key,)."""
    found = set()
    if isinstance(node, dict):
        path = node.get('get_param')
        if isinstance(path, list) and len(path) in (2, 4) and \
                path[0] == 'nfv':
            found.add(tuple(str(part) for part in path[1:]))
        for value in node.values():
            found |= _nfv_parameters(value)
    elif isinstance(node, list):
        for value in node:
            found |= _nfv_parameters(value)
    return found
