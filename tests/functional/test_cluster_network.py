"""ssh_cp_name to log in, nic_cp_name inside the cluster: every VM has a
management NIC (eth0, where the driver logs in) and a cluster NIC (eth1).
Kubernetes, /etc/hosts, etcd, haproxy and keepalived must all use the
cluster network."""

import ipaddress
import shlex

from kubernetes_mgmt_pv.cluster import cluster as driver_cluster
from kubernetes_mgmt_pv.cluster import etcd
from testbed import virtual_vnf
from tests.functional.conftest import skip_without_testbed


def two_networks(masters, workers):
    skip_without_testbed()
    return virtual_vnf.VirtualCluster(masters=masters, workers=workers,
                                      volumes=1, install_cluster=True,
                                      cluster_network=True)


def check_cluster_network(virtual, logins):
    nodes = virtual.nodes()
    master = virtual.nodes('master')[0]
    # Logged in on the management network only.
    management = {h.ip for h in virtual.testbed.hosts.values()}
    assert logins and set(logins) <= management
    # Every Node registered at its cluster address.
    api = driver_cluster.parse_api_nodes(virtual_vnf.kubectl(
        master, 'get', 'nodes', '-o', 'json'))
    assert sorted(api.values()) == sorted(h.cluster_ip for h in nodes)
    assert set(virtual_vnf.node_readiness(master).values()) == {'True'}
    for host in nodes:
        assert host.read_file('/etc/default/kubelet') == \
            'KUBELET_EXTRA_ARGS=--node-ip=%s\n' % host.cluster_ip
        block = host.read_file('/etc/hosts').split(
            '# BEGIN kubernetes-mgmt-pv')[1].splitlines()[1:-1]
        assert sorted(block) == sorted(
            '%s %s' % (h.cluster_ip, h.run('hostname').stdout.strip())
            for h in nodes)
    init, = [argv for argv in virtual.kubeadm_calls(master.name)
             if argv[1:3] == ['init', '--control-plane-endpoint']]
    assert init[init.index('--apiserver-advertise-address') + 1] == \
        master.cluster_ip
    return api


def test_one_master_on_the_cluster_network(logins):
    with two_networks(masters=1, workers=1) as virtual:
        virtual.instantiate_end()
        check_cluster_network(virtual, logins)
        master = virtual.nodes('master')[0]
        # Tacker's VIM: the Master's API server on the cluster network.
        access, = virtual.vims.values()
        assert access.url == 'https://%s:6443' % master.cluster_ip


def test_ha_masters_on_the_cluster_network(logins):
    with two_networks(masters=2, workers=1) as virtual:
        virtual.instantiate_end()
        check_cluster_network(virtual, logins)
        masters = virtual.nodes('master')
        assert ipaddress.ip_address(virtual.vip) in \
            virtual.testbed.cluster_subnet
        access, = virtual.vims.values()
        assert access.url == 'https://%s:16443' % virtual.vip
        listing = masters[0].run(' '.join(
            shlex.quote(a) for a in etcd.etcdctl('member', 'list', '-w',
                                                 'json'))).stdout
        peers = sorted(m.peer_urls for m in etcd.parse_members(listing))
        assert peers == sorted(('https://%s:2380' % h.cluster_ip,)
                               for h in masters)
        for host in masters:
            haproxy = host.read_file('/etc/haproxy/haproxy.cfg')
            for other in masters:
                assert ' %s:6443 ' % other.cluster_ip in haproxy
                assert ' %s:6443 ' % other.ip not in haproxy
            keepalived = host.read_file('/etc/keepalived/keepalived.conf')
            assert 'interface eth1' in keepalived
            assert '%s/24 dev eth1' % virtual.vip in keepalived
