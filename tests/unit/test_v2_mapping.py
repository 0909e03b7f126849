"""The Tacker v2 door's mapping of v2 dicts onto the request model."""

import pytest

from kubernetes_mgmt_pv.doors import v2_mapping
from kubernetes_mgmt_pv import exceptions
from kubernetes_mgmt_pv.request import lcm_requests
from kubernetes_mgmt_pv.request import param_model
from tests.unit import v2_dicts as v2

MASTER, WORKER1, WORKER2, STORAGE = (vnfc[0] for vnfc in v2.VNFCS)
NEW_STACK = 'bbbbbbbb-0000-4000-8000-000000000009'


def saved_state():
    return {'params': v2_mapping.saved_params(v2.install_params())}


def test_saved_params_hold_no_secret():
    saved = v2_mapping.saved_params(v2.install_params())
    text = repr(saved)
    for secret in (v2.PASSWORD, v2.STORAGE_PASSWORD, 'proxy-Secret'):
        assert secret not in text
    assert saved['master_node']['username'] == 'ubuntu'
    assert saved['proxy'] == {'no_proxy': 'example.org', 'http_proxy': None}
    assert saved['storage_server']['nfs_server_setup_params'] == \
        v2.install_params()['storage_server']['nfs_server_setup_params']


def test_saved_params_keep_a_proxy_without_user_info():
    params = v2.install_params()
    params['proxy']['http_proxy'] = 'http://proxy:3128'
    assert v2_mapping.saved_params(params)['proxy']['http_proxy'] == \
        'http://proxy:3128'


def with_keys(**extra):
    """The install parameters with ``extra`` merged into their roles."""
    params = v2.install_params()
    for role, keys in extra.items():
        if isinstance(params.get(role), dict):
            params[role].update(keys)
        else:
            params[role] = keys
    return params


REGISTRY = [{'connection_type': 1, 'server': 'registry:5000',
             'username': 'reg', 'password': 'registry-Secret-4'}]


# (parameters, a secret they hold, a value next to it that is kept)
@pytest.mark.parametrize('params, secret, kept', [
    # Keys of Tacker's own samples.
    (with_keys(master_node={'registry_password': 'registry-Secret-4'}),
     'registry-Secret-4', ('master_node', 'ssh_cp_name')),
    (with_keys(private_registry_connection_info=REGISTRY),
     'registry-Secret-4',
     ('private_registry_connection_info', 0, 'server')),
    # Tokens and secrets, in any case, at any depth, in lists of lists.
    (with_keys(worker_node={'extra': {'Bootstrap_TOKEN': 'token-Secret'}}),
     'token-Secret', ('worker_node', 'nic_cp_name')),
    (with_keys(extra=[[{'client_secret': 'client-Secret', 'id': 'c'}]]),
     'client-Secret', ('extra', 0, 0, 'id')),
    (with_keys(extra={'api_passwd': 'passwd-Secret', 'url': 'https://r'}),
     'passwd-Secret', ('extra', 'url')),
    # A secret key holding a mapping: dropped whole.
    (with_keys(proxy={'secrets': {'user': 'u', 'key': 'mapping-Secret'}}),
     'mapping-Secret', ('proxy', 'no_proxy')),
])
def test_no_secret_key_is_saved_at_any_depth(params, secret, kept):
    saved = v2_mapping.saved_params(params)
    assert secret not in repr(saved)
    assert not secret_keys(saved)
    value, original = saved, params
    for step in kept:
        value, original = value[step], original[step]
    assert value == original
    assert secret in v2_mapping.secret_values({param_model.ROOT: params})


def secret_keys(value):
    """Every key of ``value`` that names a secret, at any depth."""
    if isinstance(value, dict):
        return [key for key, item in value.items()
                if v2_mapping.is_secret_key(key)] + [
            key for item in value.values() for key in secret_keys(item)]
    if isinstance(value, list):
        return [key for item in value for key in secret_keys(item)]
    return []


@pytest.mark.parametrize('key, secret', [
    ('password', True), ('registry_password', True), ('PassWord', True),
    ('api_passwd', True), ('bearer_token', True), ('bearerToken', True),
    ('client_secret', True), ('secrets', True),
    ('username', False), ('ssh_key', False), ('apt_key_file', False),
    ('no_proxy', False), ('server', False), (1, False), (None, False),
])
def test_secret_keys(key, secret):
    assert v2_mapping.is_secret_key(key) is secret


def test_a_resent_sample_parameter_set_with_registry_secrets_is_accepted():
    """Upstream's sample resends every key, its registry passwords too:
    they are not saved, so they cannot differ, and the hooks run with the
    saved parameters and the request's node logins."""
    params = with_keys(master_node={'registry_password': 'registry-Secret'},
                       private_registry_connection_info=REGISTRY)
    state = {'params': v2_mapping.saved_params(params)}
    merged = v2_mapping.params_in_effect(
        'scale_end', {param_model.ROOT: params}, state)
    assert merged == v2_mapping.without_secret_keys(params) | {
        'master_node': dict(state['params']['master_node'],
                            password=v2.PASSWORD),
        'worker_node': dict(state['params']['worker_node'],
                            password=v2.PASSWORD),
        'storage_server': dict(state['params']['storage_server'],
                               password=v2.STORAGE_PASSWORD),
        'proxy': params['proxy']}


def test_instantiate_runs_with_the_request_parameters():
    root = v2.install_params()
    assert v2_mapping.params_in_effect(
        'instantiate_end', {param_model.ROOT: root}, {}) == root


def test_later_hooks_complete_the_saved_parameters_with_the_logins():
    merged = v2_mapping.params_in_effect('scale_end', dict(
        v2.logins(), **{}), saved_state())
    params = param_model.parse({param_model.ROOT: merged})
    assert params.master.password == v2.PASSWORD
    assert params.storage.password == v2.STORAGE_PASSWORD
    assert params.script_path == 'Scripts/install_k8s_cluster.sh'


def test_v1_style_login_keys_count_too():
    request = v2.logins()
    del request[param_model.ROOT]['worker_node']
    request['worker_node_password'] = 'flat-Secret'
    merged = v2_mapping.params_in_effect('heal_end', request, saved_state())
    assert merged['worker_node']['password'] == 'flat-Secret'


def test_a_resent_whole_parameter_set_is_accepted():
    """Upstream's v2 sample resends everything: equal keys pass."""
    merged = v2_mapping.params_in_effect(
        'heal_start', {param_model.ROOT: v2.install_params()}, saved_state())
    assert merged == v2.install_params()


@pytest.mark.parametrize('operation', ['scale_start', 'scale_end',
                                       'heal_start', 'heal_end'])
def test_missing_passwords_are_named_by_path(operation):
    request = v2.logins()
    del request[param_model.ROOT]['storage_server']
    with pytest.raises(exceptions.ParameterErrors) as caught:
        v2_mapping.params_in_effect(operation, request, saved_state())
    paths = [error.path for error in caught.value.errors]
    assert paths == ['additionalParams.k8s_cluster_installation_param.'
                     'storage_server.password']


@pytest.mark.parametrize('operation', ['scale_start', 'scale_end',
                                       'heal_start', 'heal_end'])
def test_a_withheld_proxy_url_is_required_by_path(operation):
    """Saved without it, a request that leaves it out would set up new
    nodes without the proxy."""
    request = v2.logins()
    del request[param_model.ROOT]['proxy']
    with pytest.raises(exceptions.ParameterErrors) as caught:
        v2_mapping.params_in_effect(operation, request, saved_state())
    assert [error.path for error in caught.value.errors] == [
        'additionalParams.k8s_cluster_installation_param.proxy.http_proxy']


def test_the_proxy_url_given_again_is_used():
    merged = v2_mapping.params_in_effect('scale_end', v2.logins(),
                                         saved_state())
    assert merged['proxy'] == v2.install_params()['proxy']


@pytest.mark.parametrize('operation', v2_mapping.NO_LOGIN_HOOKS)
def test_terminate_needs_no_password(operation):
    merged = v2_mapping.params_in_effect(operation, {}, saved_state())
    params = param_model.parse({param_model.ROOT: merged})
    assert params.storage.password not in (v2.STORAGE_PASSWORD, '')
    assert params.proxy.http_proxy is None


def test_changed_parameters_are_refused():
    request = v2.logins()
    request[param_model.ROOT]['master_node']['ssh_cp_name'] = 'other_CP'
    request[param_model.ROOT]['vim_name'] = 'other'
    with pytest.raises(exceptions.ParameterErrors) as caught:
        v2_mapping.params_in_effect('scale_end', request, saved_state())
    assert sorted(error.path for error in caught.value.errors) == [
        'additionalParams.k8s_cluster_installation_param.master_node.'
        'ssh_cp_name',
        'additionalParams.k8s_cluster_installation_param.vim_name']


def test_no_saved_state_turns_the_features_off():
    assert v2_mapping.params_in_effect('scale_end', v2.logins(), {}) is None


@pytest.mark.parametrize('operation, root, registers', [
    ('instantiate_end', v2.install_params(), True),
    ('instantiate_end', {'storage_server': {}}, False),
    ('instantiate_end', None, False),
    ('scale_end', v2.install_params(), False),
    ('heal_end', v2.install_params(), False),
])
def test_registers_vim(operation, root, registers):
    assert v2_mapping.registers_vim(operation, root) is registers


def test_secret_values():
    assert sorted(v2_mapping.secret_values(
        {param_model.ROOT: v2.install_params()})) == sorted(
        [v2.PASSWORD, v2.STORAGE_PASSWORD,
         'http://user:proxy-Secret@proxy:3128', 'proxy-Secret'])


def test_secret_values_hold_every_password_key_and_the_vims():
    params = {param_model.ROOT: {'master_node': {'password': 'm-Secret'}},
              'worker_node_password': 'w-Secret',
              'other': [{'admin_password': 'a-Secret', 'name': 'x'}]}
    assert sorted(v2_mapping.secret_values(params, v2.vnf_instance())) == \
        sorted(['m-Secret', 'w-Secret', 'a-Secret', v2.VIM_PASSWORD])


def test_instance_model():
    inst = v2_mapping.instance(v2.vnf_instance(), v2.install_params())
    assert inst.id == v2.INSTANCE_ID
    info = inst.instantiated_vnf_info
    assert info.instance_id == v2.STACK_ID
    assert info.additional_params == {param_model.ROOT: v2.install_params()}
    assert [vnfc.id for vnfc in info.vnfc_resource_info] == [
        v2.vnfc_info_id(vnfc[0]) for vnfc in v2.VNFCS]
    assert info.vnfc_resource_info[1].compute_resource.resource_id == \
        WORKER1
    assert [cp.cpd_id for cp in info.vnfc_resource_info[3].vnfc_cp_info] \
        == ['storage_server_CP']
    assert [s.aspect_id for s in info.scale_status] == [
        'master_instance', 'worker_instance']


def test_stack_falls_back_to_v2s_stack_name():
    inst = v2.vnf_instance()
    del inst['instantiatedVnfInfo']['metadata']
    assert v2_mapping.stack_id(inst) == v2.STACK_NAME


@pytest.mark.parametrize('request_dict, heal_ids, entire', [
    ({}, None, True),
    ({'vnfcInstanceId': [v2.vnfc_info_id(WORKER1)]},
     (v2.vnfc_info_id(WORKER1),), False),
])
def test_heal_request_model(request_dict, heal_ids, entire):
    request = v2_mapping.request('heal_start', request_dict, None)
    assert request.vnfc_instance_id == heal_ids
    assert lcm_requests.heals_entire_vnf(request) is entire


def test_heal_targets_through_the_shared_engine():
    params = param_model.parse({param_model.ROOT: v2.install_params()})
    inst = v2_mapping.instance(v2.vnf_instance(), v2.install_params())
    request = v2_mapping.request('heal_start', {'vnfcInstanceId': [
        v2.vnfc_info_id(WORKER2), v2.vnfc_info_id(STORAGE)]}, None)
    targets = lcm_requests.heal_targets(inst, request, params)
    assert targets.storage_server
    assert [(s.role, s.server_id) for s in targets.servers] == [
        ('worker', WORKER2)]


def test_scale_request_model_keeps_only_the_request_keys():
    request = v2_mapping.request('scale_end', dict(
        type='SCALE_OUT', aspectId='worker_instance', numberOfSteps=1,
        additionalParams=dict(v2.logins(), worker_node_password='x')), None)
    assert (request.type, request.aspect_id, request.number_of_steps) == (
        'SCALE_OUT', 'worker_instance', 1)
    assert request.additional_params == {'worker_node_password': 'x'}


def test_instantiate_request_model_carries_the_parameters():
    root = v2.install_params()
    request = v2_mapping.request('instantiate_end',
                                 v2.instantiate_request(root), root)
    assert lcm_requests.additional_params(None, request)[
        param_model.ROOT] == root
    assert request.flavour_id == 'simple'


def test_scale_in_victims_are_the_granted_removals():
    grant = v2.grant_request('SCALE', [WORKER2])
    assert v2_mapping.removed_member_stacks(v2.vnf_instance(), grant) == [
        v2.VNFCS[2][3]]


def test_an_unknown_removal_is_refused():
    grant = v2.grant_request('SCALE', ['no-such-server'])
    with pytest.raises(exceptions.UnknownTargetError):
        v2_mapping.removed_member_stacks(v2.vnf_instance(), grant)


def test_scale_out_hands_every_member_of_the_aspect():
    assert v2_mapping.aspect_member_stacks(
        v2.vnf_instance(), v2.install_params(), 'worker_instance') == [
        v2.VNFCS[1][3], v2.VNFCS[2][3]]
    assert v2_mapping.aspect_member_stacks(
        v2.vnf_instance(), v2.install_params(), 'other_aspect') == []


# Heat's members of worker_instance at the rollback: (resource name,
# member stack id); the instance (v2.VNFCS) is the one before the scale-out.
OLD_MEMBERS = [(v2.VNFCS[1][4], v2.VNFCS[1][3]),
               (v2.VNFCS[2][4], v2.VNFCS[2][3])]


@pytest.mark.parametrize('members, removed', [
    # One Worker added: Heat deletes it.
    (OLD_MEMBERS + [('n3wm3mb3', NEW_STACK)], ['n3wm3mb3']),
    # Listed first, and two of them.
    ([('n3w1', NEW_STACK)] + OLD_MEMBERS + [('n3w2', 'another-stack')],
     ['n3w1', 'n3w2']),
    # Heat failed before adding any member: nothing to remove.
    (OLD_MEMBERS, []),
    # A member the instance knows under another resource name still holds
    # its VNFC: matched by stack, as Tacker matches by server.
    ([('renamed', v2.VNFCS[1][3]), OLD_MEMBERS[1]], []),
])
def test_scale_out_rollback_removes_the_members_without_a_vnfc(members,
                                                               removed):
    assert v2_mapping.rolled_back_members(v2.vnf_instance(), members) == \
        removed


def test_scale_out_rollback_of_an_instance_without_vnfcs_removes_all():
    assert v2_mapping.rolled_back_members(
        v2.vnf_instance(vnfcs=()), OLD_MEMBERS) == [
        name for name, _ in OLD_MEMBERS]


@pytest.mark.parametrize('aspect, worker', [
    ('worker_instance', True), ('master_instance', False),
    ('other_aspect', False), (None, False)])
def test_only_the_worker_aspect_is_rolled_back(aspect, worker):
    assert v2_mapping.is_worker_aspect(v2.install_params(), aspect) is \
        worker


def test_the_instantiate_rollback_runs_with_the_request_parameters():
    assert v2_mapping.params_in_effect(
        'instantiate_rollback_start',
        v2.instantiate_request()['additionalParams'], {}) == \
        v2.install_params()


def test_healed_vnfcs_are_found_again_after_the_heal():
    """heal_end sees new server ids (new VNFC ids) in the same stacks."""
    healed_id = v2.vnfc_info_id(WORKER1)
    recorded = v2_mapping.healed_vnfcs(
        v2.vnf_instance(), {'vnfcInstanceId': [healed_id]})
    assert recorded == {healed_id: [v2.VNFCS[1][4], 'workerNode']}
    new_server = '55555555-5555-4555-8555-555555555555'
    after = v2.vnf_instance(vnfcs=v2.healed(1, new_server, NEW_STACK))
    aliases = v2_mapping.healed_aliases(after, recorded)
    assert aliases == {new_server: healed_id}
    inst = v2_mapping.instance(after, None, aliases)
    healed = [vnfc for vnfc in inst.instantiated_vnf_info.vnfc_resource_info
              if vnfc.id == healed_id]
    assert healed[0].compute_resource.resource_id == new_server


def test_a_healed_storage_server_is_told_apart_by_its_vdu():
    healed_id = v2.vnfc_info_id(STORAGE)
    recorded = v2_mapping.healed_vnfcs(
        v2.vnf_instance(), {'vnfcInstanceId': [healed_id]})
    assert v2_mapping.healed_aliases(v2.vnf_instance(), recorded) == {
        STORAGE: healed_id}


def test_heat_access_info_from_vim_connection_info():
    access = v2_mapping.heat_access_info(
        v2_mapping.openstack_vim(v2.vnf_instance()), '/etc/ssl/ca.pem')
    assert access == {
        'auth_url': 'http://keystone:5000/v3', 'username': 'nfv_user',
        'password': v2.VIM_PASSWORD, 'project_name': 'nfv',
        'project_id': None, 'user_domain_name': 'Default',
        'project_domain_name': 'Default', 'region': 'RegionOne',
        'cert_verify': '/etc/ssl/ca.pem'}


def test_no_openstack_vim_is_an_error():
    inst = v2.vnf_instance()
    inst['vimConnectionInfo'] = {}
    with pytest.raises(exceptions.MgmtDriverError):
        v2_mapping.openstack_vim(inst)


K8S_VIM_ID, K8S_URL = 'k8s-vim-id', 'https://10.10.0.5:6443'


def registered(vim_id, vim_type='ETSINFV.KUBERNETES.V_1',
               endpoint='https://192.0.2.9:6443'):
    """An entry as v2 stores a vimId request: completed from the
    registry (the endpoint is the registered VIM's, whatever it is)."""
    return {'vimId': vim_id, 'vimType': vim_type,
            'interfaceInfo': {'endpoint': endpoint},
            'accessInfo': {'bearer_token': 'token'}}


def inline(endpoint, vim_type='ETSINFV.KUBERNETES.V_1'):
    return {'vimType': vim_type, 'interfaceInfo': {'endpoint': endpoint},
            'accessInfo': {'bearer_token': 'token'}}


@pytest.mark.parametrize('infos, uses', [
    ({'vim1': registered(K8S_VIM_ID)}, True),
    ({'vim1': {'vimId': K8S_VIM_ID, 'vimType': 'kubernetes'}}, True),
    ({'os': v2.vnf_instance()['vimConnectionInfo']['vim1'],
      'k8s': registered(K8S_VIM_ID)}, True),
    # Another registered VIM, even at the same address: not this one.
    ({'vim1': registered('other-vim', endpoint=K8S_URL)}, False),
    # Inline: by the API server, in any spelling of its URL.
    ({'vim1': inline(K8S_URL)}, True),
    ({'vim1': inline('https://10.10.0.5:6443/')}, True),
    ({'vim1': inline('HTTPS://10.10.0.5:6443')}, True),
    ({'vim1': inline(K8S_URL, 'ETSINFV.HELM.V_3')}, True),
    ({'vim1': inline('https://10.10.0.5')}, False),
    ({'vim1': inline('https://10.10.0.6:6443')}, False),
    ({'vim1': inline('http://10.10.0.5:6443')}, False),
    ({'vim1': inline(K8S_URL, 'ETSINFV.OPENSTACK_KEYSTONE.V_3')}, False),
    ({'vim1': inline('not a url')}, False),
    ({'vim1': {'vimType': 'ETSINFV.KUBERNETES.V_1'}}, False),
    ({'vim1': 'garbage'}, False),
    ('garbage', False),
    ({}, False),
    (None, False),
])
def test_a_v2_instance_uses_the_vim_by_id_or_inline_endpoint(infos, uses):
    assert v2_mapping.uses_vim(infos, K8S_VIM_ID, K8S_URL) is uses


def test_inline_entries_match_nothing_without_the_vims_endpoint():
    assert not v2_mapping.uses_vim({'vim1': inline(K8S_URL)}, K8S_VIM_ID,
                                   None)
    assert v2_mapping.uses_vim({'vim1': registered(K8S_VIM_ID)},
                               K8S_VIM_ID, None)


OWN, OTHER = 'project-a', 'project-b'


def test_the_instances_on_a_vim_are_named_once_each():
    connections = [('cnf-b', OWN, {'vim1': inline(K8S_URL)}),
                   ('cnf-a', OWN, {'vim1': registered(K8S_VIM_ID)}),
                   ('cnf-a', OWN, {'vim1': registered(K8S_VIM_ID)}),  # op
                   ('vnf-c', OWN, v2.vnf_instance()['vimConnectionInfo']),
                   ('cnf-d', OWN, None)]
    assert v2_mapping.instances_on_vim(connections, K8S_VIM_ID, K8S_URL,
                                       OWN) == {'cnf-a': OWN, 'cnf-b': OWN}


@pytest.mark.parametrize('owner, infos, uses', [
    (OWN, {'vim1': inline(K8S_URL)}, True),
    (OWN, {'vim1': registered(K8S_VIM_ID)}, True),
    # Another project's private network may have an API server at the
    # same address: its inline entries are its own business.
    (OTHER, {'vim1': inline(K8S_URL)}, False),
    (None, {'vim1': inline(K8S_URL)}, False),  # its package is gone
    # A VIM named by its id is this one, in whatever project.
    (OTHER, {'vim1': registered(K8S_VIM_ID)}, True),
    (None, {'vim1': {'vimId': K8S_VIM_ID, 'vimType': 'kubernetes'}}, True),
    (OTHER, {'vim1': registered('other-vim', endpoint=K8S_URL)}, False),
])
def test_inline_entries_count_only_in_the_vims_project(owner, infos, uses):
    found = v2_mapping.instances_on_vim([('cnf', owner, infos)],
                                        K8S_VIM_ID, K8S_URL, OWN)
    assert found == ({'cnf': owner} if uses else {})


@pytest.mark.parametrize('users, shown', [
    ({}, []),
    ({'cnf-b': OWN, 'cnf-a': OWN}, ['cnf-a', 'cnf-b']),
    ({'cnf-x': OTHER}, ['1 VNF instance(s) of another project']),
    ({'cnf-x': OTHER, 'cnf-y': None, 'cnf-a': OWN},
     ['cnf-a', '2 VNF instance(s) of another project']),
])
def test_another_projects_instances_are_counted_not_named(users, shown):
    assert v2_mapping.shown_users(users, OWN) == shown


def test_with_state_sets_and_removes_the_one_key():
    inst = v2.vnf_instance(metadata={'other': 1})
    result = v2_mapping.with_state(inst, {'params': {}})
    assert result['metadata'] == {'other': 1, 'kubernetesMgmtPv':
                                  {'params': {}}}
    assert inst['metadata'] == {'other': 1}
    assert v2_mapping.with_state(result, None)['metadata'] == {'other': 1}


@pytest.mark.parametrize('operation, runs', [
    ('instantiate_end', True), ('terminate_start', True),
    ('instantiate_start', False), ('change_external_connectivity_start',
                                   True),
    ('modify_information_start', True), ('modify_information_end', False),
    ('change_current_package_start', True),
    ('change_current_package_end', True),
    ('change_current_package_rollback_start', True),
    ('change_current_package_rollback_end', False),
    ('scale_rollback_start', True), ('instantiate_rollback_start', True),
    ('scale_rollback_end', False), ('instantiate_rollback_end', False),
])
def test_undeclared_operations_do_not_run(operation, runs):
    assert v2_mapping.runs(operation) is runs
