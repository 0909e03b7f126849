"""The test API server's DaemonSet controller, driven by the machine's
real kubectl: a pod on every Node a DaemonSet may run on, as Nodes come,
go, are cordoned or tainted, and ``kubectl rollout status`` waits for
them (fixtures in conftest.py)."""

import copy
import pathlib

from testbed.kubeapi import daemonsets
from testbed.tests import kubectl_support
from testbed.tests.kubectl_support import node

pytestmark = kubectl_support.NEEDS_KUBECTL

CSI_DRIVER_NFS = pathlib.Path(__file__).parents[2] / 'samples' / \
    'kubernetes_pv_vnf' / 'Files' / 'csi-driver-nfs' / 'v4.13.4'
CONTROL_PLANE = {'key': 'node-role.kubernetes.io/control-plane',
                 'effect': 'NoSchedule'}


def node_plugin(tolerations=()):
    labels = {'app': 'csi-nfs-node'}
    return {'apiVersion': 'apps/v1', 'kind': 'DaemonSet',
            'metadata': {'name': 'csi-nfs-node', 'namespace': 'kube-system'},
            'spec': {'selector': {'matchLabels': labels},
                     'template': {'metadata': {'labels': labels},
                                  'spec': {'nodeSelector': {
                                      'kubernetes.io/os': 'linux'},
                                      'tolerations': list(tolerations),
                                      'containers': [{
                                          'name': 'nfs',
                                          'image': 'nfsplugin:v4.13.0'}]}}}}


def linux_node(name, address, taints=()):
    manifest = node(name, address=address)
    manifest['metadata']['labels']['kubernetes.io/os'] = 'linux'
    manifest['spec'] = {'taints': list(taints)}
    return manifest


def placed(server):
    """{Node name: pods of the DaemonSet there}, once the controller
    settled."""
    found = {}
    for pod in server.objects('pods', 'kube-system'):
        if pod['metadata']['name'].startswith('csi-nfs-node-') and \
                not pod['metadata'].get('deletionTimestamp'):
            found.setdefault(pod['spec']['nodeName'], []).append(pod)
    return found


def settled_on(server, nodes):
    assert server.wait_for(lambda: sorted(placed(server)) == sorted(nodes)
                           and all(len(pods) == 1 for pods
                                   in placed(server).values())), \
        placed(server)


def test_a_pod_on_every_node_it_may_run_on(server, kubectl):
    server.create(linux_node('master-1', '10.10.0.5', [CONTROL_PLANE]))
    server.create(linux_node('worker-1', '10.10.0.6'))
    server.create(linux_node('tainted', '10.10.0.7', [
        {'key': 'dedicated', 'value': 'db', 'effect': 'NoSchedule'}]))
    windows = node('windows-1', address='10.10.0.8')
    windows['metadata']['labels']['kubernetes.io/os'] = 'windows'
    server.create(windows)
    server.create(node_plugin([{'key': CONTROL_PLANE['key'],
                                'operator': 'Exists'}]))
    settled_on(server, ['master-1', 'worker-1'])
    result = kubectl('rollout', 'status', 'daemonset/csi-nfs-node', '-n',
                     'kube-system', '--timeout=30s')
    assert result.returncode == 0, result.stderr
    pod = placed(server)['worker-1'][0]
    assert pod['metadata']['ownerReferences'][0]['kind'] == 'DaemonSet'
    assert {'key': 'node.kubernetes.io/unschedulable', 'operator': 'Exists',
            'effect': 'NoSchedule'} in pod['spec']['tolerations']
    status = server.get('daemonset', 'csi-nfs-node', 'kube-system')[
        'status']
    assert (status['desiredNumberScheduled'],
            status['numberAvailable']) == (2, 2)


def test_nodes_that_come_go_or_are_cordoned(server, kubectl):
    server.create(linux_node('worker-1', '10.10.0.6'))
    server.create(node_plugin())
    settled_on(server, ['worker-1'])
    first = placed(server)['worker-1'][0]['metadata']['uid']
    assert kubectl('cordon', 'worker-1').returncode == 0
    server.create(linux_node('worker-2', '10.10.0.7'))
    settled_on(server, ['worker-1', 'worker-2'])
    # The cordon does not move the pod.
    assert placed(server)['worker-1'][0]['metadata']['uid'] == first
    assert kubectl('delete', 'node', 'worker-1').returncode == 0
    settled_on(server, ['worker-2'])


def test_a_daemon_set_whose_pods_a_test_places_gets_none(server):
    server.create(linux_node('worker-1', '10.10.0.6'))
    manifest = copy.deepcopy(node_plugin())
    manifest['metadata']['annotations'] = {daemonsets.CLIENT_PODS: 'true'}
    server.create(manifest)
    server.create(linux_node('worker-2', '10.10.0.7'))
    assert not server.wait_for(lambda: placed(server), timeout=1)


def test_csi_driver_nfs_of_the_sample_package_rolls_out(server, kubectl):
    """The sample's csi-driver-nfs manifests (kubectl apply, as the driver
    applies them): the controller runs on a Node, the node plugin on every
    Node (it tolerates every taint), and both roll out."""
    server.create(linux_node('master-1', '10.10.0.5', [CONTROL_PLANE]))
    server.create(linux_node('worker-1', '10.10.0.6'))
    for path in sorted(CSI_DRIVER_NFS.glob('*.yaml')):
        result = kubectl('apply', '-f', str(path))
        assert result.returncode == 0, result.stderr
    for workload in ('deployment/csi-nfs-controller',
                     'daemonset/csi-nfs-node'):
        result = kubectl('rollout', 'status', workload, '-n', 'kube-system',
                         '--timeout=60s')
        assert result.returncode == 0, result.stderr
    settled_on(server, ['master-1', 'worker-1'])
    assert [driver['metadata']['name'] for driver
            in server.objects('csidrivers')] == ['nfs.csi.k8s.io']
