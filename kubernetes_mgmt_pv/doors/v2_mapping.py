"""Tacker v2's script dicts mapped onto the request model, and back.

Pure functions of the pickled dict Tacker v2's conductor hands a package
script (``operation``, ``request``, ``vnf_instance``, ``grant_request``,
``user_script_err_handling_data``, all camelCase): no Tacker, no host.

v2 keeps no instantiate additionalParams with the instance, so
instantiate_end saves the parameters in ``vnf_instance.metadata`` under
STATE_KEY, without any secret (the API shows metadata unmasked): the node
passwords and proxy URLs with user info (saved as null, so a request
without them is refused) come again with each later request's
``additionalParams.k8s_cluster_installation_param``.
"""

import copy
import secrets
import urllib.parse

from kubernetes_mgmt_pv import exceptions
from kubernetes_mgmt_pv import feature_hooks
from kubernetes_mgmt_pv import redaction
from kubernetes_mgmt_pv.request import param_model
from kubernetes_mgmt_pv.request import request_model as model

STATE_KEY = 'kubernetesMgmtPv'
# The hooks the door runs; every other operation v2 calls is a no-op.
# The guards (v2_guards) only refuse requests, with no feature step.
GUARD_HOOKS = feature_hooks.GUARDS
HOOKS = ('instantiate_end', 'terminate_start', 'terminate_end',
         'scale_start', 'scale_end', 'heal_start', 'heal_end',
         'instantiate_rollback_start', 'scale_rollback_start') + \
    GUARD_HOOKS + feature_hooks.CLUSTER_V2_UPGRADE
# The driver hook each rollback hook runs: what Tacker v1 calls when it
# rolls these operations back.
ROLLBACK_HOOKS = {'instantiate_rollback_start': 'terminate_start',
                  'scale_rollback_start': 'scale_start'}
# Hooks with the instantiate request's parameters (nothing is saved yet).
INSTANTIATE_HOOKS = ('instantiate_end', 'instantiate_rollback_start')
# Hooks that never log in to a VM (terminate only deletes the VIM; a
# package change's rollback changes no node: kubeadm has no downgrade).
NO_LOGIN_HOOKS = ('terminate_start', 'terminate_end',
                  'change_current_package_rollback_start')
ROLES = ('master_node', 'worker_node', 'storage_server')
PROXY_URLS = ('http_proxy', 'https_proxy')
_REQUEST_PATH = 'additionalParams.' + param_model.ROOT


def runs(operation):
    return operation in HOOKS


def registers_vim(operation, root):
    """Whether the hook registers the cluster as a Kubernetes VIM, next to
    the OpenStack VIM: instantiate_end of the cluster feature."""
    return (operation == 'instantiate_end' and isinstance(root, dict) and
            root.get('script_path') is not None)


# -- the saved parameters --------------------------------------------------

def saved_params(root):
    """``root`` (k8s_cluster_installation_param) without its secrets: no
    key that names a secret (``is_secret_key``) at any depth, so none of
    Tacker's sample keys (``master_node.registry_password``,
    ``private_registry_connection_info[].password``) either; a proxy URL
    with user info is saved as None (withheld), which later requests must
    give again."""
    saved = without_secret_keys(root)
    proxy = saved.get('proxy')
    if isinstance(proxy, dict):
        for key in PROXY_URLS:
            if param_model.has_user_info(proxy.get(key)):
                proxy[key] = None
    return saved


# A key naming any of these holds a secret, wherever it stands.
_SECRET_KEY_WORDS = ('password', 'passwd', 'token', 'secret')


def is_secret_key(key):
    """Whether the value of ``key`` is a secret: a key naming a password,
    token or secret (``registry_password``, ``bearer_token``,
    ``client_secret``), in any case."""
    return isinstance(key, str) and any(
        word in key.lower() for word in _SECRET_KEY_WORDS)


def without_secret_keys(value):
    """A copy of ``value`` without the secret keys of its mappings, at any
    depth (the mappings in lists too)."""
    if isinstance(value, dict):
        return {key: without_secret_keys(item) for key, item in value.items()
                if not is_secret_key(key)}
    if isinstance(value, list):
        return [without_secret_keys(item) for item in value]
    return copy.deepcopy(value)


def _withheld(saved, role, key):
    """Whether saved_params withheld the proxy URL ``key``."""
    return (role == 'proxy' and isinstance(saved.get(role), dict) and
            key in saved[role] and saved[role][key] is None)


def _secret_paths(root):
    """(role, key) of the values saved_params leaves out of ``root``."""
    paths = [(role, 'password') for role in ROLES
             if isinstance(root.get(role), dict)]
    return paths + [('proxy', key) for key in PROXY_URLS]


def params_in_effect(operation, request_params, state):
    """The k8s_cluster_installation_param a hook runs with: the instantiate
    request's at instantiate_end and at its rollback; later, the saved one
    completed with the request's secrets (its other keys must equal the
    saved ones: they cannot change after instantiation). Raises
    ParameterErrors."""
    request_params = request_params or {}
    given = request_params.get(param_model.ROOT)
    if operation in INSTANTIATE_HOOKS:
        return given
    saved = (state or {}).get('params')
    if saved is None:
        return None  # saved without parameters: the features are off
    if given is not None and not isinstance(given, dict):
        raise exceptions.ParameterErrors([exceptions.ParameterError(
            _REQUEST_PATH, 'must be an object')])
    given = given or {}
    merged, errors = copy.deepcopy(saved), []
    _check_unchanged(given, saved, _REQUEST_PATH, errors)
    for role, key in _secret_paths(saved) + _role_logins(saved):
        error = _complete(operation, merged, saved, given, request_params,
                          role, key)
        if error:
            errors.append(error)
    if errors:
        raise exceptions.ParameterErrors(errors)
    return merged


def _complete(operation, merged, saved, given, request_params, role, key):
    """Put the request's value of ``role``'s ``key`` (a password or a
    withheld proxy URL) into ``merged``; the ParameterError when the
    request must give it and does not, else None."""
    value = _given(given, request_params, role, key)
    key_given = _given(given, request_params, role, 'ssh_key')
    if value is not None:
        merged.setdefault(role, {})[key] = value
        if key == 'password' and key_given is None:
            merged[role].pop('ssh_key', None)  # replaces the saved key
    elif _withheld(saved, role, key):
        if operation in NO_LOGIN_HOOKS:
            del merged[role][key]  # terminate sets up no node
        else:
            return exceptions.ParameterError(
                '%s.proxy.%s' % (_REQUEST_PATH, key),
                'required: the instantiate request gave a proxy URL '
                'with user info, which Tacker v2 cannot keep '
                '(metadata.%s.params.proxy.%s is null); give it in '
                'every scale and heal request, or new nodes are set up '
                'without the proxy' % (STATE_KEY, key))
    elif key == 'password' and role in merged and key_given is None \
            and merged[role].get('ssh_key') is None:
        if operation in NO_LOGIN_HOOKS:
            # Never sent anywhere: terminate logs in to no VM.
            merged[role][key] = secrets.token_urlsafe(24)
        else:
            return exceptions.ParameterError(
                '%s.%s.password' % (_REQUEST_PATH, role),
                'required: Tacker v2 keeps no password between '
                'operations (metadata.%s holds the other parameters); '
                'give the node logins in every scale and heal request, '
                'or log in with a key file (ssh_key), which is kept'
                % STATE_KEY)
    return None


def _given(given, request_params, role, key):
    """The value of ``role``'s ``key`` in the request: nested, else the
    flat ``<role>_<key>`` of Tacker's sample driver."""
    value = (given.get(role) or {}).get(key) \
        if isinstance(given.get(role), dict) else None
    return value if value is not None else request_params.get(
        '%s_%s' % (role, key))


def _role_logins(saved):
    """The login keys a later request may give again: not secrets (the
    saved ones hold), but a healed VM may take another login."""
    return [(role, key) for role in ROLES for key in _LOGIN_KEYS
            if isinstance(saved.get(role), dict)]


_LOGIN_KEYS = ('username', 'ssh_key')


def _check_unchanged(given, saved, path, errors):
    """Keys of the request that are no secret must equal the saved ones."""
    for key, value in given.items():
        here = '%s.%s' % (path, key)
        if key in PROXY_URLS or key in _LOGIN_KEYS or is_secret_key(key):
            continue
        if isinstance(value, dict) and isinstance(saved.get(key), dict):
            _check_unchanged(value, saved[key], here, errors)
        elif saved.get(key) != without_secret_keys(value):
            errors.append(exceptions.ParameterError(
                here, 'differs from the instantiate parameters saved in '
                'metadata.%s: they cannot change after instantiation'
                % STATE_KEY))


def secret_values(request_params, vnf_instance=None):
    """Every secret of a hook's input, hidden from its log and error: the
    value of each secret key (``is_secret_key``) of ``request_params``
    (additionalParams, the flat ``<role>_password`` keys included), the
    proxy URLs, and the credentials of the instance's VIMs."""
    found = _secret_key_values(request_params)
    root = (request_params or {}).get(param_model.ROOT) \
        if isinstance(request_params, dict) else None
    proxy = root.get('proxy') if isinstance(root, dict) else None
    if isinstance(proxy, dict):
        for key in PROXY_URLS:
            url = proxy.get(key)
            if isinstance(url, str) and url:
                found += [url] + list(redaction.url_secrets(url))
    found += _secret_key_values((vnf_instance or {}).get('vimConnectionInfo'))
    return list(dict.fromkeys(value for value in found
                              if isinstance(value, str) and value))


def _secret_key_values(value):
    """The values of the secret keys, at any depth (the strings in a
    secret key's mapping or list too)."""
    found = []
    if isinstance(value, dict):
        for key, item in value.items():
            found += _strings(item) if is_secret_key(key) \
                else _secret_key_values(item)
    elif isinstance(value, list):
        for item in value:
            found += _secret_key_values(item)
    return found


def _strings(value):
    """Every string in ``value``, at any depth."""
    if isinstance(value, dict):
        return [text for item in value.values() for text in _strings(item)]
    if isinstance(value, list):
        return [text for item in value for text in _strings(item)]
    return [value] if isinstance(value, str) else []


# -- the request model -----------------------------------------------------

def _stack_of(vnfc):
    """The id of the Heat stack holding the VNFC's server (v2 keeps
    "<stack name>/<stack id>" in its metadata)."""
    stack = (vnfc.get('metadata') or {}).get('stack_id') or ''
    return stack.rsplit('/', 1)[-1] or None


def stack_id(vnf_instance):
    """The VNF's top-level Heat stack: v2 names it vnf-<instance id> and
    keeps its id in instantiatedVnfInfo.metadata.stack_id."""
    info = vnf_instance.get('instantiatedVnfInfo') or {}
    return ((info.get('metadata') or {}).get('stack_id') or
            'vnf-%s' % vnf_instance['id'])


def _vnfc_ids(info):
    """{vnfcResourceInfo id: the vnfcInfo id a heal request names}."""
    return {vnfc['vnfcResourceInfoId']: vnfc['id']
            for vnfc in info.get('vnfcInfo') or []
            if vnfc.get('vnfcResourceInfoId')}


def instance(vnf_instance, root, aliases=None):
    """The model of ``vnf_instance``; ``root`` the parameters in effect.

    ``aliases`` ({vnfcResourceInfo id: id}) names re-created VNFCs by
    the ids their heal request gave (heal_end)."""
    info = vnf_instance.get('instantiatedVnfInfo') or {}
    names = dict(_vnfc_ids(info), **(aliases or {}))
    volumes = _volume_ids(info)
    vnfcs = tuple(model.Vnfc(
        id=names.get(vnfc['id'], vnfc['id']),
        compute_resource=model.ComputeResource(
            (vnfc.get('computeResource') or {}).get('resourceId')),
        vnfc_cp_info=tuple(model.VnfcCp(cp.get('cpdId'))
                           for cp in vnfc.get('vnfcCpInfo') or []),
        volume_ids=tuple(volumes[storage_id]
                         for storage_id in vnfc.get('storageResourceIds')
                         or [] if storage_id in volumes))
        for vnfc in info.get('vnfcResourceInfo') or [])
    scale_status = tuple(model.ScaleStatus(s['aspectId'],
                                           s.get('scaleLevel', 0))
                         for s in info.get('scaleStatus') or [])
    params = {param_model.ROOT: root} if root is not None else {}
    return model.VnfInstance(
        id=vnf_instance['id'], vnfd_id=vnf_instance.get('vnfdId'),
        instantiated_vnf_info=model.InstantiatedInfo(
            instance_id=stack_id(vnf_instance), additional_params=params,
            vnfc_resource_info=vnfcs, scale_status=scale_status))


def _volume_ids(info):
    """{virtualStorageResourceInfo id: its Cinder volume id}."""
    return {storage['id']: (storage.get('storageResource') or {}).get(
        'resourceId') for storage in info.get('virtualStorageResourceInfo')
        or [] if storage.get('id')}


def removed_volumes(grant_request):
    """The volume ids of a v2 grant request's STORAGE removeResources:
    the volumes its heal re-creates. None without a grant request (then
    nothing tells that a volume is kept)."""
    if not grant_request:
        return None
    return tuple(res['resource'].get('resourceId') for res in
                 grant_request.get('removeResources') or []
                 if res.get('type') == 'STORAGE' and res.get('resource'))


def request(operation, request_dict, root, grant_request=None):
    """The model of the LCM request of ``operation``; a heal's with the
    volumes its ``grant_request`` removes."""
    request_dict = request_dict or {}
    extra = {key: value for key, value in
             (request_dict.get('additionalParams') or {}).items()
             if key != param_model.ROOT}
    if operation == 'instantiate_end' and root is not None:
        extra[param_model.ROOT] = root
    heal_ids = request_dict.get('vnfcInstanceId')
    return model.LcmRequest(
        additional_params=extra,
        flavour_id=request_dict.get('flavourId'),
        type=request_dict.get('type'),
        aspect_id=request_dict.get('aspectId'),
        number_of_steps=request_dict.get('numberOfSteps'),
        vnfc_instance_id=tuple(heal_ids) if heal_ids else None,
        termination_type=request_dict.get('terminationType'),
        removed_storage=removed_volumes(grant_request)
        if operation.startswith('heal_') else None)


def removed_member_stacks(vnf_instance, grant_request):
    """Stack ids of the VMs a scale-in removes (grant_request's COMPUTE
    removeResources, Nova server ids, matched to the instance's VNFCs)."""
    servers = [res['resource']['resourceId'] for res in
               (grant_request or {}).get('removeResources') or []
               if res.get('type') == 'COMPUTE' and res.get('resource')]
    by_server = {(vnfc.get('computeResource') or {}).get('resourceId'):
                 _stack_of(vnfc) for vnfc in _vnfcs(vnf_instance)}
    exceptions.check_known(
        exceptions.indexed('grant_request.removeResources', servers),
        by_server, 'a VNFC of this VNF instance')
    return [by_server[server] for server in servers]


def aspect_member_stacks(vnf_instance, root, aspect_id):
    """Stack ids of every VM of the Master/Worker aspect: a v2 scale_end
    cannot tell the new ones, so the features get them all (they change
    only what differs, so the others are left as they are)."""
    cps = {(root.get(role) or {}).get(key) for role in ROLES[:2]
           if isinstance(root.get(role), dict) and
           root[role].get('aspect_id') == aspect_id
           for key in ('ssh_cp_name', 'nic_cp_name')} - {None}
    stacks = []
    for vnfc in _vnfcs(vnf_instance):
        if cps & {cp.get('cpdId') for cp in vnfc.get('vnfcCpInfo') or []}:
            stacks.append(_stack_of(vnfc))
    return list(dict.fromkeys(stacks))


def is_worker_aspect(root, aspect_id):
    """Whether ``aspect_id`` scales the Workers of ``root``."""
    worker = root.get('worker_node')
    return isinstance(worker, dict) and aspect_id is not None and \
        worker.get('aspect_id') == aspect_id


def rolled_back_members(vnf_instance, group_members):
    """Resource names of the scaling-group members a scale-out rollback
    deletes, of ``group_members`` ((name, member stack id) as Heat lists
    them now): Tacker v2 marks unhealthy every server that is not a
    vnfcResourceInfo of the instance as it was before the scale-out, and
    puts desired_capacity back, so Heat deletes the members that hold
    none of the instance's VNFCs."""
    kept = {_stack_of(vnfc) for vnfc in _vnfcs(vnf_instance)}
    return [name for name, stack in group_members if stack not in kept]


def _vnfcs(vnf_instance):
    info = vnf_instance.get('instantiatedVnfInfo') or {}
    return info.get('vnfcResourceInfo') or []


def _place_of(vnfc):
    """Where a VM stands in the VNF, kept when a heal replaces it: its
    member's resource name in its scaling group (Heat replaces the member
    stack under the same name), else its stack (the top-level one)."""
    metadata = vnfc.get('metadata') or {}
    return metadata.get('parent_resource_name') or _stack_of(vnfc)


def healed_vnfcs(vnf_instance, request_dict):
    """{requested vnfcInstanceId: [place, VDU id]} of a heal, recorded at
    heal_start: the ids name the old VMs, which heal_end no longer has."""
    info = vnf_instance.get('instantiatedVnfInfo') or {}
    by_id = {vnfc['id']: vnfc for vnfc in info.get('vnfcResourceInfo') or []}
    found = {}
    for resource_id, vnfc_id in _vnfc_ids(info).items():
        if vnfc_id in ((request_dict or {}).get('vnfcInstanceId') or ()) \
                and resource_id in by_id:
            vnfc = by_id[resource_id]
            found[vnfc_id] = [_place_of(vnfc), vnfc.get('vduId')]
    return found


def healed_aliases(vnf_instance, recorded):
    """{vnfcResourceInfo id: requested id} of the VMs a heal re-created,
    found at the place and VDU recorded at heal_start."""
    aliases = {}
    for vnfc_id, (place, vdu) in (recorded or {}).items():
        for vnfc in _vnfcs(vnf_instance):
            if _place_of(vnfc) == place and vnfc.get('vduId') == vdu:
                aliases[vnfc['id']] = vnfc_id
    return aliases


# -- the VIM of the OpenStack stack ------------------------------------------

OPENSTACK_VIM_TYPES = ('ETSINFV.OPENSTACK_KEYSTONE.V_3', 'openstack')


def openstack_vim(vnf_instance):
    """The instance's OpenStack vimConnectionInfo entry."""
    for entry in (vnf_instance.get('vimConnectionInfo') or {}).values():
        if entry.get('vimType') in OPENSTACK_VIM_TYPES:
            return entry
    raise exceptions.MgmtDriverError(
        'vnf_instance.vimConnectionInfo has no OpenStack VIM (vimType '
        'ETSINFV.OPENSTACK_KEYSTONE.V_3): the Heat stack cannot be read')


def heat_access_info(vim, cert_verify):
    """v2's vimConnectionInfo (interfaceInfo, accessInfo) as the access_info
    heat.build_heat_client takes. ``cert_verify``: as Tacker v2 verifies
    Heat's certificate (its registry sets skipCertificateVerification on
    every VIM and does not read it)."""
    interface = vim.get('interfaceInfo') or {}
    access = vim.get('accessInfo') or {}
    return {
        'auth_url': interface.get('endpoint'),
        'username': access.get('username'),
        'password': access.get('password'),
        'project_name': access.get('project'),
        'project_id': access.get('projectId'),
        'user_domain_name': access.get('userDomain'),
        'project_domain_name': access.get('projectDomain'),
        'region': access.get('region'),
        'cert_verify': cert_verify,
    }


# -- the v2 VNF instances on a Kubernetes VIM ---------------------------------

KUBERNETES_VIM_TYPES = ('ETSINFV.KUBERNETES.V_1', 'ETSINFV.HELM.V_3',
                        'kubernetes')
_DEFAULT_PORTS = {'https': 443, 'http': 80}


def api_server(url):
    """What identifies an API server in ``url``: (scheme, host, port,
    path), the port filled in and case and trailing slashes ignored; None
    for no URL."""
    try:
        parts = urllib.parse.urlsplit(url.strip())
        port = parts.port
    except (AttributeError, ValueError):
        return None
    if not parts.hostname:
        return None
    scheme = parts.scheme.lower()
    return (scheme, parts.hostname.lower(),
            port or _DEFAULT_PORTS.get(scheme), parts.path.rstrip('/'))


def uses_vim(vim_connection_info, vim_id, endpoint):
    """Whether a v2 vimConnectionInfo ({key: entry}) puts its VNF on the
    registered VIM ``vim_id``, whose API server is at ``endpoint``: an
    entry with that vimId, or a Kubernetes entry given inline (no vimId)
    whose interfaceInfo.endpoint is that API server."""
    if not isinstance(vim_connection_info, dict):
        return False
    server = api_server(endpoint)
    for entry in vim_connection_info.values():
        if not isinstance(entry, dict):
            continue
        if entry.get('vimId'):
            if entry['vimId'] == vim_id:
                return True
        elif (server is not None and
              entry.get('vimType') in KUBERNETES_VIM_TYPES and
              api_server((entry.get('interfaceInfo') or {}).get(
                  'endpoint')) == server):
            return True
    return False


def instances_on_vim(connections, vim_id, endpoint, project):
    """{id: project} of the v2 VNF instances on the VIM ``vim_id`` of
    ``project``, from (instance id, its project, vimConnectionInfo)
    triples: an instance's own, and those of its unfinished operations (a
    CNF whose instantiate failed midway has resources on the cluster, its
    VIM only in the request). An entry by vimId counts in any project; an
    inline entry only in the VIM's own: another project's private network
    may have an API server at the same address."""
    return {instance_id: owner for instance_id, owner, infos in connections
            if uses_vim(infos, vim_id,
                        endpoint if owner == project else None)}


def shown_users(users, project):
    """The VNF instances using a VIM of ``project`` ({id: project}) as a
    message names them: the ids of the project's own, sorted; of the
    others only how many there are (their ids are another project's)."""
    own = sorted(instance_id for instance_id, owner in users.items()
                 if owner == project)
    foreign = len(users) - len(own)
    if foreign:
        own.append('%d VNF instance(s) of another project' % foreign)
    return own


# -- the result ------------------------------------------------------------

def with_state(vnf_instance, state):
    """The instance dict to hand back, STATE_KEY set to ``state`` (None:
    removed)."""
    result = copy.deepcopy(vnf_instance)
    metadata = dict(result.get('metadata') or {})
    if state is None:
        metadata.pop(STATE_KEY, None)
    else:
        metadata[STATE_KEY] = state
    result['metadata'] = metadata
    return result


def state_of(vnf_instance):
    return (vnf_instance.get('metadata') or {}).get(STATE_KEY) or {}
