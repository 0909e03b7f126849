"""Host names of the Masters and Workers before kubeadm runs, as a table:
no host, no Heat."""

import pytest

from kubernetes_mgmt_pv.cluster import cluster
from kubernetes_mgmt_pv import exceptions
from kubernetes_mgmt_pv.openstack import vnf_topology
from kubernetes_mgmt_pv.request import param_model

ACCESS = param_model.NodeAccess('cp', 'cp', 'ubuntu', 'secret')
M1, M2 = (vnf_topology.Node('master', ip, ip, ip, 'cp', None, ACCESS)
          for ip in ('10.0.0.11', '10.0.0.12'))
W1, W2, W3 = (vnf_topology.Node('worker', ip, ip, ip, 'cp', None, ACCESS)
              for ip in ('10.0.0.21', '10.0.0.22', '10.0.1.21'))


@pytest.mark.parametrize('role, address, expected', [
    ('worker', '10.0.0.21', 'worker-10-0-0-21'),
    ('master', '192.168.100.5', 'master-192-168-100-5'),
    ('worker', 'fd00::15',
     'worker-fd00-0000-0000-0000-0000-0000-0000-0015'),
])
def test_address_host_name(role, address, expected):
    assert cluster.address_host_name(role, address) == expected


# (nodes, {node: (current host name, joined)}, API Nodes, expected names)
CASES = {
    'unique cloud-init names are kept': (
        [M1, W1, W2], {M1: ('master1',), W1: ('worker1',), W2: ('worker2',)},
        {}, ['master1', 'worker1', 'worker2']),
    'a group\'s shared Nova name: every holder named by its address': (
        [M1, W1, W2, W3],
        {M1: ('masternode',), W1: ('workernode',), W2: ('workernode',),
         W3: ('workernode',)},
        {}, ['masternode', 'worker-10-0-0-21', 'worker-10-0-0-22',
             'worker-10-0-1-21']),
    'names differing only in case collide (Node names are lower-case)': (
        [W1, W2], {W1: ('Worker',), W2: ('worker',)},
        {}, ['worker-10-0-0-21', 'worker-10-0-0-22']),
    'a cloud-init name that is not one DNS label': (
        [W1], {W1: ('worker.novalocal',)}, {}, ['worker-10-0-0-21']),
    'a re-run: members keep their Nodes\' names': (
        [M1, W1, W2],
        {M1: ('masternode', True), W1: ('worker-10-0-0-21', True),
         W2: ('worker-10-0-0-22', True)},
        {'masternode': '10.0.0.11', 'worker-10-0-0-21': '10.0.0.21',
         'worker-10-0-0-22': '10.0.0.22'},
        ['masternode', 'worker-10-0-0-21', 'worker-10-0-0-22']),
    'scale-out: a new VM may not take a member\'s name': (
        [M1, W1, W2],
        {M1: ('masternode', True), W1: ('workernode', True),
         W2: ('workernode',)},
        {'masternode': '10.0.0.11', 'workernode': '10.0.0.21'},
        ['masternode', 'workernode', 'worker-10-0-0-22']),
    'heal: the re-created VM at the old port after its Node was removed': (
        [M1, W1, W2],
        {M1: ('masternode', True), W1: ('workernode',),
         W2: ('worker-10-0-0-22', True)},
        {'masternode': '10.0.0.11', 'worker-10-0-0-22': '10.0.0.22'},
        ['masternode', 'workernode', 'worker-10-0-0-22']),
    'heal: a new VM never takes the name of a member at another address': (
        [M1, W1, W2],
        {M1: ('masternode', True), W1: ('worker-10-0-0-22',),
         W2: ('worker-10-0-0-22', True)},
        {'masternode': '10.0.0.11', 'worker-10-0-0-22': '10.0.0.22'},
        ['masternode', 'worker-10-0-0-21', 'worker-10-0-0-22']),
    'a VM joined to a cluster that does not know it is named anew': (
        [M1, W1, W2], {M1: ('masternode', True), W1: ('workernode', True),
                       W2: ('workernode',)},
        {'masternode': '10.0.0.11'},
        ['masternode', 'worker-10-0-0-21', 'worker-10-0-0-22']),
}


def gathered(current):
    return {node.address: cluster.NodeFacts(hostname=value[0],
                                            joined=value[1:] == (True,))
            for node, value in current.items()}


@pytest.mark.parametrize('nodes, current, api_nodes, expected',
                         list(CASES.values()), ids=list(CASES))
def test_host_names(nodes, current, api_nodes, expected):
    facts = gathered(current)
    names = cluster.host_names(nodes, facts, api_nodes)
    assert [names[node.address] for node in nodes] == expected
    named = [(node, cluster.NodeFacts(names[node.address], False))
             for node in nodes]
    cluster.check_node_names(named)  # valid and unique: does not raise


MEMBERS = {M1: ('masternode', True), W1: ('worker1', True),
           W2: ('worker2', True)}

# (API Nodes, the Node named in the refusal, the VM's host name): a joined
# VM is never named after a Node its own host name does not name.
REFUSED = {
    'another Worker\'s Node reports the address of a member whose Node is '
    'gone': ({'masternode': '10.0.0.11', 'worker2': '10.0.0.21'},
             'worker2', 'worker1'),
    'two Nodes report its address, the other VM\'s listed first': (
        {'masternode': '10.0.0.11', 'a-worker': '10.0.0.21',
         'worker1': '10.0.0.21', 'worker2': '10.0.0.22'},
        'a-worker', 'worker1'),
    'a member whose host name was changed since it joined': (
        {'masternode': '10.0.0.11', 'worker-10-0-0-21': '10.0.0.21'},
        'worker-10-0-0-21', 'worker1'),
}


@pytest.mark.parametrize('api_nodes, node_name, hostname',
                         list(REFUSED.values()), ids=list(REFUSED))
def test_a_member_is_not_renamed_after_a_node_it_does_not_name(
        api_nodes, node_name, hostname):
    with pytest.raises(exceptions.ClusterInstallError) as caught:
        cluster.host_names([M1, W1, W2], gathered(MEMBERS), api_nodes)
    message = str(caught.value)
    assert 'VM %s reports host name %r, but Node %s reports its address' % (
        W1.address, hostname, node_name) in message
    assert message.endswith('nothing was changed')
