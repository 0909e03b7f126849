"""Which address of a VM the driver logs in to and which one the cluster
uses: ssh_cp_name to log in (its floating IP first), nic_cp_name inside
the cluster. Heat is the Keystone/Heat HTTP fake with the real
heatclient; no host is contacted."""

import pytest

from kubernetes_mgmt_pv.openstack import heat
from kubernetes_mgmt_pv.openstack import vnf_topology
from kubernetes_mgmt_pv.request import param_model
from testbed import openstack_api
from tests.unit.test_params import sample

CLUSTER_CP, SSH_CP, FIP = 'cluster_CP', 'mgmt_CP', 'mgmt_FIP'


@pytest.fixture(scope='module')
def cloud():
    with openstack_api.FakeOpenStack() as fake:
        yield fake


def stack(cloud):
    """A Master and a Worker group member, each with a port on the cluster
    network (10.10.0.0/24), one on a management network (10.20.0.0/24)
    and a floating IP on the management port; a Storage server."""
    stack_id = cloud.add_stack('vnf-two-networks')
    cloud.add_server(stack_id, 'storage_server', server_id='storage')
    cloud.add_port(stack_id, 'storage_server_CP', ['10.20.0.4'],
                   device_id='storage')
    cloud.add_port(stack_id, 'storage_cluster_CP', ['10.10.0.4'],
                   device_id='storage')
    for aspect, octet in (('master_instance', 5), ('worker_instance', 21)):
        group = cloud.add_scaling_group(stack_id, aspect)
        member = cloud.add_group_member(group, name='m0')
        server = '%s-server' % aspect
        cloud.add_server(member, 'vdu', server_id=server)
        cloud.add_port(member, CLUSTER_CP, ['10.10.0.%d' % octet],
                       device_id=server)
        cloud.add_port(member, SSH_CP, ['10.20.0.%d' % octet],
                       device_id=server)
        cloud.add_floating_ip(member, FIP, '203.0.113.%d' % octet,
                              port_name=SSH_CP)
    return stack_id


@pytest.mark.parametrize('ssh_cp, nic_cp, login, inside', [
    (CLUSTER_CP, CLUSTER_CP, '10.10.0.%d', '10.10.0.%d'),
    (SSH_CP, CLUSTER_CP, '10.20.0.%d', '10.10.0.%d'),
    (FIP, CLUSTER_CP, '203.0.113.%d', '10.10.0.%d'),
    (SSH_CP, SSH_CP, '10.20.0.%d', '10.20.0.%d'),
    (FIP, FIP, '203.0.113.%d', '10.20.0.%d'),
])
def test_login_and_cluster_addresses(cloud, ssh_cp, nic_cp, login, inside):
    value = sample()
    root = value[param_model.ROOT]
    del root['pv_registration_params']
    for role in ('master_node', 'worker_node'):
        root[role].update(ssh_cp_name=ssh_cp, nic_cp_name=nic_cp)
    root['master_node'].pop('cluster_cp_name')
    # The Storage server's nic_cp_name names it in heal requests only.
    root['storage_server']['nic_cp_name'] = 'storage_cluster_CP'
    stack_id = stack(cloud)
    nodes = vnf_topology.Topology.resolve(heat.HeatStack(
        heat.build_heat_client(cloud.access_info()), stack_id),
        param_model.parse(value)).nodes
    assert [(n.role, n.address, n.fixed_ip) for n in nodes] == [
        ('storage', '10.20.0.4', '10.20.0.4'),
        ('master', login % 5, inside % 5),
        ('worker', login % 21, inside % 21)]
