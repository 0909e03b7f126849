"""ChangeCurrentVnfPackage through the v2 door (doors.v2_upgrade): which
hook checks, which upgrades, what a rollback leaves; and the new
package's PVs against the cluster's Bound claims (storage.package_change)
as a table."""

import contextlib
import logging
import os

import pytest

from kubernetes_mgmt_pv.cluster import etcd_snapshot
from kubernetes_mgmt_pv.cluster import upgrade_plan
from kubernetes_mgmt_pv.doors import v2_failure
from kubernetes_mgmt_pv.doors import v2_hook
from kubernetes_mgmt_pv.doors import v2_mapping
from kubernetes_mgmt_pv.doors import v2_upgrade
from kubernetes_mgmt_pv import exceptions
from kubernetes_mgmt_pv import mgmt_driver
from kubernetes_mgmt_pv.storage import manifests
from kubernetes_mgmt_pv.storage import package_change
from tests.unit import v2_dicts as v2

OLD, NEW = '1.35.4-1.1', '1.36.1-1.1'
ACCESS = object()


def manifest(name, path='/volume/nfs/pv1', cp='storage_server_CP'):
    return manifests.PvManifest(name, path, cp, {})


def volume(name, phase='Bound', claim=('default', 'data')):
    item = {'metadata': {'name': name}, 'spec': {}, 'status': {
        'phase': phase}}
    if claim:
        item['spec']['claimRef'] = {'namespace': claim[0], 'name': claim[1]}
    return item


PV1 = manifest('nfs-pv1')


@pytest.mark.parametrize('old, new, live, orphaned', [
    # The same PVs: nothing orphaned.
    ([PV1], [PV1], {'nfs-pv1': volume('nfs-pv1')}, []),
    # Dropped while Bound.
    ([PV1], [], {'nfs-pv1': volume('nfs-pv1')},
     [('nfs-pv1', 'default/data', 'no PersistentVolume')]),
    # Moved to another export or server while Bound.
    ([PV1], [manifest('nfs-pv1', path='/volume/nfs/other')],
     {'nfs-pv1': volume('nfs-pv1')}, [('nfs-pv1', 'default/data', 'moves')]),
    ([PV1], [manifest('nfs-pv1', cp='other_CP')],
     {'nfs-pv1': volume('nfs-pv1')}, [('nfs-pv1', 'default/data', 'moves')]),
    # Dropped, but no claim is bound to it: nothing lost.
    ([PV1], [], {'nfs-pv1': volume('nfs-pv1', 'Available', None)}, []),
    ([PV1], [], {}, []),
    # A PV of the cluster the old package did not register.
    ([], [], {'other': volume('other')}, []),
    # A new PV added: nothing orphaned.
    ([PV1], [PV1, manifest('nfs-pv2', '/volume/nfs/pv2')],
     {'nfs-pv1': volume('nfs-pv1')}, []),
])
def test_orphaned_claims(old, new, live, orphaned):
    found = package_change.orphaned_claims(old, new, live)
    assert [(name, claim) for name, claim, _ in found] == \
        [(name, claim) for name, claim, _ in orphaned]
    for (_, _, reason), (_, _, word) in zip(found, orphaned):
        assert word in reason
    assert (package_change.refusal(found) is None) == (not orphaned)


# -- the door ----------------------------------------------------------------

class FakeWorkflow(object):
    topology = type('Topology', (), {'masters': ['10.10.0.5']})()

    @contextlib.contextmanager
    def sessions(self):
        yield None

    def kubectl_session(self, sessions, masters, step):
        return type('Kubectl', (), {'host': '10.10.0.5'})()

    def vim_access(self):
        return ACCESS


class FakeDriver(object):
    """The V2Driver seams the upgrade hooks use."""

    last = None

    def __init__(self, script_dict, state):
        self.script_dict = script_dict
        self.registered_access = None
        self.registered = None
        self.deleted = False
        self.cluster = self
        FakeDriver.last = self

    def upgrade_workflow(self, vnf_instance, params):
        return FakeWorkflow()

    def vnf_package_dir(self, context, vnf_instance):
        return self.script_dict['tmp_csar_dir']

    def package_dir_of(self, vnfd_id):
        assert vnfd_id == 'old-vnfd'
        return FakeDriver.old_dir

    def register_vim(self, context, vnf_instance, name, access):
        self.registered_access = access
        self.registered = {'id': 'k8s-vim-id', 'name': name,
                           'endpoint': 'https://10.10.0.5:6443'}
        return 'k8s-vim-id'

    def openstack_vim_id(self):
        return v2.OPENSTACK_VIM_ID


def package(root, version, pvs=('nfs-pv1',)):
    """A package directory: the install script at ``version`` and the PV
    manifests ``pvs`` (the path pv1's)."""
    os.makedirs(os.path.join(root, 'Scripts'))
    os.makedirs(os.path.join(root, 'Files', 'kubernetes'))
    with open(os.path.join(root, 'Scripts', 'install_k8s_cluster.sh'),
              'w') as script:
        script.write("#!/bin/bash\nreadonly K8S_PACKAGE_VERSION='%s'\n"
                     % version)
    for name in pvs:
        with open(os.path.join(root, 'Files', 'kubernetes', 'nfs-pv1.yaml'),
                  'w') as handle:
            handle.write(
                'apiVersion: v1\nkind: PersistentVolume\nmetadata:\n'
                '  name: %s\nspec:\n  capacity: {storage: 1Gi}\n'
                '  accessModes: [ReadWriteOnce]\n  nfs:\n'
                '    server: 0.0.0.0\n    path: /volume/nfs/pv1\n' % name)
    return str(root)


@pytest.fixture
def calls(monkeypatch, tmp_path):
    """The upgrade_cluster calls, with a cluster at 1.35 and a Bound
    nfs-pv1."""
    found = []

    def upgrade_cluster(workflow, script, drain_force=None,
                        check_only=False, max_unavailable=None):
        found.append((upgrade_plan.script_package_version(script),
                      drain_force, check_only, max_unavailable))
        return upgrade_plan.UpgradePlan(
            upgrade_plan.parse_version(NEW), NEW,
            upgrade_plan.parse_version(OLD), ()), None

    monkeypatch.setattr(v2_upgrade.upgrade, 'upgrade_cluster',
                        upgrade_cluster)
    monkeypatch.setattr(v2_upgrade.pv, 'live_volumes',
                        lambda kubectl, names: {'nfs-pv1': volume('nfs-pv1')})
    FakeDriver.old_dir = package(tmp_path / 'old', OLD)
    return found


def pv_only_params():
    """Persistent volumes only: the cluster is not the driver's."""
    params = v2.install_params()
    del params['script_path']
    return params


def instance(params=None):
    state = {'contractVersion': mgmt_driver.PACKAGE_CONTRACT_VERSION,
             'params': v2_mapping.saved_params(params or v2.install_params()),
             'openstackVimId': v2.OPENSTACK_VIM_ID,
             'vim': {'id': 'k8s-vim-id', 'name': 'kubernetes_vim',
                     'endpoint': 'https://10.10.0.5:6443'}}
    inst = v2.vnf_instance(metadata={v2_mapping.STATE_KEY: state})
    inst['vnfdId'] = 'old-vnfd'
    return inst


def change_request(vdus=(), **params):
    additional = dict(v2.logins(), upgrade_type='RollingUpdate',
                      vdu_params=[{'vdu_id': vdu} for vdu in vdus], **params)
    return {'vnfdId': 'new-vnfd', 'additionalParams': additional}


def run(operation, request, new_dir, progress=None, params=None):
    progress = {} if progress is None else progress
    result = v2_hook.run(v2.script_dict(operation, request, instance(params),
                                        package_dir=new_dir),
                         [], progress, driver_factory=FakeDriver)
    return result, progress


def test_start_checks_the_new_packages_version_without_change(
        calls, tmp_path):
    _, progress = run(v2_upgrade.START, change_request(drain_force=True),
                      package(tmp_path / 'new', NEW))
    assert calls == [(NEW, True, True, None)]
    assert FakeDriver.last.registered_access is None
    assert progress['done'] == [v2_upgrade.START]
    assert progress[v2_upgrade.UPGRADE_KEY]['from'] == 'v1.35.4'
    assert 'v1.36.1' in progress[v2_upgrade.UPGRADE_KEY]['rollback']


def test_start_still_refuses_replaced_cluster_vdus(calls, tmp_path):
    with pytest.raises(exceptions.RequestRefused):
        run(v2_upgrade.START, change_request(['masterNode']),
            package(tmp_path / 'new', NEW))
    assert calls == []


def test_start_refuses_a_package_that_drops_a_bound_pv(calls, tmp_path):
    with pytest.raises(exceptions.StepError) as raised:
        run(v2_upgrade.START, change_request(),
            package(tmp_path / 'new', NEW, pvs=('nfs-pv9',)))
    found = v2_failure.failure(v2_upgrade.START, raised.value)
    assert (found.step, found.host) == (v2_upgrade.PV_STEP, '10.10.0.5')
    assert 'nfs-pv1' in found.reason and 'default/data' in found.reason


def test_drain_force_must_be_a_boolean(calls, tmp_path):
    with pytest.raises(exceptions.ParameterErrors,
                       match='additionalParams.drain_force'):
        run(v2_upgrade.START, change_request(drain_force='yes'),
            package(tmp_path / 'new', NEW))
    assert calls == []


@pytest.mark.parametrize('operation, check_only', [
    (v2_upgrade.START, True), (v2_upgrade.END, False)])
def test_upgrade_max_unavailable_reaches_the_upgrade(calls, tmp_path,
                                                     operation, check_only):
    run(operation, change_request(upgrade_max_unavailable='25%'),
        package(tmp_path / 'new', NEW))
    assert calls == [(NEW, None, check_only, '25%')]


@pytest.mark.parametrize('value', [0, '0%', 'half', True])
def test_upgrade_max_unavailable_is_refused_before_the_upgrade(
        calls, tmp_path, value):
    with pytest.raises(exceptions.ParameterErrors) as raised:
        run(v2_upgrade.START, change_request(upgrade_max_unavailable=value),
            package(tmp_path / 'new', NEW))
    assert [error.path for error in raised.value.errors] == [
        'additionalParams.upgrade_max_unavailable']
    assert calls == []


def test_end_upgrades_then_refreshes_the_vim(calls, tmp_path):
    result, progress = run(v2_upgrade.END, change_request(),
                           package(tmp_path / 'new', NEW))
    assert calls == [(NEW, None, False, None)]
    assert FakeDriver.last.registered_access is ACCESS
    state = result['vnf_instance']['metadata'][v2_mapping.STATE_KEY]
    assert state['vim']['id'] == 'k8s-vim-id'
    assert progress['done'] == [v2_upgrade.END]


def test_a_failed_end_says_what_a_rollback_leaves(calls, tmp_path,
                                                  monkeypatch):
    def fails(*args, **kwargs):
        raise exceptions.StepError('kubeadm upgrade node', '10.10.0.6',
                                   exceptions.MgmtDriverError('x'))
    monkeypatch.setattr(v2_upgrade.upgrade, 'upgrade_cluster', fails)
    progress = {}
    with pytest.raises(exceptions.StepError):
        run(v2_upgrade.END, change_request(), package(tmp_path / 'new', NEW),
            progress)
    note = progress[v2_upgrade.UPGRADE_KEY]['rollback']
    assert 'stay at v1.36.1' in note
    # A Worker cordoned for its upgrade stays cordoned, by a named mark.
    assert 'cordoned' in note and upgrade_plan.CORDON_ANNOTATION in note


def test_a_failed_end_names_the_etcd_snapshot_it_took(calls, tmp_path,
                                                      monkeypatch):
    """The error line and the record name where the snapshot taken
    before kubeadm upgrade apply is."""
    class Run(object):
        etcd_snapshot = etcd_snapshot.Snapshot(
            '10.10.0.5', '/var/backups/etcd-snapshots/a.db', '10.10.0.9',
            '/volume/.etcd-snapshots/a.db')

    def fails(*args, **kwargs):
        with etcd_snapshot.named_in_errors(Run):
            raise exceptions.StepError('kubeadm upgrade node', '10.10.0.6',
                                       exceptions.MgmtDriverError('x'))
    monkeypatch.setattr(v2_upgrade.upgrade, 'upgrade_cluster', fails)
    progress = {}
    with pytest.raises(exceptions.StepError) as raised:
        run(v2_upgrade.END, change_request(), package(tmp_path / 'new', NEW),
            progress)
    assert progress[v2_upgrade.UPGRADE_KEY]['etcdSnapshot'] == {
        'host': '10.10.0.5', 'path': '/var/backups/etcd-snapshots/a.db',
        'copyHost': '10.10.0.9', 'copyPath': '/volume/.etcd-snapshots/a.db'}
    line = v2_failure.error_line(v2_failure.failure(v2_upgrade.END,
                                                    raised.value))
    assert line.startswith('kubeadm upgrade node failed on 10.10.0.6: x; ')
    assert '10.10.0.5:/var/backups/etcd-snapshots/a.db' in line
    assert '10.10.0.9:/volume/.etcd-snapshots/a.db' in line


def test_the_rollback_changes_no_node_and_says_so(calls, tmp_path, caplog):
    progress = {v2_upgrade.UPGRADE_KEY: {
        'to': NEW, 'from': 'v1.35.4',
        'rollback': v2_upgrade.rollback_note('v1.36.1')}}
    request = change_request()
    del request['additionalParams']['k8s_cluster_installation_param']
    with caplog.at_level(logging.WARNING):
        result, _ = run(v2_upgrade.ROLLBACK, request,
                        package(tmp_path / 'new', NEW), progress)
    assert calls == []
    assert FakeDriver.last.registered_access is None
    assert 'stay at v1.36.1' in caplog.text
    assert result['vnf_instance']['metadata'] == instance()['metadata']


@pytest.mark.parametrize('operation, root, action', [
    (v2_upgrade.START, v2.install_params(), v2_upgrade.CHECK),
    (v2_upgrade.END, v2.install_params(), v2_upgrade.UPGRADE),
    (v2_upgrade.ROLLBACK, v2.install_params(), v2_upgrade.ROLL_BACK),
    # No script_path: no cluster of the driver's, nothing to upgrade.
    (v2_upgrade.START, pv_only_params(), v2_upgrade.CHECK_VOLUMES),
    (v2_upgrade.END, pv_only_params(), v2_upgrade.CHECK_VOLUMES),
    (v2_upgrade.ROLLBACK, pv_only_params(), v2_upgrade.NOTHING),
    (v2_upgrade.END, {}, v2_upgrade.CHECK_VOLUMES),
    (v2_upgrade.ROLLBACK, {}, v2_upgrade.NOTHING),
])
def test_hook_action(operation, root, action):
    assert v2_upgrade.hook_action(operation, root) == action


@pytest.mark.parametrize('operation', [v2_upgrade.START, v2_upgrade.END])
def test_persistent_volumes_only_check_the_new_manifests(calls, tmp_path,
                                                         caplog, operation):
    with caplog.at_level(logging.INFO):
        result, progress = run(operation, change_request(),
                               package(tmp_path / 'new', NEW),
                               params=pv_only_params())
    assert calls == []
    assert FakeDriver.last.registered_access is None
    assert progress == {'done': [operation]}
    assert result['vnf_instance']['metadata'] == \
        instance(pv_only_params())['metadata']
    assert 'nothing upgraded' in caplog.text
    assert '1 PersistentVolume manifest(s) are valid' in caplog.text


def test_persistent_volumes_only_refuse_a_missing_manifest(calls, tmp_path):
    with pytest.raises(exceptions.ParameterErrors) as raised:
        run(v2_upgrade.END, change_request(),
            package(tmp_path / 'new', NEW, pvs=()), params=pv_only_params())
    assert [error.path for error in raised.value.errors] == [
        'k8s_cluster_installation_param.pv_registration_params[0].'
        'pv_manifest_file_path']
    assert calls == []


def test_persistent_volumes_only_roll_back_nothing(calls, tmp_path, caplog):
    request = change_request()
    del request['additionalParams']['k8s_cluster_installation_param']
    with caplog.at_level(logging.INFO):
        result, _ = run(v2_upgrade.ROLLBACK, request,
                        package(tmp_path / 'new', NEW),
                        params=pv_only_params())
    assert calls == []
    assert 'nothing to roll back' in caplog.text
    assert 'stay at' not in caplog.text
