"""The Kubernetes upgrades of an HA cluster through Tacker v2's
ChangeCurrentVnfPackage (``POST /vnflcm/v2/vnf_instances/{id}/
change_vnfpkg``; the v2 door's change_current_package hooks), one minor
after another and a patch release between, as an operator keeps a
cluster current over the years.

One VNF instance of the ``ha`` flavour (samples/requests-v2/
instantiate_ha.json: three Masters behind the VIP, two Workers, the
Storage server), installed at OLD (the sample package built with a 1.35
install script, its hosts an offline image of OLD); its request's
``offline`` object names the test apt repository (testbed.lab_upgrade;
the package carries its key). The
repository serves OLD's minor, FIRST (the next minor's first patch),
PATCH (the sample's version, a later patch of that minor) and LAST (the
minor after). In file order: a claim is Bound to nfs-pv1 and a file
written to its export on the Storage server; a Master powered off,
which Tacker heals by itself (auto-heal); a package at LAST, two
minors ahead, is refused before any change and rolled back; the change
to FIRST, with ``kubeadm upgrade node`` failing on the second Master,
ends FAILED_TEMP naming that Master and the step; its retry converges to
COMPLETED, a probe through the VIP answering every second from before
the change until the retry completed. Then the patch release, both
Workers in one wave held by a PodDisruptionBudget until a replacement
pod runs, a package
that keeps the version (nothing fetched, nothing upgraded), and LAST.
After each, every Node's kubelet is at the package's version, the
instance is on that package with its saved state, the PVs are still
Bound, the file is intact and the Kubernetes VIM still registered; then
terminate and delete.
"""

import concurrent.futures
import json

import pytest

from kubernetes_mgmt_pv.cluster import ha
from testbed import disruption
from testbed import faults
from testbed import lab_upgrade
from testbed import polling
from testbed import pv_manifest
from testbed import standins
from testbed import tacker_lab
from testbed import tacker_v2
from testbed import vip_probe
from tests.tacker_rest import auto_heal_checks as auto_heal
from tests.tacker_rest import lifecycle_checks as checks
from tests.tacker_rest import test_lifecycle_ha as ha_checks

OLD = '1.35.9-1.1'  # 1.35's newest patch (2026-09-15)
FIRST = standins.next_minor(OLD)
PATCH = standins.k8s_package_version()
LAST = standins.next_minor(PATCH)
NEW = standins.kubernetes_version(FIRST)
STATE_KEY = 'kubernetesMgmtPv'
KEPT = 'kept through the upgrade\n'
APT_SOURCE = '/etc/apt/sources.list.d/kubernetes.list'
# kubectl wait's list and watch of a budget in namespace default.
BUDGET_WATCH = '/apis/policy/v1/namespaces/default/poddisruptionbudgets'


@pytest.fixture(scope='module')
def repository(lab):
    with lab_upgrade.LabRepository(lab, versions=(OLD, FIRST),
                                   image_version=OLD) as served:
        yield served


@pytest.fixture(scope='module')
def s():
    session = checks.Session()
    session.probe = None
    yield session
    if session.probe is not None:  # a test stopped before the retry
        session.probe.stop()


@pytest.fixture(scope='module')
def v2(lab):
    return tacker_v2.V2Api(lab.service.api_url, log=lab.log)


def _onboarded(lab, repository, tmp_path, version=None):
    """The sample v2 package with the repository's files, its install
    script at ``version`` (default: the sample's), onboarded: a new
    package each time."""
    # Other modules of the lab onboard the same builds of the sample.
    vnfd_id, package = repository.build_package(
        str(tmp_path), kubernetes_version=version,
        vnfd_id=tacker_lab.own_vnfd_id())
    assert lab.client.onboard_package(package)['vnfdId'] == vnfd_id
    return vnfd_id


def _completed(occ, operation):
    assert occ['operation'] == operation
    assert occ['operationState'] == 'COMPLETED', occ.get('error')


def _hosts(lab, v2, s, *vdu_ids):
    """The test hosts of the instance's VNFCs of ``vdu_ids``."""
    return [lab.engine.testbed.hosts[lab.engine.hosts[
        vnfc['computeResource']['resourceId']]] for vnfc in
        tacker_v2.vnfcs(v2.instance(s.instance_id))
        if vnfc['vduId'] in vdu_ids]


def _nodes(lab, s):
    """{Node name: (kubeletVersion, Ready?)}, kubectl on a Master
    (through the VIP)."""
    items = json.loads(lab.kubectl('get', 'nodes', '-o', 'json',
                                   master=s.masters[0]))['items']
    found = {}
    for item in items:
        conditions = {condition['type']: condition['status'] for condition
                      in item['status'].get('conditions', [])}
        found[item['metadata']['name']] = (
            item['status']['nodeInfo']['kubeletVersion'],
            conditions.get('Ready') == 'True')
    return found


def _apt_sources(s):
    """{host: the Kubernetes apt repository its install script set}."""
    found = {}
    for host in s.nodes:
        line = host.run('cat %s' % APT_SOURCE, check=False).stdout
        found[host.name] = line.split()[-2:-1]  # deb [signed-by=K] URL /
    return {name: words[0] if words else None
            for name, words in found.items()}


def _phases(lab, s):
    items = json.loads(lab.kubectl('get', 'pv', '-o', 'json',
                                   master=s.masters[0]))['items']
    return {item['metadata']['name']: item['status']['phase']
            for item in items}


def _vim(lab, v2, s):
    """The cluster's Kubernetes VIM: registered at the VIP, its id in
    the instance's metadata."""
    vim, = checks.k8s_vims(lab)
    assert vim['name'] == 'kubernetes_vim_%s' % s.instance_id
    assert vim['auth_url'] == 'https://%s:%d' % (
        s.vip, ha.FRONTEND_PORT)
    saved = v2.instance(s.instance_id)['metadata'][STATE_KEY]
    assert saved['vim']['id'] == vim['id']
    return vim


def _on_package(lab, v2, s, vnfd_id, version):
    """The instance is on package ``vnfd_id``, its saved state that of
    the instantiate (the parameters, the VIM), every Node Ready at
    ``version``, the PV Bound and the file intact."""
    instance = v2.instance(s.instance_id)
    assert instance['vnfdId'] == vnfd_id
    saved = instance['metadata'][STATE_KEY]
    assert {key: saved.get(key) for key in s.state if key != 'vim'} == {
        key: value for key, value in s.state.items() if key != 'vim'}
    assert _vim(lab, v2, s)['id'] == s.vim['id']
    nodes = _nodes(lab, s)
    assert len(nodes) == 5 and set(nodes.values()) == {
        (standins.kubernetes_version(version), True)}, nodes
    assert _phases(lab, s)['nfs-pv1'] == 'Bound'
    assert s.storage.read_file(s.kept) == KEPT


def _change(lab, v2, s, vnfd_id):
    occ = v2.lcm(s.instance_id, 'change_vnfpkg',
                 lab_upgrade.next_minor_request(lab, vnfd_id))
    _completed(occ, 'CHANGE_VNFPKG')
    return occ


# -- the steps ------------------------------------------------------------

def test_instantiate_ha_from_the_test_apt_repository(
        lab, v2, s, repository, tmp_path_factory):
    s.vim_id = ha_checks.openstack_vim_id(lab)
    s.old_vnfd_id = _onboarded(lab, repository,
                               tmp_path_factory.mktemp('upgrade-old'), OLD)
    s.instance_id = v2.create(s.old_vnfd_id, 'kubernetes-pv-ha-v2')['id']
    request = repository.instantiate_request(s.vim_id, 'instantiate_ha.json',
                                             version=OLD)
    assert request['flavourId'] == 'ha'
    occ = s.ops['instantiate'] = v2.lcm(s.instance_id, 'instantiate',
                                        request)
    _completed(occ, 'INSTANTIATE')
    s.vip = lab.cp_address(s.instance_id, 'vip_CP')
    s.masters = sorted(_hosts(lab, v2, s, 'masterNode'),
                       key=lambda host: host.ip)
    s.nodes = _hosts(lab, v2, s, 'masterNode', 'workerNode')
    assert len(s.masters) == 3 and len(s.nodes) == 5
    # The nodes were prepared as an offline image of OLD is (its
    # stand-ins installed): none has set an apt source yet.
    assert set(_apt_sources(s).values()) == {None}
    checks.check_storage_and_pvs(lab, s.instance_id)
    nodes = _nodes(lab, s)
    assert len(nodes) == 5 and len(set(nodes.values())) == 1, nodes
    (s.old_version, ready), = set(nodes.values())
    assert ready and s.old_version == standins.kubernetes_version(OLD)
    s.vim = _vim(lab, v2, s)
    s.state = v2.instance(s.instance_id)['metadata'][STATE_KEY]
    s.done.add('instantiate')


def test_a_claim_bound_and_a_file_on_the_storage_server(lab, s):
    s.need('instantiate')
    lab.ssh(s.masters[0], "cat > /tmp/claim.yaml <<'EOF'\n%sEOF\n"
            % pv_manifest.BOUND_CLAIM)
    lab.kubectl('apply', '-f', '/tmp/claim.yaml', master=s.masters[0])
    assert _phases(lab, s)['nfs-pv1'] == 'Bound'
    s.storage = lab.host_at(lab.cp_address(s.instance_id))
    s.kept = checks.EXPORTS[0] + '/kept.txt'
    s.storage.write_file(s.kept, KEPT)
    s.done.add('bound')


def test_a_powered_off_master_of_three_heals_itself(lab, v2, s):
    """Nova powers a Master off; Tacker heals it by itself (the other
    two keep etcd's quorum): the new Master joins at the package's
    version, every Node is Ready, the PV Bound, the file intact, and the
    new VM is probed under its new VNFC id."""
    s.need('bound')
    before = _nodes(lab, s)
    vnfc = [v for v in tacker_v2.vnfcs(v2.instance(s.instance_id),
                                       'masterNode')
            if lab.engine.hosts[v['computeResource']['resourceId']]
            != s.masters[0].name][0]
    occ = s.ops['auto_heal_master'] = auto_heal.power_off_until_healed(
        lab, v2, s.instance_id, [vnfc])
    _completed(occ, 'HEAL')
    assert occ['operationParams'] == {'vnfcInstanceId': [vnfc['vnfcInfoId']]}
    nodes = _nodes(lab, s)
    assert len(nodes) == 5 and set(nodes.values()) == set(
        before.values()) and all(ready for _, ready in nodes.values()), nodes
    assert _phases(lab, s)['nfs-pv1'] == 'Bound'
    assert s.storage.read_file(s.kept) == KEPT
    auto_heal.check_monitored(lab, v2.instance(s.instance_id))
    s.masters = sorted(_hosts(lab, v2, s, 'masterNode'),
                       key=lambda host: host.ip)
    s.nodes = _hosts(lab, v2, s, 'masterNode', 'workerNode')


def test_a_package_two_minors_ahead_is_refused_before_any_change(
        lab, v2, s, repository, tmp_path_factory):
    """1.35 to 1.37: change_current_package_start refuses it, naming
    both versions; no node changed, nothing fetched; the rollback puts
    the instance back on its package."""
    s.need('bound')
    s.last_vnfd_id = _onboarded(lab, repository,
                                tmp_path_factory.mktemp('upgrade-last'), LAST)
    fetched = len(repository.repository.log)
    occ = v2.lcm(s.instance_id, 'change_vnfpkg',
                 lab_upgrade.next_minor_request(lab, s.last_vnfd_id))
    assert occ['operationState'] == 'FAILED_TEMP', occ
    detail = occ['error']['detail']
    assert detail.startswith('change_current_package_start failed: '), detail
    for version in (OLD, LAST):
        assert standins.kubernetes_version(version) in detail, detail
    assert repository.repository.log[fetched:] == []
    occ = v2.op_action(occ['id'], 'rollback')
    assert occ['operationState'] == 'ROLLED_BACK', occ.get('error')
    _on_package(lab, v2, s, s.old_vnfd_id, OLD)


def test_an_upgrade_failing_on_the_second_master_ends_failed_temp(
        lab, v2, s, repository, tmp_path_factory):
    """``kubeadm upgrade node`` fails on every Master: the first Master
    runs ``kubeadm upgrade apply``, so the second one fails, and the
    operation stops there."""
    s.need('bound')
    s.new_vnfd_id = _onboarded(lab, repository,
                               tmp_path_factory.mktemp('upgrade-new'), FIRST)
    s.probe = vip_probe.VipProbe(s.vip)
    s.probe.start()
    with faults.Faults() as injected:
        for master in s.masters:
            injected.command(master, 'kubeadm', match='upgrade node')
        occ = s.ops['change_failed'] = v2.lcm(
            s.instance_id, 'change_vnfpkg',
            lab_upgrade.next_minor_request(lab, s.new_vnfd_id))
        hit = [fault.host for fault in injected if fault.hits]
    assert occ['operation'] == 'CHANGE_VNFPKG'
    assert occ['operationState'] == 'FAILED_TEMP', occ
    assert len(hit) == 1, [host.name for host in hit]
    second = hit[0]
    detail = occ['error']['detail']
    assert detail.startswith('change_current_package_end failed: '), detail
    assert 'kubeadm upgrade node failed on %s' % second.ip in detail, detail
    failure = occ['error']['userScriptErrHandlingData'][STATE_KEY][
        'failure']
    assert (failure['step'], failure['host']) == ('kubeadm upgrade node',
                                                  second.ip)
    # The first Master is at the new version, every other node is not.
    versions = [version for version, _ in _nodes(lab, s).values()]
    assert sorted(versions) == sorted([NEW] + [s.old_version] * 4), versions
    s.failed_occ = occ
    s.done.add('failed')


def test_a_retry_converges_while_the_vip_answers(lab, v2, s, repository):
    s.need('failed')
    occ = s.ops['change_retried'] = v2.op_action(s.failed_occ['id'],
                                                 'retry')
    s.probe.stop()
    _completed(occ, 'CHANGE_VNFPKG')
    probe, s.probe = s.probe, None
    assert probe.silences == [] and probe.answers > 5, probe.silences
    assert v2.instance(s.instance_id)['vnfdId'] == s.new_vnfd_id
    nodes = _nodes(lab, s)
    assert len(nodes) == 5 and set(nodes.values()) == {(NEW, True)}, nodes
    # Each node's packages came from the next minor's repository.
    assert _apt_sources(s) == dict.fromkeys(
        (host.name for host in s.nodes),
        repository.repository.url_for(FIRST))
    assert _phases(lab, s)['nfs-pv1'] == 'Bound'
    assert s.storage.read_file(s.kept) == KEPT
    assert _vim(lab, v2, s)['id'] == s.vim['id']
    s.done.add('upgraded')


def _node_names(kube, hosts):
    """The Node names of the test hosts ``hosts``, by InternalIP."""
    addresses = {host.ip for host in hosts}
    return sorted(node['metadata']['name'] for node in kube.objects('node')
                  if {entry['address'] for entry in node['status'].get(
                      'addresses', [])} & addresses)


def test_a_patch_release_upgrades_both_workers_in_one_wave_past_a_budget(
        lab, v2, s, repository, tmp_path_factory):
    """1.36.1 to the sample's 1.36.4, from the same minor's repository,
    with upgrade_max_unavailable 2: both Workers are cordoned at once; a
    PodDisruptionBudget over a pod on each lets one drain through, and
    the driver watches it (kubectl wait) until the evicted pod's
    replacement runs on a Master; then the other drain goes on and the
    change completes."""
    s.need('upgraded')
    s.patch_vnfd_id = _onboarded(lab, repository,
                                 tmp_path_factory.mktemp('upgrade-patch'))
    kube = lab.engine.kubes[lab.stack(s.instance_id).id]
    workers = _node_names(kube, _hosts(lab, v2, s, 'workerNode'))
    owner = disruption.budget_over(kube, workers)
    request = lab_upgrade.next_minor_request(lab, s.patch_vnfd_id)
    request['additionalParams']['upgrade_max_unavailable'] = 2
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        change = pool.submit(v2.lcm, s.instance_id, 'change_vnfpkg', request)
        polling.wait_until(lambda: change.done() or (
            'GET', BUDGET_WATCH) in kube.request_log,
            'the driver to watch the budget', 900, max_delay=0.5)
        assert not change.done(), change.result()
        assert all(kube.get('node', name)['spec'].get('unschedulable')
                   for name in workers)
        left = [name for name in workers
                if kube.get('pod', disruption.pod_name(name))]
        assert len(left) == 1, left
        disruption.place(kube, owner, 'db-replacement', _node_names(
            kube, s.masters[:1])[0])
        _completed(change.result(), 'CHANGE_VNFPKG')
    assert [pod['metadata']['name'] for pod in kube.objects(
        'pod', 'default') if pod['metadata']['name'].startswith(
            disruption.APP + '-')] == [
        'db-replacement']
    kube.delete('pdb', disruption.BUDGET)
    kube.delete('replicaset', disruption.APP)
    _on_package(lab, v2, s, s.patch_vnfd_id, PATCH)
    assert set(_apt_sources(s).values()) == {
        repository.repository.url_for(PATCH)}
    s.done.add('patch')


def test_a_package_at_the_same_version_upgrades_nothing(
        lab, v2, s, repository, tmp_path_factory):
    """A new package that keeps the version: COMPLETED, the instance on
    it, no node fetched a package or changed."""
    s.need('patch')
    same_vnfd_id = _onboarded(lab, repository,
                              tmp_path_factory.mktemp('upgrade-same'))
    fetched = len(repository.repository.log)
    _change(lab, v2, s, same_vnfd_id)
    assert repository.repository.log[fetched:] == []
    _on_package(lab, v2, s, same_vnfd_id, PATCH)
    s.done.add('same')


def test_the_next_minor_after_the_patch(lab, v2, s, repository):
    """1.36 to 1.37: the package refused at 1.35 is taken now."""
    s.need('same')
    _change(lab, v2, s, s.last_vnfd_id)
    _on_package(lab, v2, s, s.last_vnfd_id, LAST)
    assert set(_apt_sources(s).values()) == {
        repository.repository.url_for(LAST)}


def test_terminate_and_delete(lab, v2, s):
    s.need('instantiate')
    stack_id = lab.stack(s.instance_id).id
    hosts = {host.name for host in _hosts(
        lab, v2, s, 'masterNode', 'workerNode', 'storage_server')}
    lab.kubectl('delete', 'pvc', 'data', '--ignore-not-found',
                master=s.masters[0])
    occ = s.ops['terminate'] = v2.lcm(s.instance_id, 'terminate',
                                      {'terminationType': 'FORCEFUL'})
    _completed(occ, 'TERMINATE')
    assert lab.stack(s.instance_id) is None
    assert lab.cloud.stack(stack_id).status == 'DELETE_COMPLETE'
    assert not hosts & set(lab.engine.testbed.hosts)
    assert checks.k8s_vims(lab) == []
    v2.delete(s.instance_id)
    assert v2.client.request('GET', '/vnflcm/v2/vnf_instances/%s'
                             % s.instance_id).status == 404
