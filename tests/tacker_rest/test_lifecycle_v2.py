"""The user guide's lifecycle through Tacker's v2 API and the v2 door.

The same operator session as test_lifecycle.py, through ``/vnflcm/v2``
(``Version: 2.0.0``): the sample built with ``kubernetes-mgmt-pv package
--api v2`` (its VNFD runs the package script Scripts/kubernetes_mgmt_v2.py,
the driver's v2 door), the requests of samples/requests-v2 (their
vimConnectionInfo names the registered OpenStack VIM, the fake Keystone),
then create, an instantiate that fails after the cluster's VIM is
registered and is rolled back, instantiate, a scale-out that fails after
the new Worker joined and is rolled back, scale out (renewing the Master's
certificates, set to expire in 10 days), two Workers of three powered off
whose automatic heal the driver refuses as an outage (auto-heal paused,
the Workers healed by the operator, auto-heal resumed), scale in, heal of
a Worker, a change to a package two Kubernetes minors ahead refused before
any change and rolled back, a PATCH removing the driver's state and a
change of a cluster CP's external connectivity refused (a PATCH of another
metadata key done), a heal of the Storage server refused while a
PersistentVolume is Bound and done once the claim is gone, heal of the
whole VNF; then a v2 CNF on the cluster (given by VIM id): a terminate
refused while it runs, the Worker running its pod (the pod and its file
move to the other Worker) powered off and healed by Tacker itself
(auto-heal: tests/tacker_rest/auto_heal_checks.py), a Storage heal
re-creating the volume refused, and the Storage server powered off and
healed by Tacker itself keeping its volume (the CNF's claim stays Bound,
its file stays); the CNF terminated; the CNF's flavour "dynamic" (a
StatefulSet whose claim the sample request's default StorageClass
provisions in a directory of its own; tests/tacker_rest/db_on_the_cluster.py),
scaled out to a second pod with a directory of its own, terminated with
both directories kept; an entire heal refused while a CNF given the cluster
inline runs; terminate and delete. After each, the checks of the user
guide (tests/tacker_rest/lifecycle_checks.py) and the VIMs: the OpenStack
one stays the instance's only vimConnectionInfo entry, the cluster's
Kubernetes VIM is in Tacker's registry with its id in the instance's
metadata.

The requests log in with key files only (``ssh_key``: the lab placed the
testbed's client key in the conductor's ssh_key_dir): v2 keeps their names
(the driver's metadata), not passwords; the heals of a Worker give no
login at all. No GET of the instance or of its op occs shows a password.
"""

import contextlib
import datetime
import os
import stat

import pytest

from testbed import cnf_dynamic as dynamic
from testbed import cnf_package
from testbed import cnf_sample
from testbed import lab_upgrade
from testbed import nfs
from testbed import pv_manifest
from testbed import standins
from testbed import tacker_lab
from testbed import tacker_v2
from tests.tacker_rest import auto_heal_checks as auto_heal
from tests.tacker_rest import cnf_on_the_cluster as cnf
from tests.tacker_rest import db_on_the_cluster as db
from tests.tacker_rest import lifecycle_checks as checks

STATE_KEY = checks.STATE_KEY


@pytest.fixture(scope='module')
def s():
    return checks.Session()


@pytest.fixture(scope='module')
def v2(lab):
    return tacker_v2.V2Api(lab.service.api_url, log=lab.log)


@pytest.fixture(scope='module')
def cnf_vnfd_id(lab, tmp_path_factory):
    """The sample CNF, onboarded once for both its flavours."""
    return cnf.onboard_sample(lab, tmp_path_factory.mktemp('cnf'))


def _completed(occ, operation):
    assert occ['operation'] == operation
    assert occ['operationState'] == 'COMPLETED', occ.get('error')


def _sample(lab, name):
    """A request of samples/requests-v2, its logins the key files."""
    return lab.sample_request(name, 'v2', login='key')


def _vnfcs(v2, s, vdu_id=None):
    return tacker_v2.vnfcs(v2.instance(s.instance_id), vdu_id)


# -- the steps ------------------------------------------------------------

def test_openstack_vim_and_package(lab, s, tmp_path_factory):
    existing = [v for v in lab.vims() if v['type'] == 'openstack']
    s.vim_id = existing[0]['id'] if existing else \
        lab.register_openstack_vim()['id']
    # Other modules of the lab onboard the sample v2 package too.
    s.vnfd_id, package = lab.build_package(
        str(tmp_path_factory.mktemp('v2package')), api='v2',
        vnfd_id=tacker_lab.own_vnfd_id())
    assert lab.client.onboard_package(package)['vnfdId'] == s.vnfd_id
    s.done.add('package')


def test_failed_instantiate_is_rolled_back(lab, v2, s):
    """instantiate_end fails after registering the VIM: the rollback
    deletes the VIM before Heat deletes the stack."""
    s.need('package')
    s.instance_id = v2.create(s.vnfd_id, 'kubernetes-pv-v2')['id']
    request = lab.instantiate_request(s.vim_id, api='v2', login='key')
    occ, _ = checks.fails_after_the_cluster_part(lab, v2, s, 'instantiate',
                                                 request)
    stack_id = lab.stack(s.instance_id).id
    registered = checks.k8s_vims(lab)
    assert [v['name'] for v in registered] == [
        checks.k8s_vim_name(s.instance_id)]
    # Tacker keeps only userScriptErrHandlingData of a failed hook.
    handed = occ['error']['userScriptErrHandlingData'][STATE_KEY]
    assert handed['registeredVim']['id'] == registered[0]['id']
    occ = v2.op_action(occ['id'], 'rollback')
    assert occ['operationState'] == 'ROLLED_BACK', occ.get('error')
    assert checks.k8s_vims(lab) == []
    assert lab.stack(s.instance_id) is None
    assert lab.cloud.stack(stack_id).status == 'DELETE_COMPLETE'
    assert v2.instance(s.instance_id)['instantiationState'] == \
        'NOT_INSTANTIATED'
    s.done.add('instantiate_rolled_back')


def test_instantiate(lab, v2, s):
    s.need('package')
    if 'instantiate_rolled_back' not in s.done:
        s.instance_id = v2.create(s.vnfd_id, 'kubernetes-pv-v2')['id']
    # The same instance again, after the rollback: its VIM name is free.
    # samples/requests-v2: vimConnectionInfo names the registered VIM.
    request = lab.instantiate_request(s.vim_id, api='v2', login='key')
    assert list(request['vimConnectionInfo']) == [tacker_v2.VIM_KEY]
    occ = s.ops['instantiate'] = v2.lcm(s.instance_id, 'instantiate',
                                        request)
    _completed(occ, 'INSTANTIATE')
    assert v2.instance(s.instance_id)['instantiationState'] == \
        'INSTANTIATED'
    assert sorted(v['vduId'] for v in _vnfcs(v2, s)) == [
        'masterNode', 'storage_server', 'workerNode', 'workerNode']
    checks.check_storage_and_pvs(lab, s.instance_id)
    checks.check_v2_vims(lab, v2, s)
    nodes = checks.record_nodes(lab, s, 'instantiate')
    assert len(nodes) == 3 and all(nodes.values()), nodes
    auto_heal.check_monitored(lab, v2.instance(s.instance_id))
    s.done.add('instantiate')


def test_failed_scale_out_is_rolled_back(lab, v2, s):
    """scale_end fails after the new Worker joined: the rollback drains
    and deletes its Node before Heat deletes its VM."""
    s.need('instantiate')
    workers = {v['id'] for v in _vnfcs(v2, s, 'workerNode')}
    nodes_before = checks.ready_nodes(lab)
    occ, (new_host,) = checks.fails_after_the_cluster_part(
        lab, v2, s, 'scale', _sample(lab, 'scale_out_worker.json'))
    joined = checks.ready_nodes(lab)
    assert joined.get(new_host.ip) is True and len(joined) == 4, joined
    occ = v2.op_action(occ['id'], 'rollback')
    assert occ['operationState'] == 'ROLLED_BACK', occ.get('error')
    assert {v['id'] for v in _vnfcs(v2, s, 'workerNode')} == workers
    assert new_host.name not in lab.engine.testbed.hosts
    nodes = checks.record_nodes(lab, s, 'scale_out_rolled_back')
    assert nodes == nodes_before and all(nodes.values()), nodes


def _master_host(lab, v2, s):
    master, = _vnfcs(v2, s, 'masterNode')
    return lab.engine.testbed.hosts[lab.engine.hosts[
        master['computeResource']['resourceId']]]


def _kube(lab, s):
    return lab.engine.kubes[lab.stack(s.instance_id).id]


def test_scale_out_renews_certificates_expiring_in_10_days(lab, v2, s):
    """The Master's kubeadm certificates, signed again to expire in 10
    days, are renewed by the scale-out (cert_renewal_days: 60)."""
    s.need('instantiate')
    master = _master_host(lab, v2, s)
    standins.expire_certificates(master, 10)
    now = datetime.datetime.utcnow()
    assert all(date - now < datetime.timedelta(days=11)
               for date in standins.certificate_expiry(master).values())
    before = {v['id'] for v in _vnfcs(v2, s, 'workerNode')}
    since = len(_kube(lab, s).request_log)
    occ = s.ops['scale_out'] = v2.lcm(
        s.instance_id, 'scale', _sample(lab, 'scale_out_worker.json'))
    _completed(occ, 'SCALE')
    renewed = standins.certificate_expiry(master)
    assert len(renewed) == 4 and all(
        datetime.timedelta(days=364) < date - now <
        datetime.timedelta(days=366) for date in renewed.values()), renewed
    workers = _vnfcs(v2, s, 'workerNode')
    added = [v for v in workers if v['id'] not in before]
    assert len(workers) == 3 and len(added) == 1
    host = lab.engine.testbed.hosts[lab.engine.hosts[
        added[0]['computeResource']['resourceId']]]
    nodes = checks.record_nodes(lab, s, 'scale_out')
    assert nodes.get(host.ip) is True and len(nodes) == 4, nodes
    checks.node_plugin_waited_for(lab, _kube(lab, s), host.ip, since)
    auto_heal.check_monitored(lab, v2.instance(s.instance_id))
    s.added = added[0]
    s.done.add('scale_out')


def test_two_workers_of_three_down_is_an_outage_not_healed(lab, v2, s):
    """Two of three Workers powered off: the driver refuses Tacker's own
    heal before any change (more Nodes down than auto_heal_max_unhealthy,
    40 % of 3); the operator fails it, pauses auto-heal for the instance
    (its VMs no longer probed), heals both and resumes it."""
    s.need('scale_out')
    auto_heal.check_outage_refused_then_recovered(
        lab, v2, s.instance_id, [s.added] + [v for v in _vnfcs(
            v2, s, 'workerNode') if v['id'] != s.added['id']][:1],
        '2 of 4 Nodes are not Ready')


def test_scale_in(lab, v2, s):
    s.need('scale_out')
    addresses = {v['id']: lab.engine.testbed.hosts[lab.engine.hosts[
        v['computeResource']['resourceId']]].ip
        for v in _vnfcs(v2, s, 'workerNode')}
    occ = s.ops['scale_in'] = v2.lcm(
        s.instance_id, 'scale', _sample(lab, 'scale_in_worker.json'))
    _completed(occ, 'SCALE')
    # Tacker picked one Worker; Heat removed exactly that one.
    gone, = set(addresses) - {v['id'] for v in _vnfcs(v2, s, 'workerNode')}
    checks.check_storage_and_pvs(lab, s.instance_id)
    nodes = checks.record_nodes(lab, s, 'scale_in')
    assert addresses[gone] not in nodes and \
        list(nodes.values()) == [True] * 3, nodes
    auto_heal.check_monitored(lab, v2.instance(s.instance_id))
    s.done.add('scale')


def test_heal_a_worker(lab, v2, s):
    s.need('instantiate')
    worker = _vnfcs(v2, s, 'workerNode')[0]
    old_server = worker['computeResource']['resourceId']
    host_name = lab.engine.hosts[old_server]
    since = len(_kube(lab, s).request_log)
    # No login in the request: the saved key file names are used.
    occ = s.ops['heal_worker'] = v2.lcm(s.instance_id, 'heal', {
        'vnfcInstanceId': [worker['vnfcInfoId']],
        'cause': 'Heal a Worker node'})
    _completed(occ, 'HEAL')
    # The same VM name and address, a new server (fresh root fs): v2's
    # VNFC ids are its server's, so they changed too.
    healed, = [v for v in _vnfcs(v2, s, 'workerNode')
               if lab.engine.hosts.get(v['computeResource']['resourceId'])
               == host_name]
    assert healed['computeResource']['resourceId'] != old_server
    address = lab.engine.testbed.hosts[host_name].ip
    checks.check_storage_and_pvs(lab, s.instance_id)
    nodes = checks.record_nodes(lab, s, 'heal_worker')
    assert nodes.get(address) is True and len(nodes) == 3, nodes
    checks.node_plugin_waited_for(lab, _kube(lab, s), address, since)
    s.done.add('heal_worker')


def _cluster_hosts(lab, v2, s):
    """The test hosts of the instance's Masters and Workers."""
    return [lab.engine.testbed.hosts[lab.engine.hosts[
        v['computeResource']['resourceId']]] for v in _vnfcs(v2, s)
        if v['vduId'] in ('masterNode', 'workerNode')]


def _versions(lab, v2, s):
    """Each Node's kubelet version and each host's Kubernetes packages."""
    kubelets = {name: node['status']['nodeInfo']['kubeletVersion']
                for name, node in lab.nodes().items()}
    packages = {host.name: host.run(
        "dpkg-query -W -f='${Version} ' kubeadm kubelet kubectl").stdout
        for host in _cluster_hosts(lab, v2, s)}
    return kubelets, packages


def _package_change(lab, s, tmp_path_factory, version):
    """The sample package with the install script at ``version``,
    onboarded; the ChangeCurrentVnfPackage request for it (the logins of
    the sample requests, no server replaced)."""
    vnfd_id, package = lab.build_package(
        str(tmp_path_factory.mktemp('v2upgrade')), api='v2',
        transform=lab_upgrade.script_version(version),
        vnfd_id=tacker_lab.own_vnfd_id())
    assert lab.client.onboard_package(package)['vnfdId'] == vnfd_id
    return lab_upgrade.next_minor_request(lab, vnfd_id)


def test_a_package_two_minors_ahead_is_refused_and_rolled_back(
        lab, v2, s, tmp_path_factory):
    """change_current_package_start refuses a jump of two minors before
    any change (FAILED_TEMP naming both versions, every node as it was);
    the rollback puts the instance back on its package and says the
    nodes are not downgraded."""
    s.need('instantiate')
    two_minors = standins.next_minor(standins.next_minor())
    before = _versions(lab, v2, s)
    vnfd_before = v2.instance(s.instance_id)['vnfdId']
    occ = v2.lcm(s.instance_id, 'change_vnfpkg',
                 _package_change(lab, s, tmp_path_factory, two_minors))
    assert occ['operationState'] == 'FAILED_TEMP', occ
    detail = occ['error']['detail']
    assert 'change_current_package_start' in detail
    assert standins.kubernetes_version(two_minors) in detail
    assert standins.kubernetes_version() in detail
    assert _versions(lab, v2, s) == before
    occ = v2.op_action(occ['id'], 'rollback')
    assert occ['operationState'] == 'ROLLED_BACK', occ.get('error')
    assert v2.instance(s.instance_id)['vnfdId'] == vnfd_before
    assert _versions(lab, v2, s) == before
    checks.check_v2_vims(lab, v2, s)
    nodes = checks.record_nodes(lab, s, 'package_change_refused')
    assert len(nodes) == 3 and all(nodes.values()), nodes


def test_a_patch_cannot_erase_the_drivers_state(lab, v2, s):
    """modify_information_start refuses a PATCH removing the state (scale,
    heal and terminate would skip the cluster without it); a PATCH of
    another metadata key goes through."""
    s.need('instantiate')
    saved = v2.instance(s.instance_id)['metadata'][STATE_KEY]
    occ = v2.modify(s.instance_id, {'metadata': {STATE_KEY: None}})
    assert occ['operation'] == 'MODIFY_INFO'
    assert occ['operationState'] == 'FAILED_TEMP'
    detail = occ['error']['detail']
    assert 'modify_information_start' in detail, detail
    assert 'metadata.%s' % STATE_KEY in detail, detail
    assert v2.instance(s.instance_id)['metadata'][STATE_KEY] == saved
    assert v2.op_action(occ['id'], 'fail')['operationState'] == 'FAILED'
    assert v2.instance(s.instance_id)['metadata'][STATE_KEY] == saved

    occ = v2.modify(s.instance_id, {'metadata': {'owner': 'team-a'},
                                    'vnfInstanceDescription': 'guarded'})
    _completed(occ, 'MODIFY_INFO')
    instance = v2.instance(s.instance_id)
    assert instance['metadata']['owner'] == 'team-a'
    assert instance['vnfInstanceDescription'] == 'guarded'
    assert instance['metadata'][STATE_KEY] == saved


def test_change_ext_conn_of_a_cluster_cp_is_refused(lab, v2, s):
    """A new port for the Workers' CP would change addresses the cluster
    holds: change_external_connectivity_start refuses it, nothing
    changes."""
    s.need('instantiate')
    before = _vnfcs(v2, s)
    occ = v2.lcm(s.instance_id, 'change_ext_conn', {'extVirtualLinks': [{
        'id': 'ext-vl-workers', 'resourceId': 'net-workers',
        'extCps': [{'cpdId': 'workerNode_CP2', 'cpConfig': {'port1': {
            'cpProtocolData': [{'layerProtocol': 'IP_OVER_ETHERNET',
                                'ipOverEthernet': {'ipAddresses': [{
                                    'type': 'IPV4',
                                    'numDynamicAddresses': 1}]}}]}}}]}]})
    assert occ['operation'] == 'CHANGE_EXT_CONN'
    assert occ['operationState'] == 'FAILED_TEMP'
    detail = occ['error']['detail']
    assert 'change_external_connectivity_start' in detail, detail
    assert 'extVirtualLinks[0].extCps[0].cpdId' in detail, detail
    assert 'workerNode_CP2' in detail, detail
    assert v2.op_action(occ['id'], 'fail')['operationState'] == 'FAILED'
    assert _vnfcs(v2, s) == before
    assert v2.instance(s.instance_id)['instantiationState'] == \
        'INSTANTIATED'


def _bind_the_claim(lab):
    lab.ssh(lab.masters()[0], "cat > /tmp/claim.yaml <<'EOF'\n%sEOF\n"
            % pv_manifest.BOUND_CLAIM)
    lab.kubectl('apply', '-f', '/tmp/claim.yaml')


def test_heal_storage_server_refused_while_a_pv_is_bound(lab, v2, s):
    s.need('instantiate')
    _bind_the_claim(lab)
    assert lab.persistent_volumes()['nfs-pv1']['status']['phase'] == 'Bound'
    storage, = _vnfcs(v2, s, 'storage_server')
    s.storage_vnfc = storage
    # all: the Storage server's volume is healed (re-created) too, as
    # Tacker v1 does by default.
    request = _sample(lab, 'heal_storage_server.json')
    request['vnfcInstanceId'] = [storage['vnfcInfoId']]
    request['additionalParams']['all'] = True
    s.heal_storage_request = request
    occ = s.ops['heal_storage_bound'] = v2.lcm(s.instance_id, 'heal',
                                               s.heal_storage_request)
    assert occ['operationState'] == 'FAILED_TEMP'
    error = v2.op_occ(occ['id'])['error']
    detail = error['detail']
    assert 'nfs-pv1' in detail and 'Bound' in detail, detail
    assert 'default/data' in detail, detail  # the claim
    assert 'nfs-pv2' not in detail
    # Tacker's "<hook> failed: " and the repr of the script's stderr: one
    # ASCII line naming the step and the Master it ran on, the hook once.
    master = lab.masters()[0].ip
    assert detail.startswith(
        "heal_start failed: b'PersistentVolume check failed on %s: "
        % master), detail
    assert detail.endswith(".'") and '\\' not in detail, detail
    assert detail.count('heal_start') == 1, detail
    failure = error['userScriptErrHandlingData'][STATE_KEY]['failure']
    assert failure['step'] == 'PersistentVolume check'
    assert failure['host'] == master
    assert failure['reason'] in detail and 'nfs-pv1' in failure['reason']
    assert failure['retry'].startswith('a retry runs heal_start again')
    # The lab's tacker.conf sets no log_dir: the log is in its state_path.
    assert failure['logFile'] == os.path.join(
        lab.service.workdir, 'state', 'kubernetes-mgmt-pv-v2.log')
    with open(failure['logFile']) as log:
        assert failure['reason'] in log.read()
    assert stat.S_IMODE(os.stat(failure['logFile']).st_mode) == 0o600
    same, = _vnfcs(v2, s, 'storage_server')
    assert same['computeResource'] == storage['computeResource']
    assert lab.persistent_volumes()['nfs-pv1']['status']['phase'] == 'Bound'
    # The operator releases the claim and fails the operation.
    lab.kubectl('delete', 'pvc', 'data')
    assert v2.op_action(occ['id'], 'fail')['operationState'] == 'FAILED'
    s.done.add('heal_storage_refused')


def test_heal_storage_server(lab, v2, s):
    s.need('heal_storage_refused')
    old_server = s.storage_vnfc['computeResource']['resourceId']
    occ = s.ops['heal_storage'] = v2.lcm(s.instance_id, 'heal',
                                         s.heal_storage_request)
    _completed(occ, 'HEAL')
    healed, = _vnfcs(v2, s, 'storage_server')
    assert healed['computeResource']['resourceId'] != old_server
    checks.check_storage_and_pvs(lab, s.instance_id)
    checks.record_nodes(lab, s, 'heal_storage')
    s.done.add('heal_storage')


def test_heal_entire_vnf(lab, v2, s):
    s.need('instantiate')
    old_stack = lab.stack(s.instance_id).id
    old_servers = {v['computeResource']['resourceId']
                   for v in _vnfcs(v2, s)}
    body = _sample(lab, 'heal_entire_cluster.json')
    body['additionalParams']['all'] = True  # v2: re-create the stack
    occ = s.ops['heal_entire'] = v2.lcm(s.instance_id, 'heal', body)
    _completed(occ, 'HEAL')
    assert lab.stack(s.instance_id).id != old_stack
    assert not old_servers & {v['computeResource']['resourceId']
                              for v in _vnfcs(v2, s)}
    checks.check_storage_and_pvs(lab, s.instance_id)
    checks.check_v2_vims(lab, v2, s)
    nodes = checks.record_nodes(lab, s, 'heal_entire')
    assert len(nodes) == 3 and all(nodes.values()), nodes
    s.done.add('heal_entire')


def _refused_while_the_cnf_runs(lab, v2, s, cnf_id, operation, body):
    """``operation`` of the cluster VNF fails (FAILED_TEMP) naming the CNF
    and its VIM, before anything is deleted; the operator fails it."""
    k8s_vim = checks.check_v2_vims(lab, v2, s)
    stack_id = lab.stack(s.instance_id).id
    servers = {v['computeResource']['resourceId'] for v in _vnfcs(v2, s)}
    hosts = {lab.engine.hosts[server] for server in servers}
    volumes = set(lab.persistent_volumes())
    occ = v2.lcm(s.instance_id, operation, body)
    assert occ['operationState'] == 'FAILED_TEMP', occ
    detail = v2.op_occ(occ['id'])['error']['detail']
    assert cnf_id in detail and k8s_vim['id'] in detail, detail
    assert lab.stack(s.instance_id).id == stack_id
    assert servers == {v['computeResource']['resourceId']
                       for v in _vnfcs(v2, s)}
    assert hosts <= set(lab.engine.testbed.hosts)
    assert checks.check_v2_vims(lab, v2, s)['id'] == k8s_vim['id']
    assert set(lab.persistent_volumes()) == volumes
    deployment = lab.engine.kubes[stack_id].get('deployment', cnf.DEPLOYMENT)
    assert deployment['status']['readyReplicas'] == 1, deployment
    assert v2.op_action(occ['id'], 'fail')['operationState'] == 'FAILED'
    assert v2.instance(s.instance_id)['instantiationState'] == \
        'INSTANTIATED'


def test_a_cnf_on_the_registered_vim(lab, v2, s, cnf_vnfd_id):
    """A v2 CNF instantiated on the Kubernetes VIM the door registered
    (by vimId): Tacker's Kubernetes infra driver completes it on the
    cluster. It runs until test_terminate_the_cnf."""
    s.need('instantiate')
    vim = cnf_package.registered_vim(checks.check_v2_vims(lab, v2, s)['id'])
    s.cnf = contextlib.ExitStack()
    s.cnf_id = s.cnf.enter_context(cnf.on_the_cluster(
        lab, v2, s.instance_id, cnf_vnfd_id, vim))
    kube = _kube(lab, s)
    s.cnf_file = cnf.kept_file(kube, cnf_sample.running_pod(kube))
    s.done.add('cnf')


def test_terminate_refused_while_the_cnf_runs(lab, v2, s):
    s.need('cnf')
    _refused_while_the_cnf_runs(lab, v2, s, s.cnf_id, 'terminate',
                                {'terminationType': 'FORCEFUL'})


def test_the_powered_off_worker_of_the_cnfs_pod_heals_itself(lab, v2, s):
    """Nova powers the Worker running the CNF's pod off: the probe of its
    kubelet fails, Prometheus fires, Alertmanager posts to Tacker, and
    Tacker heals the VNFC by itself (no additionalParams). The pod comes
    back on the other Worker with its file, the claim Bound; the new VM
    is probed under its new VNFC id."""
    s.need('cnf')
    pod, stored, host, others = cnf.the_pods_worker(lab, s.instance_id)
    vnfc, = [v for v in _vnfcs(v2, s, 'workerNode') if lab.engine.hosts[
        v['computeResource']['resourceId']] == host.name]
    occ = s.ops['auto_heal_worker'] = auto_heal.power_off_until_healed(
        lab, v2, s.instance_id, [vnfc])
    _completed(occ, 'HEAL')
    assert occ['operationParams'] == {
        'vnfcInstanceId': [vnfc['vnfcInfoId']]}, occ['operationParams']
    _, kept = cnf.pod_back_with_its_file(lab, s.instance_id, pod, stored,
                                         others)
    assert kept == s.cnf_file
    nodes = checks.record_nodes(lab, s, 'heal_cnf_worker')
    assert len(nodes) == 3 and all(nodes.values()), nodes
    assert vnfc['vnfcInfoId'] not in {v['vnfcInfoId'] for v in _vnfcs(v2, s)}
    auto_heal.check_monitored(lab, v2.instance(s.instance_id))
    s.done.add('cnf_worker_healed')


def test_heal_storage_recreating_its_volume_refused_while_the_cnf_runs(
        lab, v2, s):
    """With all: true the Storage server's volume would be re-created:
    heal_start refuses, naming the CNF's claim, before anything
    changes."""
    s.need('cnf')
    kube = _kube(lab, s)
    storage, = _vnfcs(v2, s, 'storage_server')
    request = _sample(lab, 'heal_storage_server.json')
    request['vnfcInstanceId'] = [storage['vnfcInfoId']]
    request['additionalParams']['all'] = True
    occ = v2.lcm(s.instance_id, 'heal', request)
    assert occ['operationState'] == 'FAILED_TEMP', occ
    detail = v2.op_occ(occ['id'])['error']['detail']
    assert 'default/' + cnf_sample.CLAIM in detail, detail
    assert cnf_sample.VOLUME in detail, detail
    same, = _vnfcs(v2, s, 'storage_server')
    assert same['computeResource'] == storage['computeResource']
    assert kube.get('pvc', cnf_sample.CLAIM)['status']['phase'] == \
        'Bound'
    host = lab.host_at(lab.cp_address(s.instance_id))
    assert host.read_file(s.cnf_file) == cnf.KEPT
    assert v2.op_action(occ['id'], 'fail')['operationState'] == 'FAILED'


def test_heal_storage_server_keeping_its_volume_while_the_cnf_runs(
        lab, v2, s):
    """The Storage server powered off is healed by Tacker itself, with
    no additionalParams: v2 replaces only the VM, its Cinder volume and
    port stay, attached to the new VM. The heal goes ahead while the
    CNF's claim is Bound: the claim stays Bound, the pod's file stays,
    the export is served and writable again."""
    s.need('cnf_worker_healed')
    kube = _kube(lab, s)
    assert kube.get('pvc', cnf_sample.CLAIM)['status']['phase'] == \
        'Bound'
    storage, = _vnfcs(v2, s, 'storage_server')
    old_host = lab.host_at(lab.cp_address(s.instance_id))
    assert old_host.read_file(s.cnf_file) == cnf.KEPT
    old_host.write_file('/root-fs-probe', 'old VM')
    versions = {name: pv['metadata']['resourceVersion']
                for name, pv in lab.persistent_volumes().items()}
    occ = s.ops['heal_storage_kept'] = auto_heal.power_off_until_healed(
        lab, v2, s.instance_id, [storage])
    _completed(occ, 'HEAL')
    assert occ['operationParams'] == {
        'vnfcInstanceId': [storage['vnfcInfoId']]}
    healed, = _vnfcs(v2, s, 'storage_server')
    assert healed['computeResource']['resourceId'] != \
        storage['computeResource']['resourceId']
    host = lab.host_at(lab.cp_address(s.instance_id))
    assert host.ip == old_host.ip  # the port stayed
    assert host.run('cat /root-fs-probe', check=False).returncode != 0
    assert host.read_file(s.cnf_file) == cnf.KEPT
    checks.check_volume_mounted_and_exported(lab, s.instance_id)
    volumes = lab.persistent_volumes()
    assert volumes['nfs-pv1']['status']['phase'] == 'Bound'
    assert {name: pv['metadata']['resourceVersion']
            for name, pv in volumes.items()} == versions
    assert kube.get('pvc', cnf_sample.CLAIM)['status']['phase'] == \
        'Bound'
    export, name = s.cnf_file.rsplit('/', 1)
    worker = lab.engine.testbed.hosts[lab.engine.hosts[_vnfcs(
        v2, s, 'workerNode')[0]['computeResource']['resourceId']]]
    nfs.start_ganesha(host)
    nfs.nfs_write(worker, host.ip, export, 'after.txt', 'healed')
    assert nfs.nfs_read(worker, host.ip, export, name) == cnf.KEPT
    assert host.read_file(export + '/after.txt') == 'healed'
    s.done.add('heal_storage_kept')


def test_terminate_the_cnf(s):
    """The CNF goes (terminate, delete; its PV made Available again)."""
    s.need('cnf')
    s.cnf.close()


def test_a_statefulset_claims_a_volume_of_the_default_class(
        lab, v2, s, cnf_vnfd_id):
    """The sample CNF's flavour "dynamic" (the StatefulSet db, its claim
    template naming no class) on the registered VIM: the cluster's
    default class, nfs-dynamic, provisions data-db-0 in
    /volume/nfs/dynamic/default/data-db-0. It runs until
    test_terminate_the_statefulset_keeps_its_directories."""
    s.need('instantiate')
    vim = cnf_package.registered_vim(checks.check_v2_vims(lab, v2, s)['id'])
    s.db = contextlib.ExitStack()
    s.db_cnf = s.db.enter_context(db.on_the_cluster(
        lab, v2, s.instance_id, cnf_vnfd_id))
    _completed(s.db_cnf.instantiate(vim), 'INSTANTIATE')
    s.db_cnf.check_pod(0)
    assert s.db_cnf.vnfc_pods() == [dynamic.pod_name(0)]
    s.done.add('db')


def test_scale_out_gives_the_new_pod_a_directory_of_its_own(s):
    s.need('db')
    _completed(s.db_cnf.lcm('scale', cnf_sample.request(dynamic.SCALE_OUT)),
               'SCALE')
    s.db_cnf.check_pod(1)
    claims = s.db_cnf.claims()
    assert sorted(claims) == [dynamic.claim_name(0), dynamic.claim_name(1)]
    assert len(set(claims.values())) == 2, claims  # a PV each
    assert s.db_cnf.vnfc_pods() == [dynamic.pod_name(0),
                                    dynamic.pod_name(1)]


def test_terminate_the_statefulset_keeps_its_directories(s):
    """Tacker's terminate deletes the StatefulSet and its claims: their
    PVs go, and with on_delete retain both directories and their files
    stay on the Storage server's volume."""
    s.need('db')
    kube, volumes = s.db_cnf.kube, set(s.db_cnf.claims().values())
    _completed(s.db_cnf.lcm('terminate', {'terminationType': 'FORCEFUL'}),
               'TERMINATE')
    assert kube.wait_for(lambda: not s.db_cnf.claims() and not [
        name for name in volumes if kube.get('pv', name)], 60), \
        kube.objects('pv')
    assert s.db_cnf.stored_files() == s.db_cnf.written
    s.db.close()


def test_entire_heal_refused_while_a_cnf_is_on_the_cluster_inline(
        lab, v2, s, cnf_vnfd_id):
    """A v2 CNF given the cluster inline (API server URL, token, CA; no
    vimId) keeps the VIM too: the entire-VNF heal is refused."""
    s.need('instantiate')
    kube = _kube(lab, s)
    vim = cnf_package.inline_vim(checks.check_v2_vims(lab, v2, s)['auth_url'],
                                 kube.token, kube.ca_pem)
    body = _sample(lab, 'heal_entire_cluster.json')
    body['additionalParams']['all'] = True
    with cnf.on_the_cluster(lab, v2, s.instance_id, cnf_vnfd_id, vim) \
            as cnf_id:
        _refused_while_the_cnf_runs(lab, v2, s, cnf_id, 'heal', body)


def test_no_password_shown_by_the_api(lab, v2, s):
    """Every operation so far logged in with key files: neither the
    instance (its metadata keeps the driver's state) nor any operation
    occurrence shows a password."""
    s.need('instantiate')
    checks.check_no_password_shown(v2.client, '/vnflcm/v2', s.instance_id,
                                   [occ['id'] for occ in s.ops.values()])


def test_terminate_and_delete(lab, v2, s):
    s.need('instantiate')
    stack_id = lab.stack(s.instance_id).id
    hosts = {lab.engine.hosts[v['computeResource']['resourceId']]
             for v in _vnfcs(v2, s)}
    occ = s.ops['terminate'] = v2.lcm(s.instance_id, 'terminate',
                                      {'terminationType': 'FORCEFUL'})
    _completed(occ, 'TERMINATE')
    assert v2.instance(s.instance_id)['instantiationState'] == \
        'NOT_INSTANTIATED'
    assert lab.stack(s.instance_id) is None
    assert lab.cloud.stack(stack_id).status == 'DELETE_COMPLETE'
    assert not hosts & set(lab.engine.testbed.hosts)
    assert stack_id not in lab.engine.kubes
    assert checks.k8s_vims(lab) == []
    assert auto_heal.instance_files(lab, s.instance_id) == []
    checks.check_no_password_shown(v2.client, '/vnflcm/v2', s.instance_id,
                                   [occ['id'] for occ in s.ops.values()])
    v2.delete(s.instance_id)
    assert v2.client.request('GET', '/vnflcm/v2/vnf_instances/%s'
                             % s.instance_id).status == 404
