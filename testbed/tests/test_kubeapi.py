"""Tests of testbed/kubeapi/, driven by the machine's real kubectl.

Each test gets a fresh server and a private HOME (kubectl's discovery cache
lives in ~/.kube/cache), so no test depends on another's state. The only
waits are kubectl's own bounded waits and KubeApiServer.wait_for().
"""

import base64
import http.client
import json
import os
import ssl
import subprocess
import time

import pytest

from testbed import kubeapi

KUBECTL = kubeapi.kubectl_binary()
pytestmark = pytest.mark.skipif(KUBECTL is None,
                                reason='no kubectl binary on this machine')

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


@pytest.fixture
def server():
    with kubeapi.KubeApiServer() as api:
        yield api


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


@pytest.fixture
def kubectl(server, tmp_path):
    home = tmp_path / 'home'
    home.mkdir()
    return Kubectl(server, home)


def writes(server):
    return [entry for entry in server.request_log if entry[0] in WRITES]


def make_bound_pair(kubectl):
    """Create nfs-pv-1 and claim-1 and wait until they are bound."""
    assert kubectl.apply(pv_yaml(size='5Gi')).returncode == 0
    assert kubectl.apply(pvc_yaml()).returncode == 0
    kubectl.ok('wait', '--for=jsonpath={.status.phase}=Bound',
               'pvc/claim-1', '--timeout=20s')


def test_kubectl_version_is_reported():
    assert kubeapi.kubectl_version().startswith('v1.')


def test_apply_creates_then_is_unchanged_then_configured(server, kubectl):
    result = kubectl.apply(pv_yaml())
    assert result.returncode == 0, result.stderr
    assert 'persistentvolume/nfs-pv-1 created' in result.stdout
    assert ('POST', '/api/v1/persistentvolumes') in writes(server)

    before = len(writes(server))
    result = kubectl.apply(pv_yaml())
    assert result.returncode == 0, result.stderr
    assert 'persistentvolume/nfs-pv-1 unchanged' in result.stdout
    assert len(writes(server)) == before

    result = kubectl.apply(pv_yaml(size='2Gi'))
    assert result.returncode == 0, result.stderr
    assert 'persistentvolume/nfs-pv-1 configured' in result.stdout
    assert writes(server)[-1] == ('PATCH',
                                  '/api/v1/persistentvolumes/nfs-pv-1')
    [pv] = server.objects('pv')
    assert pv['spec']['capacity'] == {'storage': '2Gi'}


def test_wait_for_available(server, kubectl):
    server.available_delay = 1.0  # long enough that kubectl must watch
    assert kubectl.apply(pv_yaml()).returncode == 0
    assert server.get('pv', 'nfs-pv-1')['status']['phase'] == 'Pending'

    out = kubectl.ok('wait', '--for=jsonpath={.status.phase}=Available',
                     'pv/nfs-pv-1', '--timeout=20s')
    assert 'condition met' in out
    assert server.get('pv', 'nfs-pv-1')['status']['phase'] == 'Available'


def test_wait_times_out_for_a_pv_stuck_pending(server, kubectl):
    server.keep_pending('nfs-pv-1')
    assert kubectl.apply(pv_yaml()).returncode == 0

    started = time.monotonic()
    result = kubectl('wait', '--for=jsonpath={.status.phase}=Available',
                     'pv/nfs-pv-1', '--timeout=2s')
    assert result.returncode != 0
    assert 2 <= time.monotonic() - started < 10  # it waited, then gave up
    assert server.get('pv', 'nfs-pv-1')['status']['phase'] == 'Pending'

    server.release_pending('nfs-pv-1')
    kubectl.ok('wait', '--for=jsonpath={.status.phase}=Available',
               'pv/nfs-pv-1', '--timeout=20s')


def test_get_pv_as_json(server, kubectl):
    assert kubectl.apply(pv_yaml()).returncode == 0

    listing = json.loads(kubectl.ok('get', 'pv', '-o', 'json'))
    [pv] = listing['items']
    assert pv['kind'] == 'PersistentVolume'
    assert pv['spec']['nfs'] == {'server': '10.88.0.11',
                                 'path': '/volume/nfs-pv-1'}
    assert pv['metadata']['finalizers'] == ['kubernetes.io/pv-protection']
    assert pv['metadata']['uid'] and pv['metadata']['creationTimestamp']
    assert pv['status']['phase'] in ('Pending', 'Available')

    single = json.loads(kubectl.ok('get', 'pv', 'nfs-pv-1', '-o', 'json'))
    assert single['metadata']['uid'] == pv['metadata']['uid']
    assert int(single['metadata']['resourceVersion']) >= int(
        pv['metadata']['resourceVersion'])


def test_get_missing_pv_is_not_found(kubectl):
    result = kubectl('get', 'pv', 'missing')
    assert result.returncode != 0
    assert 'persistentvolumes "missing" not found' in result.stderr


def test_claim_binds_the_smallest_matching_volume(server, kubectl):
    # Created largest first, so "first match" would pick the wrong one.
    for name, size in (('pv-large', '10Gi'), ('pv-small', '1Gi'),
                       ('pv-fit', '3Gi')):
        assert kubectl.apply(pv_yaml(name, size)).returncode == 0
    kubectl.ok('wait', '--for=jsonpath={.status.phase}=Available', 'pv',
               '--all', '--timeout=20s')
    assert kubectl.apply(pvc_yaml(size='2Gi')).returncode == 0

    kubectl.ok('wait', '--for=jsonpath={.status.phase}=Bound',
               'pvc/claim-1', '--timeout=20s')
    assert kubectl.ok('get', 'pvc', 'claim-1', '-o',
                      'jsonpath={.spec.volumeName}') == 'pv-fit'
    rows = {line.split()[0]: line.split()
            for line in kubectl.ok('get', 'pv').splitlines()[1:]}
    assert rows['pv-fit'][4:6] == ['Bound', 'default/claim-1']
    assert rows['pv-small'][4] == 'Available'
    assert rows['pv-large'][4] == 'Available'


def test_deleting_a_bound_pv_waits_for_its_claim(server, kubectl):
    make_bound_pair(kubectl)

    kubectl.ok('delete', 'pv', 'nfs-pv-1', '--wait=false')
    assert 'Terminating' in kubectl.ok('get', 'pv', 'nfs-pv-1')
    pv = server.get('pv', 'nfs-pv-1')
    assert pv['metadata']['deletionTimestamp']
    assert pv['status']['phase'] == 'Bound'

    kubectl.ok('delete', 'pvc', 'claim-1')
    kubectl.ok('wait', '--for=delete', 'pv/nfs-pv-1', '--timeout=20s')
    assert server.objects('pv') == []


def test_deleting_the_claim_releases_a_retained_volume(server, kubectl):
    make_bound_pair(kubectl)

    kubectl.ok('delete', 'pvc', 'claim-1')
    kubectl.ok('wait', '--for=jsonpath={.status.phase}=Released',
               'pv/nfs-pv-1', '--timeout=20s')
    pv = server.get('pv', 'nfs-pv-1')
    assert pv['spec']['claimRef']['name'] == 'claim-1'
    assert not pv['metadata'].get('deletionTimestamp')


def test_delete_of_an_unbound_pv_returns_once_it_is_gone(server, kubectl):
    assert kubectl.apply(pv_yaml()).returncode == 0
    kubectl.ok('wait', '--for=jsonpath={.status.phase}=Available',
               'pv/nfs-pv-1', '--timeout=20s')
    assert server.get('pv', 'nfs-pv-1')['metadata']['finalizers']

    out = kubectl.ok('delete', 'pv', 'nfs-pv-1')
    assert 'persistentvolume "nfs-pv-1" deleted' in out
    assert server.objects('pv') == []


def test_wrong_token_is_rejected(server, kubectl):
    env = dict(kubectl.env, KUBECONFIG=str(
        kubectl.write_kubeconfig(server, token='wrong')))
    result = kubectl('get', 'pv', env=env)
    assert result.returncode != 0 and not result.stdout
    kubectl.ok('get', 'pv')


def test_changing_the_nfs_server_is_rejected_as_immutable(server, kubectl):
    assert kubectl.apply(pv_yaml()).returncode == 0

    result = kubectl.apply(pv_yaml(nfs_server='10.88.0.99'))
    assert result.returncode != 0
    assert 'spec.persistentvolumesource' in result.stderr
    assert 'immutable' in result.stderr
    assert server.get('pv', 'nfs-pv-1')['spec']['nfs']['server'] == \
        '10.88.0.11'


def test_create_of_an_existing_pv_conflicts(kubectl):
    path = kubectl.home / 'pv.yaml'
    path.write_text(pv_yaml())
    kubectl.ok('create', '-f', str(path))
    result = kubectl('create', '-f', str(path))
    assert result.returncode != 0
    assert 'AlreadyExists' in result.stderr
    assert 'persistentvolumes "nfs-pv-1" already exists' in result.stderr


def test_patch_types(server, kubectl):
    assert kubectl.apply(pv_yaml()).returncode == 0

    kubectl.ok('patch', 'pv', 'nfs-pv-1', '--type=merge',
               '-p', '{"metadata": {"labels": {"app": null, "tier": "a"}}}')
    kubectl.ok('patch', 'pv', 'nfs-pv-1', '--type=json', '-p',
               '[{"op": "replace", "path": "/spec/capacity/storage",'
               ' "value": "3Gi"}]')
    kubectl.ok('patch', 'pv', 'nfs-pv-1', '--type=strategic',
               '-p', '{"spec": {"mountOptions": ["hard"]}}')

    pv = server.get('pv', 'nfs-pv-1')
    assert pv['metadata']['labels'] == {'tier': 'a'}
    assert pv['spec']['capacity'] == {'storage': '3Gi'}
    assert pv['spec']['mountOptions'] == ['hard']


def test_replace_checks_the_resource_version(server, kubectl):
    assert kubectl.apply(pv_yaml()).returncode == 0
    server.wait_for(lambda: server.get('pv', 'nfs-pv-1')['status']['phase']
                    == 'Available')
    stale = json.loads(kubectl.ok('get', 'pv', 'nfs-pv-1', '-o', 'json'))
    stale['spec']['persistentVolumeReclaimPolicy'] = 'Delete'
    path = kubectl.home / 'replace.json'
    path.write_text(json.dumps(stale))

    kubectl.ok('replace', '-f', str(path))
    assert server.get('pv', 'nfs-pv-1')['spec'][
        'persistentVolumeReclaimPolicy'] == 'Delete'
    result = kubectl('replace', '-f', str(path))  # now a stale version
    assert result.returncode != 0
    assert 'the object has been modified' in result.stderr


def test_watch_stream_ends_cleanly_on_stop():
    """A watch is filtered, sees the Pending -> Available flip, and ends
    with the terminating chunk when the server stops."""
    with kubeapi.KubeApiServer(available_delay=0) as server:
        context = ssl.create_default_context(cadata=server.ca_pem)
        connection = http.client.HTTPSConnection(
            '127.0.0.1', server.port, context=context, timeout=10)
        connection.request(
            'GET', '/api/v1/persistentvolumes?watch=true'
            '&fieldSelector=metadata.name%3Dnfs-pv-1',
            headers={'Authorization': 'Bearer ' + server.token})
        response = connection.getresponse()
        assert response.status == 200
        for name in ('other', 'nfs-pv-1'):
            server.create({'apiVersion': 'v1', 'kind': 'PersistentVolume',
                           'metadata': {'name': name},
                           'spec': {'capacity': {'storage': '1Gi'},
                                    'accessModes': ['ReadWriteOnce'],
                                    'nfs': {'server': 'h', 'path': '/x'}}})
        events = [json.loads(response.readline()) for _ in range(2)]
        started = time.monotonic()
        server.stop()
        assert time.monotonic() - started < 5

    assert [(e['type'], e['object']['metadata']['name'],
             e['object']['status']['phase']) for e in events] == [
        ('ADDED', 'nfs-pv-1', 'Pending'),
        ('MODIFIED', 'nfs-pv-1', 'Available')]
    rest = response.read()  # raises IncompleteRead unless ended cleanly
    assert all(json.loads(line)['object']['metadata']['name'] == 'nfs-pv-1'
               for line in rest.splitlines())


# --- nodes, namespaces, service accounts, RBAC -----------------------------

SA_MANIFEST = """\
apiVersion: v1
kind: ServiceAccount
metadata:
  name: tacker
  namespace: kube-system
---
apiVersion: v1
kind: Secret
metadata:
  name: tacker-token
  namespace: kube-system
  annotations:
    kubernetes.io/service-account.name: tacker
type: kubernetes.io/service-account-token
"""

BINDING_MANIFEST = """\
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: tacker-admin
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: cluster-admin
subjects:
- kind: ServiceAccount
  name: tacker
  namespace: kube-system
"""

FORBIDDEN_NAMESPACES = (
    'Error from server (Forbidden): namespaces is forbidden: User '
    '"system:serviceaccount:kube-system:tacker" cannot list resource '
    '"namespaces" in API group "" at the cluster scope')


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


def service_account_token(kubectl):
    """Apply SA_MANIFEST and return the token the controller gives it."""
    kubectl.ok('apply', '-f', '-', input=SA_MANIFEST)
    kubectl.ok('wait', '--for=jsonpath={.data.token}', '-n', 'kube-system',
               'secret/tacker-token', '--timeout=20s')
    encoded = kubectl.ok('get', 'secret', 'tacker-token', '-n',
                         'kube-system', '-o', 'jsonpath={.data.token}')
    return base64.b64decode(encoded).decode()


def as_token(kubectl, server, token):
    """kubectl's environment for a user with this bearer token."""
    return dict(kubectl.env, KUBECONFIG=str(
        kubectl.write_kubeconfig(server, token=token)))


def https_get(server, path, token=None):
    """(status, content type, body) of a GET with an optional token."""
    context = ssl.create_default_context(cadata=server.ca_pem)
    connection = http.client.HTTPSConnection(
        '127.0.0.1', server.port, context=context, timeout=10)
    headers = {'Authorization': 'Bearer ' + token} if token else {}
    try:
        connection.request('GET', path, headers=headers)
        response = connection.getresponse()
        return (response.status, response.getheader('Content-Type'),
                response.read())
    finally:
        connection.close()


def test_discovery_serves_the_core_kinds_and_the_api_groups(kubectl):
    resources = kubectl.ok('api-resources', '--no-headers')
    found = {line.split()[0]: line.split()[-3:] for line in
             resources.splitlines()}
    assert found['nodes'] == ['v1', 'false', 'Node']
    assert found['namespaces'] == ['v1', 'false', 'Namespace']
    assert found['serviceaccounts'] == ['v1', 'true', 'ServiceAccount']
    assert found['secrets'] == ['v1', 'true', 'Secret']
    assert found['configmaps'] == ['v1', 'true', 'ConfigMap']
    assert found['clusterroles'] == [
        'rbac.authorization.k8s.io/v1', 'false', 'ClusterRole']
    assert found['clusterrolebindings'] == [
        'rbac.authorization.k8s.io/v1', 'false', 'ClusterRoleBinding']

    assert found['pods'] == ['v1', 'true', 'Pod']
    assert found['daemonsets'] == ['apps/v1', 'true', 'DaemonSet']
    assert found['replicasets'] == ['apps/v1', 'true', 'ReplicaSet']
    assert found['poddisruptionbudgets'] == [
        'policy/v1', 'true', 'PodDisruptionBudget']

    groups = json.loads(kubectl.ok('get', '--raw', '/apis'))
    assert [group['name'] for group in groups['groups']] == [
        'apps', 'policy', 'rbac.authorization.k8s.io']
    # drain looks here for the Eviction API and the version to send.
    core = json.loads(kubectl.ok('get', '--raw', '/api/v1'))
    [eviction] = [entry for entry in core['resources']
                  if entry['name'] == 'pods/eviction']
    assert (eviction['group'], eviction['version'], eviction['kind'],
            eviction['verbs']) == ('policy', 'v1', 'Eviction', ['create'])
    group = json.loads(kubectl.ok('get', '--raw',
                                  '/apis/rbac.authorization.k8s.io'))
    assert group['preferredVersion']['groupVersion'] == \
        'rbac.authorization.k8s.io/v1'


def test_a_new_server_has_the_kubeadm_namespaces_and_cluster_admin(
        server, kubectl):
    header, table = rows(kubectl.ok('get', 'ns'))
    assert header == ['NAME', 'STATUS', 'AGE']
    assert sorted(table) == ['default', 'kube-node-lease', 'kube-public',
                             'kube-system']
    assert {row[1] for row in table.values()} == {'Active'}
    role = json.loads(kubectl.ok('get', 'clusterrole', 'cluster-admin',
                                 '-o', 'json'))
    assert role['rules'][0] == {'apiGroups': ['*'], 'resources': ['*'],
                                'verbs': ['*']}
    assert [ns['metadata']['name'] for ns in server.objects('namespace')] \
        == sorted(kubeapi.INITIAL_NAMESPACES)
    assert server.get('ns', 'kube-system')['metadata']['labels'] == {
        'kubernetes.io/metadata.name': 'kube-system'}


def test_get_nodes_prints_status_roles_and_version(server, kubectl):
    server.create(node('master-1', roles=['control-plane']))
    server.create(node('worker-1', ready='False', address='10.10.0.6'))
    server.create({'kind': 'Node', 'metadata': {'name': 'new-1'}})

    header, table = rows(kubectl.ok('get', 'nodes'))
    assert header == ['NAME', 'STATUS', 'ROLES', 'AGE', 'VERSION']
    assert table['master-1'][:3] + table['master-1'][4:] == [
        'master-1', 'Ready', 'control-plane', 'v1.32.0']
    assert table['worker-1'][:3] == ['worker-1', 'NotReady', '<none>']
    assert table['new-1'][:3] == ['new-1', 'Unknown', '<none>']

    header, table = rows(kubectl.ok('get', 'nodes', '-o', 'wide'))
    assert header[5:7] == ['INTERNAL-IP', 'EXTERNAL-IP']
    assert table['worker-1'][5:7] == ['10.10.0.6', '<none>']
    assert 'containerd://1.7' in table['worker-1']

    listing = json.loads(kubectl.ok('get', 'nodes', '-o', 'json'))
    assert [item['metadata']['name'] for item in listing['items']] == [
        'master-1', 'new-1', 'worker-1']
    assert listing['items'][0]['status']['nodeInfo']['kubeletVersion'] == \
        'v1.32.0'
    assert [n['metadata']['name'] for n in server.nodes()] == [
        'master-1', 'new-1', 'worker-1']


def test_wait_for_a_node_to_become_ready_then_delete_it(server, kubectl):
    server.create(node('worker-1', ready='False'))
    waiting = subprocess.Popen(
        [KUBECTL, 'wait', '--for=condition=Ready', 'node/worker-1',
         '--timeout=30s'], env=kubectl.env, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)
    try:
        assert server.wait_for(lambda: server.watchers > 0, timeout=20)
        assert waiting.poll() is None  # still waiting while NotReady
        kubectl.ok('patch', 'node', 'worker-1', '--subresource=status',
                   '--type=merge', '-p', '{"status": {"conditions": '
                   '[{"type": "Ready", "status": "True"}]}}')
        out, err = waiting.communicate(timeout=30)
    finally:
        waiting.kill()
    assert waiting.returncode == 0, err
    assert 'node/worker-1 condition met' in out

    # The main resource cannot change the status, the subresource can.
    kubectl.ok('label', 'node', 'worker-1', 'zone=a')
    kubectl.ok('patch', 'node', 'worker-1', '--type=merge', '-p',
               '{"status": {"conditions": []}}')
    assert server.get('node', 'worker-1')['status']['conditions'] == [
        {'type': 'Ready', 'status': 'True'}]
    server.update_status('node', 'worker-1', {'conditions': [
        {'type': 'Ready', 'status': 'Unknown'}]})
    assert rows(kubectl.ok('get', 'node', 'worker-1'))[1]['worker-1'][1] \
        == 'NotReady'

    assert 'node "worker-1" deleted' in kubectl.ok('delete', 'node',
                                                   'worker-1')
    assert server.nodes() == []


def test_token_controller_fills_a_service_account_token_secret(
        server, kubectl):
    kubectl.ok('apply', '-f', '-', input=SA_MANIFEST)
    out = kubectl.ok('wait', '--for=jsonpath={.data.token}', '-n',
                     'kube-system', 'secret/tacker-token', '--timeout=20s')
    assert 'condition met' in out

    secret = server.get('secret', 'tacker-token', namespace='kube-system')
    account = server.get('sa', 'tacker', namespace='kube-system')
    data = {key: base64.b64decode(value).decode()
            for key, value in secret['data'].items()}
    assert sorted(data) == ['ca.crt', 'namespace', 'token']
    assert data['ca.crt'] == server.ca_pem
    assert data['namespace'] == 'kube-system'
    assert len(data['token']) >= 32
    assert secret['metadata']['annotations'][
        'kubernetes.io/service-account.uid'] == account['metadata']['uid']
    token = kubectl.ok('get', 'secret', 'tacker-token', '-n', 'kube-system',
                       '-o', 'jsonpath={.data.token}')
    assert base64.b64decode(token).decode() == data['token']
    header, table = rows(kubectl.ok('get', 'secret', '-n', 'kube-system'))
    assert header == ['NAME', 'TYPE', 'DATA', 'AGE']
    assert table['tacker-token'][1:3] == [
        'kubernetes.io/service-account-token', '3']

    # Applying the manifest again keeps the token.
    out = kubectl.ok('apply', '-f', '-', input=SA_MANIFEST)
    assert 'secret/tacker-token unchanged' in out
    assert server.get('secret', 'tacker-token', namespace='kube-system')[
        'data']['token'] == secret['data']['token']


def test_token_controller_is_asynchronous_and_waits_for_the_account(
        server):
    def secret(name, account, kind='kubernetes.io/service-account-token'):
        return {'apiVersion': 'v1', 'kind': 'Secret', 'type': kind,
                'metadata': {'name': name, 'annotations': {
                    'kubernetes.io/service-account.name': account}}}

    def token_of(name):
        return (server.get('secret', name).get('data') or {}).get('token')

    started = time.monotonic()
    created = server.create(secret('early', 'late-account'))
    server.create(secret('opaque', 'late-account', kind='Opaque'))
    assert 'data' not in created
    server.create({'kind': 'ServiceAccount',
                   'metadata': {'name': 'late-account'}})
    assert server.wait_for(lambda: token_of('early'))
    assert time.monotonic() - started >= server.token_delay
    assert token_of('opaque') is None
    assert server.get('secret', 'opaque')['type'] == 'Opaque'


def test_an_unbound_service_account_is_forbidden_until_bound(
        server, kubectl):
    token = service_account_token(kubectl)
    account = as_token(kubectl, server, token)

    result = kubectl('get', 'ns', env=account)
    assert result.returncode != 0
    assert FORBIDDEN_NAMESPACES in result.stderr
    result = kubectl('get', 'secret', 'tacker-token', '-n', 'kube-system',
                     env=account)
    assert ('secrets "tacker-token" is forbidden: User '
            '"system:serviceaccount:kube-system:tacker" cannot get resource '
            '"secrets" in API group "" in the namespace "kube-system"'
            in result.stderr)
    # Discovery, /version and the health checks are for everyone.
    assert 'clusterrolebindings' in kubectl.ok('api-resources', env=account)
    assert 'Server Version: v1.32.0' in kubectl.ok('version', env=account)
    assert kubectl.ok('get', '--raw', '/readyz', env=account) == 'ok'

    out = kubectl.ok('apply', '-f', '-', input=BINDING_MANIFEST)
    assert ('clusterrolebinding.rbac.authorization.k8s.io/tacker-admin '
            'created') in out
    header, table = rows(kubectl.ok('get', 'clusterrolebinding', '-o',
                                    'wide'))
    assert table['tacker-admin'][1] == 'ClusterRole/cluster-admin'
    assert table['tacker-admin'][-1] == 'kube-system/tacker'

    assert 'kube-node-lease' in kubectl.ok('get', 'ns', env=account)
    kubectl.ok('create', 'namespace', 'made-by-tacker', env=account)

    kubectl.ok('delete', 'clusterrolebinding', 'tacker-admin')
    result = kubectl('get', 'ns', env=account)
    assert FORBIDDEN_NAMESPACES in result.stderr


def test_deleting_the_token_secret_revokes_the_token(server, kubectl):
    token = service_account_token(kubectl)
    kubectl.ok('apply', '-f', '-', input=BINDING_MANIFEST)
    account = as_token(kubectl, server, token)
    kubectl.ok('get', 'ns', env=account)

    kubectl.ok('delete', 'secret', 'tacker-token', '-n', 'kube-system')
    result = kubectl('get', 'ns', env=account)
    assert result.returncode != 0 and not result.stdout


def test_rbac_rules_of_other_cluster_roles_apply(server, kubectl):
    token = service_account_token(kubectl)
    account = as_token(kubectl, server, token)
    kubectl.ok('create', 'clusterrole', 'ns-reader', '--verb=get,list',
               '--resource=namespaces')
    kubectl.ok('create', 'clusterrolebinding', 'tacker-reads',
               '--clusterrole=ns-reader',
               '--serviceaccount=kube-system:tacker')

    assert 'kube-public' in kubectl.ok('get', 'ns', env=account)
    result = kubectl('get', 'nodes', env=account)
    assert 'cannot list resource "nodes"' in result.stderr


def test_the_python_clients_vim_check_requests(server, kubectl):
    """What Tacker's Kubernetes VIM driver sends (kubernetes client's
    get_api_versions() and list_namespace()), with a bound account."""
    token = service_account_token(kubectl)
    status, _, body = https_get(server, '/api/', token)
    assert status == 200
    assert json.loads(body)['versions'] == ['v1']
    status, _, body = https_get(server, '/api/v1/namespaces', token)
    assert status == 403
    assert json.loads(body)['reason'] == 'Forbidden'

    kubectl.ok('apply', '-f', '-', input=BINDING_MANIFEST)
    status, _, body = https_get(server, '/api/v1/namespaces', token)
    assert status == 200
    listing = json.loads(body)
    assert listing['kind'] == 'NamespaceList'
    assert 'default' in [item['metadata']['name']
                         for item in listing['items']]


def test_health_checks_and_version_need_no_token(server):
    for path in ('/healthz', '/livez', '/readyz'):
        assert https_get(server, path)[::2] == (200, b'ok')
    status, content_type, body = https_get(server, '/version')
    assert (status, content_type) == (200, 'application/json')
    assert json.loads(body)['gitVersion'] == 'v1.32.0'
    for path in ('/api', '/api/v1/namespaces'):
        assert https_get(server, path)[0] == 401
    assert https_get(server, '/healthz', 'wrong-token')[0] == 401


def test_imperative_create_commands_send_protobuf(server, kubectl):
    kubectl.ok('create', 'namespace', 'demo')
    kubectl.ok('create', 'serviceaccount', 'robot', '-n', 'demo')
    kubectl.ok('create', 'secret', 'generic', 'creds', '-n', 'demo',
               '--from-literal=user=admin', '--from-literal=pass=s3cret')
    kubectl.ok('create', 'configmap', 'settings', '-n', 'demo',
               '--from-literal=mode=fast')
    kubectl.ok('create', 'clusterrolebinding', 'robot-admin',
               '--clusterrole=cluster-admin', '--serviceaccount=demo:robot')

    assert server.get('ns', 'demo')['status'] == {'phase': 'Active'}
    assert server.get('sa', 'robot', namespace='demo') is not None
    secret = server.get('secret', 'creds', namespace='demo')
    assert secret['type'] == 'Opaque'
    assert base64.b64decode(secret['data']['pass']) == b's3cret'
    assert server.get('cm', 'settings', namespace='demo')['data'] == {
        'mode': 'fast'}
    binding = server.get('clusterrolebinding', 'robot-admin')
    assert binding['roleRef'] == {'apiGroup': 'rbac.authorization.k8s.io',
                                  'kind': 'ClusterRole',
                                  'name': 'cluster-admin'}
    assert binding['subjects'] == [{'kind': 'ServiceAccount',
                                    'name': 'robot', 'namespace': 'demo'}]
    assert ('POST', '/api/v1/namespaces/demo/secrets') in writes(server)


def test_namespaces_protect_and_own_their_objects(server, kubectl):
    result = kubectl('create', 'configmap', 'x', '-n', 'missing')
    assert 'namespaces "missing" not found' in result.stderr
    result = kubectl('delete', 'namespace', 'kube-system')
    assert ('namespaces "kube-system" is forbidden: this namespace may not '
            'be deleted') in result.stderr

    kubectl.ok('create', 'namespace', 'demo')
    kubectl.ok('create', 'configmap', 'settings', '-n', 'demo')
    kubectl.ok('apply', '-n', 'demo', '-f', '-', input=pvc_yaml())
    kubectl.ok('delete', 'namespace', 'demo', '--timeout=20s')
    assert server.get('ns', 'demo') is None
    assert server.objects('configmap') == server.objects('pvc') == []


def test_invalid_objects_of_the_new_kinds_are_rejected(server, kubectl):
    result = kubectl('create', 'namespace', 'Not_A_Label')
    assert 'a lowercase RFC 1123 label must consist of' in result.stderr
    bad_secret = json.dumps({'apiVersion': 'v1', 'kind': 'Secret',
                             'metadata': {'name': 'bad'},
                             'data': {'key': 'not base64!'}})
    result = kubectl('apply', '-f', '-', input=bad_secret)
    assert 'illegal base64 data' in result.stderr
    string_data = json.dumps({'apiVersion': 'v1', 'kind': 'Secret',
                              'metadata': {'name': 'good'},
                              'stringData': {'key': 'plain'}})
    kubectl.ok('apply', '-f', '-', input=string_data)
    assert server.get('secret', 'good')['data'] == {
        'key': base64.b64encode(b'plain').decode()}

    kubectl.ok('apply', '-f', '-', input=BINDING_MANIFEST)
    result = kubectl('apply', '-f', '-', input=BINDING_MANIFEST.replace(
        'name: cluster-admin', 'name: view'))
    assert 'cannot change roleRef' in result.stderr
    result = kubectl('apply', '-f', '-', input=SA_MANIFEST.replace(
        '  annotations:\n    kubernetes.io/service-account.name: tacker\n',
        ''))
    assert ("metadata.annotations[kubernetes.io/service-account.name]: "
            "Required value") in result.stderr


def test_fail_requests_covers_the_new_paths(server, kubectl):
    failure = server.fail_requests(
        'POST',
        r'/apis/rbac.authorization.k8s.io/v1/clusterrolebindings(\?.*)?',
        code=503, message='etcd is down')
    result = kubectl('apply', '-f', '-', input=BINDING_MANIFEST)
    assert result.returncode != 0
    assert 'etcd is down' in result.stderr
    assert len(failure.hits) == 1
    kubectl.ok('apply', '-f', '-', input=BINDING_MANIFEST)

    server.create(node('master-1'))
    server.fail_requests('GET', r'/api/v1/nodes(\?.*)?', count=None,
                         code=500)
    assert kubectl('get', 'nodes').returncode != 0
    server.clear_failures()
    assert 'master-1' in kubectl.ok('get', 'nodes')


def test_the_certificate_can_name_a_whole_subnet(tmp_path):
    with kubeapi.KubeApiServer(extra_sans=['10.99.0.0/24']) as server:
        ips = [name for name in server.certificate_names
               if name.startswith('10.99.0.')]
        assert len(ips) == 254
        text = subprocess.run(
            ['openssl', 'x509', '-noout', '-ext', 'subjectAltName'],
            input=server.ca_pem, capture_output=True, text=True,
            check=True).stdout
        assert text.count('IP Address:10.99.0.') == 254

        # kubectl (Go) checks the IP SANs when tls-server-name is an IP.
        home = tmp_path / 'home'
        home.mkdir()
        kubectl = Kubectl(server, home)
        for address, works in (('10.99.0.254', True), ('10.99.0.1', True),
                               ('10.99.1.1', False)):
            config = home / f'config-{address}'
            config.write_text(server.kubeconfig().replace(
                '    certificate-authority-data:',
                f'    tls-server-name: {address}\n'
                '    certificate-authority-data:'))
            result = kubectl('get', 'ns', 'default',
                             env=dict(kubectl.env, KUBECONFIG=str(config)))
            assert (result.returncode == 0) == works, result.stderr
        assert 'tls-server-name' not in server.kubeconfig('10.99.0.7')

    with pytest.raises(ValueError, match='too many addresses'):
        kubeapi.KubeApiServer(extra_sans=['10.0.0.0/16'])


# --- pods, workloads, disruption budgets: cordon, drain, delete node -------

DRAIN = ('drain', 'worker-1', '--ignore-daemonsets',
         '--delete-emptydir-data')
BLOCKED = "Cannot evict pod as it would violate the pod's disruption budget."


def replica_set(name='web', replicas=2, labels=None):
    labels = labels or {'app': name}
    return {'apiVersion': 'apps/v1', 'kind': 'ReplicaSet',
            'metadata': {'name': name},
            'spec': {'replicas': replicas,
                     'selector': {'matchLabels': labels},
                     'template': {'metadata': {'labels': labels},
                                  'spec': {'containers': [
                                      {'name': 'main',
                                       'image': 'nginx:1.27'}]}}}}


def daemon_set(name='proxy', namespace='kube-system'):
    manifest = replica_set(name)
    manifest['kind'] = 'DaemonSet'
    manifest['metadata']['namespace'] = namespace
    del manifest['spec']['replicas']
    return manifest


def budget(name='web-pdb', app='web', **spec):
    return {'apiVersion': 'policy/v1', 'kind': 'PodDisruptionBudget',
            'metadata': {'name': name},
            'spec': {'selector': {'matchLabels': {'app': app}}, **spec}}


def running(server, *names):
    """Wait until the named pods (namespace/name, or name in "default")
    run."""
    def phases():
        return {f'{pod["metadata"]["namespace"]}/{pod["metadata"]["name"]}':
                pod['status']['phase'] for pod in server.objects('pods')}
    wanted = [name if '/' in name else f'default/{name}' for name in names]
    assert server.wait_for(lambda: all(phases().get(name) == 'Running'
                                       for name in wanted)), phases()


def worker_with_pods(server, budget_spec=None):
    """worker-1 runs web-1 (with an emptyDir) and web-2 of ReplicaSet web
    and kube-system/proxy-1 of DaemonSet proxy; with ``budget_spec``, a
    PodDisruptionBudget web-pdb covers the web pods."""
    server.create(node('worker-1', address='10.10.0.6'))
    web = server.create(replica_set())
    proxy = server.create(daemon_set())
    server.create(kubeapi.pod_manifest('web-1', 'worker-1', owner=web,
                                       labels={'app': 'web'},
                                       empty_dir=True))
    server.create(kubeapi.pod_manifest('web-2', 'worker-1', owner=web,
                                       labels={'app': 'web'}))
    server.create(kubeapi.pod_manifest('proxy-1', 'worker-1', owner=proxy,
                                       namespace='kube-system',
                                       labels={'app': 'proxy'}))
    if budget_spec is not None:
        server.create(budget(**budget_spec))
    running(server, 'web-1', 'web-2', 'kube-system/proxy-1')


def pod_names(server):
    return [pod['metadata']['name'] for pod in server.objects('pods')]


def budget_status(server, name='web-pdb'):
    return server.get('pdb', name)['status']


def https_post(server, path, document):
    """(status, headers, JSON body) of an admin POST of a JSON document,
    or of protobuf bytes."""
    context = ssl.create_default_context(cadata=server.ca_pem)
    connection = http.client.HTTPSConnection(
        '127.0.0.1', server.port, context=context, timeout=10)
    protobuf = isinstance(document, bytes)
    try:
        connection.request(
            'POST', path,
            body=document if protobuf else json.dumps(document),
            headers={'Authorization': 'Bearer ' + server.token,
                     'Content-Type': kubeapi.PROTOBUF if protobuf
                     else 'application/json'})
        response = connection.getresponse()
        return (response.status, dict(response.getheaders()),
                json.loads(response.read()))
    finally:
        connection.close()


def protobuf_eviction(name, namespace='default', grace=None):
    """An Eviction as client-go encodes it in protobuf (field numbers of
    policy/v1 and meta/v1 generated.proto)."""
    def varint(number):
        out = b''
        while True:
            out += bytes([number & 0x7f | (0x80 if number > 0x7f else 0)])
            number >>= 7
            if not number:
                return out

    def field(number, payload):  # length-delimited; ints are varints
        if isinstance(payload, int):
            return varint(number << 3) + varint(payload)
        if isinstance(payload, str):
            payload = payload.encode()
        return varint(number << 3 | 2) + varint(len(payload)) + payload

    meta = field(1, name) + field(3, namespace)
    options = b'' if grace is None else field(1, grace)
    raw = field(1, meta) + field(2, options)
    type_meta = field(1, 'policy/v1') + field(2, 'Eviction')
    return b'k8s\x00' + field(1, type_meta) + field(2, raw)


def eviction(name, namespace='default'):
    return {'apiVersion': 'policy/v1', 'kind': 'Eviction',
            'metadata': {'name': name, 'namespace': namespace}}


def test_pods_run_on_their_node_and_list_by_field(server, kubectl):
    worker_with_pods(server)
    waiting = kubeapi.pod_manifest('waiting', 'worker-2')
    waiting['metadata']['finalizers'] = ['example.com/hold']
    server.create(waiting)
    server.create(kubeapi.pod_manifest('unbound'))

    header, *lines = kubectl.ok('get', 'pods', '-A', '-o',
                                'wide').splitlines()
    assert header.split() == ['NAMESPACE', 'NAME', 'READY', 'STATUS',
                              'RESTARTS', 'AGE', 'IP', 'NODE', 'NOMINATED',
                              'NODE', 'READINESS', 'GATES']
    by_name = {line.split()[1]: line.split() for line in lines}
    assert by_name['unbound'][2:4] + by_name['unbound'][6:8] == [
        '0/1', 'Pending', '<none>', '<none>']
    assert by_name['web-1'][:5] == ['default', 'web-1', '1/1', 'Running',
                                    '0']
    assert by_name['web-1'][7] == 'worker-1'
    assert by_name['proxy-1'][0] == 'kube-system'
    assert by_name['waiting'][2:4] == ['0/1', 'Pending']
    pod = server.get('pod', 'web-1')
    assert pod['status']['hostIP'] == '10.10.0.6'
    assert pod['status']['podIP'] == by_name['web-1'][6]
    assert pod['spec']['restartPolicy'] == 'Always'
    assert pod['spec']['terminationGracePeriodSeconds'] == 30

    # What drain lists, and the selectors it may add.

    def names(*args):
        return sorted(kubectl.ok('get', 'pods', '-A', '-o', 'name',
                                 *args).split())
    assert names('--field-selector', 'spec.nodeName=worker-1') == [
        'pod/proxy-1', 'pod/web-1', 'pod/web-2']
    assert names('--field-selector', 'spec.nodeName=worker-1',
                 '-l', 'app=web') == ['pod/web-1', 'pod/web-2']
    assert names('--field-selector',
                 'status.phase!=Succeeded,status.phase!=Failed,'
                 'spec.nodeName=worker-2') == ['pod/waiting']
    assert names('--field-selector', 'status.phase=Pending') == [
        'pod/unbound', 'pod/waiting']
    assert names('--field-selector', 'metadata.name=web-2') == ['pod/web-2']
    result = kubectl('get', 'pods', '--field-selector', 'spec.host=x')
    assert 'field label not supported: spec.host' in result.stderr

    # The owners' status counts their running pods.
    header, table = rows(kubectl.ok('get', 'rs'))
    assert header == ['NAME', 'DESIRED', 'CURRENT', 'READY', 'AGE']
    assert table['web'][1:4] == ['2', '2', '2']
    header, table = rows(kubectl.ok('get', 'ds', '-n', 'kube-system'))
    assert header[:6] == ['NAME', 'DESIRED', 'CURRENT', 'READY',
                          'UP-TO-DATE', 'AVAILABLE']
    assert table['proxy'][1:7] == ['1', '1', '1', '1', '1', '<none>']

    # The node appearing starts its pods; a deleted pod is Terminating
    # while its grace or a finalizer holds it.
    server.create(node('worker-2'))
    running(server, 'waiting')
    out = kubectl.ok('delete', 'pod', 'waiting', '--wait=false')
    assert 'pod "waiting" deleted' in out
    assert 'Terminating' in kubectl.ok('get', 'pod', 'waiting')
    kubectl.ok('patch', 'pod', 'waiting', '--type=json', '-p',
               '[{"op": "remove", "path": "/metadata/finalizers"}]')
    kubectl.ok('wait', '--for=delete', 'pod/waiting', '--timeout=20s')
    kubectl.ok('delete', 'pod', 'unbound')  # no kubelet: it goes at once


def test_invalid_pods_workloads_and_budgets_are_rejected(server, kubectl):
    result = kubectl('apply', '-f', '-', input=json.dumps(
        {'apiVersion': 'v1', 'kind': 'Pod', 'metadata': {'name': 'p'},
         'spec': {'containers': [{'name': 'main'}]}}))
    assert 'spec.containers[0].image: Required value' in result.stderr
    server.create(kubeapi.pod_manifest('p', 'worker-1'))
    result = kubectl('patch', 'pod', 'p', '-p',
                     '{"spec": {"nodeName": "worker-2"}}')
    assert 'pod updates may not change fields' in result.stderr
    kubectl.ok('patch', 'pod', 'p', '--type=json', '-p',
               '[{"op": "replace", "path": "/spec/containers/0/image",'
               ' "value": "nginx:1.28"}]')

    bad = replica_set()
    bad['spec']['template']['metadata']['labels'] = {'app': 'other'}
    result = kubectl('apply', '-f', '-', input=json.dumps(bad))
    assert '`selector` does not match template `labels`' in result.stderr
    result = kubectl('apply', '-f', '-', input=json.dumps(
        budget(minAvailable=1, maxUnavailable=1)))
    assert 'minAvailable and maxUnavailable cannot be both set' in \
        result.stderr
    result = kubectl('create', 'pdb', 'x', '--selector=app=web',
                     '--min-available=150%')
    assert 'spec.minAvailable: Invalid value: "150%": must not be greater ' \
        'than 100%' in result.stderr
    web = server.create(replica_set())
    two = dict(kubeapi.owner_reference(web), name='other', uid='2')
    manifest = kubeapi.pod_manifest('q', owner=web)
    manifest['metadata']['ownerReferences'].append(two)
    result = kubectl('apply', '-f', '-', input=json.dumps(manifest))
    assert 'Only one reference can have Controller set to true' in \
        result.stderr


def test_cordon_and_uncordon(server, kubectl):
    server.create(node('worker-1'))

    assert kubectl.ok('cordon', 'worker-1') == 'node/worker-1 cordoned\n'
    assert server.get('node', 'worker-1')['spec'] == {'unschedulable': True}
    assert rows(kubectl.ok('get', 'nodes'))[1]['worker-1'][1] == \
        'Ready,SchedulingDisabled'
    assert kubectl.ok('get', 'nodes', '-o', 'name', '--field-selector',
                      'spec.unschedulable=true') == 'node/worker-1\n'
    assert 'already cordoned' in kubectl.ok('cordon', 'worker-1')
    assert writes(server)[-1] == ('PATCH', '/api/v1/nodes/worker-1')

    assert kubectl.ok('uncordon', 'worker-1') == \
        'node/worker-1 uncordoned\n'
    assert server.get('node', 'worker-1')['spec'] == {}
    assert rows(kubectl.ok('get', 'nodes'))[1]['worker-1'][1] == 'Ready'


def test_drain_evicts_replica_set_pods_and_ignores_daemon_sets(
        server, kubectl):
    worker_with_pods(server)

    # Without the flags, drain refuses as it does on a cluster.
    result = kubectl('drain', 'worker-1', '--timeout=30s')
    assert result.returncode != 0
    assert ('cannot delete DaemonSet-managed Pods (use --ignore-daemonsets '
            'to ignore): kube-system/proxy-1') in result.stderr
    result = kubectl('drain', 'worker-1', '--ignore-daemonsets',
                     '--timeout=30s')
    assert ('cannot delete Pods with local storage (use '
            '--delete-emptydir-data to override): default/web-1'
            in result.stderr)
    assert sorted(pod_names(server)) == ['proxy-1', 'web-1', 'web-2']

    out = kubectl.ok(*DRAIN, '--timeout=30s')
    assert 'node/worker-1 already cordoned' in out
    for name in ('web-1', 'web-2'):
        assert f'evicting pod default/{name}' in out
        assert f'pod/{name} evicted' in out
        assert ('POST', f'/api/v1/namespaces/default/pods/{name}/eviction') \
            in server.request_log
    assert out.endswith('node/worker-1 drained\n')
    assert pod_names(server) == ['proxy-1']
    assert rows(kubectl.ok('get', 'rs'))[1]['web'][1:4] == ['2', '0', '0']

    # The node goes, and the pod garbage collector takes its last pod.
    assert 'node "worker-1" deleted' in kubectl.ok('delete', 'node',
                                                   'worker-1')
    assert server.wait_for(lambda: server.objects('pods') == [])
    assert server.nodes() == []


def test_a_bare_pod_blocks_drain_unless_forced(server, kubectl):
    server.create(node('worker-1'))
    server.create(kubeapi.pod_manifest('bare', 'worker-1'))
    running(server, 'bare')

    result = kubectl(*DRAIN, '--timeout=30s')
    assert result.returncode != 0
    assert ('cannot delete Pods that declare no controller (use --force to '
            'override): default/bare') in result.stderr
    assert pod_names(server) == ['bare']
    assert server.get('node', 'worker-1')['spec']['unschedulable'] is True

    # With --force it goes; --disable-eviction makes it a plain DELETE.
    out = kubectl.ok(*DRAIN, '--force', '--disable-eviction',
                     '--timeout=30s')
    assert 'pod/bare deleted' in out and 'node/worker-1 drained' in out
    assert server.objects('pods') == []
    log = server.request_log
    assert ('DELETE', '/api/v1/namespaces/default/pods/bare') in log
    assert not [path for _, path in log if path.endswith('/eviction')]


def test_a_budget_that_allows_no_disruption_blocks_drain(server, kubectl):
    worker_with_pods(server, {'minAvailable': 2})
    assert server.wait_for(lambda: budget_status(server).get(
        'observedGeneration') == 1)
    status = budget_status(server)
    assert (status['expectedPods'], status['currentHealthy'],
            status['desiredHealthy'], status['disruptionsAllowed']) == (
        2, 2, 2, 0)
    header, table = rows(kubectl.ok('get', 'pdb'))
    assert header[:2] == ['NAME', 'MIN'] and header[-1] == 'AGE'
    assert table['web-pdb'][1:4] == ['2', 'N/A', '0']

    # drain retries a refused eviction every 5 s until its --timeout. By
    # default kubectl prints the Status message only; the budget's name is
    # in the Status' causes, which -v=8 shows as kubectl received them.
    started = time.monotonic()
    result = kubectl(*DRAIN, '--timeout=2s', '-v=8')
    elapsed = time.monotonic() - started
    assert result.returncode != 0
    assert elapsed < 20
    assert ('error when evicting pods/"web-1" -n "default" (will retry '
            f'after 5s): {BLOCKED}') in result.stderr
    assert ('The disruption budget web-pdb needs 2 healthy pods and has 2 '
            'currently') in result.stderr
    assert ('error when evicting pods/"web-2" -n "default": global timeout '
            'reached: 2s') in result.stderr
    assert 'There are pending nodes to be drained:\n worker-1' in \
        result.stderr
    assert sorted(pod_names(server)) == ['proxy-1', 'web-1', 'web-2']
    assert all(pod['status']['phase'] == 'Running'
               for pod in server.objects('pods'))

    # Once the budget allows it, the drain goes through.
    kubectl.ok('patch', 'pdb', 'web-pdb', '--type=merge', '-p',
               '{"spec": {"minAvailable": 0}}')
    assert server.wait_for(lambda: budget_status(server)[
        'observedGeneration'] == 2)
    assert budget_status(server)['disruptionsAllowed'] == 2
    out = kubectl.ok(*DRAIN, '--timeout=30s')
    assert 'node/worker-1 drained' in out
    assert pod_names(server) == ['proxy-1']
    assert server.wait_for(lambda: budget_status(server)[
        'expectedPods'] == 0)


def test_the_eviction_api_answers_as_kubernetes_does():
    # A longer grace, so that the Terminating pod is seen for sure.
    with kubeapi.KubeApiServer(pod_grace=1.0) as server:
        worker_with_pods(server, {'maxUnavailable': 1})
        assert server.wait_for(lambda: budget_status(server).get(
            'disruptionsAllowed') == 1)
        path = '/api/v1/namespaces/default/pods/{}/eviction'

        code, headers, body = https_post(server, path.format('web-1'),
                                         eviction('web-1'))
        assert (code, body) == (201, {'kind': 'Status', 'apiVersion': 'v1',
                                      'metadata': {}, 'status': 'Success',
                                      'code': 201})
        # The pod terminates, then its kubelet lets it go.
        pod = server.get('pod', 'web-1')
        assert pod['metadata']['deletionTimestamp']
        assert pod['metadata']['deletionGracePeriodSeconds'] == 30
        status = budget_status(server)
        assert status['disruptionsAllowed'] == 0
        assert server.wait_for(lambda: server.get('pod', 'web-1') is None)
        assert server.wait_for(
            lambda: budget_status(server)['currentHealthy'] == 1)

        code, headers, body = https_post(server, path.format('web-2'),
                                         eviction('web-2'))
        assert code == 429
        assert 'Retry-After' not in headers  # kubectl does the retrying
        assert body == {
            'kind': 'Status', 'apiVersion': 'v1', 'metadata': {},
            'status': 'Failure', 'message': BLOCKED,
            'reason': 'TooManyRequests', 'code': 429,
            'details': {'causes': [{
                'reason': 'DisruptionBudget',
                'message': 'The disruption budget web-pdb needs 1 healthy '
                           'pods and has 1 currently'}]}}
        assert server.get('pod', 'web-2')['status']['phase'] == 'Running'

        # A pod no budget covers just goes; so does one not running.
        in_system = path.replace('default', 'kube-system')
        assert https_post(server, in_system.format('proxy-1'),
                          eviction('proxy-1', 'kube-system'))[0] == 201
        server.create(kubeapi.pod_manifest('unbound', labels={'app': 'web'}))
        assert https_post(server, path.format('unbound'),
                          eviction('unbound'))[0] == 201
        assert server.get('pod', 'unbound') is None

        code, _, body = https_post(server, path.format('web-2'),
                                   eviction('other'))
        assert (code, body['message']) == (
            400, 'name in URL does not match name in Eviction object')
        code, _, body = https_post(server, path.format('gone'),
                                   eviction('gone'))
        assert (code, body['message']) == (404, 'pods "gone" not found')

        # In protobuf too; a grace of 0 deletes at once.
        code, _, body = https_post(server, path.format('web-2'),
                                   protobuf_eviction('web-2', grace=0))
        assert (code, body['reason']) == (429, 'TooManyRequests')
        server.delete('pdb', 'web-pdb')
        code, _, body = https_post(server, path.format('web-2'),
                                   protobuf_eviction('web-2', grace=0))
        assert (code, body['status']) == (201, 'Success')
        assert server.get('pod', 'web-2') is None


def test_budget_status_follows_the_pods(server, kubectl):
    worker_with_pods(server)
    server.create(budget('half', minAvailable='50%'))
    server.create(budget('none', app='nothing', minAvailable=1))
    # kubectl sends this one in protobuf, with IntOrString fields.
    kubectl.ok('create', 'pdb', 'most', '--selector=app=web',
               '--max-unavailable=50%')
    kubectl.ok('create', 'pdb', 'one', '--selector=app=nothing',
               '--max-unavailable=1')
    assert server.get('pdb', 'most')['spec'] == {
        'maxUnavailable': '50%', 'selector': {'matchLabels': {'app': 'web'}}}
    assert server.get('pdb', 'one')['spec']['maxUnavailable'] == 1

    def summary(name):
        status = budget_status(server, name)
        return (status.get('expectedPods'), status.get('currentHealthy'),
                status.get('desiredHealthy'),
                status.get('disruptionsAllowed'))

    assert server.wait_for(lambda: [summary(name) for name in (
        'half', 'most', 'none')] == [(2, 2, 1, 1), (2, 2, 1, 1),
                                     (0, 0, 1, 0)])
    condition, = budget_status(server, 'half')['conditions']
    assert (condition['type'], condition['status'], condition['reason']) == (
        'DisruptionAllowed', 'True', 'SufficientPods')

    # An unready pod is not healthy; a percentage of a ReplicaSet's
    # replicas counts the pods it should have.
    server.update_status('pod', 'web-2', {'conditions': [
        {'type': 'Ready', 'status': 'False'}]})
    assert server.wait_for(lambda: summary('half') == (2, 1, 1, 0))
    kubectl.ok('patch', 'rs', 'web', '--type=merge', '-p',
               '{"spec": {"replicas": 4}}')
    assert server.wait_for(lambda: summary('most') == (4, 1, 2, 0))
    assert server.get('rs', 'web')['metadata']['generation'] == 2


def test_graceful_pods_hold_their_claim_and_their_namespace(server, kubectl):
    server.create(node('worker-1'))
    kubectl.ok('create', 'namespace', 'demo')
    kubectl.ok('apply', '-n', 'demo', '-f', '-', input=pvc_yaml())
    manifest = kubeapi.pod_manifest('user', 'worker-1', namespace='demo')
    manifest['spec']['volumes'] = [{'name': 'data', 'persistentVolumeClaim':
                                    {'claimName': 'claim-1'}}]
    server.create(manifest)
    running(server, 'demo/user')

    kubectl.ok('delete', 'pvc', 'claim-1', '-n', 'demo', '--wait=false')
    assert 'Terminating' in kubectl.ok('get', 'pvc', '-n', 'demo')
    kubectl.ok('delete', 'namespace', 'demo', '--timeout=20s')
    assert server.objects('pods') == server.objects('pvc') == []
    assert server.get('ns', 'demo') is None
