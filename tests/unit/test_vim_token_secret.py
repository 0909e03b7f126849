"""The registered Kubernetes VIM's bearer token is a secret of every hook
of both doors, not only of the hook that read it from the cluster: a
Master whose kubectl prints it (compromised or verbose) must not put it
into the step's error, Tacker's LCM operation error or the log."""

import logging
import traceback
import types

import pytest

from kubernetes_mgmt_pv.doors import tacker_compat
from kubernetes_mgmt_pv.doors import v2_hook
from kubernetes_mgmt_pv import exceptions
from kubernetes_mgmt_pv import mgmt_driver
from tests.unit import test_v2_door
from tests.unit import v2_dicts as v2

TOKEN = 'eyJhbGciOiJSUzI1NiJ9.registered-vim-token'
MASTER = '10.0.0.5'


def master_printing_the_token(driver):
    """The storage workflow of ``driver``: it takes the hook's sessions, as
    every feature does before a remote step, then a Master's kubectl fails
    printing the token bare (no "Bearer" or "token:" a pattern finds)."""
    def workflow(context, vnf_instance, request=None):
        driver.hook_sessions()
        raise exceptions.StepError(
            'PersistentVolume check', MASTER, exceptions.RemoteCommandError(
                MASTER, 'kubectl get persistentvolumes', 1,
                stderr='error: credentials %s rejected' % TOKEN))
    driver.cluster.instantiate_end = lambda *args, **kwargs: None
    driver.storage.workflow = workflow
    return driver


def shown(error):
    return ''.join(traceback.format_exception(type(error), error,
                                              error.__traceback__))


def logged(caplog):
    return '\n'.join(record.getMessage() + (record.exc_text or '')
                     for record in caplog.records)


def test_a_v1_hook_hides_the_token_of_the_registered_vim(monkeypatch,
                                                         caplog):
    caplog.set_level(logging.DEBUG, logger='kubernetes_mgmt_pv')
    context, instance = object(), types.SimpleNamespace(id='vnf-1')
    asked = []

    def registered(context, vnf_instance):
        asked.append((context, vnf_instance))
        return [TOKEN]
    monkeypatch.setattr(tacker_compat, 'registered_vim_tokens', registered)
    driver = master_printing_the_token(mgmt_driver.KubernetesPvMgmtDriver())

    with pytest.raises(exceptions.StepError) as raised:
        # As Tacker v1 calls a hook: every argument by name.
        driver.instantiate_end(
            context=context, vnf_instance=instance,
            instantiate_vnf_request=None, grant=None, grant_request=None)

    assert 'credentials *** rejected' in str(raised.value)
    assert raised.value.step == 'PersistentVolume check'
    assert TOKEN not in shown(raised.value) + logged(caplog)
    assert asked == [(context, instance)]


class V2MasterPrintingTheToken(v2_hook.V2Driver):
    def __init__(self, script_dict, state):
        super().__init__(script_dict, state)
        master_printing_the_token(self)


def test_a_v2_hook_hides_the_token_of_the_vim_it_saved(monkeypatch):
    asked = []
    monkeypatch.setattr(tacker_compat, 'project_context',
                        lambda vim_id: asked.append(vim_id) or 'ctx')

    def vim_tokens(context, vim_ids):
        asked.append((context, vim_ids))
        return [TOKEN]
    monkeypatch.setattr(tacker_compat, 'vim_tokens', vim_tokens)

    with pytest.raises(exceptions.StepError) as raised:
        v2_hook.run(v2.script_dict('instantiate_end', v2.instantiate_request(),
                                   test_v2_door.instantiated()),
                    [], {}, driver_factory=V2MasterPrintingTheToken)

    assert 'credentials *** rejected' in str(raised.value)
    assert TOKEN not in shown(raised.value)
    assert asked == [v2.OPENSTACK_VIM_ID,
                     ('ctx', [test_v2_door.K8S_VIM['id']])]


def test_a_v2_hook_without_a_saved_vim_asks_for_no_token(monkeypatch):
    monkeypatch.setattr(tacker_compat, 'vim_tokens', pytest.fail)
    driver = v2_hook.V2Driver(v2.script_dict('instantiate_end', {}), {})
    assert driver.registered_vim_tokens(None, None) == []


def test_a_token_tacker_cannot_read_leaves_the_hook_running(monkeypatch,
                                                            caplog):
    """No VIM registry (or Barbican down): the hook goes on, the log says
    why the token is not hidden."""
    def no_registry(vim_id):
        raise exceptions.MgmtDriverError('Tacker is not installed')
    monkeypatch.setattr(tacker_compat, 'project_context', no_registry)
    driver = v2_hook.V2Driver(v2.script_dict('terminate_start', {}),
                              {'vim': dict(test_v2_door.K8S_VIM)})
    with caplog.at_level(logging.WARNING):
        assert driver.registered_vim_tokens(None, None) == []
    assert 'k8s-vim-id' in caplog.text and 'not installed' in caplog.text
