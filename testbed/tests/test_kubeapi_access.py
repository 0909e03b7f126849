"""Tests of testbed/kubeapi/, driven by the machine's real kubectl:
discovery, Nodes, Namespaces, service accounts and their tokens, RBAC,
protobuf bodies, injected failures and the certificate (fixtures in
conftest.py, helpers in kubectl_support.py).
"""

import base64
import http.client
import json
import ssl
import subprocess
import time

import pytest

from testbed import kubeapi
from testbed.tests import kubectl_support
from testbed.tests.kubectl_support import KUBECTL
from testbed.tests.kubectl_support import Kubectl
from testbed.tests.kubectl_support import node
from testbed.tests.kubectl_support import pvc_yaml
from testbed.tests.kubectl_support import rows
from testbed.tests.kubectl_support import writes

pytestmark = kubectl_support.NEEDS_KUBECTL


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
    assert found['storageclasses'] == [
        'storage.k8s.io/v1', 'false', 'StorageClass']
    assert found['csidrivers'] == ['storage.k8s.io/v1', 'false', 'CSIDriver']
    assert found['rolebindings'] == [
        'rbac.authorization.k8s.io/v1', 'true', 'RoleBinding']

    groups = json.loads(kubectl.ok('get', '--raw', '/apis'))
    assert [group['name'] for group in groups['groups']] == [
        'apps', 'policy', 'rbac.authorization.k8s.io', 'storage.k8s.io']
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
