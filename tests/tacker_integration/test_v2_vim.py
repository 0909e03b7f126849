"""The v2 door's Kubernetes VIM through Tacker's real NfvoPlugin: put in
the project of the instance's OpenStack VIM, resolved by Tacker v2's own
vim_utils as a CNF instantiate request with its vimId resolves it, and
deleted again without any vimConnectionInfo entry of the instance."""

import types
import uuid

import pytest

pytest.importorskip('tacker.sol_refactored')

from tacker.db.db_sqlalchemy import models as db_models  # noqa: E402
from tacker.sol_refactored.common import lcm_op_occ_utils as lcmocc_utils  # noqa: E402,E501
from tacker.sol_refactored.common import vim_utils  # noqa: E402
from tacker.sol_refactored import objects as sol_objects  # noqa: E402

from kubernetes_mgmt_pv.doors import tacker_compat  # noqa: E402
from kubernetes_mgmt_pv.doors import v2_hook  # noqa: E402
from kubernetes_mgmt_pv.doors import v2_mapping  # noqa: E402
from kubernetes_mgmt_pv import exceptions  # noqa: E402
from tests.tacker_integration import test_vim_registration as v1  # noqa: E402,E501
from tests.unit import v2_dicts as v2  # noqa: E402

NAME = 'kubernetes_vim'


@pytest.fixture(autouse=True)
def v2_objects():
    """Tacker v2's objects registered, as its server and conductor register
    them at start: each test resolves VIMs as they do, whichever test of
    the module runs first (or alone)."""
    sol_objects.register_all()


@pytest.fixture
def openstack_vim_id(hook_context, kube_api, credentials):
    """A VIM of the registry in PROJECT standing in for the OpenStack VIM
    of the instance: the door reads only its project."""
    token, ca_pem = credentials
    return tacker_compat.register_kubernetes_vim(
        hook_context(), types.SimpleNamespace(id='openstack-vnf'),
        'openstack_stand_in', kube_api.url, token, ca_pem, record=False)


def door(openstack_vim_id, operation='instantiate_end', state=None):
    inst = v2.vnf_instance()
    inst['vimConnectionInfo']['vim1']['vimId'] = openstack_vim_id
    driver = v2_hook.V2Driver(v2.script_dict(operation, {}, inst),
                              state or {})
    return driver, v2_mapping.instance(inst, None)


def test_registered_in_the_project_and_resolved_as_v2_resolves_it(
        hook_context, kube_api, credentials, openstack_vim_id, tacker_db):
    token, ca_pem = credentials
    driver, inst = door(openstack_vim_id)
    access = types.SimpleNamespace(url=kube_api.url, bearer_token=token,
                                   ca_cert=ca_pem)
    vim_id = driver.register_vim(None, inst, NAME, access)
    assert driver.registered == {'id': vim_id, 'name': NAME,
                                 'endpoint': kube_api.url}
    vim = v1.get_vim(hook_context, vim_id)
    assert (vim['tenant_id'], vim['type']) == (v1.PROJECT, 'kubernetes')

    # A CNF instantiate request naming {"vimId": vim_id} is completed by
    # Tacker v2 from the registry, with the user's own context.
    info = vim_utils.get_vim(hook_context(), vim_id)
    assert info.vimType == 'ETSINFV.KUBERNETES.V_1'
    assert info.interfaceInfo['endpoint'] == kube_api.url
    assert info.interfaceInfo['ssl_ca_cert'] == ca_pem
    assert info.accessInfo['bearer_token'] == token

    # terminate_start: found by name and the instance it was made for.
    driver, inst = door(openstack_vim_id, 'terminate_start')
    assert driver.vim_users(None, inst, NAME) == {}
    assert driver.delete_vim(None, inst, NAME) is True
    assert [row['id'] for row in v1.live_vims(tacker_db)] == [
        openstack_vim_id]


# -- v2 VNF instances on the Kubernetes VIM -----------------------------------
# NfvoPlugin counts only v1's "vnf" rows as users of a VIM; a v2 CNF keeps
# its VIM in its own vimConnectionInfo (by vimId, or inline).

def package(context, project=v1.PROJECT):
    """The id of the VNFD of an onboarded VNF package of ``project``, as
    Tacker's package rows keep it: a v2 instance's project is its
    package's."""
    package_id, vnfd_id = str(uuid.uuid4()), str(uuid.uuid4())
    context.session.add(db_models.VnfPackage(
        id=package_id, tenant_id=project, onboarding_state='ONBOARDED',
        operational_state='ENABLED', usage_state='IN_USE'))
    context.session.add(db_models.VnfPackageVnfd(
        id=str(uuid.uuid4()), package_uuid=package_id, vnfd_id=vnfd_id,
        vnf_provider='Company', vnf_product_name='Sample CNF',
        vnf_software_version='1.0', vnfd_version='1.0'))
    context.session.commit()
    return vnfd_id


def v2_cnf(context, vim_connection_info, state='INSTANTIATED',
           project=v1.PROJECT):
    """A v2 VNF instance of ``project`` saved through Tacker's v2 objects;
    its id."""
    inst = sol_objects.VnfInstanceV2(
        id=str(uuid.uuid4()), vnfdId=package(context, project),
        vnfProvider='Company', vnfProductName='Sample CNF',
        vnfSoftwareVersion='1.0', vnfdVersion='1.0',
        instantiationState=state,
        vimConnectionInfo={
            key: sol_objects.VimConnectionInfo.from_dict(entry)
            for key, entry in vim_connection_info.items()})
    inst.create(context)
    return inst.id


def v2_terminated(context, inst_id):
    """As v2's terminate leaves an instance: NOT_INSTANTIATED, its
    vimConnectionInfo emptied."""
    inst = sol_objects.VnfInstanceV2.get_by_id(context, inst_id)
    inst.instantiationState = 'NOT_INSTANTIATED'
    inst.vimConnectionInfo = {}
    inst.update(context)


def inline(endpoint, token):
    return {'vim1': {'vimType': 'ETSINFV.KUBERNETES.V_1',
                     'interfaceInfo': {'endpoint': endpoint},
                     'accessInfo': {'bearer_token': token}}}


def registered_vim(openstack_vim_id, kube_api, credentials):
    token, ca_pem = credentials
    driver, inst = door(openstack_vim_id)
    return driver.register_vim(None, inst, NAME, types.SimpleNamespace(
        url=kube_api.url, bearer_token=token, ca_cert=ca_pem))


def test_a_later_hook_learns_the_token_of_the_vim_it_saved(
        kube_api, credentials, openstack_vim_id):
    """Its secret from the first remote step on, read from the registry
    in the project of the instance's OpenStack VIM."""
    token, _ = credentials
    vim_id = registered_vim(openstack_vim_id, kube_api, credentials)
    driver, inst = door(openstack_vim_id, 'scale_start', {'vim': {
        'id': vim_id, 'name': NAME, 'endpoint': kube_api.url}})
    assert driver.registered_vim_tokens(None, inst) == [token]


def test_v2_cnfs_by_vim_id_or_inline_endpoint_keep_the_vim(
        hook_context, kube_api, credentials, openstack_vim_id, tacker_db):
    vim_id = registered_vim(openstack_vim_id, kube_api, credentials)
    # As Tacker v2 stores a request naming {"vimId": ...}: completed from
    # the registry; and one given inline, with the API server's URL.
    by_id = v2_cnf(hook_context(), {'vim1': vim_utils.get_vim(
        hook_context(), vim_id).to_dict()})
    by_url = v2_cnf(hook_context(), inline(kube_api.url + '/',
                                           credentials[0]))
    v2_cnf(hook_context(), inline('https://192.0.2.1:6443', 'x'))
    v2_cnf(hook_context(), {}, state='NOT_INSTANTIATED')
    # Another project: its inline entry at the same address is a cluster
    # of its own private network; by vimId it is this VIM, unnamed.
    v2_cnf(hook_context(), inline(kube_api.url, 'y'),
           project=v1.OTHER_PROJECT)
    foreign = v2_cnf(hook_context(), {'vim1': {
        'vimId': vim_id, 'vimType': 'kubernetes'}}, project=v1.OTHER_PROJECT)
    one_foreign = '1 VNF instance(s) of another project'

    driver, inst = door(openstack_vim_id, 'terminate_start')
    assert driver.vim_users(None, inst, NAME) == {
        vim_id: sorted([by_id, by_url]) + [one_foreign]}
    with pytest.raises(exceptions.MgmtDriverError) as refused:
        door(openstack_vim_id, 'terminate_start')[0].delete_vim(
            None, inst, NAME)
    assert vim_id in str(refused.value)
    assert by_id in str(refused.value) and by_url in str(refused.value)
    assert one_foreign in str(refused.value)
    assert foreign not in str(refused.value)
    assert credentials[0] not in str(refused.value)
    assert vim_id in [row['id'] for row in v1.live_vims(tacker_db)]

    v2_terminated(hook_context(), foreign)
    v2_terminated(hook_context(), by_id)
    assert door(openstack_vim_id, 'terminate_start')[0].vim_users(
        None, inst, NAME) == {vim_id: [by_url]}
    v2_terminated(hook_context(), by_url)
    driver = door(openstack_vim_id, 'terminate_start')[0]
    assert driver.vim_users(None, inst, NAME) == {}
    assert driver.delete_vim(None, inst, NAME) is True
    assert vim_id not in [row['id'] for row in v1.live_vims(tacker_db)]


def test_a_cnf_instantiate_failed_midway_keeps_the_vim(
        hook_context, kube_api, credentials, openstack_vim_id):
    # v2 saves the instance's vimConnectionInfo only when the instantiate
    # completes: until it is rolled back or failed, the VIM is in the
    # operation's request, the CNF's resources on the cluster.
    vim_id = registered_vim(openstack_vim_id, kube_api, credentials)
    cnf_id = v2_cnf(hook_context(), {}, state='NOT_INSTANTIATED')
    occ = lcmocc_utils.new_lcmocc(
        cnf_id, 'INSTANTIATE', {'flavourId': 'simple',
                                'vimConnectionInfo': {'vim1': {
                                    'vimId': vim_id,
                                    'vimType': 'kubernetes'}}},
        op_state='FAILED_TEMP')
    occ.create(hook_context())
    driver, inst = door(openstack_vim_id, 'terminate_start')
    assert driver.vim_users(None, inst, NAME) == {vim_id: [cnf_id]}

    occ = sol_objects.VnfLcmOpOccV2.get_by_id(hook_context(), occ.id)
    occ.operationState = 'FAILED'
    occ.update(hook_context())
    driver, inst = door(openstack_vim_id, 'terminate_start')
    assert driver.vim_users(None, inst, NAME) == {}


def test_a_v2_cnf_keeps_the_vim_of_a_v1_cluster_vnf(
        hook_context, kube_api, credentials, tacker_db):
    # The VIM a v1 cluster VNF registered (in its vimConnectionInfo), a
    # v2 CNF on it: the v1 door refuses too.
    vnf_instance = v1.new_vnf_instance(hook_context())
    vim_id = v1.register(hook_context, vnf_instance, kube_api, credentials,
                         name=NAME)
    cnf_id = v2_cnf(hook_context(), {'vim1': {'vimId': vim_id,
                                              'vimType': 'kubernetes'}})
    instance = v1.reread(hook_context, vnf_instance)
    assert tacker_compat.kubernetes_vim_users(
        hook_context(), instance, NAME) == {vim_id: [cnf_id]}
    with pytest.raises(exceptions.MgmtDriverError) as refused:
        tacker_compat.delete_kubernetes_vim(hook_context(), instance, NAME)
    assert vim_id in str(refused.value) and cnf_id in str(refused.value)
    assert [row['id'] for row in v1.live_vims(tacker_db)] == [vim_id]
