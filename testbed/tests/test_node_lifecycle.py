"""A lost Node in the test API server (testbed.node_lifecycle), seen by
the real kubectl: NotReady and tainted, its pods stay, a drain cannot end
them, and deleting the Node lets the pod garbage collector take them."""

import json
import subprocess
import time

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
