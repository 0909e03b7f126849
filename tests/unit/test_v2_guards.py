"""What the v2 door refuses: a PATCH of its state in metadata, a hook
that finds the state gone, change_external_connectivity and
change_current_package touching the cluster (doors.v2_guards), through
v2_hook.run as Tacker v2's conductor calls it."""

import copy

import pytest

from kubernetes_mgmt_pv.doors import v2_failure
from kubernetes_mgmt_pv.doors import v2_guards
from kubernetes_mgmt_pv.doors import v2_hook
from kubernetes_mgmt_pv.doors import v2_mapping
from kubernetes_mgmt_pv import exceptions
from kubernetes_mgmt_pv import mgmt_driver
from tests.unit import v2_dicts as v2

KEY = v2_mapping.STATE_KEY
STATE = {'contractVersion': mgmt_driver.PACKAGE_CONTRACT_VERSION,
         'params': v2_mapping.saved_params(v2.install_params()),
         'openstackVimId': v2.OPENSTACK_VIM_ID,
         'vim': {'id': 'k8s-vim-id', 'name': 'kubernetes_vim',
                 'endpoint': 'https://10.10.0.5:6443'}}


def instance(state=STATE, other=None):
    metadata = dict(other or {})
    if state is not None:
        metadata[KEY] = copy.deepcopy(state)
    return v2.vnf_instance(metadata=metadata)


# -- a PATCH of the state ---------------------------------------------------

@pytest.mark.parametrize('patch, refused', [
    ({KEY: None}, ['metadata.' + KEY]),
    ({KEY: {'vim': None}}, ['metadata.%s.vim' % KEY]),
    ({KEY: {'params': {'master_node': {'ssh_cp_name': 'other_CP'}}}},
     ['metadata.%s.params.master_node.ssh_cp_name' % KEY]),
    ({KEY: {'vim': {'id': 'another'}, 'contractVersion': 1}},
     ['metadata.%s.vim.id' % KEY, 'metadata.%s.contractVersion' % KEY]),
    ({KEY: {'added': 1}}, ['metadata.%s.added' % KEY]),
    ({KEY: 'replaced'}, ['metadata.' + KEY]),
    ({KEY: {'vim': 'replaced'}}, ['metadata.%s.vim' % KEY]),
    ({KEY: {'vim': {'id': 'k8s-vim-id'}}}, []),  # the same value
    ({KEY: {'params': {'master_node': copy.deepcopy(
        STATE['params']['master_node'])}}}, []),
    # null removes a key in a merge patch: the saved state itself holds
    # one (a withheld proxy URL), so sending it back would change it.
    ({KEY: copy.deepcopy(STATE)},
     ['metadata.%s.params.proxy.http_proxy' % KEY]),
    ({KEY: {'absent': None}}, []),  # removes nothing
    ({'other': None, 'note': 'x'}, []),
    ({}, []),
])
def test_metadata_patch(patch, refused):
    request = {'metadata': patch, 'vnfInstanceName': 'renamed'}
    if not refused:
        v2_guards.check_metadata_patch(request, instance(other={'o': 1}))
        return
    with pytest.raises(exceptions.RequestRefused) as raised:
        v2_guards.check_metadata_patch(request, instance(other={'o': 1}))
    assert [path for path, _ in raised.value.problems] == refused


@pytest.mark.parametrize('request_body', [
    {'vnfInstanceName': 'renamed'},  # no metadata
    {'metadata': {KEY: STATE}},  # puts an erased state back
    {'metadata': {KEY: None}},
])
def test_a_patch_of_an_instance_without_state_goes_through(request_body):
    v2_guards.check_metadata_patch(request_body, instance(state=None))


@pytest.mark.parametrize('target, patch, merged', [
    ({'a': 1, 'b': {'c': 2}}, {'b': {'c': None, 'd': 3}},
     {'a': 1, 'b': {'d': 3}}),
    ({'a': 1}, {'a': None, 'b': [1]}, {'b': [1]}),
    ({'a': 1}, 'x', 'x'),
    ('x', {'a': {'b': None}}, {'a': {}}),
])
def test_merge_patch_as_tacker_applies_it(target, patch, merged):
    assert v2_guards.merge_patch(target, patch) == merged


# -- a hook that finds the state gone ---------------------------------------

@pytest.mark.parametrize('operation, state, fails', [
    ('scale_start', None, True), ('scale_end', None, True),
    ('heal_start', None, True), ('heal_end', None, True),
    ('terminate_start', None, True), ('terminate_end', None, True),
    ('change_external_connectivity_start', None, True),
    ('change_current_package_start', None, True),
    ('modify_information_start', None, False),
    ('instantiate_end', None, False),
    ('instantiate_rollback_start', None, False),
    ('scale_end', STATE, False),
    # Saved with the features off: the key is there.
    ('terminate_start', {'contractVersion': 2}, False),
])
def test_check_state_kept(operation, state, fails):
    inst = instance(state=state)
    if not fails:
        v2_guards.check_state_kept(operation, inst)
        return
    with pytest.raises(exceptions.MgmtDriverError) as raised:
        v2_guards.check_state_kept(operation, inst)
    assert 'metadata.' + KEY in str(raised.value)
    assert v2.INSTANCE_ID in str(raised.value)


# -- change_external_connectivity and change_current_package ----------------

def ext_link(*cps, link_id='ext-vl-1'):
    """An ExtVirtualLinkData as a v2 request gives it."""
    return {'id': link_id, 'resourceId': 'net-1',
            'extCps': [{'cpdId': cp, 'cpConfig': {'cfg1': {
                'cpProtocolData': [{'layerProtocol': 'IP_OVER_ETHERNET',
                                    'ipOverEthernet': {'ipAddresses': [
                                        {'type': 'IPV4',
                                         'numDynamicAddresses': 1}]}}]}}}
                       for cp in cps]}


def package_change(vdus, links=()):
    return {'vnfdId': 'new-vnfd', 'extVirtualLinks': list(links),
            'additionalParams': {
                'upgrade_type': 'RollingUpdate',
                'vdu_params': [{'vdu_id': vdu, 'old_vnfc_param': {},
                                'new_vnfc_param': {}} for vdu in vdus]}}


def test_touched_cps_and_replaced_vdus_name_their_request_paths():
    request = package_change(['workerNode', 'probe'], [
        ext_link('probe_CP'), ext_link('masterNode_CP1', 'workerNode_CP2')])
    assert v2_guards.touched_cps(request) == [
        ('extVirtualLinks[0].extCps[0].cpdId', 'probe_CP'),
        ('extVirtualLinks[1].extCps[0].cpdId', 'masterNode_CP1'),
        ('extVirtualLinks[1].extCps[1].cpdId', 'workerNode_CP2')]
    assert v2_guards.replaced_vdus(request) == [
        ('additionalParams.vdu_params[0].vdu_id', 'workerNode'),
        ('additionalParams.vdu_params[1].vdu_id', 'probe')]
    assert v2_guards.touched_cps({}) == []
    assert v2_guards.replaced_vdus({'additionalParams': {
        'vdu_params': 'x'}}) == []


@pytest.mark.parametrize('operation, request_body, state, refused', [
    ('change_external_connectivity_start',
     {'extVirtualLinks': [ext_link('workerNode_CP2')]}, STATE,
     ['extVirtualLinks[0].extCps[0].cpdId']),
    ('change_external_connectivity_start',
     {'extVirtualLinks': [ext_link('probe_CP')]}, STATE, []),
    ('change_external_connectivity_start',
     {'extVirtualLinks': [ext_link('workerNode_CP2')]},
     {'contractVersion': 2}, []),  # the features are off
    ('change_current_package_start', package_change(['masterNode']),
     STATE, ['additionalParams.vdu_params[0].vdu_id']),
    ('change_current_package_start',
     package_change(['probe'], [ext_link('storage_server_CP')]), STATE,
     ['extVirtualLinks[0].extCps[0].cpdId']),
    ('change_current_package_start', package_change([]), STATE, []),
    ('change_current_package_start', package_change(['workerNode']),
     {'contractVersion': 2}, []),
])
def test_guarded_operations(operation, request_body, state, refused):
    inst = instance(state=state)
    if not refused:
        v2_guards.check(operation, request_body, inst)
        return
    with pytest.raises(exceptions.RequestRefused) as raised:
        v2_guards.check(operation, request_body, inst)
    assert [path for path, _ in raised.value.problems] == refused


# -- through the door -------------------------------------------------------

def never_built(script_dict, state):
    raise AssertionError('a guard hook needs no driver')


def run(operation, request, inst):
    progress = {}
    result = v2_hook.run(v2.script_dict(operation, request, inst), [],
                         progress, driver_factory=never_built)
    return result, progress


@pytest.mark.parametrize('operation, request_body', [
    ('modify_information_start', {'metadata': {KEY: None}}),
    ('change_external_connectivity_start',
     {'extVirtualLinks': [ext_link('masterNode_CP1')]}),
    ('change_current_package_start', package_change(['workerNode'])),
])
def test_the_door_refuses_before_anything_runs(operation, request_body):
    progress = {}
    with pytest.raises(exceptions.RequestRefused) as raised:
        v2_hook.run(v2.script_dict(operation, request_body, instance()), [],
                    progress, driver_factory=never_built)
    assert progress == {}
    found = v2_failure.failure(operation, raised.value)
    assert v2_failure.error_line(found).endswith('nothing was changed')
    assert v2_failure.retry_note(operation, raised.value, []).startswith(
        'a retry sends this request again')


def test_a_guard_that_lets_the_request_through_changes_nothing():
    result, progress = run('modify_information_start',
                           {'metadata': {'note': 'x'}}, instance())
    assert result == {}
    assert progress == {'done': ['modify_information_start']}


def test_a_hook_without_the_state_fails_before_any_step():
    with pytest.raises(exceptions.MgmtDriverError, match=KEY):
        run('scale_end', dict(additionalParams=v2.logins(),
                              type='SCALE_OUT', aspectId='worker_instance'),
            instance(state=None))
