"""The Kubernetes minor upgrade end to end (cluster/upgrade.py) on an HA
cluster of three Masters and two Workers: the next minor's install script
(standins.script_at) upgrades the nodes' packages from the test apt
repository's next-minor path, kubeadm's upgrade stand-in restarts each
Master's control plane, the kubelet's package posts its new version.

One cluster for the module, its tests in file order: a two-minor jump is
refused before any change; the check installs nothing on the Masters and
refuses while an etcd member does not answer; then the upgrade, failed
on the second Master by an injected kubeadm error, run again with both
Workers in one wave, where a PodDisruptionBudget lets one Worker's drain
through and blocks the other's, and run a third time once the budget is
gone, converges while a claim is Bound, a file sits on the Storage
server and a probe through the VIP answers every second; the etcd
snapshot the upgrade took first restores into a fresh etcd.
"""

import base64
import contextlib
import json
import shlex

import pytest

from kubernetes_mgmt_pv.cluster import etcd
from kubernetes_mgmt_pv.cluster import etcd_snapshot
from kubernetes_mgmt_pv.cluster import upgrade
from kubernetes_mgmt_pv.cluster import upgrade_plan
from kubernetes_mgmt_pv.doors import v2_failure
from kubernetes_mgmt_pv import exceptions
from testbed import apt_repo
from testbed import disruption
from testbed import faults
from testbed import standins
from testbed import vip_probe
from testbed import virtual_vnf
from tests.functional.conftest import skip_without_testbed
from tests.functional import etcd_restore
from tests.functional.test_pv_lifecycle import bind_claim

OLD = standins.kubernetes_version()
NEXT = standins.next_minor()
NEW = standins.kubernetes_version(NEXT)
NODES = ('master1', 'master2', 'master3', 'worker1', 'worker2')
WORKERS = NODES[3:]
PACKAGES = ('kubeadm', 'kubelet', 'kubectl')
COPIES = '/volume1/' + etcd_snapshot.STORAGE_DIRECTORY
# Older snapshots where the driver keeps them: with etcd_snapshot_keep 3,
# the upgrade's own and the two newest of these stay.
OLD_SNAPSHOTS = ['etcd-2020010%dT000000Z-upgrade.db' % day
                 for day in (4, 1, 3, 2)]
PROBE_KEY, PROBE_VALUE = 'snapshot-probe', 'written before the upgrade'


@contextlib.contextmanager
def upgradable(masters, workers=1):
    """An installed cluster of ``masters`` and ``workers`` whose nodes
    reach the test apt repository (``virtual.repository``), which serves
    the next minor."""
    skip_without_testbed()
    virtual_vnf.use_test_options()
    with apt_repo.AptRepository() as repository, \
            virtual_vnf.VirtualCluster(masters=masters, workers=workers,
                                       volumes=1,
                                       install_cluster=True) as virtual:
        apt_repo.use_in(virtual, repository, virtual_vnf.CALICO_STAND_IN)
        for node in virtual.nodes():
            repository.route_from(node, virtual.testbed.bridge_ip)
        virtual.instantiate_end()
        virtual.repository = repository
        yield virtual


@pytest.fixture(scope='module')
def ha():
    with upgradable(3, workers=2) as virtual:
        bind_claim(virtual.host('master1'))
        storage = virtual.host('storage')
        storage.write_file(virtual.export_dirs()[0] + '/keep.txt', 'kept')
        yield virtual


def kubelet_versions(virtual):
    items = json.loads(virtual_vnf.kubectl(
        virtual.host('master1'), 'get', 'nodes', '-o', 'json'))['items']
    return {item['metadata']['name']: item['status']['nodeInfo'][
        'kubeletVersion'] for item in items}


def package_versions(host):
    return host.run("dpkg-query -W -f='${Version} ' " +
                    ' '.join(PACKAGES)).stdout.split()


def upgrade_calls(virtual, name):
    return [' '.join(argv[1:]) for argv in virtual.kubeadm_calls(name)
            if argv[1] == 'upgrade']


def upgrade_times(virtual, name):
    """When each kubeadm upgrade command ran on a host."""
    log = virtual.host(name).run(
        'cat /var/log/kubeadm-standin.log 2>/dev/null || true').stdout
    return [entry['time'] for entry in map(json.loads, log.splitlines())
            if entry['argv'][1:2] == ['upgrade']]


def failed_upgrade(virtual, host, command, **fault):
    """The StepError of an upgrade to NEXT that a CommandFault on
    ``command`` on ``host`` stopped."""
    with faults.Faults() as injected:
        fault = injected.command(host, command, **fault)
        with pytest.raises(exceptions.StepError) as raised:
            virtual.upgrade(NEXT)
        assert fault.hits, str(raised.value)
    return raised.value


def snapshot_places(virtual):
    """(host, directory) of the snapshots and of their copies."""
    return ((virtual.host('master1'), etcd_snapshot.DIRECTORY),
            (virtual.host('storage'), COPIES))


def seed_snapshots(virtual):
    """Older snapshots and a file of someone else's where the driver
    keeps snapshots, and a key in etcd (through etcd's API with curl)."""
    for host, directory in snapshot_places(virtual):
        host.run('mkdir -p {0} && cd {0} && touch {1} notes.txt'.format(
            directory, ' '.join(OLD_SNAPSHOTS)))
    body = json.dumps({'key': base64.b64encode(PROBE_KEY.encode()).decode(),
                       'value': base64.b64encode(
                           PROBE_VALUE.encode()).decode()})
    virtual.host('master1').run(' '.join(shlex.quote(word) for word in (
        etcd.member_list_command()[:-3] + ['--fail', '--data', body,
                                           etcd.LOCAL_API + '/v3/kv/put'])))


def listing(host, directory):
    return sorted(host.run('ls -A ' + directory).stdout.split())


def check_snapshot(virtual, error):
    """The upgrade's snapshot, root-only, copied to the Storage server,
    the older ones pruned to three, named by the error; its name."""
    [name] = [name for name in listing(virtual.host('master1'),
                                       etcd_snapshot.DIRECTORY)
              if name.endswith('-upgrade.db') and name not in OLD_SNAPSHOTS]
    digests = set()
    for host, directory in snapshot_places(virtual):
        path = '%s/%s' % (directory, name)
        assert listing(host, directory) == sorted(
            ['etcd-20200103T000000Z-upgrade.db',
             'etcd-20200104T000000Z-upgrade.db', name, 'notes.txt'])
        assert host.run("stat -c '%%a %%U:%%G' %s %s" % (
            directory, path)).stdout.split('\n')[:2] == [
                '700 root:root', '600 root:root']
        digests.add(host.run('sha256sum ' + path).stdout.split()[0])
        line = v2_failure.error_line(v2_failure.failure('x', error))
        assert '%s:%s' % (host.ip, path) in line, line
    assert len(digests) == 1
    assert error.etcd_snapshot.copy_path == '%s/%s' % (COPIES, name)
    return name


def test_a_two_minor_jump_is_refused_before_any_change(ha):
    two_minors = standins.next_minor(NEXT)
    before = {name: package_versions(ha.host(name)) for name in NODES}
    with pytest.raises(exceptions.NodeStepError) as raised:
        ha.upgrade(two_minors)
    error = raised.value
    assert error.step == upgrade_plan.CHECK_STEP
    # The cluster's version is named on the Master asked, each Node too
    # old for the target on its own address.
    assert 'more than one minor after' in str(
        error.failures[ha.host('master1').ip])
    assert sorted(error.failures) == sorted(ha.host(name).ip
                                            for name in NODES)
    assert 'nothing was changed' in str(error)
    assert {name: package_versions(ha.host(name)) for name in NODES} == \
        before
    assert all(upgrade_calls(ha, name) == [] for name in NODES)
    assert set(kubelet_versions(ha).values()) == {OLD}


def installed_packages(host):
    """The host's package set, as dpkg -l lists it."""
    return host.run("dpkg-query -W -f='${Package} ${Version} ${Status}\\n'"
                    ).stdout.splitlines()


def test_the_start_check_changes_no_package_and_finds_a_silent_etcd(ha):
    """change_current_package_start changes nothing: on Masters without
    etcdctl (a kubeadm Master has it only in the etcd image) the etcd
    check installs none, and still refuses while a member does not
    answer (master3's etcd frozen)."""
    masters = [ha.host(name) for name in NODES[:3]]
    for host in masters:
        host.run('dpkg --purge etcd-client >/dev/null')
    before = {name: installed_packages(ha.host(name)) for name in NODES}
    master3 = masters[2]
    pid = master3.run('cat /run/etcd.pid').stdout.strip()
    master3.run('kill -STOP %s' % pid)
    try:
        with pytest.raises(exceptions.NodeStepError) as raised:
            ha.upgrade(NEXT, check_only=True)
    finally:
        master3.run('kill -CONT %s' % pid)
    assert {name: installed_packages(ha.host(name)) for name in NODES} == \
        before
    assert all(upgrade_calls(ha, name) == [] for name in NODES)
    error = raised.value
    assert error.step == upgrade_plan.CHECK_STEP
    [reason] = [str(failure) for failure in error.failures.values()
                if 'etcd is not healthy' in str(failure)]
    assert 'master3 (https://%s:2379) does not answer' % master3.ip \
        in reason


def cordoned_together(changes):
    """Each set of Nodes unschedulable at one time, replaying the Node
    changes (kube.changes) in order."""
    cordoned, seen = set(), set()
    for _, node in changes:
        name = node['metadata']['name']
        if (node.get('spec') or {}).get('unschedulable'):
            cordoned.add(name)
        else:
            cordoned.discard(name)
        seen.add(frozenset(cordoned))
    return seen


def wave_blocked_by_budget(virtual):
    """The upgrade with both Workers in one wave: the budget lets one
    drain through and blocks the other until drain_timeout. Returns the
    name of the Worker it blocked."""
    kube = virtual.kube
    disruption.budget_over(kube, WORKERS)
    since = kube.resource_version
    virtual_vnf.use_test_options(drain_timeout=5)
    try:
        with pytest.raises(exceptions.NodeStepError) as raised:
            virtual.upgrade(NEXT, max_unavailable=2)
    finally:
        virtual_vnf.use_test_options()
    # Both Workers were cordoned at once.
    assert frozenset(WORKERS) in cordoned_together(kube.changes('node',
                                                                since))
    error = raised.value
    assert error.step == upgrade.WAVE_STEP
    addresses = {virtual.host(name).ip: name for name in WORKERS}
    [blocked] = [addresses[address] for address in error.failures]
    failure = error.failures[virtual.host(blocked).ip]
    assert failure.step == 'drain of %s' % blocked
    assert 'Node %s' % blocked in str(error)
    assert 'PodDisruptionBudget default/%s' % disruption.BUDGET in str(
        error)
    # The other Worker of the wave was upgraded and uncordoned.
    versions = kubelet_versions(virtual)
    assert {name: versions[name] for name in WORKERS} == {
        name: OLD if name == blocked else NEW for name in WORKERS}
    assert [versions[name] for name in NODES[:3]] == [NEW] * 3
    assert {name for name in WORKERS if json.loads(virtual_vnf.kubectl(
        virtual.host('master1'), 'get', 'node', name, '-o', 'json'))[
            'spec'].get('unschedulable')} == {blocked}
    # The operator relaxes the budget.
    kube.delete('pdb', disruption.BUDGET)
    return blocked


def test_an_upgrade_failed_on_the_second_master_converges_on_a_rerun(ha):
    master2 = ha.host('master2')
    seed_snapshots(ha)
    with vip_probe.VipProbe(ha.vip) as probe:
        error = failed_upgrade(ha, master2, 'kubeadm', match='upgrade node')
        check_snapshot(ha, error)
        assert (error.host, error.step) == (master2.ip,
                                            'kubeadm upgrade node')
        # The first Master was upgraded; the second stopped at kubeadm.
        versions = kubelet_versions(ha)
        assert versions['master1'] == NEW
        assert [versions[name] for name in NODES[1:]] == [OLD] * 4
        assert upgrade_calls(ha, 'master1') == ['upgrade apply %s --yes'
                                                % NEW]
        blocked = wave_blocked_by_budget(ha)
        plan, report = ha.upgrade(NEXT, max_unavailable=2)
    assert probe.silences == [] and probe.answers > 5, probe.silences
    assert [(step.name, step.action, step.done) for step in plan.steps] == [
        ('master1', 'node', True), ('master2', 'node', True),
        ('master3', 'node', True)] + [
            (name, 'worker', name != blocked) for name in WORKERS]
    assert_converged(ha, report, blocked)
    # A further run finds every node at the target and changes nothing.
    plan, report = ha.upgrade(NEXT)
    assert plan.pending == ()
    assert all(upgrade_calls(ha, name) == calls for name, calls in (
        ('master1', ['upgrade apply %s --yes' % NEW]),
        ('worker1', ['upgrade node']), ('worker2', ['upgrade node'])))


def assert_converged(virtual, report, blocked):
    """Every node at the target, upgraded once, schedulable; the claim
    and the Storage server's file kept."""
    master1 = virtual.host('master1')
    assert kubelet_versions(virtual) == dict.fromkeys(NODES, NEW)
    for name in NODES:
        assert package_versions(virtual.host(name)) == [NEXT] * 3, name
    # The Masters one after the other, in the plan's order, then the
    # Workers.
    times = [upgrade_times(virtual, name)[-1] for name in NODES]
    assert times[:3] == sorted(times[:3])
    assert min(times[3:]) > times[2]
    assert [outcome.step for outcome in report.outcomes
            if outcome.step.startswith('drain of')] == [
        'drain of %s' % blocked]
    # The re-run did not apply again on the first Master.
    assert upgrade_calls(virtual, 'master1') == ['upgrade apply %s --yes'
                                                 % NEW]
    for name in WORKERS:
        assert upgrade_calls(virtual, name) == ['upgrade node'], name
        # The held packages stay at the new version.
        assert sorted(virtual.host(name).run('apt-mark showhold').stdout
                      .split()) == sorted(PACKAGES)
        # Drained and schedulable again.
        assert not json.loads(virtual_vnf.kubectl(
            master1, 'get', 'node', name, '-o', 'json'))['spec'].get(
                'unschedulable')
    volumes = virtual_vnf.persistent_volumes(master1)
    assert volumes['nfs-pv1']['status']['phase'] == 'Bound'
    assert virtual.host('storage').read_file(
        virtual.export_dirs()[0] + '/keep.txt') == 'kept'


def test_the_storage_servers_snapshot_restores_into_a_fresh_etcd(
        ha, tmp_path):
    """The operator guide's restore commands, run on the copy the
    upgrade kept on the Storage server: the fresh etcd has the key written
    before the upgrade."""
    storage = ha.host('storage')
    [name] = [name for name in listing(storage, COPIES)
              if name.endswith('-upgrade.db') and name not in OLD_SNAPSHOTS]
    snapshot = tmp_path / name
    snapshot.write_bytes(base64.b64decode(storage.run(
        'base64 -w0 %s/%s' % (COPIES, name)).stdout))
    assert etcd_restore.restored_value(snapshot, tmp_path / 'data',
                                       PROBE_KEY) == PROBE_VALUE
