"""A lost Node in the test API server (testbed.node_lifecycle), seen by
the real kubectl: NotReady and tainted, its pods stay, a drain cannot end
them, and deleting the Node lets the pod garbage collector take them."""

import json
import subprocess
import time
import types

import pytest

from testbed import kubeapi
from testbed import node_lifecycle

KUBECTL = kubeapi.kubectl_binary()
pytestmark = pytest.mark.skipif(KUBECTL is None,
                                reason='no kubectl binary on this machine')


def node(name, address):
    return {'apiVersion': 'v1', 'kind': 'Node', 'metadata': {'name': name},
            'status': {
                'conditions': [{'type': 'Ready', 'status': 'True'},
                               {'type': 'MemoryPressure', 'status': 'False'}],
                'addresses': [{'type': 'InternalIP', 'address': address}]}}


@pytest.fixture
def kubectl(server, tmp_path):
    config = tmp_path / 'kubeconfig'
    config.write_text(server.kubeconfig())

    def run(*args):
        return subprocess.run([KUBECTL, '--kubeconfig', str(config), *args],
                              capture_output=True, text=True, timeout=60)
    return run


def phases(server):
    return {pod['metadata']['name']: (
        pod['status'].get('phase'),
        bool(pod['metadata'].get('deletionTimestamp')))
        for pod in server.objects('pods')}


def test_a_lost_node_keeps_its_pods_terminating(server, kubectl):
    server.create(node('worker-1', '10.10.0.6'))
    server.create(node('worker-2', '10.10.0.7'))
    web = server.create({
        'apiVersion': 'apps/v1', 'kind': 'ReplicaSet',
        'metadata': {'name': 'web'},
        'spec': {'replicas': 1, 'selector': {'matchLabels': {'app': 'web'}},
                 'template': {'metadata': {'labels': {'app': 'web'}},
                              'spec': {'containers': [
                                  {'name': 'main', 'image': 'nginx'}]}}}})
    for name, where in (('web-1', 'worker-1'), ('web-2', 'worker-2')):
        server.create(kubeapi.pod_manifest(name, where, owner=web,
                                           labels={'app': 'web'}))
    assert server.wait_for(lambda: phases(server) == {
        'web-1': ('Running', False), 'web-2': ('Running', False)})

    server.lose_node('worker-1')
    lost = server.get('node', 'worker-1')
    assert {c['type']: c['status'] for c in lost['status']['conditions']} \
        == {'Ready': 'Unknown', 'MemoryPressure': 'Unknown'}
    assert sorted((t['key'], t['effect']) for t in lost['spec']['taints']) \
        == [(node_lifecycle.UNREACHABLE, 'NoExecute'),
            (node_lifecycle.UNREACHABLE, 'NoSchedule')]
    listed = json.loads(kubectl('get', 'nodes', '-o', 'json').stdout)
    assert [item['metadata']['name'] for item in listed['items']
            if node_lifecycle.kubelet_gone(item)] == ['worker-1']

    # The eviction is accepted, but nothing ends the pod: drain times out.
    started = time.monotonic()
    result = kubectl('drain', 'worker-1', '--ignore-daemonsets',
                     '--timeout=3s')
    assert result.returncode != 0
    assert time.monotonic() - started >= 3
    assert phases(server) == {'web-1': ('Running', True),
                              'web-2': ('Running', False)}
    # A pod on a healthy Node still ends after its grace.
    server.delete('pod', 'web-2')
    assert server.wait_for(lambda: 'web-2' not in phases(server))

    # Deleting the Node lets the pod garbage collector take its pods.
    assert kubectl('delete', 'node', 'worker-1').returncode == 0
    assert server.wait_for(lambda: phases(server) == {})


def test_a_pending_pod_does_not_start_on_a_lost_node(server):
    server.create(node('worker-1', '10.10.0.6'))
    server.lose_node('worker-1')
    server.create(kubeapi.pod_manifest('late', 'worker-1'))
    server.create(node('worker-2', '10.10.0.7'))
    server.create(kubeapi.pod_manifest('elsewhere', 'worker-2'))
    assert server.wait_for(
        lambda: phases(server).get('elsewhere') == ('Running', False))
    assert phases(server)['late'] == ('Pending', False)


def ready(server, name):
    return {c['type']: c['status'] for c in server.get('node', name)[
        'status']['conditions']}['Ready']


def test_a_powered_off_node_stays_ready_for_the_grace_period(server):
    server.create(node('worker-1', '10.10.0.6'))
    server.create(node('worker-2', '10.10.0.7'))
    powered_off = []
    testbed = types.SimpleNamespace(
        hosts={'vm1': types.SimpleNamespace(ip='10.10.0.6')},
        power_off=powered_off.append)
    started = time.monotonic()
    node_lifecycle.power_off(testbed, server, 'vm1', grace_period=1.5)
    assert powered_off == ['vm1']
    # The controller has not noticed the silent kubelet yet.
    assert ready(server, 'worker-1') == 'True'
    assert not node_lifecycle.kubelet_gone(server.get('node', 'worker-1'))
    assert server.wait_for(lambda: node_lifecycle.kubelet_gone(
        server.get('node', 'worker-1')))
    assert time.monotonic() - started >= 1.5
    assert ready(server, 'worker-1') == 'Unknown'
    assert ready(server, 'worker-2') == 'True'


def test_the_grace_period_ends_for_the_lost_node_only(server):
    """A Node deleted and registered anew before the grace period ends (a
    heal) is not the one that was lost."""
    old_uid = server.create(node('worker-1', '10.10.0.6'))['metadata']['uid']
    server.delete('node', 'worker-1')
    server.lose_node('worker-1', uid=old_uid)  # deleted meanwhile: no-op
    server.create(node('worker-1', '10.10.0.6'))
    server.lose_node('worker-1', uid=old_uid)
    assert ready(server, 'worker-1') == 'True'
    assert not node_lifecycle.kubelet_gone(server.get('node', 'worker-1'))
