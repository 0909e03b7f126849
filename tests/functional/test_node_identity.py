"""A compromised Worker's kubelet makes its Node report another VM's
address (InternalIP), as any kubelet may for its own Node: the driver
neither renames the victim after that Node, nor points /etc/hosts at it,
nor drains or deletes the wrong Node. Scale-out and heal are refused
before any change, on real SSH hosts with the test API server. The tests
share one cluster (a Master and two Workers), in file order."""

import pytest

from kubernetes_mgmt_pv import exceptions
from testbed import virtual_vnf
from tests.functional.conftest import skip_without_testbed


@pytest.fixture(scope='module')
def k8s_cluster():
    skip_without_testbed()
    virtual_vnf.use_test_options()
    with virtual_vnf.VirtualCluster(masters=1, workers=2, volumes=1,
                                    install_cluster=True) as virtual:
        virtual.instantiate_end()
        yield virtual


def report_address(kube, name, address):
    """The Node ``name`` reports ``address`` as its InternalIP, as its
    kubelet posts its status."""
    kube.update_status('node', name, {'addresses': [
        {'type': 'InternalIP', 'address': address},
        {'type': 'Hostname', 'address': name}]})


def state(virtual, down=()):
    """What a refused hook must leave as it was: every running VM's
    /etc/hosts, host name and kubeadm runs, and every Node (its
    addresses, whether it is cordoned)."""
    vms = {host.name: (host.read_file('/etc/hosts'),
                       host.run('hostname').stdout,
                       virtual.kubeadm_calls(host.name))
           for host in virtual.nodes() if host.name not in down}
    nodes = {node['metadata']['name']: (
        node['status'].get('addresses'),
        bool(node.get('spec', {}).get('unschedulable')))
        for node in virtual.kube.nodes()}
    return vms, nodes


def refused(hook, *words):
    """Run ``hook``, which must be refused naming every one of ``words``."""
    with pytest.raises(exceptions.MgmtDriverError) as caught:
        hook()
    message = str(caught.value)
    for word in words:
        assert word in message, message
    assert 'nothing was changed' in message
    return message


def test_an_address_two_nodes_report_is_refused(k8s_cluster):
    """worker1's Node reports worker2's address: worker1 sorts first, so
    it was taken for worker2's Node."""
    virtual = k8s_cluster
    worker1, worker2 = virtual.host('worker1'), virtual.host('worker2')
    report_address(virtual.kube, 'worker1', worker2.ip)
    new = virtual.add_node('worker')
    before = state(virtual)

    refused(lambda: virtual.scale_end([new]),
            'Nodes worker1 and worker2 report the same InternalIP',
            repr(worker2.ip))
    assert state(virtual) == before
    refused(lambda: virtual.heal_start([virtual.vnfcs['worker2'].vnfc_id]),
            'Nodes worker1 and worker2 report the same InternalIP',
            repr(worker2.ip))
    assert state(virtual) == before

    # Once worker1's Node reports its own address again, the scale-out
    # goes through as ever.
    report_address(virtual.kube, 'worker1', worker1.ip)
    virtual.scale_end([new])
    readiness = virtual_vnf.node_readiness(virtual.host('master1'))
    assert readiness == dict.fromkeys(
        ['master1', 'worker1', 'worker2', 'worker3'], 'True')
    assert state(virtual)[0]['worker2'][1] == 'worker2\n'


def test_a_node_its_vm_does_not_name_is_left_alone(k8s_cluster):
    """worker2's Node is gone and worker1's reports worker2's address:
    the only Node there is not worker2's, whether worker2 answers (its
    host name says so) or is down (worker1 names that Node its own).
    worker3 joined in the test above."""
    virtual = k8s_cluster
    worker2 = virtual.host('worker2')
    virtual.kube.delete('node', 'worker2')
    report_address(virtual.kube, 'worker1', worker2.ip)
    new = virtual.add_node('worker')
    before = state(virtual)
    heal = [virtual.vnfcs['worker2'].vnfc_id]

    refused(lambda: virtual.scale_end([new]),
            "VM %s reports host name 'worker2', but Node worker1 reports its "
            "address" % worker2.ip)
    assert state(virtual) == before
    refused(lambda: virtual.heal_start(heal),
            "VM %s reports host name 'worker2', but Node worker1 reports its "
            "address" % worker2.ip)
    assert state(virtual) == before

    virtual.testbed.power_off('worker2')
    refused(lambda: virtual.heal_start(heal),
            'Node worker1 reports the address of VM %s, but it is the Node '
            "of VM %s (host name 'worker1')" % (
                worker2.ip, virtual.host('worker1').ip))
    vms, nodes = before
    del vms['worker2']
    assert state(virtual, down=['worker2']) == (vms, nodes)
