"""Realistic Tacker v2 script dicts (the shapes of VnfInstanceV2,
GrantRequestV1 and the v2 request bodies, as ``to_dict`` gives them)."""

import copy

INSTANCE_ID = '9b0cc5c6-6e59-4d4c-9a44-7d1f4c0f2f3a'
STACK_ID = '2a9f1a84-52b6-4bb8-9c0c-5a7f1b0c1d2e'
STACK_NAME = 'vnf-' + INSTANCE_ID
OPENSTACK_VIM_ID = '8d8373fe-6977-49ff-83ac-7756572ed186'
PASSWORD = 'nodes-Secret-1'
STORAGE_PASSWORD = 'storage-Secret-2'
VIM_PASSWORD = 'vim-Secret-3'

# (vnfcResourceInfo id = Nova server id, VDU, CP, member stack or None,
# the member's resource name in its scaling group, which Heat keeps when
# a heal replaces the member with a new stack)
VNFCS = (
    ('11111111-1111-4111-8111-111111111111', 'masterNode', 'masterNode_CP1',
     'aaaaaaaa-0000-4000-8000-000000000001', 'q3zmw2a1'),
    ('22222222-2222-4222-8222-222222222222', 'workerNode', 'workerNode_CP2',
     'bbbbbbbb-0000-4000-8000-000000000001', 'x7kd0b2c'),
    ('33333333-3333-4333-8333-333333333333', 'workerNode', 'workerNode_CP2',
     'bbbbbbbb-0000-4000-8000-000000000002', 'p0lq4d9e'),
    ('44444444-4444-4444-8444-444444444444', 'storage_server',
     'storage_server_CP', None, None),
)


def install_params():
    login = {'username': 'ubuntu', 'password': PASSWORD}
    return {
        'script_path': 'Scripts/install_k8s_cluster.sh',
        'vim_name': 'kubernetes_vim',
        'master_node': dict(login, aspect_id='master_instance',
                            ssh_cp_name='masterNode_CP1',
                            nic_cp_name='masterNode_CP1',
                            pod_cidr='192.168.0.0/16',
                            cluster_cidr='10.199.187.0/24'),
        'worker_node': dict(login, aspect_id='worker_instance',
                            ssh_cp_name='workerNode_CP2',
                            nic_cp_name='workerNode_CP2'),
        'proxy': {'http_proxy': PROXY_URL,
                  'no_proxy': 'example.org'},
        'storage_server': {
            'ssh_cp_name': 'storage_server_CP',
            'nic_cp_name': 'storage_server_CP',
            'username': 'ubuntu', 'password': STORAGE_PASSWORD,
            'cinder_volume_setup_params': [
                {'volume_resource_id': 'storage_server_volume',
                 'mount_to': '/volume'}],
            'nfs_server_setup_params': [
                {'export_dir': '/volume/nfs/pv1',
                 'export_to': '10.10.0.0/24'}]},
        'pv_registration_params': [
            {'pv_manifest_file_path': 'Files/kubernetes/nfs-pv1.yaml',
             'nfs_server_cp': 'storage_server_CP'}],
    }


def vnfc_resource_info(server_id, vdu, cp, member_stack, member_name):
    stack = ('%s-%s/%s' % (STACK_NAME, vdu, member_stack) if member_stack
             else '%s/%s' % (STACK_NAME, STACK_ID))
    metadata = {'creation_time': '2026-11-25T10:00:00Z', 'stack_id': stack}
    if member_stack:
        metadata.update(parent_stack_id='%s-%s/cccc' % (STACK_NAME, vdu),
                        parent_resource_name=member_name)
    return {
        'id': server_id, 'vduId': vdu,
        'computeResource': {'vimConnectionId': 'vim1',
                            'resourceId': server_id,
                            'vimLevelResourceType': 'OS::Nova::Server'},
        'vnfcCpInfo': [{'id': cp + '-' + server_id, 'cpdId': cp,
                        'vnfExtCpId': 'ext-' + cp}],
        'metadata': metadata,
    }


def vnf_instance(vnfcs=VNFCS, metadata=None, instantiated=True):
    inst = {
        'id': INSTANCE_ID,
        'vnfdId': 'b1bb0ce7-ebca-4fa7-95ed-4840d70a1177',
        'vnfProvider': 'Company', 'vnfProductName': 'Sample VNF',
        'vnfSoftwareVersion': '1.0', 'vnfdVersion': '1.0',
        'instantiationState': 'INSTANTIATED' if instantiated
        else 'NOT_INSTANTIATED',
        'vimConnectionInfo': {'vim1': {
            'vimId': OPENSTACK_VIM_ID,
            'vimType': 'ETSINFV.OPENSTACK_KEYSTONE.V_3',
            'interfaceInfo': {'endpoint': 'http://keystone:5000/v3',
                              'skipCertificateHostnameCheck': True,
                              'skipCertificateVerification': True},
            'accessInfo': {'username': 'nfv_user', 'password': VIM_PASSWORD,
                           'region': 'RegionOne', 'project': 'nfv',
                           'projectDomain': 'Default',
                           'userDomain': 'Default'}}},
        '_links': {'self': {'href': 'http://tacker/vnflcm/v2/'
                                    'vnf_instances/' + INSTANCE_ID}},
    }
    if metadata is not None:
        inst['metadata'] = metadata
    if instantiated:
        infos = [vnfc_resource_info(*vnfc) for vnfc in vnfcs]
        inst['instantiatedVnfInfo'] = {
            'flavourId': 'simple', 'vnfState': 'STARTED',
            'scaleStatus': [{'aspectId': 'master_instance', 'scaleLevel': 0},
                            {'aspectId': 'worker_instance',
                             'scaleLevel': 0}],
            'maxScaleLevels': [{'aspectId': 'master_instance',
                                'scaleLevel': 0},
                               {'aspectId': 'worker_instance',
                                'scaleLevel': 2}],
            'vnfcResourceInfo': infos,
            'vnfcInfo': [{'id': '%s-%s' % (info['vduId'], info['id']),
                          'vduId': info['vduId'],
                          'vnfcResourceInfoId': info['id'],
                          'vnfcState': 'STARTED'} for info in infos],
            'metadata': {'stack_id': STACK_ID, 'tenant': 'nfv'},
        }
    return inst


def vnfc_info_id(server_id):
    vdu = [vnfc[1] for vnfc in VNFCS if vnfc[0] == server_id][0]
    return '%s-%s' % (vdu, server_id)


def script_dict(operation, request, inst=None, grant_request=None,
                package_dir='/tmp/csar', data=None):
    return {
        'operation': operation,
        'request': copy.deepcopy(request),
        'vnf_instance': copy.deepcopy(inst or vnf_instance()),
        'grant_request': grant_request,
        'grant_response': None,
        'tmp_csar_dir': package_dir,
        'user_script_err_handling_data': data or {},
    }


def instantiate_request(params=None):
    return {'flavourId': 'simple',
            'additionalParams': {'k8s_cluster_installation_param':
                                 install_params() if params is None
                                 else params,
                                 'lcm-operation-user-data':
                                 './UserData/k8s_cluster_user_data.py'},
            'vimConnectionInfo': {'vim1': {
                'vimId': OPENSTACK_VIM_ID,
                'vimType': 'ETSINFV.OPENSTACK_KEYSTONE.V_3'}}}


PROXY_URL = 'http://user:proxy-Secret@proxy:3128'


def logins():
    """The logins and the credentialed proxy a later v2 request gives
    again."""
    return {'k8s_cluster_installation_param': {
        'proxy': {'http_proxy': PROXY_URL},
        'master_node': {'username': 'ubuntu', 'password': PASSWORD},
        'worker_node': {'username': 'ubuntu', 'password': PASSWORD},
        'storage_server': {'username': 'ubuntu',
                           'password': STORAGE_PASSWORD}}}


def grant_request(operation, removed_servers=()):
    return {
        'vnfInstanceId': INSTANCE_ID, 'vnfLcmOpOccId': 'op-1',
        'vnfdId': 'b1bb0ce7-ebca-4fa7-95ed-4840d70a1177',
        'operation': operation, 'isAutomaticInvocation': False,
        'removeResources': [
            {'id': 'rm-%d' % n, 'type': 'COMPUTE',
             'resourceTemplateId': 'workerNode',
             'resource': {'vimConnectionId': 'vim1', 'resourceId': server,
                          'vimLevelResourceType': 'OS::Nova::Server'}}
            for n, server in enumerate(removed_servers)],
        '_links': {'vnfLcmOpOcc': {'href': 'x'},
                   'vnfInstance': {'href': 'y'}},
    }


def healed(index, new_server, new_stack=None):
    """VNFCS after a heal of VNFCS[index]: a new server and, in a scaling
    group, a new member stack under the same member name."""
    server, vdu, cp, stack, name = VNFCS[index]
    return VNFCS[:index] + ((new_server, vdu, cp, new_stack or stack,
                             name),) + VNFCS[index + 1:]
