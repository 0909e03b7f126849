"""The check mode's descriptions of the plans, per host, as tables; the
``plan`` command's refusals of bad input. No host, no Heat."""

import json

import pytest

from kubernetes_mgmt_pv.cluster import cluster
from kubernetes_mgmt_pv.cluster import cluster_sequence
from kubernetes_mgmt_pv.cluster import ha
from kubernetes_mgmt_pv.doors import check_mode
from kubernetes_mgmt_pv.doors import cli
from kubernetes_mgmt_pv.remote import managed_block
from kubernetes_mgmt_pv.storage import manifests
from kubernetes_mgmt_pv.storage import nfs_client
from kubernetes_mgmt_pv.storage import pv
from kubernetes_mgmt_pv.storage import server_steps
from kubernetes_mgmt_pv.storage import storage_workflow
from tests.unit import test_cluster_sequence as sequences
from tests.unit import test_plan_storage as storage_plans

M1, M2, M3, W1, W2 = (sequences.M1, sequences.M2, sequences.M3,
                      sequences.W1, sequences.W2)
HOSTS = sequences.hosts_file((M1, M2, M3, W1, W2))


def install_changes(**kwargs):
    changes = check_mode.install_changes(sequences.install(**kwargs))
    return sorted((change.host, change.change) for change in changes)


@pytest.mark.parametrize('case, kwargs, expected', [
    ('configured cluster: no change',
     dict(sequences.CONFIGURED, hosts=HOSTS), []),
    ('a new Worker, not joined yet: it joins',
     dict(joined=(M1, M2, M3, W1),
          api={n: a for n, a in sequences.ALL_API.items() if n != 'w2'},
          etcd_members=sequences.CONFIGURED['etcd_members'], hosts=HOSTS),
     [('10.0.0.22', 'join the cluster as a Worker')]),
    ('a fresh single-Master cluster',
     dict(masters=(M1,), workers=(W1,), vip=None),
     [('10.0.0.11', 'initialise the cluster (install script as its first '
                    'Master)'),
      ('10.0.0.11', 'update /etc/hosts'),
      ('10.0.0.21', 'join the cluster as a Worker'),
      ('10.0.0.21', 'update /etc/hosts')]),
    ('a half-joined Master: reset, its Node deleted, joined again',
     dict(sequences.CONFIGURED, hosts=HOSTS,
          etcd_members=[sequences.member(M1), sequences.member(M3)]),
     [('10.0.0.11', 'delete the stale Node(s) m2'),
      ('10.0.0.11', 'remove the etcd members left by earlier VMs of the '
                    'joining Masters'),
      ('10.0.0.12', 'join the cluster as a Master'),
      ('10.0.0.12', 'kubeadm reset (half-joined: not an etcd member)')]),
])
def test_install_changes(case, kwargs, expected):
    assert install_changes(**kwargs) == expected, case


def test_a_rename_is_named():
    prepared = cluster_sequence.Preparation(
        W1, host_name='worker-10-0-0-21', was_named='workernode',
        hosts_current=managed_block.with_block(b'', ['10.0.0.21 w1']),
        hosts_lines=('10.0.0.21 w1',))
    assert check_mode.preparation_changes(prepared) == [
        'set the host name worker-10-0-0-21 (was workernode)']


@pytest.mark.parametrize('plan, expected', [
    (ha.Plan(), []),
    (ha.Plan(install=('haproxy', 'keepalived')),
     ['install haproxy keepalived, then configure them']),
    (ha.Plan(services=(ha.ServicePlan('haproxy', '/etc/haproxy/h.cfg'),
                       ha.ServicePlan('keepalived', '/etc/k.conf', b'x',
                                      'reload'))),
     ['write /etc/k.conf', 'reload keepalived']),
    (ha.Plan(services=(ha.ServicePlan('haproxy', '/etc/h.cfg', None,
                                      'start'),)),
     ['start haproxy']),
])
def test_ha_changes(plan, expected):
    assert [c.change for c in check_mode.ha_changes('m', plan)] == expected


def server_changes(**kwargs):
    plan = server_steps.plan_server('10.0.0.5', storage_plans.SERVER,
                                    storage_plans.server_facts(**kwargs))
    return [c.change for c in check_mode.server_changes('10.0.0.5', plan)]


@pytest.mark.parametrize('kwargs, expected', [
    ({}, []),
    (dict(point=storage_plans.EMPTY, probe={}),
     ['format /dev/vdb (ext4)', 'mount /dev/vdb on /volume1',
      'update /etc/fstab with the new filesystems',
      'create and chown the export directories missing on the new '
      'mounts']),
    (dict(statuses={}),
     ['install nfs-kernel-server',
      'update /etc/exports and export after the installation']),
    (dict(directories={}),
     ['create /volume1/nfs/pv1', 'chown nobody:nogroup /volume1/nfs/pv1']),
    (dict(exports=b''), ['update /etc/exports', 'exportfs -ra']),
    (dict(exportfs=''), ['exportfs -ra']),
    (dict(fstab=b''), ['update /etc/fstab']),
])
def test_server_changes(kwargs, expected):
    assert server_changes(**kwargs) == expected


def manifest(name):
    return manifests.PvManifest(name, '/volume1/nfs/pv1', 'cp', {
        'apiVersion': 'v1', 'kind': 'PersistentVolume',
        'metadata': {'name': name}, 'spec': {'nfs': {'server': None}}})


@pytest.mark.parametrize('clients, registration, expected', [
    ({'w': nfs_client.ClientFacts('', {'nfs-common': 'install ok '
                                                     'installed'}, {})},
     pv.RegistrationPlan(unchanged=(('pv1', 'Bound'),)), []),
    ({'w': nfs_client.ClientFacts('', {'nfs-common': 'deinstall ok '
                                                     'config-files'}, {})},
     None, [('w', 'install nfs-common')]),
    ({}, pv.RegistrationPlan(recreate=('pv1',),
                             apply=((manifest('pv1'), {}),
                                    (manifest('pv2'), {}))),
     [('m', 'delete PersistentVolume pv1 (its NFS source changed)'),
      ('m', 'apply PersistentVolume pv1'),
      ('m', 'apply PersistentVolume pv2')]),
])
def test_deploy_changes(clients, registration, expected):
    unchanged = server_steps.plan_server('s', storage_plans.SERVER,
                                         storage_plans.server_facts())
    check = storage_workflow.DeployCheck(
        clients, 's', unchanged, 'm', registration)
    assert [(c.host, c.change)
            for c in check_mode.deploy_changes(check)] == expected


def test_render_names_every_host_and_counts_the_changes():
    result = check_mode.CheckResult(
        (('10.0.0.5', 'storage'), ('10.0.0.11', 'master')),
        (check_mode.Change('10.0.0.11', 'update /etc/hosts'),))
    assert check_mode.render(result) == [
        '10.0.0.5 (storage): no change',
        '10.0.0.11 (master): 1 change(s)',
        '    update /etc/hosts',
        '1 change(s) pending on 1 host(s)']


@pytest.mark.parametrize('request_body, vim, message', [
    ([], {}, 'request: must be a JSON object'),
    ({'additionalParams': {}}, [], 'vim: must be a JSON object'),
    ({'additionalParams': {}}, {},
     'k8s_cluster_installation_param: is required'),
])
def test_plan_refuses_bad_input_before_any_login(tmp_path, capsys,
                                                 request_body, vim, message):
    request_file, vim_file = tmp_path / 'request.json', tmp_path / 'vim.json'
    request_file.write_text(json.dumps(request_body))
    vim_file.write_text(json.dumps(vim))
    assert cli.main(['plan', '--package', str(tmp_path), '--request',
                     str(request_file), '--vim', str(vim_file),
                     '--stack-id', 'stack']) == 1
    assert message in capsys.readouterr().err


def test_install_plan_says_whether_the_leader_is_joined():
    plan = sequences.install(**sequences.CONFIGURED).plan
    assert plan.leader_joined
    assert not sequences.install().plan.leader_joined
    assert isinstance(plan, cluster.InstallPlan)


@pytest.mark.parametrize('extra, project', [([], None),
                                            (['--project', 'p1'], 'p1')])
def test_plan_passes_the_project_of_the_key_files(monkeypatch, tmp_path,
                                                  extra, project):
    """With ssh_key_per_project, plan reads the key files of the project
    given, as the hooks read the instance's."""
    seen = []
    monkeypatch.setattr(check_mode, 'load', lambda *args: ('inputs',))
    monkeypatch.setattr(check_mode, 'check', lambda *args, **kwargs: (
        seen.append((args, kwargs)) or check_mode.CheckResult((), ())))
    (tmp_path / 'r.json').write_text('{}')
    (tmp_path / 'v.json').write_text('{}')
    assert cli.main(['plan', '--package', str(tmp_path), '--request',
                     str(tmp_path / 'r.json'), '--vim',
                     str(tmp_path / 'v.json'), '--stack-id', 's'] +
                    extra) == 0
    assert seen == [(('inputs',), {'project': project})]
