"""The Tacker-facing classes, without Tacker and without hosts."""

import os
import subprocess
import threading
import types

import pytest

from kubernetes_mgmt_pv import config
from kubernetes_mgmt_pv.doors import tacker_compat
from kubernetes_mgmt_pv.doors import tacker_v1
from kubernetes_mgmt_pv import exceptions
from kubernetes_mgmt_pv import flow
from kubernetes_mgmt_pv import mgmt_driver
from kubernetes_mgmt_pv.openstack import vnf_topology
from kubernetes_mgmt_pv.remote import parallel
from kubernetes_mgmt_pv.request import lcm_requests
from kubernetes_mgmt_pv.request import param_model
from kubernetes_mgmt_pv import step_report
from kubernetes_mgmt_pv.storage import storage_workflow
from tests.unit.test_params import sample


def vnfc(vnfc_id, cpd_id, server_id):
    return types.SimpleNamespace(
        id=vnfc_id,
        compute_resource=types.SimpleNamespace(resource_id=server_id),
        vnfc_cp_info=[types.SimpleNamespace(cpd_id=cpd_id)])


def instance(additional_params=None):
    info = types.SimpleNamespace(
        instance_id='stack-1', additional_params=additional_params,
        vnfc_resource_info=[
            vnfc('v-storage', 'storage_server_CP', 'srv-s'),
            vnfc('v-master', 'masterNode_CP1', 'srv-m'),
            vnfc('v-worker', 'workerNode_CP2', 'srv-w')])
    return types.SimpleNamespace(instantiated_vnf_info=info)


def heal_request(*ids):
    return types.SimpleNamespace(vnfc_instance_id=list(ids))


def test_entry_point_identity():
    driver = mgmt_driver.KubernetesPvMgmtDriver()
    assert driver.get_type() == driver.get_name() == 'mgmt-drivers-kubernetes'
    assert isinstance(driver, tacker_compat.VnflcmMgmtAbstractDriver)
    assert isinstance(driver, tacker_v1.KubernetesMgmtDriver)


def test_every_abstract_hook_is_implemented():
    abstract = getattr(tacker_compat.VnflcmMgmtAbstractDriver,
                       '__abstractmethods__')
    assert set(tacker_compat.HOOKS) <= abstract
    assert not getattr(mgmt_driver.KubernetesPvMgmtDriver,
                       '__abstractmethods__')


def test_heal_targets_classify_by_cp_descriptor():
    parsed = param_model.parse(sample())
    targets = lcm_requests.heal_targets(
        instance(), heal_request('v-storage', 'v-worker'), parsed)
    assert not targets.entire_cluster and targets.storage_server
    assert targets.servers == (vnf_topology.HealedServer('worker', 'srv-w'),)
    entire = lcm_requests.heal_targets(
        instance(), heal_request(), parsed)
    assert entire.entire_cluster and not entire.storage_server


def test_additional_params_prefer_the_request_then_the_instance():
    stored = sample()
    request = types.SimpleNamespace(additional_params={'other': 1})
    read = lcm_requests.additional_params
    assert read(instance(stored), request) is stored
    fresh = sample()
    assert read(instance(stored),
                types.SimpleNamespace(additional_params=fresh)) is fresh
    assert read(instance(None)) == {}


def test_hooks_do_nothing_without_storage_server_and_script_path():
    value = sample()
    del value[param_model.ROOT]['storage_server']
    del value[param_model.ROOT]['pv_registration_params']
    del value[param_model.ROOT]['script_path']

    class Driver(mgmt_driver.KubernetesPvMgmtDriver):
        def vnf_package_dir(self, context, vnf_instance):
            raise AssertionError('package must not be read')

    driver = Driver()
    driver.instantiate_end(None, instance(value),
                           types.SimpleNamespace(additional_params=value),
                           None, None)
    driver.heal_start(None, instance(value), heal_request('v-storage'),
                      None, None)
    driver.scale_end(None, instance(value), types.SimpleNamespace(
        type='SCALE_OUT', aspect_id='worker_instance'), None, None,
        scale_out_id_list=['m1'])


def test_invalid_parameters_fail_before_any_lookup():
    value = sample()
    value[param_model.ROOT]['storage_server']['nfs_server_setup_params'][0][
        'export_to'] = 'x;reboot'

    class Driver(mgmt_driver.KubernetesPvMgmtDriver):
        def vim_access_info(self, context, vnf_instance):
            raise AssertionError('VIM must not be contacted')

    with pytest.raises(exceptions.ParameterErrors):
        Driver().heal_end(None, instance(value), heal_request(), None, None)


def test_run_on_nodes_reports_every_failed_node_after_all_ran():
    done = []
    lock = threading.Lock()

    def step(node):
        with lock:
            done.append(node)
        if node in ('b', 'd'):
            raise RuntimeError('broken %s' % node)

    with pytest.raises(exceptions.NodeStepError) as caught:
        parallel.run_on_nodes('demo step', step,
                              {n: n for n in 'abcd'}, max_workers=2)
    assert sorted(done) == list('abcd')
    assert sorted(caught.value.failures) == ['b', 'd']
    assert 'broken b' in str(caught.value) and 'broken d' in str(caught.value)


def test_report_summary_counts_changed_and_unchanged_steps():
    outcomes = step_report.Report()
    outcomes.record('h1', 'mount /v', True, '/dev/vdb')
    outcomes.record('h1', 'exports', False)
    assert outcomes.summary() == '1 step(s) changed, 1 unchanged'
    assert str(outcomes.outcomes[0]) == 'h1: mount /v changed (/dev/vdb)'


IN_USE = {'vim-1': ['cnf-1']}


def _vim_recording_driver(calls, users):
    """The entry-point driver whose VIM registry records each call into
    ``calls`` and finds ``users`` ({vim id: VNF ids}) on the VIM."""
    class Driver(mgmt_driver.KubernetesPvMgmtDriver):
        def delete_vim(self, context, vnf_instance, name):
            calls.append('delete_vim %s' % name)
            return True

        def vim_users(self, context, vnf_instance, name):
            calls.append('vim_users %s' % name)
            return users

    return Driver()


@pytest.mark.parametrize('vnfc_ids, users, request_params, expected', [
    # Entire cluster: the storage VM is re-created, then the cluster (and
    # its VIM) too; the PVs go first, while the cluster still answers,
    # once the VIM is known to be free (and asked again before it goes).
    ((), {}, None, ['vim_users kubernetes_vim', 'release_storage False',
                    'vim_users kubernetes_vim', 'delete_vim kubernetes_vim']),
    ((), {}, {'skip_pv_check_if_unreachable': True},
     ['vim_users kubernetes_vim', 'release_storage True',
      'vim_users kubernetes_vim', 'delete_vim kubernetes_vim']),
    # A VIM in use: refused before anything is deleted.
    ((), IN_USE, None, ['vim_users kubernetes_vim']),
    (('v-storage',), IN_USE, {'skip_pv_check_if_unreachable': False},
     ['release_storage False']),
    # A Worker: drained and taken out of the cluster.
    (('v-worker',), IN_USE, None, ["remove ['worker srv-w']"]),
])
def test_heal_start_releases_the_pvs_when_the_storage_vm_is_recreated(
        vnfc_ids, users, request_params, expected):
    calls = []
    workflow = types.SimpleNamespace(
        params=param_model.parse(sample()),
        release_storage=lambda skip_if_unreachable: calls.append(
            'release_storage %s' % skip_if_unreachable))

    cluster = types.SimpleNamespace(
        topology=types.SimpleNamespace(healed=lambda servers: [
            '%s %s' % (s.role, s.server_id) for s in servers]),
        remove=lambda nodes: calls.append('remove %s' % nodes))
    driver = _vim_recording_driver(calls, users)
    driver.storage.workflow = lambda context, vnf_instance, **requests: \
        workflow
    driver.cluster._workflow = lambda *args: cluster
    request = heal_request(*vnfc_ids)
    request.additional_params = request_params
    if users and not vnfc_ids:
        with pytest.raises(exceptions.MgmtDriverError) as caught:
            driver.heal_start(None, instance(sample()), request, None, None)
        assert "VIM 'kubernetes_vim'" in str(caught.value)
        assert 'vim-1: cnf-1' in str(caught.value)
    else:
        driver.heal_start(None, instance(sample()), request, None, None)
    assert calls == expected


@pytest.mark.parametrize('hook, request_', [
    ('terminate_start', None),
    ('heal_start', heal_request()),  # without the storage feature
])
@pytest.mark.parametrize('users, expected', [
    ({}, ['vim_users kubernetes_vim', 'delete_vim kubernetes_vim']),
    # A v1 or v2 VNF instance on the VIM: refused before anything goes.
    (IN_USE, ['vim_users kubernetes_vim']),
])
def test_terminate_and_entire_heal_refuse_while_the_vim_is_in_use(
        hook, request_, users, expected):
    calls = []
    driver = _vim_recording_driver(calls, users)
    inst = instance(cluster_only())
    if users:
        with pytest.raises(exceptions.MgmtDriverError) as caught:
            getattr(driver, hook)(None, inst, request_, None, None)
        assert 'vim-1: cnf-1' in str(caught.value)
        assert str(caught.value).endswith('Nothing was changed.')
    else:
        getattr(driver, hook)(None, inst, request_, None, None)
    assert calls == expected


def test_entire_heal_refuses_an_unusable_key_file_before_the_vim_goes(
        tmp_path):
    """heal_end logs in to the new VMs with the key files: heal_start
    checks them before it deletes the VIM."""
    config.CONF.set_override('ssh_key_dir', str(tmp_path),
                             config.GROUP_NAME)
    try:
        calls = []
        params = cluster_only()
        params[param_model.ROOT]['worker_node'].pop('password')
        params[param_model.ROOT]['worker_node']['ssh_key'] = 'gone'
        driver = _vim_recording_driver(calls, {})
        with pytest.raises(exceptions.ParameterErrors) as caught:
            driver.heal_start(None, instance(params), heal_request(), None,
                              None)
    finally:
        config.CONF.clear_override('ssh_key_dir', config.GROUP_NAME)
    assert [error.path for error in caught.value.errors] == [
        'additionalParams.%s.worker_node.ssh_key' % param_model.ROOT]
    assert calls == ['vim_users kubernetes_vim']


@pytest.mark.parametrize('owner, refused', [
    ('project-a', False), ('project-b', True)])
def test_an_entire_heal_uses_only_the_key_files_of_the_instance_s_project(
        tmp_path, owner, refused):
    """With ssh_key_per_project, the key a request names is looked up in
    the directory of the VNF instance's project (tenant_id), not in
    another project's, nor in ssh_key_dir itself."""
    for directory in (tmp_path, tmp_path / 'project-a'):
        os.makedirs(str(directory), 0o700, exist_ok=True)
        subprocess.run(['ssh-keygen', '-q', '-t', 'ed25519', '-N', '', '-f',
                        str(directory / 'nodes')], check=True)
    os.makedirs(str(tmp_path / 'project-b'), 0o700)
    for option, value in (('ssh_key_dir', str(tmp_path)),
                          ('ssh_key_per_project', True)):
        config.CONF.set_override(option, value, config.GROUP_NAME)
    calls = []
    params = cluster_only()
    params[param_model.ROOT]['worker_node'].pop('password')
    params[param_model.ROOT]['worker_node']['ssh_key'] = 'nodes'
    vnf_instance = instance(params)
    vnf_instance.tenant_id = owner
    driver = _vim_recording_driver(calls, {})
    try:
        if refused:
            with pytest.raises(exceptions.ParameterErrors) as caught:
                driver.heal_start(None, vnf_instance, heal_request(), None,
                                  None)
            (error,) = caught.value.errors
            assert error.reason.startswith('no such key')
        else:
            driver.heal_start(None, vnf_instance, heal_request(), None, None)
    finally:
        for option in ('ssh_key_dir', 'ssh_key_per_project'):
            config.CONF.clear_override(option, config.GROUP_NAME)
    assert ('delete_vim kubernetes_vim' in calls) is not refused


@pytest.mark.parametrize('value', ['true', 1, []])
def test_the_pv_check_flag_must_be_a_boolean(value):
    driver = mgmt_driver.KubernetesPvMgmtDriver()
    driver.storage.workflow = lambda context, vnf_instance, **requests: \
        types.SimpleNamespace(params=param_model.parse(sample()))
    request = heal_request()
    request.additional_params = {'skip_pv_check_if_unreachable': value}
    with pytest.raises(exceptions.ParameterErrors) as caught:
        driver.heal_start(None, instance(sample()), request, None, None)
    assert [error.path for error in caught.value.errors] == [
        'additionalParams.skip_pv_check_if_unreachable']


def test_each_flow_reports_only_what_it_did(monkeypatch, caplog):
    """A heal that runs two flows logs two summaries, not a cumulative
    second one."""
    class Sessions(object):
        def __init__(self, **kwargs):
            pass

        def __enter__(self):
            return self

        def __exit__(self, *exc_info):
            pass

        def reserve(self, hosts):
            pass

        def get(self, host, username, password, host_key_policy=None,
                pkey=None):
            return types.SimpleNamespace(host=host)

    def install_nfs_client(executor, proxy, conf, outcomes, statuses):
        outcomes.record(executor.host, 'package nfs-common', True)

    monkeypatch.setattr(flow.remote, 'SessionPool', Sessions)
    monkeypatch.setattr(flow.dpkg, 'check_supported_os',
                        lambda executor, supported: None)
    monkeypatch.setattr(storage_workflow.nfs_client, 'install_nfs_client',
                        install_nfs_client)
    monkeypatch.setattr(
        storage_workflow.nfs_client, 'gather_facts',
        lambda executor, servers: storage_workflow.nfs_client.ClientFacts(
            'ID=ubuntu\nVERSION_ID=22.04\n', {},
            {server: executor.host for server in servers}))
    parsed = param_model.parse(sample())
    storage = vnf_topology.Node('storage', 'storage', '10.0.0.5', '10.0.0.5',
                                'storage_server_CP', None, parsed.storage)
    monkeypatch.setattr(vnf_topology.Topology, 'resolve',
                        lambda heat, params, overrides: vnf_topology.Topology(
                            heat, [storage]))
    workflow = storage_workflow.PvWorkflow(parsed, [], heat=None)

    def node(address):  # inside the sample's export_to 10.10.0.0/24
        return vnf_topology.Node('worker', address, address, address,
                                 'workerNode_CP2', 'member-' + address,
                                 parsed.worker)

    caplog.set_level('INFO', logger=flow.__name__)
    first = workflow.install_clients([node('10.10.0.21')])
    second = workflow.install_clients([node('10.10.0.22')])
    assert first is not second
    assert [o.host for o in first.outcomes] == ['10.10.0.21']
    assert [o.host for o in second.outcomes] == ['10.10.0.22']
    assert [r.getMessage() for r in caplog.records
            if r.name == flow.__name__] == [
        'install_clients done: 1 step(s) changed, 0 unchanged'] * 2


def cluster_only():
    value = sample()
    del value[param_model.ROOT]['storage_server']
    del value[param_model.ROOT]['pv_registration_params']
    return value


def test_heal_targets_without_a_storage_server():
    targets = lcm_requests.heal_targets(
        instance(), heal_request('v-worker', 'v-storage'),
        param_model.parse(cluster_only()))
    assert targets.servers == (vnf_topology.HealedServer('worker', 'srv-w'),)
    assert not targets.storage_server


def scaling_driver(calls):
    """The entry-point driver with the cluster workflow replaced by one
    that records what scale_start asks of it."""
    workflow = types.SimpleNamespace(
        topology=types.SimpleNamespace(
            members=lambda aspect, ids: ['%s:%s' % (aspect, i) for i in ids],
            member_stack_ids=lambda aspect, names: ['stack-' + n
                                                    for n in names]),
        remove=lambda nodes, scale_in=False: calls.append(
            ('remove', nodes, scale_in)))
    driver = mgmt_driver.KubernetesPvMgmtDriver()
    driver.cluster._workflow = lambda *args: workflow
    return driver


def scale_request(kind, aspect='worker_instance'):
    return types.SimpleNamespace(type=kind, aspect_id=aspect,
                                 additional_params={})


@pytest.mark.parametrize('kind, extra, expected', [
    ('SCALE_IN', {'scale_out_id_list': ['s1'], 'scale_name_list': ['r1']},
     [('remove', ['worker_instance:s1'], True)]),
    # Tacker's rollback of a scale-out: the scale-out's own request, and
    # the members only by resource name.
    ('SCALE_OUT', {'scale_name_list': ['r1']},
     [('remove', ['worker_instance:stack-r1'], True)]),
])
def test_scale_start_removes_the_named_workers(kind, extra, expected):
    calls = []
    scaling_driver(calls).scale_start(
        None, instance(cluster_only()), scale_request(kind), None, None,
        **extra)
    assert calls == expected


def test_scaling_the_master_aspect_is_refused():
    calls = []
    with pytest.raises(exceptions.MgmtDriverError,
                       match='scaling the Master aspect master_instance'):
        scaling_driver(calls).scale_start(
            None, instance(cluster_only()),
            scale_request('SCALE_IN', 'master_instance'), None, None,
            scale_out_id_list=['s1'])
    assert calls == []
