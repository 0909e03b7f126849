"""Scale and heal of cluster nodes end to end: real SSH hosts, the real
install script on the kubeadm stand-ins, real etcd on the Masters, real
haproxy and keepalived, and kubectl drain against the test API server."""

import time

import pytest

from kubernetes_mgmt_pv.cluster import etcd
from kubernetes_mgmt_pv.cluster import etcd_snapshot
from kubernetes_mgmt_pv import exceptions
from testbed import faults
from testbed.kubeapi import daemonsets
from testbed import standins
from testbed import virtual_vnf
from tests.functional.conftest import skip_without_testbed


def pod(name, node, controller):
    """A pod on ``node`` that ``controller`` (a created object) owns."""
    meta = controller['metadata']
    return {'apiVersion': 'v1', 'kind': 'Pod',
            'metadata': {'name': name, 'namespace': meta['namespace'],
                         'labels': {'app': name},
                         'ownerReferences': [{
                             'apiVersion': 'apps/v1',
                             'kind': controller['kind'],
                             'name': meta['name'], 'uid': meta['uid'],
                             'controller': True}]},
            'spec': {'nodeName': node, 'containers': [
                {'name': 'main', 'image': 'registry.example/app:1'}]}}


def owner(kind, name):
    api_kind = {'ReplicaSet': 'ReplicaSet', 'DaemonSet': 'DaemonSet'}[kind]
    spec = {'selector': {'matchLabels': {'app': name}},
            'template': {'metadata': {'labels': {'app': name}},
                         'spec': {'containers': [
                             {'name': 'main',
                              'image': 'registry.example/app:1'}]}}}
    # The test places the pods of either kind itself.
    return {'apiVersion': 'apps/v1', 'kind': api_kind,
            'metadata': {'name': name + '-owner', 'namespace': 'default',
                         'annotations': {daemonsets.CLIENT_PODS: 'true'}},
            'spec': spec}


def create_owned_pod(kube, kind, name, node):
    """The controller first, then its pod: the garbage collector deletes a
    pod whose owner does not exist, as Kubernetes' does."""
    kube.create(pod(name, node, kube.create(owner(kind, name))))


def etcd_members(master):
    result = master.run(' '.join(etcd.etcdctl('member', 'list', '-w',
                                              'json')))
    return sorted(m.name for m in etcd.parse_members(result.stdout))


def removal_snapshots(cluster):
    """{host name: its etcd snapshots taken before a member removal}, of
    the Masters and the Storage server (a copy on its volume)."""
    places = [(master, etcd_snapshot.DIRECTORY)
              for master in cluster.nodes('master')]
    places.append((cluster.host('storage'),
                   '/volume1/' + etcd_snapshot.STORAGE_DIRECTORY))
    found = {}
    for host, directory in places:
        names = host.run('ls -A %s 2>/dev/null || true' % directory).stdout
        found[host.name] = [name for name in names.split()
                            if name.endswith('-member-removal.db')]
    return found


def haproxy_backends(master):
    config = master.read_file('/etc/haproxy/haproxy.cfg')
    return sorted(line.split()[2].rsplit(':', 1)[0]
                  for line in config.splitlines()
                  if line.strip().startswith('server '))


def haproxy_pid(master):
    return master.read_file('/run/haproxy.pid').split()[0]


def pod_phase(kube, name):
    found = kube.get('pod', name)
    return found and (found['status'].get('phase'),
                      bool(found['metadata'].get('deletionTimestamp')))


def run_pod_on(kube, node):
    """A ReplicaSet's pod running on ``node``: what a drain must evict."""
    create_owned_pod(kube, 'ReplicaSet', 'web', node)
    assert kube.wait_for(lambda: pod_phase(kube, 'web') == ('Running', False))


# drain_timeout as the tests leave it (the driver's default): a heal that
# waited for the evictions of a dead node would take that long.
DRAIN_TIMEOUT = 300


def hosts_block(host):
    text = host.read_file('/etc/hosts')
    start = text.index('# BEGIN kubernetes-mgmt-pv')
    return text[start:text.index('# END kubernetes-mgmt-pv')].splitlines()[1:]


@pytest.fixture
def simple(k8s_cluster):
    return k8s_cluster


@pytest.fixture
def ha_cluster():
    skip_without_testbed()
    with virtual_vnf.VirtualCluster(masters=3, workers=1, volumes=1,
                                    install_cluster=True) as virtual:
        virtual.instantiate_end()
        yield virtual


def test_scale_out_by_two_workers(simple):
    new = [simple.add_node('worker'), simple.add_node('worker')]
    simple.scale_end(new)
    master = simple.host('master1')
    assert virtual_vnf.node_readiness(master) == dict.fromkeys(
        ['master1', 'worker1', 'worker2', 'worker3', 'worker4'], 'True')
    for host in simple.nodes():
        block = hosts_block(host)
        assert '%s worker3' % new[0].ip in block
        assert '%s worker4' % new[1].ip in block
    for host in new:
        assert [argv[1] for argv in simple.kubeadm_calls(host.name)] == [
            'join']
    # The old workers were not joined again.
    assert [argv[1] for argv in simple.kubeadm_calls('worker1')] == ['join']


def test_new_workers_log_in_with_the_scale_requests_password(simple):
    new = simple.add_node('worker')
    new.run('chpasswd', input='ubuntu:rotated-image-pw\n')
    simple.scale_end([new], worker_node_password='rotated-image-pw')
    readiness = virtual_vnf.node_readiness(simple.host('master1'))
    assert readiness['worker3'] == 'True'


def test_scale_in_drains_the_worker_and_forgets_it(simple):
    worker2 = simple.host('worker2')
    create_owned_pod(simple.kube, 'ReplicaSet', 'web', 'worker2')
    create_owned_pod(simple.kube, 'DaemonSet', 'agent', 'worker2')
    simple.scale_in(worker2)
    master = simple.host('master1')
    assert virtual_vnf.node_readiness(master) == {'master1': 'True',
                                                  'worker1': 'True'}
    assert 'web' not in [p['metadata']['name']
                         for p in simple.kube.objects('pods')]
    for host in simple.nodes():
        assert hosts_block(host) == [
            '%s master1' % master.ip,
            '%s worker1' % simple.host('worker1').ip]


def test_a_scale_in_refuses_a_host_name_it_would_write_elsewhere(simple):
    """A compromised Worker naming itself after other hosts does not get
    their names mapped to its address in the other nodes' /etc/hosts."""
    worker1, worker2 = simple.host('worker1'), simple.host('worker2')
    before = {host.name: hosts_block(host) for host in simple.nodes()}
    # The kernel takes any name; the hostname tool would refuse it.
    worker1.run("printf %s 'w1 mirror.internal pkgs.k8s.io' "
                '> /proc/sys/kernel/hostname')
    with pytest.raises(exceptions.MgmtDriverError) as caught:
        simple.scale_in(worker2)
    assert '%s: host name' % worker1.ip in str(caught.value)
    # Nothing changed: no /etc/hosts, worker2 still a member.
    assert {host.name: hosts_block(host)
            for host in simple.nodes()} == before
    assert 'worker2' in virtual_vnf.node_readiness(simple.host('master1'))


def test_a_disruption_budget_blocks_the_scale_in(simple):
    create_owned_pod(simple.kube, 'ReplicaSet', 'db', 'worker2')
    simple.kube.create({
        'apiVersion': 'policy/v1', 'kind': 'PodDisruptionBudget',
        'metadata': {'name': 'db-budget', 'namespace': 'default'},
        'spec': {'minAvailable': 1,
                 'selector': {'matchLabels': {'app': 'db'}}}})
    virtual_vnf.use_test_options(drain_timeout=5)
    with pytest.raises(exceptions.MgmtDriverError) as caught:
        simple.scale_in(simple.host('worker2'))
    message = str(caught.value)
    assert 'blocked by pod(s) default/db (PodDisruptionBudget ' \
        'default/db-budget allows no disruption) (drain_force deletes such ' \
        'pods regardless)' in message
    assert 'server error' not in message
    assert 'Node worker2' in message
    # Still a member, cordoned; the VM was not deleted.
    assert 'worker2' in virtual_vnf.node_readiness(simple.host('master1'))
    assert 'worker2' in simple.testbed.hosts


def test_a_server_error_on_an_eviction_is_not_blamed_on_a_budget(simple):
    """The API server answers the eviction with 500: the error names the
    pod and the server error, not a budget nor drain_force, which would
    not help."""
    create_owned_pod(simple.kube, 'ReplicaSet', 'db', 'worker2')
    failure = simple.kube.fail_requests(
        'POST', '/api/v1/namespaces/default/pods/db/eviction', count=None,
        code=500, message='Internal error occurred: etcdserver: leader '
        'changed')
    virtual_vnf.use_test_options(drain_timeout=5)
    try:
        with pytest.raises(exceptions.MgmtDriverError) as caught:
            simple.scale_in(simple.host('worker2'))
    finally:
        simple.kube.clear_failures()
    message = str(caught.value)
    assert failure.hits, 'the eviction was not tried'
    assert 'Node worker2' in message
    assert 'pod default/db with a server error' in message
    assert 'etcdserver: leader changed' in message
    assert 'drain_force' not in message and 'blocked by' not in message
    assert 'worker2' in virtual_vnf.node_readiness(simple.host('master1'))
    assert 'worker2' in simple.testbed.hosts


def test_heal_of_a_worker(simple):
    vnfc = simple.vnfcs['worker1'].vnfc_id
    simple.heal_start([vnfc])
    assert 'worker1' not in virtual_vnf.node_readiness(simple.host('master1'))
    simple.replace_host('worker1')
    simple.heal_end([vnfc])
    assert virtual_vnf.node_readiness(simple.host('master1')) == dict.fromkeys(
        ['master1', 'worker1', 'worker2'], 'True')


def test_heal_of_a_powered_off_worker(simple):
    master = simple.host('master1')
    run_pod_on(simple.kube, 'worker1')
    simple.power_off('worker1')
    assert virtual_vnf.node_readiness(master)['worker1'] == 'Unknown'
    vnfc = simple.vnfcs['worker1'].vnfc_id

    started = time.monotonic()
    simple.heal_start([vnfc])
    assert time.monotonic() - started < DRAIN_TIMEOUT / 3
    assert 'worker1' not in virtual_vnf.node_readiness(master)
    # The pod garbage collector took the pod of the deleted Node.
    assert simple.kube.wait_for(lambda: pod_phase(simple.kube, 'web') is None)

    simple.replace_host('worker1')
    simple.heal_end([vnfc])
    assert virtual_vnf.node_readiness(master) == dict.fromkeys(
        ['master1', 'worker1', 'worker2'], 'True')


def test_the_only_master_is_not_healed(simple):
    before = simple.kubeadm_calls('master1')
    with pytest.raises(exceptions.MgmtDriverError,
                       match='only Master'):
        simple.heal_start([simple.vnfcs['master1'].vnfc_id])
    assert 'master1' in virtual_vnf.node_readiness(simple.host('master1'))
    assert simple.kubeadm_calls('master1') == before


def test_heal_of_a_master_of_three(ha_cluster):
    master1, master3 = ha_cluster.host('master1'), ha_cluster.host('master3')
    old_ip = ha_cluster.host('master2').ip
    pids = {m.name: haproxy_pid(m) for m in (master1, master3)}
    vnfc = ha_cluster.vnfcs['master2'].vnfc_id
    ha_cluster.heal_start([vnfc])
    assert etcd_members(master1) == ['master1', 'master3']
    # A snapshot first, on the Master the removal ran on, and its copy.
    snapshots = removal_snapshots(ha_cluster)
    copy = snapshots.pop('storage')
    assert len(copy) == 1 and sorted(snapshots.values()) == [[], [], copy]
    for master in (master1, master3):
        assert haproxy_backends(master) == sorted([master1.ip, master3.ip])
        assert haproxy_pid(master) == pids[master.name]  # reloaded
    assert 'master2' not in virtual_vnf.node_readiness(master1)

    ha_cluster.replace_host('master2')
    ha_cluster.heal_end([vnfc])
    assert ha_cluster.host('master2').ip == old_ip
    assert etcd_members(master1) == ['master1', 'master2', 'master3']
    for master in ha_cluster.nodes('master'):
        assert haproxy_backends(master) == sorted(
            m.ip for m in ha_cluster.nodes('master'))
    assert virtual_vnf.node_readiness(master3) == dict.fromkeys(
        ['master1', 'master2', 'master3', 'worker1'], 'True')
    join, = [entry for entry in standins.call_log(ha_cluster.host('master2'))
             if entry['argv'][1] == 'join']
    assert join['config']['controlPlane']['certificateKey'] == '***'


def test_a_master_heal_refuses_a_name_it_would_give_haproxy(ha_cluster):
    """A compromised Master's host name would become a line of haproxy's
    configuration on the others: refused before any change."""
    master1, master3 = ha_cluster.host('master1'), ha_cluster.host('master3')
    configs = {m.name: m.read_file('/etc/haproxy/haproxy.cfg')
               for m in (master1, master3)}
    master3.run("printf %s 'master3 mirror.internal' "
                '> /proc/sys/kernel/hostname')
    with pytest.raises(exceptions.MgmtDriverError) as caught:
        ha_cluster.heal_start([ha_cluster.vnfcs['master2'].vnfc_id])
    assert '%s: host name' % master3.ip in str(caught.value)
    assert {m.name: m.read_file('/etc/haproxy/haproxy.cfg')
            for m in (master1, master3)} == configs
    assert etcd_members(master1) == ['master1', 'master2', 'master3']


def test_heal_of_a_powered_off_master_of_three(ha_cluster):
    master1, master3 = ha_cluster.host('master1'), ha_cluster.host('master3')
    run_pod_on(ha_cluster.kube, 'master2')
    ha_cluster.power_off('master2')
    assert virtual_vnf.node_readiness(master1)['master2'] == 'Unknown'
    vnfc = ha_cluster.vnfcs['master2'].vnfc_id

    started = time.monotonic()
    ha_cluster.heal_start([vnfc])
    assert time.monotonic() - started < DRAIN_TIMEOUT / 3
    assert etcd_members(master1) == ['master1', 'master3']
    for master in (master1, master3):
        assert haproxy_backends(master) == sorted([master1.ip, master3.ip])
    assert 'master2' not in virtual_vnf.node_readiness(master1)

    ha_cluster.replace_host('master2')
    ha_cluster.heal_end([vnfc])
    assert etcd_members(master1) == ['master1', 'master2', 'master3']
    assert virtual_vnf.node_readiness(master3) == dict.fromkeys(
        ['master1', 'master2', 'master3', 'worker1'], 'True')


def test_a_master_heal_interrupted_after_the_etcd_removal_converges(
        ha_cluster):
    vnfc = ha_cluster.vnfcs['master3'].vnfc_id
    with faults.Faults() as injected:
        injected.http(ha_cluster.kube, 'DELETE',
                      r'/api/v1/nodes/master3(\?.*)?')
        with pytest.raises(exceptions.MgmtDriverError):
            ha_cluster.heal_start([vnfc])
    master1 = ha_cluster.host('master1')
    assert etcd_members(master1) == ['master1', 'master2']
    ha_cluster.heal_start([vnfc])  # the re-run finishes the job
    assert 'master3' not in virtual_vnf.node_readiness(master1)
    ha_cluster.replace_host('master3')
    ha_cluster.heal_end([vnfc])
    assert etcd_members(master1) == ['master1', 'master2', 'master3']
    assert virtual_vnf.node_readiness(master1) == dict.fromkeys(
        ['master1', 'master2', 'master3', 'worker1'], 'True')
