"""The Tacker v2 door end to end on the testbed: v2's dicts (as the
conductor pickles them) through the door's mapping and the shared
features, to real SSH hosts, the sample install script on the kubeadm
stand-ins, the Storage server and the PVs; then terminate_start deletes
the VIM while the VMs still exist."""

import pytest

from kubernetes_mgmt_pv.doors import v2_hook
from kubernetes_mgmt_pv.doors import v2_mapping
from testbed import virtual_vnf
from tests.functional.conftest import skip_without_testbed

VDUS = {virtual_vnf.MASTER_CP: 'masterNode',
        virtual_vnf.WORKER_CP: 'workerNode',
        virtual_vnf.STORAGE_CP: 'storage_server'}


@pytest.fixture
def simple():
    skip_without_testbed()
    with virtual_vnf.VirtualCluster(masters=1, workers=2, volumes=1,
                                    install_cluster=True) as virtual:
        yield virtual


def v2_instance(cluster, metadata=None):
    """The VnfInstanceV2 dict Tacker v2 would hand the script for the
    cluster's VMs (its Heat stack, VNFCs, OpenStack VIM)."""
    access = cluster.openstack.access_info()
    vnfcs = []
    for vnfc in cluster.vnfcs.values():
        stack = vnfc.member_stack_id or cluster.stack_id
        vnfcs.append({
            'id': vnfc.server_id, 'vduId': VDUS[vnfc.cp_name],
            'computeResource': {'resourceId': vnfc.server_id,
                                'vimLevelResourceType': 'OS::Nova::Server'},
            'vnfcCpInfo': [{'id': 'cp-' + vnfc.server_id,
                            'cpdId': vnfc.cp_name}],
            'metadata': {'stack_id': 'member/%s' % stack}})
    return {
        'id': cluster.instance_id, 'vnfdId': cluster.vnfd_id,
        'vimConnectionInfo': {'vim1': {
            'vimId': 'openstack-vim',
            'vimType': 'ETSINFV.OPENSTACK_KEYSTONE.V_3',
            'interfaceInfo': {'endpoint': access['auth_url'],
                              'skipCertificateVerification': True},
            'accessInfo': {'username': access['username'],
                           'password': access['password'],
                           'project': access['project_name'],
                           'projectDomain': access['project_domain_name'],
                           'userDomain': access['user_domain_name']}}},
        'instantiatedVnfInfo': {
            'flavourId': 'simple', 'vnfState': 'STARTED',
            'scaleStatus': [{'aspectId': virtual_vnf.MASTER_ASPECT,
                             'scaleLevel': 0},
                            {'aspectId': virtual_vnf.WORKER_ASPECT,
                             'scaleLevel': 0}],
            'vnfcResourceInfo': vnfcs,
            'vnfcInfo': [{'id': '%s-%s' % (v['vduId'], v['id']),
                          'vduId': v['vduId'], 'vnfcResourceInfoId': v['id'],
                          'vnfcState': 'STARTED'} for v in vnfcs],
            'metadata': {'stack_id': cluster.stack_id}},
        'metadata': metadata or {},
    }


def door_driver(cluster):
    """The v2 door's driver with the VIM registry answered by the cluster
    (the functional env has no Tacker database); the package directory
    and the OpenStack VIM come from the script dict, as in Tacker."""
    class Driver(v2_hook.V2Driver):
        def check_vim_registry(self):
            assert self.openstack_vim_id() == 'openstack-vim'

        def register_vim(self, context, vnf_instance, name, access):
            cluster.register_vim(name, access)
            self.registered = {'id': 'vim-' + name, 'name': name,
                               'endpoint': access.url}
            return self.registered['id']

        def delete_vim(self, context, vnf_instance, name):
            self.deleted = cluster.vims.pop(name, None) is not None
            return self.deleted

        def vim_users(self, context, vnf_instance, name):
            return {}
    return Driver


def run(cluster, operation, request, inst):
    script_dict = {
        'operation': operation, 'request': request, 'vnf_instance': inst,
        'grant_request': None, 'grant_response': None,
        'tmp_csar_dir': cluster.package_dir,
        'user_script_err_handling_data': {}}
    secrets, progress = [], {}
    result = v2_hook.run(script_dict, secrets, progress,
                         driver_factory=door_driver(cluster))
    return result


def test_instantiate_end_then_terminate_start(simple):
    params = simple.additional_params()
    result = run(simple, 'instantiate_end',
                 {'flavourId': 'simple', 'additionalParams': params},
                 v2_instance(simple))
    assert 'kubernetes_vim_test' in simple.vims
    ready = virtual_vnf.node_readiness(simple.host('master1'))
    assert len(ready) == 3 and set(ready.values()) == {'True'}
    volumes = virtual_vnf.persistent_volumes(simple.host('master1'))
    assert {name: v['status']['phase'] for name, v in volumes.items()} == {
        'nfs-pv1': 'Available', 'nfs-pv2': 'Available',
        'nfs-pv3': 'Available'}
    state = result['vnf_instance']['metadata'][v2_mapping.STATE_KEY]
    assert state['vim']['name'] == 'kubernetes_vim_test'
    saved = state['params']
    assert [role for role in ('master_node', 'worker_node', 'storage_server')
            if 'password' in saved[role]] == []
    assert saved['storage_server']['username'] == simple.testbed.username

    # terminate_start: no password in the request, the state from
    # metadata; the VIM goes while the VMs still exist.
    result = run(simple, 'terminate_start', {'terminationType': 'FORCEFUL'},
                 v2_instance(simple, result['vnf_instance']['metadata']))
    assert simple.vims == {}
    state = result['vnf_instance']['metadata'][v2_mapping.STATE_KEY]
    assert 'vim' not in state
