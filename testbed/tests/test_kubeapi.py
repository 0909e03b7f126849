"""Tests of testbed/kubeapi/, driven by the machine's real kubectl:
PersistentVolumes and claims, apply, wait, patches, watches.

Each test gets a fresh server and a private HOME (kubectl's discovery cache
lives in ~/.kube/cache), so no test depends on another's state. The only
waits are kubectl's own bounded waits and KubeApiServer.wait_for().
"""

import http.client
import json
import ssl
import time

from testbed import kubeapi
from testbed.tests import kubectl_support
from testbed.tests.kubectl_support import pv_yaml
from testbed.tests.kubectl_support import pvc_yaml
from testbed.tests.kubectl_support import writes

pytestmark = kubectl_support.NEEDS_KUBECTL


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
    assert ('POST', '/api/v1/persistentvolumes') in writes(server)

    before = len(writes(server))
    result = kubectl.apply(pv_yaml())
    assert result.returncode == 0, result.stderr
    assert len(writes(server)) == before

    result = kubectl.apply(pv_yaml(size='2Gi'))
    assert result.returncode == 0, result.stderr
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
