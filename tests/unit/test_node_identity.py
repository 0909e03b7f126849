"""Which Node is a VM's, as tables: an address two Nodes report, and a
Node whose name is not the VM's own host name, are refused. No host."""

import json

import pytest

from kubernetes_mgmt_pv.cluster import cluster
from kubernetes_mgmt_pv.cluster import node_identity
from kubernetes_mgmt_pv.cluster import upgrade_plan
from kubernetes_mgmt_pv import exceptions
from kubernetes_mgmt_pv.openstack import vnf_topology
from kubernetes_mgmt_pv.request import param_model

ACCESS = param_model.NodeAccess('cp', 'cp', 'ubuntu', 'secret')
W1 = vnf_topology.Node('worker', 'w1', '10.0.0.21', '10.0.0.21', 'cp', None,
                       ACCESS)
# Reached at a floating IP: both addresses are named.
W2 = vnf_topology.Node('worker', 'w2', '172.24.4.22', '10.0.0.22', 'cp',
                       None, ACCESS)


def listing(*nodes):
    """kubectl get nodes -o json of (name, InternalIP) Nodes."""
    return json.dumps({'items': [
        {'metadata': {'name': name},
         'status': {'addresses': [{'type': 'Hostname', 'address': name}] + (
             [{'type': 'InternalIP', 'address': ip}] if ip else []),
             'conditions': [{'type': 'Ready', 'status': 'True'}],
             'nodeInfo': {'kubeletVersion': 'v1.35.4'}}}
        for name, ip in nodes]})


# (Nodes as (name, InternalIP), the refusal's words; None: accepted)
ADDRESSES = {
    'every Node at its own address': (
        [('m1', '10.0.0.11'), ('w1', '10.0.0.21'), ('w2', '10.0.0.22')],
        None),
    'Nodes without an InternalIP do not clash': (
        [('m1', '10.0.0.11'), ('w1', None), ('w2', None)], None),
    'a Worker reports another\'s address': (
        [('m1', '10.0.0.11'), ('w1', '10.0.0.21'), ('w2', '10.0.0.21')],
        ["Nodes w1 and w2 report the same InternalIP '10.0.0.21'"]),
    'three Nodes at one address, two at another': (
        [('m1', '10.0.0.11'), ('w1', '10.0.0.11'), ('x', '10.0.0.11'),
         ('w2', '10.0.0.22'), ('w3', '10.0.0.22')],
        ["Nodes m1 and w1 and x report the same InternalIP '10.0.0.11'",
         "Nodes w2 and w3 report the same InternalIP '10.0.0.22'"]),
    'a kubelet\'s text is shown quoted, on one line': (
        [('w1', '10.0.0.21\nINFO forged'), ('w2', '10.0.0.21\nINFO forged')],
        ["Nodes w1 and w2 report the same InternalIP "
         "'10.0.0.21\\nINFO forged'"]),
}


@pytest.mark.parametrize('nodes, refusal', list(ADDRESSES.values()),
                         ids=list(ADDRESSES))
@pytest.mark.parametrize('parser, accepted', [
    (cluster.parse_api_nodes, lambda nodes: dict(nodes)),
    (upgrade_plan.parse_nodes,
     lambda nodes: {ip: name for name, ip in nodes}),
], ids=['cluster', 'upgrade'])
def test_an_address_two_nodes_report_is_refused(parser, accepted, nodes,
                                                refusal):
    if refusal is None:
        parsed = parser(listing(*nodes))
        assert {key: getattr(value, 'name', value)
                for key, value in parsed.items()} == accepted(nodes)
        return
    with pytest.raises(exceptions.ClusterInstallError) as caught:
        parser(listing(*nodes))
    message = str(caught.value)
    for words in refusal:
        assert words in message
    assert '\n' not in message
    assert message.endswith('nothing was changed')


# (VM, Node name at its address, the VM's own host name, refusal words)
OWN = {
    'the Node of its host name': (W1, 'w1', 'w1', None),
    'kubelet registers the host name lower-cased': (W1, 'w1', 'W1', None),
    'another name': (W1, 'w2', 'w1',
                     "VM 10.0.0.21 reports host name 'w1', but Node w2 "
                     "reports its address"),
    'the InternalIP is named when it is not the SSH address': (
        W2, 'w1', 'w2', "VM 172.24.4.22 (InternalIP 10.0.0.22) reports host "
        "name 'w2', but Node w1 reports its address"),
    'no host name read': (W1, 'w1', None,
                          'VM 10.0.0.21 reports host name none, but Node w1'),
    'a host name of several lines': (
        W1, 'w1', 'w1\nINFO forged',
        "VM 10.0.0.21 reports host name 'w1\\nINFO forged', but Node w1"),
}


@pytest.mark.parametrize('node, name, hostname, refusal',
                         list(OWN.values()), ids=list(OWN))
def test_a_node_must_be_named_by_its_vm(node, name, hostname, refusal):
    if refusal is None:
        assert node_identity.own_node_refusal(node, name, hostname) is None
        node_identity.check_own_node(node, name, hostname)
        return
    assert refusal in node_identity.own_node_refusal(node, name, hostname)
    with pytest.raises(exceptions.ClusterInstallError) as caught:
        node_identity.check_own_node(node, name, hostname)
    assert refusal in str(caught.value)
    assert '\n' not in str(caught.value)


# (Node name at W1's address, {address: host name of another VM}, refusal)
TAKEN = {
    'no other VM names it': ('w1', {'10.0.0.22': 'w2'}, None),
    'another VM names it': (
        'w2', {'10.0.0.11': 'm1', '10.0.0.22': 'W2'},
        "Node w2 reports the address of VM 10.0.0.21, but it is the Node of "
        "VM 10.0.0.22 (host name 'W2')"),
    'the VM itself is not another': ('w1', {'10.0.0.21': 'w1'}, None),
    'a Node of no VM of the VNF': ('outside', {'10.0.0.22': 'w2'}, None),
}


@pytest.mark.parametrize('name, others, refusal', list(TAKEN.values()),
                         ids=list(TAKEN))
def test_a_node_another_vm_names_is_not_taken(name, others, refusal):
    if refusal is None:
        node_identity.check_not_taken(W1, name, others)
        return
    with pytest.raises(exceptions.ClusterInstallError) as caught:
        node_identity.check_not_taken(W1, name, others)
    assert refusal in str(caught.value)
    assert str(caught.value).endswith('nothing was changed')


def test_the_upgrade_reads_the_host_name():
    facts = upgrade_plan.parse_host_facts(
        'hostname worker1\nkubeadm v1.35.4\napiserver \n')
    assert facts.hostname == 'worker1'
    assert facts.kubeadm == (1, 35, 4)
    # A name of several words is none: it names no Node.
    assert upgrade_plan.parse_host_facts(
        'hostname w1 mirror.internal\n').hostname is None


def host(hostname):
    return upgrade_plan.HostFacts((1, 35, 4), {}, None, hostname)


# ({InternalIP: Node name}, {VM: its host name}, the refused VMs): the
# upgrade drains, uncordons and waits on the Node at a VM's address only
# when the VM names it.
UPGRADE = {
    'every Node named by its VM': (
        {'10.0.0.21': 'w1', '10.0.0.22': 'w2'}, {W1: 'w1', W2: 'w2'}, []),
    'a Node the cluster lacks is plan_upgrade\'s refusal': (
        {'10.0.0.21': 'w1'}, {W1: 'w1', W2: 'w2'}, []),
    'another VM\'s Node at its address': (
        {'10.0.0.21': 'w2', '10.0.0.22': 'w1'}, {W1: 'w1', W2: 'w2'},
        [W1.address, W2.address]),
    'no host name read': (
        {'10.0.0.21': 'w1', '10.0.0.22': 'w2'}, {W1: None, W2: 'w2'},
        [W1.address]),
}


@pytest.mark.parametrize('api, hostnames, refused', list(UPGRADE.values()),
                         ids=list(UPGRADE))
def test_the_upgrade_acts_only_on_nodes_their_vms_name(api, hostnames,
                                                       refused):
    api_nodes = {ip: upgrade_plan.ApiNode(name, ip, True, (1, 35, 4))
                 for ip, name in api.items()}
    problems = upgrade_plan.identity_refusals(
        [W1, W2], api_nodes,
        {node.address: host(name) for node, name in hostnames.items()})
    assert [address for address, _ in problems] == refused
    for address, reason in problems:
        node = W1 if address == W1.address else W2
        assert 'Node %s reports its address' % api[node.fixed_ip] in reason
    if problems:
        error = upgrade_plan.refusal_error(problems, '10.0.0.11')
        assert sorted(error.failures) == sorted(refused)
        assert 'nothing was changed' in str(error)
