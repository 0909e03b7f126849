"""The user guide's whole lifecycle through real Tacker's REST API.

An operator's session, in order (each test is one step and needs the ones
before it; a failed step skips the rest): register the OpenStack VIM,
build the sample package with ``kubernetes-mgmt-pv package`` and onboard
it, create and instantiate the VNF with samples/requests/
instantiate_simple.json, scale the Workers out and in, heal a Worker, try
to change the external connectivity of the Workers' CP (refused), heal
a Worker whose VM was stopped (``openstack server stop``), try to heal
the Storage server while a PersistentVolume is Bound (refused:
FAILED_TEMP with the driver's message), release the claim, fail the
operation and heal the Storage server, heal the entire VNF; then a v2
CNF on the cluster: a terminate refused while it runs, a heal of the
Worker running its pod (the pod and its file move to the other Worker), a
Storage heal refused naming its claim; the CNF terminated; the same CNF
through /vnflcm/v1 (samples/requests-cnf-v1), instantiated and
terminated; terminate and delete. After
every operation the checks the user guide tells operators to make:
``df -h`` and ``sudo exportfs -v`` on the Storage server (over SSH),
``kubectl get pv`` and ``kubectl get nodes`` on a Master, and ``GET
/v1.0/vims`` for the Kubernetes VIM the driver registers.

Its VMs boot from the user guide's stock image, without the NFS
packages, so the driver installs them through Tacker at every step that
boots one (the other modules of the lab boot VMs that have them).

The requests log in with key files only (``ssh_key``: the lab placed the
testbed's client key in the conductor's ssh_key_dir), and no GET of the
VNF instance or of its LCM operation occurrences shows a node password.

Everything the driver does runs inside tacker-conductor: Tacker loads it
through its entry point, checks the package's copy of it, and hands it
the objects and Heat stacks it made from the package and the requests.
The cluster half (nodes joining, drained, re-joined) is checked by the
last tests, from what the steps recorded.
"""

import contextlib
import ipaddress
import json

import pytest

from testbed import cnf_package
from testbed import cnf_sample
from testbed import heat_engine
from testbed import kubeapi
from testbed import node_lifecycle
from testbed import polling
from testbed import pv_manifest
from testbed import tacker_lab
from testbed import tacker_v2
from testbed import virtual_vnf
from tests.tacker_rest import cnf_on_the_cluster as cnf
from tests.tacker_rest import lifecycle_checks as checks


@pytest.fixture(scope='module')
def s():
    return checks.Session()


@pytest.fixture(scope='module', autouse=True)
def stock_image(lab):
    """This module's VMs boot from the user guide's stock image, without
    the NFS packages: the driver installs them through Tacker (the other
    modules' VMs come with them)."""
    lab.engine.stock_image = True
    yield
    lab.engine.stock_image = False


def _completed(occ, operation):
    assert occ['operation'] == operation
    assert occ['operationState'] == 'COMPLETED', occ.get('error')


# -- the steps ----------------------------------------------------------------

def test_register_openstack_vim(lab, s):
    vim = lab.register_openstack_vim()
    assert vim['status'] in ('ACTIVE', 'REACHABLE', 'PENDING')
    listed = {v['id']: v for v in lab.vims()}
    assert listed[vim['id']]['type'] == 'openstack'
    assert listed[vim['id']]['placement_attr']['regions'] == ['RegionOne']
    s.vim_id = vim['id']
    s.done.add('vim')


def test_build_and_onboard_the_sample_package(lab, s, tmp_path_factory):
    # Other modules of the lab onboard the sample v1 package too.
    vnfd_id, zip_path = lab.build_package(
        str(tmp_path_factory.mktemp('package')),
        vnfd_id=tacker_lab.own_vnfd_id())
    package = lab.client.onboard_package(zip_path)
    assert package['onboardingState'] == 'ONBOARDED'
    assert package['vnfdId'] == vnfd_id
    s.vnfd_id = vnfd_id
    s.done.add('package')


def check_differs_from_the_sample_only_where_it_must(lab, request):
    """Only the network ids, the VIM id, the export_to (the testbed's
    subnet instead of the user guide's network, which the driver would
    refuse) and the security groups' management CIDR (the runner, whose
    SSH and API calls its rules let in) differ from the sample;
    additionalParams are the sample's otherwise, its key file logins
    included."""
    sample = lab.sample_request('instantiate_simple.json', login='key')
    assert request['flavourId'] == sample['flavourId']
    storage = request['additionalParams'][
        'k8s_cluster_installation_param']['storage_server']
    sample_storage = sample['additionalParams'][
        'k8s_cluster_installation_param']['storage_server']

    def as_sent(exports, export_to):
        return [dict(export, export_to=export_to) for export in exports]

    assert dict(storage, nfs_server_setup_params=None) == \
        dict(sample_storage, nfs_server_setup_params=None)
    assert 'password' not in json.dumps(request['additionalParams'])
    assert request['additionalParams']['nfv'] == dict(
        sample['additionalParams']['nfv'],
        management_cidr=lab.engine.testbed.bridge_ip + '/32')
    assert storage['nfs_server_setup_params'] == as_sent(
        sample_storage['nfs_server_setup_params'], lab.engine.testbed.subnet)


def test_instantiate(lab, s):
    s.need('vim', 'package')
    instance = lab.client.post('/vnflcm/v1/vnf_instances',
                               {'vnfdId': s.vnfd_id}, expect=201).body
    s.instance_id = instance['id']
    assert instance['instantiationState'] == 'NOT_INSTANTIATED'
    request = lab.instantiate_request(s.vim_id, login='key')
    check_differs_from_the_sample_only_where_it_must(lab, request)
    # Boots longer than Tacker takes from ACTIVE to the driver's first
    # look (the engine's default is shorter, to spare the suite's time).
    lab.engine.boot_delays = (6.0, 3.0)
    try:
        occ = s.ops['instantiate'] = lab.lcm(s.instance_id, 'instantiate',
                                             request)
    finally:
        lab.engine.boot_delays = heat_engine.BOOT_DELAYS
    _completed(occ, 'INSTANTIATE')
    instance = lab.instance(s.instance_id)
    assert instance['instantiationState'] == 'INSTANTIATED'
    vdus = sorted(v['vduId'] for v in lab.vnfcs(s.instance_id))
    assert vdus == ['masterNode', 'storage_server', 'workerNode',
                    'workerNode']
    # Both Workers booted with cloud-init's name for their Nova name.
    assert [h.hostname for h in lab.engine.testbed.hosts.values()
            if h.role == 'worker'] == ['workernode', 'workernode']
    # Nova called the VMs ACTIVE before they booted (sshd, then the host
    # keys on the console): the driver read a console without host keys
    # and waited, in its own boot window (the lab leaves it the defaults).
    servers = {v['computeResource']['resourceId']
               for v in lab.vnfcs(s.instance_id)}
    assert [server for server, keys in lab.cloud.console_reads
            if server in servers and not keys]
    checks.check_storage_and_pvs(lab, s.instance_id)
    # The driver registered the cluster as a Kubernetes VIM.
    assert [v['name'] for v in checks.k8s_vims(lab)] == [
        checks.k8s_vim_name(s.instance_id)]
    checks.record_nodes(lab, s, 'instantiate')
    s.done.add('instantiate')


def test_scale_out_workers(lab, s):
    s.need('instantiate')
    before = {v['id'] for v in lab.vnfcs(s.instance_id, 'workerNode')}
    occ = s.ops['scale_out'] = lab.lcm(
        s.instance_id, 'scale', lab.sample_request('scale_out_worker.json'))
    _completed(occ, 'SCALE')
    workers = lab.vnfcs(s.instance_id, 'workerNode')
    added = [v for v in workers if v['id'] not in before]
    assert len(workers) == 3 and len(added) == 1
    s.added_host = lab.engine.testbed.hosts[lab.engine.hosts[
        added[0]['computeResource']['resourceId']]].name
    info = lab.instance(s.instance_id)['instantiatedVnfInfo']
    levels = {scale['aspectId']: scale['scaleLevel']
              for scale in info['scaleStatus']}
    assert levels['worker_instance'] == 1
    # The new VM got the NFS client (operator guide: dpkg -l nfs-common).
    host = lab.engine.testbed.hosts[s.added_host]
    assert virtual_vnf.installed(host, 'nfs-common')
    checks.record_nodes(lab, s, 'scale_out')
    s.scaled_out_node = host.ip
    s.done.add('scale_out')


def test_scale_in_workers(lab, s):
    s.need('scale_out')
    before = lab.vnfcs(s.instance_id, 'workerNode')
    hosts_before = {lab.engine.hosts[v['computeResource']['resourceId']]
                    for v in before}
    addresses = {name: lab.engine.testbed.hosts[name].ip
                 for name in hosts_before}
    occ = s.ops['scale_in'] = lab.lcm(
        s.instance_id, 'scale', lab.sample_request('scale_in_worker.json'))
    _completed(occ, 'SCALE')
    after = lab.vnfcs(s.instance_id, 'workerNode')
    assert len(after) == 2
    hosts_after = {lab.engine.hosts[v['computeResource']['resourceId']]
                   for v in after}
    removed = hosts_before - hosts_after
    assert len(removed) == 1
    # Heat removed the oldest Worker, the one Tacker chose.
    removed_host = removed.pop()
    assert removed_host not in lab.engine.testbed.hosts
    s.scaled_in_node = addresses[removed_host]
    checks.check_storage_and_pvs(lab, s.instance_id)
    checks.record_nodes(lab, s, 'scale_in')
    s.done.add('scale_in')


def test_heal_a_worker(lab, s):
    s.need('instantiate')
    worker = lab.vnfcs(s.instance_id, 'workerNode')[0]
    old_server = worker['computeResource']['resourceId']
    s.healed_node = lab.engine.hosts[old_server]
    occ = s.ops['heal_worker'] = lab.lcm(
        s.instance_id, 'heal', {'vnfcInstanceId': [worker['id']],
                                'cause': 'Heal a Worker node'})
    _completed(occ, 'HEAL')
    healed = {v['id']: v for v in lab.vnfcs(s.instance_id)}[worker['id']]
    new_server = healed['computeResource']['resourceId']
    assert new_server != old_server  # a new VM (fresh root fs)
    assert lab.engine.hosts[new_server] == s.healed_node
    host = lab.engine.testbed.hosts[s.healed_node]
    assert virtual_vnf.installed(host, 'nfs-common')
    s.healed_address = host.ip
    checks.check_storage_and_pvs(lab, s.instance_id)
    checks.record_nodes(lab, s, 'heal_worker')
    s.done.add('heal_worker')


def test_change_ext_conn_of_a_cluster_cp_is_refused(lab, s):
    """v1 calls change_external_connectivity_start with the request: a
    new port for the Workers' CP is refused, nothing changes."""
    s.need('instantiate')
    before = lab.vnfcs(s.instance_id)
    occ = lab.lcm(s.instance_id, 'change_ext_conn', {'extVirtualLinks': [{
        'id': 'ext-vl-workers', 'resourceId': 'net-workers',
        'extCps': [{'cpdId': 'workerNode_CP2', 'cpConfig': [{
            'cpProtocolData': [{'layerProtocol': 'IP_OVER_ETHERNET',
                                'ipOverEthernet': {'ipAddresses': [{
                                    'type': 'IPV4',
                                    'numDynamicAddresses': 1}]}}]}]}]}]})
    assert occ['operationState'] == 'FAILED_TEMP'
    shown = lab.client.get('/vnflcm/v1/vnf_lcm_op_occs/%s' % occ['id'])
    detail = shown['error']['detail']
    assert 'extVirtualLinks[0].extCps[0].cpdId' in detail, detail
    assert 'workerNode_CP2' in detail, detail
    assert lab.op_action(occ['id'], 'fail')['operationState'] == 'FAILED'
    assert lab.vnfcs(s.instance_id) == before


def test_heal_a_powered_off_worker(lab, s):
    s.need('heal_worker', 'scale_in')
    # The Worker the scale-out added: Tacker found its CPs through Heat's
    # required_by, and the driver classifies heal targets by them.
    worker, = [v for v in lab.vnfcs(s.instance_id, 'workerNode')
               if lab.engine.hosts[v['computeResource']['resourceId']]
               == s.added_host]
    assert worker['vnfcCpInfo'], worker
    old_server = worker['computeResource']['resourceId']
    host = lab.engine.testbed.hosts[lab.engine.hosts[old_server]]
    node, = [name for name, item in lab.nodes().items()
             if node_lifecycle.internal_ip(item) == host.ip]
    kube = lab.engine.kubes[lab.stack(s.instance_id).id]
    web = kube.create({
        'apiVersion': 'apps/v1', 'kind': 'ReplicaSet',
        'metadata': {'name': 'web', 'namespace': 'default'},
        'spec': {'selector': {'matchLabels': {'app': 'web'}},
                 'template': {'metadata': {'labels': {'app': 'web'}},
                              'spec': {'containers': [
                                  {'name': 'main', 'image': 'nginx'}]}}}})
    kube.create(kubeapi.pod_manifest('web-1', node, owner=web,
                                     labels={'app': 'web'}))
    lab.stop_server(old_server)
    polling.wait_until(
        lambda: node_lifecycle.kubelet_gone(lab.nodes()[node]),
        'Node %s unreachable' % node, 60, first_delay=0.05, max_delay=1.0)

    occ = s.ops['heal_dead_worker'] = lab.lcm(
        s.instance_id, 'heal', {'vnfcInstanceId': [worker['id']],
                                'cause': 'Its VM is down'})
    _completed(occ, 'HEAL')
    # Not drained: the drain would have waited drain_timeout (300 s).
    assert occ['seconds'] < 150
    healed = {v['id']: v for v in lab.vnfcs(s.instance_id)}[worker['id']]
    assert healed['computeResource']['resourceId'] != old_server
    assert kube.get('pod', 'web-1') is None
    nodes = checks.record_nodes(lab, s, 'heal_dead_worker')
    assert nodes.get(host.ip) is True and len(nodes) == 3, nodes
    s.done.add('heal_dead_worker')


def test_heal_storage_server_refused_while_a_pv_is_bound(lab, s):
    s.need('instantiate')
    master = lab.masters()[0]
    lab.ssh(master, "cat > /tmp/claim.yaml <<'EOF'\n%sEOF\n"
            % pv_manifest.BOUND_CLAIM)
    lab.kubectl('apply', '-f', '/tmp/claim.yaml')
    assert lab.persistent_volumes()['nfs-pv1']['status']['phase'] == 'Bound'
    storage = lab.vnfcs(s.instance_id, 'storage_server')[0]
    s.storage_vnfc = storage
    request = lab.sample_request('heal_storage_server.json')
    request['vnfcInstanceId'] = [storage['id']]
    s.heal_storage_request = request
    occ = s.ops['heal_storage_bound'] = lab.lcm(s.instance_id, 'heal',
                                                request)
    assert occ['operationState'] == 'FAILED_TEMP'
    # What the operator reads: GET /vnf_lcm_op_occs/{id}.
    shown = lab.client.get('/vnflcm/v1/vnf_lcm_op_occs/%s' % occ['id'])
    detail = shown['error']['detail']
    assert 'nfs-pv1' in detail and 'Bound' in detail, detail
    assert 'nfs-pv2' not in detail
    # Nothing was touched: same VM, the PV still Bound, exports intact.
    same = {v['id']: v for v in lab.vnfcs(s.instance_id)}[storage['id']]
    assert same['computeResource'] == storage['computeResource']
    assert lab.persistent_volumes()['nfs-pv1']['status']['phase'] == 'Bound'
    s.failed_heal = occ['id']
    s.done.add('heal_storage_refused')


def test_failed_heal_must_be_handled_before_the_next_one(lab, s):
    s.need('heal_storage_refused')
    # Tacker refuses another LCM operation while one is FAILED_TEMP.
    refused = lab.client.request(
        'POST', '/vnflcm/v1/vnf_instances/%s/heal' % s.instance_id,
        body=s.heal_storage_request)
    assert refused.status == 409, refused.body
    # A heal cannot be rolled back in Tacker's v1 API (instantiate and
    # scale only) ...
    rollback = lab.client.request(
        'POST', '/vnflcm/v1/vnf_lcm_op_occs/%s/rollback' % s.failed_heal)
    assert rollback.status == 409, rollback.body
    assert 'INSTANTIATE/SCALE' in json.dumps(rollback.body)
    # ... so the operator releases the claim and fails the operation.
    lab.kubectl('delete', 'pvc', 'data')
    assert lab.persistent_volumes()['nfs-pv1']['status']['phase'] != 'Bound'
    failed = lab.op_action(s.failed_heal, 'fail')
    assert failed['operationState'] == 'FAILED'
    shown = lab.client.get('/vnflcm/v1/vnf_lcm_op_occs/%s' % s.failed_heal)
    assert shown['operationState'] == 'FAILED'
    s.done.add('failed_heal_handled')


def test_heal_storage_server(lab, s):
    s.need('failed_heal_handled')
    storage = lab.host_at(lab.cp_address(s.instance_id))
    storage.run('touch /volume/nfs/pv2/written-before-heal')
    old_server = s.storage_vnfc['computeResource']['resourceId']
    occ = s.ops['heal_storage'] = lab.lcm(s.instance_id, 'heal',
                                          s.heal_storage_request)
    _completed(occ, 'HEAL')
    healed = {v['id']: v for v in lab.vnfcs(s.instance_id)}[
        s.storage_vnfc['id']]
    assert healed['computeResource']['resourceId'] != old_server
    found = checks.check_storage_and_pvs(lab, s.instance_id)
    # Heat re-created the volume too (Tacker marks it unhealthy with the
    # server): its data is gone, as the user guide warns.
    storage = lab.host_at(found['address'])
    assert storage.run('ls /volume/nfs/pv2').stdout.strip() == ''
    checks.record_nodes(lab, s, 'heal_storage')
    s.done.add('heal_storage')


def test_heal_entire_vnf(lab, s):
    s.need('instantiate')
    old_stack = lab.stack(s.instance_id).id
    old_servers = {v['computeResource']['resourceId']
                   for v in lab.vnfcs(s.instance_id)}
    occ = s.ops['heal_entire'] = lab.lcm(
        s.instance_id, 'heal',
        lab.sample_request('heal_entire_cluster.json'))
    _completed(occ, 'HEAL')
    assert lab.stack(s.instance_id).id != old_stack  # re-created
    new_servers = {v['computeResource']['resourceId']
                   for v in lab.vnfcs(s.instance_id)}
    assert not old_servers & new_servers
    checks.check_storage_and_pvs(lab, s.instance_id)
    assert [v['name'] for v in checks.k8s_vims(lab)] == [
        checks.k8s_vim_name(s.instance_id)]
    checks.record_nodes(lab, s, 'heal_entire')
    s.done.add('heal_entire')


def test_a_v2_cnf_on_the_cluster(lab, s, tmp_path_factory):
    """A v2 CNF on the Kubernetes VIM this v1 VNF registered; it runs
    until test_terminate_the_cnf."""
    s.need('instantiate')
    k8s_vim, = checks.k8s_vims(lab)
    v2 = tacker_v2.V2Api(lab.service.api_url, log=lab.log)
    s.cnf = contextlib.ExitStack()
    s.cnf_id = s.cnf.enter_context(cnf.on_the_cluster(
        lab, v2, s.instance_id,
        cnf.onboard_sample(lab, tmp_path_factory.mktemp('cnf')),
        cnf_package.registered_vim(k8s_vim['id'])))
    kube = lab.engine.kubes[lab.stack(s.instance_id).id]
    s.cnf_file = cnf.kept_file(kube, cnf_sample.running_pod(kube))
    s.done.add('cnf')


def test_terminate_refused_while_the_v2_cnf_runs(lab, s):
    """The v1 door refuses the terminate too (Tacker counts only v1 VNFs
    as its users), before Heat deletes anything; the operator fails the
    operation."""
    s.need('cnf')
    k8s_vim, = checks.k8s_vims(lab)
    stack_id = lab.stack(s.instance_id).id
    servers = {v['computeResource']['resourceId']
               for v in lab.vnfcs(s.instance_id)}
    occ = lab.lcm(s.instance_id, 'terminate',
                  {'terminationType': 'FORCEFUL'})
    assert occ['operationState'] == 'FAILED_TEMP', occ
    detail = lab.client.get('/vnflcm/v1/vnf_lcm_op_occs/%s'
                            % occ['id'])['error']['detail']
    assert s.cnf_id in detail and k8s_vim['id'] in detail, detail
    assert lab.stack(s.instance_id).id == stack_id
    assert servers == {v['computeResource']['resourceId']
                       for v in lab.vnfcs(s.instance_id)}
    assert [v['id'] for v in checks.k8s_vims(lab)] == [k8s_vim['id']]
    assert lab.op_action(occ['id'], 'fail')['operationState'] == 'FAILED'
    assert lab.instance(s.instance_id)['instantiationState'] == \
        'INSTANTIATED'


def test_heal_the_worker_running_the_cnfs_pod(lab, s):
    """heal_start drains the Worker: the pod is evicted and recreated on
    the other Worker with its file."""
    s.need('cnf')

    def heal(host):
        vnfc, = [v for v in lab.vnfcs(s.instance_id, 'workerNode')
                 if lab.engine.hosts[v['computeResource']['resourceId']]
                 == host.name]
        return lab.lcm(s.instance_id, 'heal', {
            'vnfcInstanceId': [vnfc['id']],
            'cause': 'Heal the Worker running the CNF'})
    _, kept = cnf.heal_the_pods_worker(lab, s.instance_id, heal)
    assert kept == s.cnf_file


def test_heal_storage_server_refused_while_the_cnfs_claim_is_bound(lab, s):
    """v1 re-creates the Storage server's volume: heal_start refuses,
    naming the CNF's claim, before anything changes."""
    s.need('cnf')
    kube = lab.engine.kubes[lab.stack(s.instance_id).id]
    storage = lab.vnfcs(s.instance_id, 'storage_server')[0]
    request = lab.sample_request('heal_storage_server.json')
    request['vnfcInstanceId'] = [storage['id']]
    occ = lab.lcm(s.instance_id, 'heal', request)
    assert occ['operationState'] == 'FAILED_TEMP', occ
    detail = lab.client.get('/vnflcm/v1/vnf_lcm_op_occs/%s'
                            % occ['id'])['error']['detail']
    assert 'default/' + cnf_sample.CLAIM in detail, detail
    assert cnf_sample.VOLUME in detail, detail
    same = {v['id']: v for v in lab.vnfcs(s.instance_id)}[storage['id']]
    assert same['computeResource'] == storage['computeResource']
    assert kube.get('pvc', cnf_sample.CLAIM)['status']['phase'] == 'Bound'
    assert lab.host_at(lab.cp_address(s.instance_id)).read_file(
        s.cnf_file) == cnf.KEPT
    assert lab.op_action(occ['id'], 'fail')['operationState'] == 'FAILED'


def test_terminate_the_cnf(s):
    """The CNF goes (terminate, delete; its PV made Available again)."""
    s.need('cnf')
    s.cnf.close()


def test_a_v1_cnf_on_the_cluster(lab, s, tmp_path_factory):
    """The same CNF through /vnflcm/v1 with samples/requests-cnf-v1 on
    the same VIM (Tacker v1's Kubernetes infra driver): instantiated, its
    pod Running with its claim Bound and its file on the Storage server,
    then terminated and deleted."""
    s.need('instantiate')
    k8s_vim, = checks.k8s_vims(lab)
    vnfd_id = cnf.onboard_sample(lab, tmp_path_factory.mktemp('v1-cnf'))
    with cnf.on_the_cluster(lab, cnf.V1Api(lab), s.instance_id, vnfd_id,
                            cnf_package.registered_vim(k8s_vim['id'])) \
            as cnf_id:
        instance = lab.instance(cnf_id)
        assert instance['vimConnectionInfo'][0]['vimId'] == k8s_vim['id']
        assert [v['vduId'] for v in lab.vnfcs(cnf_id)] == ['web']


def test_no_password_shown_by_the_api(lab, s):
    """Every operation so far logged in with key files: neither the
    instance (its instantiatedVnfInfo keeps the instantiate parameters)
    nor any operation occurrence shows a password."""
    s.need('instantiate')
    checks.check_no_password_shown(lab.client, '/vnflcm/v1', s.instance_id,
                                   [occ['id'] for occ in s.ops.values()])


def test_terminate_and_delete(lab, s):
    s.need('instantiate')
    stack_id = lab.stack(s.instance_id).id
    occ = s.ops['terminate'] = lab.lcm(s.instance_id, 'terminate',
                                       {'terminationType': 'FORCEFUL'})
    _completed(occ, 'TERMINATE')
    assert lab.instance(s.instance_id)['instantiationState'] == \
        'NOT_INSTANTIATED'
    # The stack is gone (it still answers by id, as in Heat), every VM
    # with it, and the driver deregistered the Kubernetes VIM.
    assert lab.stack(s.instance_id) is None
    assert lab.cloud.stack(stack_id).status == 'DELETE_COMPLETE'
    assert lab.engine.testbed.hosts == {}
    assert lab.engine.kubes == {}
    assert checks.k8s_vims(lab) == []
    checks.check_no_password_shown(lab.client, '/vnflcm/v1', s.instance_id,
                                   [occ['id'] for occ in s.ops.values()])
    lab.client.delete('/vnflcm/v1/vnf_instances/%s' % s.instance_id,
                      expect=204)
    assert lab.client.request('GET', '/vnflcm/v1/vnf_instances/%s'
                              % s.instance_id).status == 404
    s.done.add('terminate')


# -- what held throughout -----------------------------------------------------

def test_only_testbed_addresses_were_handed_out(lab, s):
    s.need('instantiate')
    subnet = lab.engine.testbed._subnet
    assert lab.engine.errors == []
    addresses = sorted(lab.engine.ever_handed_out)
    assert addresses
    assert all(ipaddress.ip_address(ip) in subnet for ip in addresses)
    assert lab.engine.testbed.bridge_ip not in addresses


# -- the cluster half (issue "Scale and heal of cluster nodes") ---------------

def test_cluster_nodes_ready_after_instantiate(s):
    nodes = checks.nodes_at(s, 'instantiate')
    assert len(nodes) == 3 and all(nodes.values()), nodes


def test_cluster_new_worker_ready_after_scale_out(s):
    nodes = checks.nodes_at(s, 'scale_out')
    assert nodes.get(s.scaled_out_node) is True, nodes
    assert len(nodes) == 4 and all(nodes.values()), nodes


def test_cluster_removed_worker_gone_after_scale_in(s):
    nodes = checks.nodes_at(s, 'scale_in')
    assert s.scaled_in_node not in nodes, nodes
    assert len(nodes) == 3 and all(nodes.values()), nodes


def test_cluster_healed_worker_ready(s):
    nodes = checks.nodes_at(s, 'heal_worker')
    assert nodes.get(s.healed_address) is True, nodes
    assert len(nodes) == 3 and all(nodes.values()), nodes


def test_cluster_ready_after_entire_heal(s):
    nodes = checks.nodes_at(s, 'heal_entire')
    assert len(nodes) == 3 and all(nodes.values()), nodes
