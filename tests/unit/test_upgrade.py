"""upgrade_cluster's refusals that need no host."""

import threading
import types

import pytest

from kubernetes_mgmt_pv.cluster import upgrade
from kubernetes_mgmt_pv import exceptions


class NoHosts(object):
    """A workflow that fails the test if anything is looked up."""

    conf = types.SimpleNamespace(drain_force=False)

    def __getattr__(self, name):
        pytest.fail('the workflow was used: %s' % name)


def test_a_script_without_its_version_is_refused_before_any_login():
    with pytest.raises(exceptions.ParameterErrors) as raised:
        upgrade.upgrade_cluster(NoHosts(), b'#!/bin/bash\necho hi\n')
    assert [error.path for error in raised.value.errors] == [
        upgrade.SCRIPT_PATH_PARAM]
    assert 'K8S_PACKAGE_VERSION' in str(raised.value)


class RecordingKubectl(object):
    """kubectl whose ``wait`` calls answer from ``waits`` in turn."""

    NODES = ('{"items": [{"metadata": {"name": "worker1"}, "status": {'
             '"addresses": [{"type": "InternalIP", "address": "10.0.0.5"}],'
             ' "nodeInfo": {"kubeletVersion": "v1.35.4"}, "conditions": ['
             '{"type": "Ready", "status": "True"}]}}]}')

    def __init__(self, *waits):
        self.waits = list(waits)
        self.calls = []

    def run(self, args, check=True, timeout=None):
        self.calls.append(args)
        ok = self.waits.pop(0) if args[0] == 'wait' else True
        return types.SimpleNamespace(ok=ok, stdout=self.NODES)


def waiting_upgrade():
    workflow = types.SimpleNamespace(
        conf=types.SimpleNamespace(node_ready_timeout=300,
                                   max_concurrent_nodes=10))
    step = types.SimpleNamespace(
        name='worker1', node=types.SimpleNamespace(fixed_ip='10.0.0.5'))
    return upgrade._Upgrade(workflow, b'', '1.36.1-1.1', False, 1), step


def test_a_node_is_watched_to_the_target_kubelet_then_ready():
    run, step = waiting_upgrade()
    kubectl = RecordingKubectl(True, True)
    run._wait_ready_at_target(kubectl, step)
    assert [call[:2] for call in kubectl.calls] == [
        ['wait', '--for=jsonpath={.status.nodeInfo.kubeletVersion}=v1.36.1'],
        ['wait', '--for=condition=Ready']]
    assert all(call[-1] == 'node/worker1' for call in kubectl.calls)


def test_a_node_not_at_the_target_in_time_is_named_with_its_state():
    run, step = waiting_upgrade()
    kubectl = RecordingKubectl(False)
    with pytest.raises(exceptions.ClusterInstallError) as raised:
        run._wait_ready_at_target(kubectl, step)
    assert str(raised.value) == ('Node worker1 is not Ready at v1.36.1 after '
                                 '300s: kubelet v1.35.4, Ready')


def wave_steps(*names, action='worker'):
    return tuple(types.SimpleNamespace(
        name=name, action=action,
        node=types.SimpleNamespace(address='10.0.0.%d' % i))
        for i, name in enumerate(names, 1))


class NoBudgets(object):
    """kubectl on a cluster without PodDisruptionBudgets."""

    host = 'm1'

    def __init__(self):
        self.calls = []

    def run(self, args, check=True, timeout=None):
        self.calls.append(args)
        return types.SimpleNamespace(ok=True, stdout='{"items": []}')


def test_the_workers_of_a_wave_run_at_once_and_all_failures_are_named(
        monkeypatch):
    """Each Worker of the wave waits for the others to start (a barrier
    that breaks unless they run at once); the two that fail are named
    with their steps after the third finished."""
    run, _ = waiting_upgrade()
    wave = wave_steps('worker1', 'worker2', 'worker3')
    started = threading.Barrier(len(wave), timeout=30)
    finished = []

    def upgrade_node(sessions, kubectl, step, gate):
        assert gate is None
        started.wait()
        if step.name != 'worker2':
            raise exceptions.StepError('drain of %s' % step.name, 'm1',
                                       exceptions.ClusterInstallError('no'))
        finished.append(step.name)

    monkeypatch.setattr(run, '_upgrade_node', upgrade_node)
    kubectl = NoBudgets()
    with pytest.raises(exceptions.NodeStepError) as raised:
        run._upgrade_wave(None, kubectl, wave)
    # One look for budgets, none found: no pods listed.
    assert kubectl.calls == [['get', 'poddisruptionbudgets', '-A', '-o',
                              'json']]
    error = raised.value
    assert error.step == upgrade.WAVE_STEP
    assert sorted(error.failures) == ['10.0.0.1', '10.0.0.3']
    assert 'drain of worker1' in str(error) and 'drain of worker3' in str(
        error)
    assert finished == ['worker2']


def test_a_wave_of_one_node_raises_its_own_step_error(monkeypatch):
    run, _ = waiting_upgrade()
    failure = exceptions.StepError('kubeadm upgrade node', '10.0.0.1',
                                   exceptions.ClusterInstallError('no'))

    def upgrade_node(sessions, kubectl, step, gate):
        raise failure

    monkeypatch.setattr(run, '_upgrade_node', upgrade_node)
    with pytest.raises(exceptions.StepError) as raised:
        # A Master drains nothing: no budget asked for (kubectl None).
        run._upgrade_wave(None, None, wave_steps('master2', action='master'))
    assert raised.value is failure
