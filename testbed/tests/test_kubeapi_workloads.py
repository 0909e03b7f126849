"""Tests of testbed/kubeapi/, driven by the machine's real kubectl: pods,
workloads and disruption budgets; cordon, drain, evictions and deleting a
Node (fixtures in conftest.py, helpers in kubectl_support.py).
"""

import http.client
import json
import ssl
import time

from testbed import kubeapi
from testbed.kubeapi import daemonsets
from testbed.tests import kubectl_support
from testbed.tests.kubectl_support import eviction
from testbed.tests.kubectl_support import node
from testbed.tests.kubectl_support import pv_yaml
from testbed.tests.kubectl_support import pvc_yaml
from testbed.tests.kubectl_support import rows
from testbed.tests.kubectl_support import writes

pytestmark = kubectl_support.NEEDS_KUBECTL


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
    """A DaemonSet whose pods the test places (daemonsets.CLIENT_PODS)."""
    manifest = replica_set(name)
    manifest['kind'] = 'DaemonSet'
    manifest['metadata']['namespace'] = namespace
    manifest['metadata']['annotations'] = {daemonsets.CLIENT_PODS: 'true'}
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
    # The kubelet runs the pod only once its claim is Bound.
    kubectl.ok('apply', '-f', '-', input=pv_yaml(size='2Gi'))
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
