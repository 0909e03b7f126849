"""The cluster half end to end: the real sample install script on real SSH
test hosts, with kubeadm/kubelet/containerd stand-ins that make each host
a Node of the test API server, real haproxy and keepalived for HA, and the
persistent-volume half on top."""

import json
import ssl
import urllib.request

import pytest

from kubernetes_mgmt_pv import exceptions
from testbed import faults
from testbed import polling
from testbed import standins
from testbed import virtual_vnf
from tests.functional.conftest import skip_without_testbed


def verb(calls):
    """The kubeadm subcommands in a host's call log."""
    return [' '.join(argv[1:3]) if argv[1] == 'init' and argv[2:3] == [
        'phase'] else argv[1] for argv in calls]


def join_configuration(host):
    """The JoinConfiguration of the one kubeadm join run on host, as the
    stand-in logged it (secrets replaced by ***)."""
    join, = [entry for entry in standins.call_log(host)
             if entry['argv'][1] == 'join']
    assert join['argv'][2] == '--config'
    return join['config']


def api_get(access, path):
    context = ssl.create_default_context(cadata=access.ca_cert)
    request = urllib.request.Request(access.url + path, headers={
        'Authorization': 'Bearer ' + access.bearer_token})
    with urllib.request.urlopen(request, context=context,
                                timeout=10) as response:
        return json.load(response)


def assert_pvs_available(virtual):
    volumes = virtual_vnf.persistent_volumes(virtual.host('master1'))
    assert {name: v['status']['phase'] for name, v in volumes.items()} == {
        'nfs-pv1': 'Available', 'nfs-pv2': 'Available',
        'nfs-pv3': 'Available'}


@pytest.fixture
def simple():
    """Storage, 1 Master and 2 Workers, with the cluster installed by the
    driver."""
    skip_without_testbed()
    with virtual_vnf.VirtualCluster(masters=1, workers=2, volumes=1,
                                    install_cluster=True) as virtual:
        yield virtual


@pytest.fixture
def ha_cluster():
    skip_without_testbed()
    with virtual_vnf.VirtualCluster(masters=3, workers=2, volumes=1,
                                    install_cluster=True) as virtual:
        yield virtual


def test_one_master_two_workers(simple, logins):
    simple.instantiate_end()

    master = simple.host('master1')
    assert virtual_vnf.node_readiness(master) == {
        'master1': 'True', 'worker1': 'True', 'worker2': 'True'}
    init, = [argv for argv in simple.kubeadm_calls('master1')
             if argv[1] == 'init' and argv[2] != 'phase']
    assert init[init.index('--pod-network-cidr') + 1] == virtual_vnf.POD_CIDR
    assert init[init.index('--service-cidr') + 1] == virtual_vnf.SERVICE_CIDR
    assert init[init.index('--control-plane-endpoint') + 1] == \
        '%s:6443' % master.ip
    for worker in ('worker1', 'worker2'):
        join = join_configuration(simple.host(worker))
        assert join['discovery']['bootstrapToken'] == {
            'apiServerEndpoint': '%s:6443' % master.ip, 'token': '***',
            'caCertHashes': [join['discovery']['bootstrapToken'][
                'caCertHashes'][0]]}
        assert 'controlPlane' not in join
    # Every node resolves every other by name, from the driver's block.
    hosts = simple.host('worker2').read_file('/etc/hosts')
    assert '%s master1' % master.ip in hosts
    # The VIM works with the ServiceAccount token, through the CA.
    access = simple.vims['kubernetes_vim_test']
    assert access.url == 'https://%s:6443' % master.ip
    assert 'kube-system' in [item['metadata']['name'] for item in
                             api_get(access, '/api/v1/namespaces')['items']]
    assert_pvs_available(simple)
    # One login per host for the whole hook, cluster and storage alike.
    assert sorted(logins) == sorted(h.ip for h in
                                    simple.testbed.hosts.values())


def test_a_rerun_changes_nothing(simple):
    simple.instantiate_end()
    before = {name: simple.kubeadm_calls(name)
              for name in ('master1', 'worker1', 'worker2')}
    simple.instantiate_end()
    after = {name: simple.kubeadm_calls(name)
             for name in ('master1', 'worker1', 'worker2')}
    # The leader only prints fresh join information again; the workers,
    # already members, are not touched.
    assert after['worker1'] == before['worker1']
    assert after['worker2'] == before['worker2']
    assert 'init' not in verb(after['master1'][len(before['master1']):])
    assert_pvs_available(simple)

    # A floating IP the cluster was not created with: its Master's API
    # server certificate does not name it, so Tacker's TLS check would
    # fail; refused before the VIM is registered again.
    registered = dict(simple.vims)
    simple.add_floating_ip('198.51.100.7')
    with pytest.raises(exceptions.ParameterErrors) as caught:
        simple.instantiate_end()
    error, = caught.value.errors
    assert error.path == ('k8s_cluster_installation_param.master_node.'
                          'cluster_fip_name')
    for part in ('198.51.100.7', simple.host('master1').ip,
                 '/etc/kubernetes/pki/apiserver.crt',
                 'heal the entire cluster', 'apiServer.certSANs'):
        assert part in error.reason, error.reason
    assert simple.vims == registered


def assert_install_script_fails(virtual, host, command, match):
    """instantiate_end fails once ``command`` (its arguments containing
    ``match``) fails on ``host``, naming the host and the install script."""
    with faults.Faults() as injected:
        fault = injected.command(host, command, match=match)
        with pytest.raises(exceptions.MgmtDriverError) as caught:
            virtual.instantiate_end()
        assert len(fault.hits) == 1
    message = str(caught.value)
    assert host.ip in message and 'install script' in message, message


def test_a_rerun_after_a_failed_worker_join_converges(simple):
    assert_install_script_fails(simple, simple.host('worker2'), 'kubeadm',
                                'join')
    # worker1 joined in the same run; nothing is registered yet.
    assert virtual_vnf.node_readiness(simple.host('master1')) == {
        'master1': 'True', 'worker1': 'True'}
    assert simple.vims == {}

    simple.instantiate_end()
    assert virtual_vnf.node_readiness(simple.host('master1')) == {
        'master1': 'True', 'worker1': 'True', 'worker2': 'True'}
    assert verb(simple.kubeadm_calls('worker1')) == ['join']
    assert_pvs_available(simple)
    assert 'kubernetes_vim_test' in simple.vims


def calico_config(master):
    """The network add-on's object (the testbed's Calico stand-in
    manifest holds one ConfigMap) as `kubectl get -o name` names it, with
    the admin kubeconfig: the login user gets its copy only at the end."""
    return master.run('kubectl --kubeconfig /etc/kubernetes/admin.conf get '
                      'configmap -n kube-system calico-config '
                      '--ignore-not-found -o name').stdout.strip()


def test_a_rerun_applies_the_network_addon_an_init_left_out(simple):
    master = simple.host('master1')
    assert_install_script_fails(simple, master, 'kubectl', 'calico')
    assert calico_config(master) == ''
    assert master.run('test -e /usr/local/lib/kubernetes-mgmt-pv/'
                      'network-add-on-pending', check=False).returncode == 0

    simple.instantiate_end()
    assert calico_config(master) == 'configmap/calico-config'
    assert verb(simple.kubeadm_calls('master1')).count('init') == 1
    assert virtual_vnf.node_readiness(master) == {
        'master1': 'True', 'worker1': 'True', 'worker2': 'True'}
    assert 'kubernetes_vim_test' in simple.vims


def test_terminate_deletes_the_vim(simple):
    simple.instantiate_end()
    assert 'kubernetes_vim_test' in simple.vims
    simple.terminate_end()
    assert simple.vims == {}
    simple.terminate_end()  # nothing left to delete: not an error


def test_entire_cluster_heal(simple):
    simple.instantiate_end()
    old_token = simple.vims['kubernetes_vim_test'].bearer_token
    simple.heal_start()
    assert simple.vims == {}
    simple.replace_everything()
    simple.heal_end()
    assert virtual_vnf.node_readiness(simple.host('master1')) == {
        'master1': 'True', 'worker1': 'True', 'worker2': 'True'}
    access = simple.vims['kubernetes_vim_test']
    assert access.bearer_token != old_token
    api_get(access, '/api/v1/namespaces')
    assert_pvs_available(simple)


def test_entire_heal_of_a_cluster_whose_masters_are_all_down(simple):
    simple.instantiate_end()
    pvs = sorted(pv['metadata']['name'] for pv in simple.kube.objects('pv'))
    assert pvs == ['nfs-pv1', 'nfs-pv2', 'nfs-pv3']
    # Another VNF on the cluster's VIM: refused before anything changes.
    simple.vims_in_use['kubernetes_vim_test'] = {'vim-1': ['cnf-1']}
    with pytest.raises(exceptions.MgmtDriverError, match='cnf-1'):
        simple.heal_start(skip_pv_check_if_unreachable=True)
    assert 'kubernetes_vim_test' in simple.vims
    simple.vims_in_use.clear()

    simple.power_off('master1')
    with pytest.raises(exceptions.MgmtDriverError) as caught:
        simple.heal_start()
    assert 'additionalParams.skip_pv_check_if_unreachable to true' in \
        str(caught.value)
    assert 'kubernetes_vim_test' in simple.vims
    assert sorted(pv['metadata']['name']
                  for pv in simple.kube.objects('pv')) == pvs

    simple.heal_start(skip_pv_check_if_unreachable=True)
    assert simple.vims == {}
    simple.replace_everything()
    simple.heal_end(skip_pv_check_if_unreachable=True)
    assert virtual_vnf.node_readiness(simple.host('master1')) == {
        'master1': 'True', 'worker1': 'True', 'worker2': 'True'}
    api_get(simple.vims['kubernetes_vim_test'], '/api/v1/namespaces')
    assert_pvs_available(simple)


def test_three_masters_behind_haproxy_and_keepalived(ha_cluster):
    ha_cluster.instantiate_end()
    vip = ha_cluster.vip
    names = ['master1', 'master2', 'master3', 'worker1', 'worker2']
    assert virtual_vnf.node_readiness(ha_cluster.host('master2')) == \
        dict.fromkeys(names, 'True')
    for name in ('master2', 'master3'):
        join = join_configuration(ha_cluster.host(name))
        assert join['discovery']['bootstrapToken']['apiServerEndpoint'] == \
            '%s:16443' % vip
        assert join['controlPlane'] == {
            'localAPIEndpoint': {
                'advertiseAddress': ha_cluster.host(name).ip},
            'certificateKey': '***'}
    for master in ha_cluster.nodes('master'):
        config = master.read_file('/etc/haproxy/haproxy.cfg')
        for other in ha_cluster.nodes('master'):
            assert '%s:6443' % other.ip in config
    access = ha_cluster.vims['kubernetes_vim_test']
    assert access.url == 'https://%s:16443' % vip
    api_get(access, '/api')
    # Through the VIP, haproxy passes TLS on to a Master's own API server
    # certificate: kubeadm's names, the VIP as controlPlaneEndpoint.
    served = standins.served_names(vip, 16443)
    assert 'IP Address:%s' % vip in served
    assert len({'DNS:master1', 'DNS:master2', 'DNS:master3'} &
               set(served)) == 1, served

    holder, = [m for m in ha_cluster.nodes('master')
               if vip in m.run('ip -o -4 addr show').stdout]
    holder.run('service keepalived stop')
    # Another Master takes the VIP over; the API answers through it.
    polling.wait_until(
        lambda: any(vip in m.run('ip -o -4 addr show').stdout
                    for m in ha_cluster.nodes('master') if m is not holder),
        'another Master holds the VIP', timeout=30)
    api_get(access, '/api/v1/namespaces')
    assert_pvs_available(ha_cluster)
