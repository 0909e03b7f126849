"""What the tests of testbed/kubeapi/ share: the machine's kubectl, run
against one server with a private kubeconfig and HOME, and manifests."""

import os
import subprocess

import pytest

from testbed import kubeapi

KUBECTL = kubeapi.kubectl_binary()


WRITES = ('POST', 'PUT', 'PATCH', 'DELETE')


def pv_yaml(name='nfs-pv-1', size='1Gi', nfs_server='10.88.0.11',
            policy='Retain'):
    return f"""\
apiVersion: v1
kind: PersistentVolume
metadata:
  name: {name}
  labels:
    app: nfs
spec:
  capacity:
    storage: {size}
  accessModes: [ReadWriteMany]
  persistentVolumeReclaimPolicy: {policy}
  mountOptions: [nfsvers=4.1]
  nfs:
    server: {nfs_server}
    path: /volume/{name}
"""


def pvc_yaml(name='claim-1', size='2Gi'):
    return f"""\
apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: {name}
spec:
  accessModes: [ReadWriteMany]
  storageClassName: ""
  resources:
    requests:
      storage: {size}
"""


class Kubectl:
    """Runs kubectl against one server with a private kubeconfig and HOME."""

    def __init__(self, server, home):
        self.home = home
        self.env = dict(os.environ, HOME=str(home),
                        KUBECONFIG=str(self.write_kubeconfig(server)))

    def write_kubeconfig(self, server, **kwargs):
        path = self.home / ('kubeconfig-%d' % len(list(self.home.iterdir())))
        path.write_text(server.kubeconfig(**kwargs))
        return path

    def __call__(self, *args, env=None, timeout=60, input=None):
        return subprocess.run([KUBECTL, *args], env=env or self.env,
                              capture_output=True, text=True, timeout=timeout,
                              input=input)

    def ok(self, *args, **kwargs):
        """Run kubectl and insist that it succeeds; return its stdout."""
        result = self(*args, **kwargs)
        assert result.returncode == 0, (args, result.stdout, result.stderr)
        return result.stdout

    def apply(self, manifest):
        path = self.home / 'manifest.yaml'
        path.write_text(manifest)
        return self('apply', '-f', str(path))


def writes(server):
    return [entry for entry in server.request_log if entry[0] in WRITES]


def node(name, ready='True', roles=(), version='v1.32.0',
         address='10.10.0.5'):
    return {'apiVersion': 'v1', 'kind': 'Node',
            'metadata': {'name': name, 'labels': {
                f'node-role.kubernetes.io/{role}': '' for role in roles}},
            'status': {
                'conditions': [{'type': 'Ready', 'status': ready}],
                'addresses': [{'type': 'InternalIP', 'address': address},
                              {'type': 'Hostname', 'address': name}],
                'nodeInfo': {'kubeletVersion': version,
                             'osImage': 'Debian GNU/Linux 12 (bookworm)',
                             'kernelVersion': '6.1.0',
                             'containerRuntimeVersion': 'containerd://1.7'}}}


def rows(table):
    """A kubectl table as {name: [cells]}, and its header."""
    lines = table.splitlines()
    return lines[0].split(), {line.split()[0]: line.split()
                              for line in lines[1:]}


def eviction(name, namespace='default'):
    return {'apiVersion': 'policy/v1', 'kind': 'Eviction',
            'metadata': {'name': name, 'namespace': namespace}}


NEEDS_KUBECTL = pytest.mark.skipif(KUBECTL is None,
                                   reason='no kubectl binary on this machine')
