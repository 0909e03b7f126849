"""Every failure names the step, the host and a non-empty reason; nothing
but the driver's own errors leaves a hook."""

import socket
import types

import paramiko
import pytest
import yaml

from kubernetes_mgmt_pv import exceptions
from kubernetes_mgmt_pv import mgmt_driver
from kubernetes_mgmt_pv import step_report

HOST = '10.0.0.5'


@pytest.mark.parametrize('cause, message', [
    (exceptions.StorageSetupError('/volume1 is not empty'),
     'mount /volume1 failed on 10.0.0.5: /volume1 is not empty'),
    # The executor's "<host>: " prefix is not repeated.
    (exceptions.RemoteCommandError(HOST, 'mount -- /dev/vdb /volume1', 32,
                                   stderr='mount: wrong fs type'),
     'mount /volume1 failed on 10.0.0.5: `mount -- /dev/vdb /volume1` '
     'failed with exit status 32: mount: wrong fs type'),
    # Another host's name in the reason stays.
    (exceptions.StorageSetupError('10.0.0.6: busy'),
     'mount /volume1 failed on 10.0.0.5: 10.0.0.6: busy'),
    # Errors with an empty message show their type.
    (EOFError(), 'mount /volume1 failed on 10.0.0.5: EOFError'),
    (exceptions.StorageSetupError(''),
     'mount /volume1 failed on 10.0.0.5: StorageSetupError'),
    (exceptions.StorageSetupError(HOST + ': '),
     'mount /volume1 failed on 10.0.0.5: StorageSetupError'),
    # Foreign errors show their type in front of their message.
    (paramiko.SSHException('SSH session not active'),
     'mount /volume1 failed on 10.0.0.5: SSHException: SSH session not '
     'active'),
    (socket.timeout('timed out'),
     'mount /volume1 failed on 10.0.0.5: TimeoutError: timed out'),
])
def test_step_error_names_step_host_and_reason(cause, message):
    with pytest.raises(exceptions.StepError) as caught:
        with step_report.step(HOST, 'mount /volume1'):
            raise cause
    assert str(caught.value) == message
    assert caught.value.cause is cause and caught.value.__cause__ is cause
    assert (caught.value.step, caught.value.host) == ('mount /volume1', HOST)


def test_inner_step_keeps_its_more_precise_name():
    with pytest.raises(exceptions.StepError) as caught:
        with step_report.step(HOST, 'storage server setup'):
            with step_report.step(HOST, 'format /dev/vdb'):
                raise exceptions.StorageSetupError('holds other data')
    assert str(caught.value) == \
        'format /dev/vdb failed on 10.0.0.5: holds other data'


def test_step_without_failure_is_transparent():
    with step_report.step(HOST, 'mount /volume1'):
        pass


@pytest.mark.parametrize('failures, message', [
    ({HOST: EOFError()},
     'NFS client installation failed on 1 node(s): 10.0.0.5: EOFError'),
    ({HOST: exceptions.RemoteConnectError(HOST + ': cannot connect')},
     'NFS client installation failed on 1 node(s): 10.0.0.5: cannot '
     'connect'),
    ({HOST: exceptions.StepError('mount /v', HOST, OSError('gone')),
      '10.0.0.4': RuntimeError('')},
     'NFS client installation failed on 2 node(s): 10.0.0.4: RuntimeError; '
     'mount /v failed on 10.0.0.5: OSError: gone'),
])
def test_node_step_error_lists_every_node_with_a_reason(failures, message):
    assert str(exceptions.NodeStepError('NFS client installation',
                                        failures)) == message


def _failing_driver(error):
    """A driver whose storage feature fails with ``error``, the cluster
    feature having nothing to do."""
    def workflow(context, vnf_instance, request=None):
        raise error
    driver = mgmt_driver.KubernetesPvMgmtDriver()
    driver.cluster.instantiate_end = lambda *args, **kwargs: None
    driver.storage.workflow = workflow
    return driver


def _instantiate_end(driver):
    driver.instantiate_end(None, types.SimpleNamespace(), None, None, None)


@pytest.mark.parametrize('error, message', [
    (EOFError(), 'instantiate_end failed: EOFError'),
    (paramiko.SSHException('No existing session'),
     'instantiate_end failed: SSHException: No existing session'),
    (UnicodeDecodeError('utf-8', b'\xff', 0, 1, 'invalid start byte'),
     "instantiate_end failed: UnicodeDecodeError: 'utf-8' codec can't "
     "decode byte 0xff in position 0: invalid start byte"),
    (yaml.YAMLError('bad'), 'instantiate_end failed: YAMLError: bad'),
])
def test_foreign_errors_leave_a_hook_as_driver_errors(error, message):
    with pytest.raises(exceptions.MgmtDriverError) as caught:
        _instantiate_end(_failing_driver(error))
    assert type(caught.value) is exceptions.MgmtDriverError
    assert str(caught.value) == message
    assert caught.value.__cause__ is error


def test_driver_errors_leave_a_hook_unchanged():
    error = exceptions.StepError('mount /v', HOST, EOFError())
    with pytest.raises(exceptions.StepError) as caught:
        _instantiate_end(_failing_driver(error))
    assert caught.value is error


def test_hooks_keep_their_names():
    hook = mgmt_driver.KubernetesPvMgmtDriver.heal_start
    assert hook.__name__ == 'heal_start'
    assert hook.__qualname__ == 'KubernetesPvMgmtDriver.heal_start'
