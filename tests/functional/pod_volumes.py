"""A pod's NFS volume, end to end: the test API server's Deployment and
PV binder, the node agents' FUSE mounts on the Workers, ganesha on the
Storage server."""

import contextlib
import json
import shlex

from testbed import node_agent
from testbed.virtual_vnf import kubectl

CLAIM = {'apiVersion': 'v1', 'kind': 'PersistentVolumeClaim',
         'metadata': {'name': 'data', 'namespace': 'default'},
         'spec': {'accessModes': ['ReadWriteOnce'], 'storageClassName': '',
                  'volumeName': 'nfs-pv1',
                  'resources': {'requests': {'storage': '1Gi'}}}}
POD_SPEC = {'containers': [{'name': 'app', 'image': 'nginx:1.27',
                            'volumeMounts': [{'name': 'data',
                                              'mountPath': '/data'}]}],
            'volumes': [{'name': 'data',
                         'persistentVolumeClaim': {'claimName': 'data'}}]}
DEPLOYMENT = {
    'apiVersion': 'apps/v1', 'kind': 'Deployment',
    'metadata': {'name': 'app', 'namespace': 'default'},
    'spec': {'replicas': 1, 'selector': {'matchLabels': {'app': 'app'}},
             'template': {'metadata': {'labels': {'app': 'app'}},
                          'spec': POD_SPEC}}}


@contextlib.contextmanager
def node_agents(cluster):
    """A node agent on every Worker of the virtual cluster."""
    with contextlib.ExitStack() as stack:
        yield [stack.enter_context(node_agent.NodeAgent(cluster.kube, host))
               for host in cluster.nodes('worker')]


def running_pod(kube, timeout=60):
    """The Deployment's one pod once it runs (and no other is left)."""
    def pods():
        return [pod for pod in kube.objects('pod')
                if pod['metadata']['name'].startswith('app-')]
    assert kube.wait_for(lambda: [pod['status']['phase']
                                  for pod in pods()] == ['Running'],
                         timeout), pods()
    return pods()[0]


def mount_of(cluster, pod):
    """(Worker host, the pod's volume path there), checked mounted."""
    host = next(node for node in cluster.nodes('worker')
                if node.hostname.lower() == pod['spec']['nodeName'])
    path = node_agent.volume_path(pod['metadata']['uid'], 'nfs-pv1')
    source = host.run(f'findmnt -n -o SOURCE {shlex.quote(path)}').stdout
    pv = cluster.kube.get('pv', 'nfs-pv1')['spec']['nfs']
    assert source.strip() == f'{pv["server"]}:{pv["path"]}'
    return host, path


def assert_pod_volume_follows_the_pod(cluster):
    """A file the pod writes through its mount is on the Storage server's
    volume, and is read back on the other Worker once the pod moves."""
    kube, storage = cluster.kube, cluster.host('storage')
    master = cluster.nodes('master')[0]
    export = kube.get('pv', 'nfs-pv1')['spec']['nfs']['path']
    with node_agents(cluster):
        kube.create(CLAIM)
        kube.create(DEPLOYMENT)
        pod = running_pod(kube)
        worker, path = mount_of(cluster, pod)
        worker.run(f'echo written by the pod > {path}/pod.txt')

        assert storage.read_file(f'{export}/pod.txt') == \
            'written by the pod\n'
        device = storage.run(f'findmnt -n -o SOURCE --target {export}')
        assert device.stdout.strip() in storage.volumes
        claims = json.loads(kubectl(master, 'get', 'pvc', 'data', '-o',
                                    'json'))
        assert claims['status']['phase'] == 'Bound'

        kubectl(master, 'cordon', pod['spec']['nodeName'])
        kubectl(master, 'delete', 'pod', pod['metadata']['name'])
        assert worker.run(f'findmnt -n {path}', check=False).returncode
        moved = running_pod(kube)
        other, moved_path = mount_of(cluster, moved)
        assert other is not worker
        assert other.read_file(f'{moved_path}/pod.txt') == \
            'written by the pod\n'
        other.write_file(f'{moved_path}/moved.txt', 'written there\n')
        assert storage.read_file(f'{export}/moved.txt') == 'written there\n'

        kubectl(master, 'delete', 'deployment', 'app',
                '--cascade=foreground')
        assert other.run(f'findmnt -n {moved_path}', check=False).returncode
        kubectl(master, 'delete', 'pvc', 'data')
        kubectl(master, 'uncordon', pod['spec']['nodeName'])
