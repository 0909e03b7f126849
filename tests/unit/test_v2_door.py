"""The Tacker v2 door: one hook per run, the state it saves, what it
hands back to Tacker, and its seams."""

import json
import os
import subprocess
import sys
import types

import pytest

from kubernetes_mgmt_pv.doors import tacker_compat
from kubernetes_mgmt_pv.doors import tacker_v2
from kubernetes_mgmt_pv.doors import v2_hook
from kubernetes_mgmt_pv.doors import v2_mapping
from kubernetes_mgmt_pv import exceptions
from kubernetes_mgmt_pv import mgmt_driver
from kubernetes_mgmt_pv.request import param_model
from tests.unit import v2_dicts as v2

MASTER, WORKER1, WORKER2, STORAGE = (vnfc[0] for vnfc in v2.VNFCS)
NEW_STACK = 'bbbbbbbb-0000-4000-8000-000000000009'
K8S_VIM = {'id': 'k8s-vim-id', 'name': 'kubernetes_vim',
           'endpoint': 'https://10.10.0.5:6443'}


class Recorder(object):
    """A driver that records the hook calls instead of running them; it
    registers or deletes the VIM as the features would."""

    def __init__(self, script_dict, state, fail=None):
        self.calls = []
        self.checked_registry = False
        self.registered = None
        self.deleted = False
        self._fail = fail
        Recorder.last = self

    def openstack_vim_id(self):
        return v2.OPENSTACK_VIM_ID

    def group_members(self, aspect_id):
        assert aspect_id == 'worker_instance'
        return Recorder.members

    def check_vim_registry(self):
        self.checked_registry = True
        if Recorder.unregistered:
            raise exceptions.MgmtDriverError('not in the VIM registry')

    def __getattr__(self, hook):
        if hook not in v2_mapping.HOOKS:
            raise AttributeError(hook)

        def call(context, vnf_instance, request, grant, grant_request,
                 **kwargs):
            self.calls.append((hook, vnf_instance, request, kwargs))
            if self._fail:
                raise self._fail
            if hook in ('instantiate_end', 'heal_end') and \
                    request.vnfc_instance_id is None:
                self.registered = dict(K8S_VIM)
            if hook in ('terminate_start', 'terminate_end') or (
                    hook == 'heal_start' and not request.vnfc_instance_id):
                self.deleted = True
        return call


@pytest.fixture(autouse=True)
def _no_recorder():
    Recorder.last = None
    Recorder.members = [(vnfc[4], vnfc[3]) for vnfc in v2.VNFCS[1:3]]
    Recorder.unregistered = False


def run(operation, request, inst=None, progress=None, **kwargs):
    secrets, progress = [], {} if progress is None else progress
    result = v2_hook.run(v2.script_dict(operation, request, inst, **kwargs),
                         secrets, progress, driver_factory=Recorder)
    return result, secrets, progress


def instantiated(vim=True):
    state = {'contractVersion': mgmt_driver.PACKAGE_CONTRACT_VERSION,
             'params': v2_mapping.saved_params(v2.install_params()),
             'openstackVimId': v2.OPENSTACK_VIM_ID}
    if vim:
        state['vim'] = dict(K8S_VIM)
    return v2.vnf_instance(metadata={v2_mapping.STATE_KEY: state})


def test_instantiate_end_saves_the_state_without_secrets():
    result, secrets, progress = run('instantiate_end',
                                    v2.instantiate_request())
    state = result['vnf_instance']['metadata'][v2_mapping.STATE_KEY]
    assert state == instantiated()['metadata'][v2_mapping.STATE_KEY]
    for secret in (v2.PASSWORD, v2.STORAGE_PASSWORD, v2.VIM_PASSWORD,
                   'proxy-Secret'):
        assert secret not in repr(result['vnf_instance']['metadata'])
    for secret in (v2.PASSWORD, v2.STORAGE_PASSWORD, v2.VIM_PASSWORD,
                   'proxy-Secret'):
        assert secret in secrets
    assert progress == {'done': ['instantiate_end']}
    hook, inst, request, kwargs = Recorder.last.calls[0]
    assert inst.instantiated_vnf_info.instance_id == v2.STACK_ID
    assert request.additional_params[param_model.ROOT] == v2.install_params()


def test_the_rest_of_the_instance_is_handed_back_unchanged():
    result, _, _ = run('instantiate_end', v2.instantiate_request())
    handed = dict(result['vnf_instance'], metadata={})
    assert handed == dict(v2.vnf_instance(), metadata={})


def test_instantiate_without_parameters_saves_a_state_without_them():
    """With the features off too: a later hook that finds no state knows
    it was erased."""
    result, _, _ = run('instantiate_end', {'flavourId': 'simple'},
                       inst=v2.vnf_instance(metadata={'a': 'b'}))
    metadata = result['vnf_instance']['metadata']
    assert metadata['a'] == 'b'
    state = metadata[v2_mapping.STATE_KEY]
    assert state['contractVersion'] == mgmt_driver.PACKAGE_CONTRACT_VERSION
    assert 'params' not in state


def test_terminate_start_deletes_the_vim_and_forgets_it():
    result, _, _ = run('terminate_start', {'terminationType': 'FORCEFUL'},
                       inst=instantiated())
    state = result['vnf_instance']['metadata'][v2_mapping.STATE_KEY]
    assert 'vim' not in state and 'params' in state
    assert Recorder.last.calls[0][0] == 'terminate_start'


def test_terminate_end_after_terminate_start_only_drops_the_state():
    inst = instantiated(vim=False)
    inst['vimConnectionInfo'] = {}
    del inst['instantiatedVnfInfo']
    result, _, _ = run('terminate_end', {'terminationType': 'FORCEFUL'},
                       inst=inst)
    assert v2_mapping.STATE_KEY not in result['vnf_instance']['metadata']
    assert Recorder.last is None


def test_terminate_end_deletes_a_vim_terminate_start_left():
    inst = instantiated()
    inst['vimConnectionInfo'] = {}
    result, _, _ = run('terminate_end', {}, inst=inst)
    assert Recorder.last.calls[0][0] == 'terminate_end'
    assert v2_mapping.STATE_KEY not in result['vnf_instance']['metadata']


def test_scale_in_hands_the_victims_member_stacks():
    run('scale_start', dict(additionalParams=v2.logins(), type='SCALE_IN',
                            aspectId='worker_instance', numberOfSteps=1),
        inst=instantiated(),
        grant_request=v2.grant_request('SCALE', [WORKER2]))
    hook, inst, request, kwargs = Recorder.last.calls[0]
    assert kwargs == {'scale_out_id_list': [v2.VNFCS[2][3]]}
    assert request.type == 'SCALE_IN'
    params = param_model.parse(inst.instantiated_vnf_info.additional_params)
    assert params.worker.password == v2.PASSWORD


def test_scale_out_hands_every_worker():
    run('scale_end', dict(additionalParams=v2.logins(), type='SCALE_OUT',
                          aspectId='worker_instance', numberOfSteps=1),
        inst=instantiated())
    assert Recorder.last.calls[0][3] == {
        'scale_out_id_list': [v2.VNFCS[1][3], v2.VNFCS[2][3]]}


def test_heal_of_a_worker_across_start_and_end():
    healed_id = v2.vnfc_info_id(WORKER1)
    request = dict(additionalParams=v2.logins(),
                   vnfcInstanceId=[healed_id])
    progress = {}
    run('heal_start', request, inst=instantiated(), progress=progress)
    assert progress['healing'] == {healed_id: [v2.VNFCS[1][4],
                                               'workerNode']}
    new_server = '55555555-5555-4555-8555-555555555555'
    after = instantiated()
    after['instantiatedVnfInfo'] = v2.vnf_instance(vnfcs=v2.healed(
        1, new_server, NEW_STACK))['instantiatedVnfInfo']
    result, _, _ = run('heal_end', request, inst=after, progress=progress)
    _, inst, heal_request, _ = Recorder.last.calls[0]
    vnfcs = {vnfc.id: vnfc.compute_resource.resource_id
             for vnfc in inst.instantiated_vnf_info.vnfc_resource_info}
    assert vnfcs[healed_id] == new_server
    assert heal_request.vnfc_instance_id == (healed_id,)
    assert progress['done'] == ['heal_start', 'heal_end']
    assert result['vnf_instance']['metadata'][v2_mapping.STATE_KEY][
        'vim'] == K8S_VIM


def test_entire_heal_replaces_the_vim_record():
    progress = {}
    result, _, _ = run('heal_start', {'additionalParams': v2.logins()},
                       inst=instantiated(),
                       progress=progress)
    state = result['vnf_instance']['metadata'][v2_mapping.STATE_KEY]
    assert 'vim' not in state
    result, _, _ = run('heal_end', {'additionalParams': v2.logins()},
                       inst=result['vnf_instance'], progress=progress)
    assert result['vnf_instance']['metadata'][v2_mapping.STATE_KEY][
        'vim'] == K8S_VIM


def test_a_retry_skips_a_start_hook_that_was_done():
    progress = {'done': ['heal_start']}
    result, _, _ = run('heal_start', {'additionalParams': v2.logins()},
                       inst=instantiated(),
                       progress=progress)
    assert result == {}
    assert Recorder.last is None


def test_a_retry_of_a_failed_hook_converges():
    """The failed run saves nothing; the retry runs with the same inputs
    and hands back what a first success would have."""
    progress = {}
    with pytest.raises(exceptions.StepError):
        v2_hook.run(v2.script_dict('instantiate_end',
                                   v2.instantiate_request()), [], progress,
                    driver_factory=lambda d, s: Recorder(
                        d, s, fail=exceptions.StepError(
                            'kubeadm init', '10.10.0.5', OSError('x'))))
    assert progress == {}
    retried, _, _ = run('instantiate_end', v2.instantiate_request(),
                        progress=progress)
    first, _, _ = run('instantiate_end', v2.instantiate_request())
    assert retried == first


@pytest.mark.parametrize('operation', [
    'instantiate_start', 'modify_information_end',
    'change_external_connectivity_end', 'change_current_package_rollback_end',
    'scale_rollback_end', 'instantiate_rollback_end'])
def test_undeclared_operations_are_no_ops(operation):
    assert run(operation, {}, inst=instantiated())[0] == {}
    assert Recorder.last is None


class RegistersThenFails(Recorder):
    """instantiate_end whose cluster part registered the VIM and whose
    persistent-volume part then failed."""

    def instantiate_end(self, *args, **kwargs):
        self.registered = dict(K8S_VIM)
        raise exceptions.StepError('NFS client facts', '10.10.0.7',
                                   OSError('dpkg-query failed'))


def test_a_failed_hook_hands_back_the_vim_it_registered():
    progress = {}
    with pytest.raises(exceptions.StepError):
        v2_hook.run(v2.script_dict('instantiate_end',
                                   v2.instantiate_request()), [], progress,
                    driver_factory=RegistersThenFails)
    assert progress == {'registeredVim': K8S_VIM}


def test_instantiate_rollback_deletes_the_vim_as_terminate_start():
    result, secrets, progress = run(
        'instantiate_rollback_start', v2.instantiate_request(),
        inst=v2.vnf_instance(instantiated=False),
        progress={'registeredVim': dict(K8S_VIM)})
    (hook, instance, _, kwargs), = Recorder.last.calls
    assert hook == 'terminate_start' and kwargs == {}
    assert instance.instantiated_vnf_info.additional_params == {
        param_model.ROOT: v2.install_params()}
    assert v2.PASSWORD in secrets
    assert v2_mapping.STATE_KEY not in result['vnf_instance']['metadata']
    assert progress['done'] == ['instantiate_rollback_start']


def test_instantiate_rollback_without_parameters_does_nothing():
    assert run('instantiate_rollback_start', {'flavourId': 'simple'},
               inst=v2.vnf_instance(instantiated=False))[0] == {}
    assert Recorder.last is None


def scale_out(**params):
    return {'type': 'SCALE_OUT', 'aspectId': 'worker_instance',
            'numberOfSteps': 1, 'additionalParams': dict(v2.logins(),
                                                         **params)}


def test_scale_out_rollback_takes_the_new_workers_out_as_scale_start():
    Recorder.members.append(('n3wm3mb3', NEW_STACK))
    run('scale_rollback_start', scale_out(), inst=instantiated())
    (hook, instance, request, kwargs), = Recorder.last.calls
    assert hook == 'scale_start'
    assert (request.type, request.aspect_id) == ('SCALE_OUT',
                                                 'worker_instance')
    assert kwargs == {'scale_name_list': ['n3wm3mb3']}
    assert instance.instantiated_vnf_info.additional_params[
        param_model.ROOT]['worker_node']['password'] == v2.PASSWORD


def test_scale_out_rollback_without_a_new_member_does_nothing():
    assert run('scale_rollback_start', scale_out(),
               inst=instantiated())[0] == {}
    assert Recorder.last.calls == []


@pytest.mark.parametrize('request_dict', [
    dict(scale_out(), type='SCALE_IN'),
    dict(scale_out(), aspectId='master_instance')])
def test_rollbacks_of_other_scales_do_nothing(request_dict):
    assert run('scale_rollback_start', request_dict,
               inst=instantiated())[0] == {}
    assert Recorder.last is None


@pytest.mark.parametrize('unregistered', [False, True])
def test_instantiate_end_checks_the_vim_registry_before_any_step(
        unregistered):
    Recorder.unregistered = unregistered
    if unregistered:
        with pytest.raises(exceptions.MgmtDriverError):
            run('instantiate_end', v2.instantiate_request())
        assert Recorder.last.calls == []
    else:
        run('instantiate_end', v2.instantiate_request())
        assert [call[0] for call in Recorder.last.calls] == [
            'instantiate_end']
    assert Recorder.last.checked_registry


def test_without_the_cluster_feature_no_vim_is_registered_or_checked():
    run('instantiate_end', v2.instantiate_request(params={}))
    assert not Recorder.last.checked_registry


def test_missing_logins_fail_before_any_step():
    progress = {}
    with pytest.raises(exceptions.ParameterErrors):
        run('scale_end', {'type': 'SCALE_OUT', 'aspectId': 'worker_instance'},
            inst=instantiated(), progress=progress)
    assert Recorder.last is None
    assert progress == {'refused': 'scale_end'}


def test_an_automatic_heal_without_the_logins_says_so_in_one_line():
    """Tacker's auto-heal request has no additionalParams: an instance
    logging in with passwords cannot heal by itself."""
    progress = {}
    with pytest.raises(exceptions.MgmtDriverError) as raised:
        run('heal_start', {'vnfcInstanceId': [WORKER1]},
            inst=instantiated(), progress=progress,
            grant_request={'isAutomaticInvocation': True})
    message = str(raised.value)
    assert message.startswith('automatic heal refused: ') and \
        '\n' not in message, message
    assert 'worker_node.password' in message
    assert Recorder.last is None
    assert progress == {'refused': 'heal_start'}


def test_the_rollback_of_a_refused_operation_does_nothing():
    """Its request would be refused again: the rollback would never
    end, though the driver changed nothing."""
    Recorder.members.append(('n3wm3mb3', NEW_STACK))
    request = {'type': 'SCALE_OUT', 'aspectId': 'worker_instance'}
    assert run('scale_rollback_start', request, inst=instantiated(),
               progress={'refused': 'scale_start'})[0] == {}
    assert Recorder.last is None


# -- the driver's seams -------------------------------------------------------

def test_seams_answer_from_the_script_dict(monkeypatch):
    script = v2.script_dict('instantiate_end', v2.instantiate_request(),
                            package_dir='/tmp/pkg')
    driver = v2_hook.V2Driver(script, {})
    assert driver.vnf_package_dir(None, None) == '/tmp/pkg'
    assert driver.openstack_access_info(None, None)['password'] == \
        v2.VIM_PASSWORD
    calls = []
    monkeypatch.setattr(tacker_compat, 'project_context',
                        lambda vim_id: calls.append(vim_id) or 'ctx')

    def register(context, inst, name, url, token, ca, record=True):
        calls.append((context, name, url, record))
        return 'new-vim'
    monkeypatch.setattr(tacker_compat, 'register_kubernetes_vim', register)
    access = types.SimpleNamespace(url='https://10.10.0.5:6443',
                                   bearer_token='tok', ca_cert='ca')
    assert driver.register_vim(None, None, 'kubernetes_vim', access) == \
        'new-vim'
    assert calls == [v2.OPENSTACK_VIM_ID,
                     ('ctx', 'kubernetes_vim', access.url, False)]
    assert driver.registered == {'id': 'new-vim', 'name': 'kubernetes_vim',
                                 'endpoint': access.url}


def test_terminate_end_finds_the_project_through_the_saved_vim_id():
    inst = v2.vnf_instance()
    inst['vimConnectionInfo'] = {}
    driver = v2_hook.V2Driver(v2.script_dict('terminate_end', {}, inst),
                              {'openstackVimId': 'saved-id'})
    assert driver.openstack_vim_id() == 'saved-id'


@pytest.mark.parametrize('vim_id', [v2.OPENSTACK_VIM_ID, None])
def test_the_registry_check_asks_tacker_for_the_vim(monkeypatch, vim_id):
    """No vimId, or a vimId Tacker's registry lacks: refused."""
    inst = v2.vnf_instance()
    inst['vimConnectionInfo']['vim1']['vimId'] = vim_id
    asked = []

    def project_context(vim_id):
        asked.append(vim_id)
        raise exceptions.MgmtDriverError('not in Tacker\'s VIM registry')
    monkeypatch.setattr(tacker_compat, 'project_context', project_context)
    driver = v2_hook.V2Driver(v2.script_dict('instantiate_end', {}, inst),
                              {})
    with pytest.raises(exceptions.MgmtDriverError):
        driver.check_vim_registry()
    assert asked == ([vim_id] if vim_id else [])


def test_an_openstack_vim_without_id_cannot_register():
    inst = v2.vnf_instance()
    del inst['vimConnectionInfo']['vim1']['vimId']
    driver = v2_hook.V2Driver(v2.script_dict('instantiate_end', {}, inst),
                              {})
    with pytest.raises(exceptions.MgmtDriverError, match='vimId'):
        driver.delete_vim(None, None, 'kubernetes_vim')


# -- the process shell -------------------------------------------------------

CONDUCTOR = ['/usr/bin/python3', '/usr/bin/tacker-conductor',
             '--config-file', '/etc/tacker/t.conf',
             '--config-dir=/etc/tacker/conf.d', '--log-file', '/var/log/x']
# Tacker 16: the script's parent is a retitled worker; the master process
# keeps the command line in its title.
WORKER = ['tacker-conductor: ServiceWrapper worker(0)']
MASTER = ['tacker-conductor: master process [/usr/bin/tacker-conductor '
          '--config-file /etc/t16.conf --log-file /var/log/c.log]']


@pytest.mark.parametrize('environ, ancestors, default, expected', [
    ({tacker_v2.CONFIG_ENV: '/a.conf:/b.conf'}, [CONDUCTOR],
     True, ['--config-file', '/a.conf', '--config-file', '/b.conf']),
    ({}, [CONDUCTOR], True,
     ['--config-file', '/etc/tacker/t.conf',
      '--config-dir', '/etc/tacker/conf.d']),
    ({}, [WORKER, MASTER, ['/sbin/init']], True,
     ['--config-file', '/etc/t16.conf']),
    ({}, [WORKER, ['/usr/bin/bash'], CONDUCTOR], False,
     ['--config-file', '/etc/tacker/t.conf',
      '--config-dir', '/etc/tacker/conf.d']),
    ({}, [['pytest']], True, ['--config-file', tacker_v2.DEFAULT_CONFIG]),
    ({}, [WORKER, ['pytest']], False, []),
    # A title with a line break is no master's: not read.
    ({}, [WORKER, [MASTER[0] + '\n']], False, []),
    ({}, [], False, []),
])
def test_config_args(environ, ancestors, default, expected):
    assert tacker_v2.config_args(environ, ancestors, default) == expected


def _cmdline(pid):
    with open('/proc/%d/cmdline' % pid, 'rb') as stream:
        return [arg.decode() for arg in stream.read().split(b'\0') if arg]


def test_ancestor_argvs_reads_the_real_process_tree():
    """A child's ancestors as /proc shows them: its parent (this test's
    interpreter) first, then the parent's parent."""
    probe = ('import json, sys\n'
             'from kubernetes_mgmt_pv.doors import tacker_v2\n'
             'json.dump(tacker_v2._ancestor_argvs(depth=2), sys.stdout)')
    done = subprocess.run([sys.executable, '-c', probe],
                          capture_output=True, text=True, check=True)
    expected = [_cmdline(os.getpid())]
    if os.getppid() > 1:
        expected.append(_cmdline(os.getppid()))
    assert json.loads(done.stdout) == expected
