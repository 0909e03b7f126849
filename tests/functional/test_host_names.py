"""Host names as a real cloud gives them: every member of a scaling group
boots with the group's Nova name (cloud-init's ``workernode``). The driver
names the VMs uniquely before kubeadm runs, keeps the names on a re-run,
and keeps them unique through scale-out and heal."""

import pytest

from kubernetes_mgmt_pv.cluster import cluster as driver_cluster
from testbed import virtual_vnf
from tests.functional.conftest import skip_without_testbed


@pytest.fixture
def nova_named():
    skip_without_testbed()
    with virtual_vnf.VirtualCluster(masters=1, workers=2, volumes=1,
                                    install_cluster=True,
                                    nova_host_names=True) as virtual:
        yield virtual


def host_name(host):
    return host.run('hostname').stdout.strip()


def node_names(virtual):
    """{testbed host name: its Node's name}, matched by InternalIP, with
    every Node Ready."""
    master = virtual.nodes('master')[0]
    api = driver_cluster.parse_api_nodes(virtual_vnf.kubectl(
        master, 'get', 'nodes', '-o', 'json'))
    assert set(virtual_vnf.node_readiness(master).values()) == {'True'}
    by_ip = {ip: name for name, ip in api.items()}
    assert len(by_ip) == len(api)
    return {host.name: by_ip.get(host.ip) for host in virtual.nodes()}


def check_unique_names(virtual):
    """Every VM has a Node, named after its host name, no two alike; a
    name the driver gave stays across reboots (cloud-init is told to
    preserve it)."""
    names = node_names(virtual)
    assert None not in names.values(), names
    assert len(set(names.values())) == len(names), names
    for host in virtual.nodes():
        assert host_name(host) == names[host.name]
        assert host.read_file('/etc/hostname') == names[host.name] + '\n'
        preserve = host.run('cat %s' % driver_cluster.CLOUD_INIT_HOST_NAME,
                            check=False).stdout
        renamed = names[host.name] != host.hostname  # cloud-init's name
        assert preserve == ('preserve_hostname: true\n' if renamed else '')
    return names


def test_colliding_cloud_init_names_are_made_unique(nova_named):
    workers = nova_named.nodes('worker')
    assert {host_name(host) for host in workers} == {'workernode'}
    nova_named.instantiate_end()
    names = check_unique_names(nova_named)
    assert names['master1'] == 'masternode'  # unique already: kept
    for host in workers:
        assert names[host.name] == 'worker-' + host.ip.replace('.', '-')
    hosts = workers[0].read_file('/etc/hosts')
    for host in nova_named.nodes():
        assert '\n%s %s\n' % (host.ip, names[host.name]) in hosts

    # A re-run renames nothing and joins nothing (the leader only prints
    # fresh join information again).
    calls = {h.name: nova_named.kubeadm_calls(h.name)
             for h in nova_named.nodes()}
    nova_named.instantiate_end()
    assert check_unique_names(nova_named) == names
    for host in workers:
        assert nova_named.kubeadm_calls(host.name) == calls[host.name]
    again = nova_named.kubeadm_calls('master1')[len(calls['master1']):]
    assert not [argv for argv in again if argv[1] == 'join' or
                argv[1] == 'init' and argv[2] != 'phase']


def test_scale_out_and_heal_keep_names_unique(nova_named):
    nova_named.instantiate_end()
    before = check_unique_names(nova_named)
    new = nova_named.add_node('worker')
    assert host_name(new) == 'workernode'
    nova_named.scale_end([new])
    after_scale = check_unique_names(nova_named)
    assert {k: v for k, v in after_scale.items() if k != new.name} == before

    # Heal of a Worker: Heat re-creates the VM at its port, cloud-init
    # names it workernode again; the old Node is gone when it joins.
    vnfc = nova_named.vnfcs['worker1'].vnfc_id
    nova_named.heal_start([vnfc])
    nova_named.replace_host('worker1')
    assert host_name(nova_named.host('worker1')) == 'workernode'
    nova_named.heal_end([vnfc])
    after_heal = check_unique_names(nova_named)
    assert after_heal == after_scale
