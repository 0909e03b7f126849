"""The v2 door's Kubernetes VIM through Tacker's real NfvoPlugin: put in
the project of the instance's OpenStack VIM, resolved by Tacker v2's own
vim_utils as a CNF instantiate request with its vimId resolves it, and
deleted again without any vimConnectionInfo entry of the instance."""

import types

import pytest

pytest.importorskip('tacker.sol_refactored')

from tacker.sol_refactored.common import vim_utils  # noqa: E402
from tacker.sol_refactored import objects as sol_objects  # noqa: E402

from kubernetes_mgmt_pv.doors import tacker_compat  # noqa: E402
from kubernetes_mgmt_pv.doors import v2_hook  # noqa: E402
from kubernetes_mgmt_pv.doors import v2_mapping  # noqa: E402
from tests.tacker_integration import test_vim_registration as v1  # noqa: E402,E501
from tests.unit import v2_dicts as v2  # noqa: E402

NAME = 'kubernetes_vim'


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
    sol_objects.register_all()
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
