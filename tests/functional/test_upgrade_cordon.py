"""The Kubernetes minor upgrade of a Worker cut off after the Worker was
cordoned, and of a node where an earlier run of a step still runs: each
test upgrades a cluster of its own (a Master and a Worker) to the next
minor (see test_upgrade.py for the packages and the stand-ins)."""

import json
import logging
import threading

import pytest

from kubernetes_mgmt_pv import exceptions
from testbed import faults
from testbed import polling
from testbed import standins
from testbed import virtual_vnf
from tests.functional import test_upgrade

NEXT = standins.next_minor()
NEW = standins.kubernetes_version(NEXT)


@pytest.fixture
def small():
    with test_upgrade.upgradable(1) as virtual:
        yield virtual


# The documented mark of a Worker the upgrade cordoned.
MARK = 'kubernetes-mgmt-pv/cordoned-for-upgrade'


def worker_node(virtual):
    """(unschedulable, the upgrade's mark) of worker1's Node."""
    node = json.loads(virtual_vnf.kubectl(
        virtual.host('master1'), 'get', 'node', 'worker1', '-o', 'json'))
    return (bool(node['spec'].get('unschedulable')),
            MARK in (node['metadata'].get('annotations') or {}))


def assert_rerun_only_uncordons(virtual):
    """The re-run plans the Worker's uncordon alone and runs no kubeadm
    upgrade again."""
    calls = test_upgrade.upgrade_calls(virtual, 'worker1')
    plan, report = virtual.upgrade(NEXT)
    assert [(step.name, step.action, step.done) for step in plan.steps] == [
        ('master1', 'node', True), ('worker1', 'uncordon', False)]
    assert worker_node(virtual) == (False, False)
    assert test_upgrade.upgrade_calls(virtual, 'worker1') == calls
    assert [outcome.step for outcome in report.outcomes
            if outcome.changed and outcome.step.startswith(
                ('drain', 'uncordon'))] == ['uncordon of worker1']
    assert test_upgrade.kubelet_versions(virtual) == dict.fromkeys(
        ['master1', 'worker1'], NEW)


def test_a_failed_uncordon_is_done_by_the_rerun(small):
    worker = small.host('worker1')
    with faults.Faults() as injected:
        # The Node's second update, after the cordon: the uncordon.
        fault = injected.http(small.kube, 'PATCH',
                              r'/api/v1/nodes/worker1(\?.*)?', skip=1)
        with pytest.raises(exceptions.StepError) as raised:
            small.upgrade(NEXT)
        assert fault.hits, str(raised.value)
    assert (raised.value.host, raised.value.step) == (worker.ip, 'uncordon')
    assert worker_node(small)[0], 'the Worker is not cordoned'
    assert_rerun_only_uncordons(small)


def test_a_worker_cut_off_after_its_kubelet_is_uncordoned_by_the_rerun(
        small):
    worker = small.host('worker1')
    error = test_upgrade.failed_upgrade(small, worker, 'bash',
                                        action=faults.DROP_AFTER,
                                        match='-U kubelet')
    assert (error.host, error.step) == (worker.ip, 'kubelet package upgrade')
    assert test_upgrade.package_versions(worker) == [NEXT] * 3
    assert worker_node(small)[0], 'the Worker is not cordoned'
    assert_rerun_only_uncordons(small)


def test_a_worker_the_operator_cordoned_stays_cordoned(small):
    master = small.host('master1')
    virtual_vnf.kubectl(master, 'cordon', 'worker1')
    plan, report = small.upgrade(NEXT)
    # Drained and upgraded, left cordoned and unmarked.
    assert worker_node(small) == (True, False)
    assert test_upgrade.upgrade_calls(small, 'worker1') == ['upgrade node']
    assert test_upgrade.kubelet_versions(small)['worker1'] == NEW
    assert [(step.name, step.keep_cordon) for step in plan.steps] == [
        ('master1', False), ('worker1', True)]
    assert [(outcome.step, outcome.changed) for outcome in report.outcomes
            if outcome.step.startswith(('drain', 'uncordon'))] == [
        ('drain of worker1', True), ('uncordon of worker1', False)]
    # A re-run finds it done, and still leaves it cordoned.
    plan, _ = small.upgrade(NEXT)
    assert plan.pending == ()
    assert worker_node(small) == (True, False)


def test_an_upgrade_waits_for_an_earlier_run_on_a_node(small, caplog):
    master = small.host('master1')
    versions = test_upgrade.package_versions(master)
    with faults.EarlierRun(master) as earlier:
        # Still running when the wait ends: the step is not started.
        virtual_vnf.use_test_options(package_install_timeout=2)
        with pytest.raises(exceptions.StepError) as raised:
            small.upgrade(NEXT)
        virtual_vnf.use_test_options()
        error = raised.value
        assert (error.host, error.step) == (master.ip,
                                            'kubeadm package upgrade')
        assert 'still running' in str(error)
        assert test_upgrade.package_versions(master) == versions
        assert test_upgrade.upgrade_calls(small, 'master1') == []

        # Finished while a retry waits for it: the retry goes on after.
        def finish_once_waited_for():
            polling.wait_until(earlier.waited_for, 'the retry to wait',
                               timeout=60)
            earlier.finish()

        finisher = threading.Thread(target=finish_once_waited_for)
        finisher.start()
        try:
            with caplog.at_level(logging.WARNING):
                small.upgrade(NEXT)
        finally:
            finisher.join()
    assert 'waited' in caplog.text and master.ip in caplog.text
    assert 'install_k8s_cluster.sh -U kubeadm' in caplog.text
    assert test_upgrade.upgrade_times(small, 'master1')[0] > earlier.finished
    assert test_upgrade.kubelet_versions(small) == dict.fromkeys(
        ['master1', 'worker1'], NEW)
