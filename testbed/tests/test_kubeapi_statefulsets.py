"""The test API server's StatefulSets, driven by the machine's real
kubectl: pods in order, a claim per volumeClaimTemplate and ordinal kept
when the set scales in or goes, and the scale subresource that ``kubectl
scale`` (and Tacker's Kubernetes driver) patch (fixtures in
conftest.py)."""

import json

import yaml

from testbed.tests import kubectl_support
from testbed.tests.kubectl_support import node
from testbed.tests.kubectl_support import pv_yaml

pytestmark = kubectl_support.NEEDS_KUBECTL


def stateful_set(name, replicas, claim_templates=()):
    labels = {'app': name}
    return {'apiVersion': 'apps/v1', 'kind': 'StatefulSet',
            'metadata': {'name': name, 'namespace': 'default'},
            'spec': {'replicas': replicas, 'serviceName': name,
                     'selector': {'matchLabels': labels},
                     'template': {'metadata': {'labels': labels},
                                  'spec': {'containers': [{
                                      'name': 'main',
                                      'image': 'nginx:1.27'}]}},
                     'volumeClaimTemplates': [{
                         'metadata': {'name': template},
                         'spec': {'accessModes': ['ReadWriteMany'],
                                  'storageClassName': '',
                                  'resources': {'requests': {
                                      'storage': '1Gi'}}}}
                         for template in claim_templates]}}


def phases(server, prefix):
    return {pod['metadata']['name']: pod['status']['phase']
            for pod in server.objects('pods')
            if pod['metadata']['name'].startswith(prefix)
            and not pod['metadata'].get('deletionTimestamp')}


def test_pods_in_order_rolled_out_and_scaled_in(server, kubectl):
    server.create(node('worker-1', address='10.10.0.6'))
    kubectl.apply(yaml.safe_dump(stateful_set('web', 2)))
    assert server.wait_for(lambda: phases(server, 'web-') == {
        'web-0': 'Running', 'web-1': 'Running'}), phases(server, 'web-')
    # web-1 was created only once web-0 ran.
    created = {pod['metadata']['name']: pod['metadata']['creationTimestamp']
               for pod in server.objects('pods')}
    assert created['web-0'] <= created['web-1']
    kubectl.ok('rollout', 'status', 'statefulset/web', '--timeout=30s')
    pod = server.get('pod', 'web-1')
    assert pod['metadata']['labels'][
        'statefulset.kubernetes.io/pod-name'] == 'web-1'
    assert pod['spec']['nodeName'] == 'worker-1'
    kubectl.ok('scale', 'statefulset/web', '--replicas=1')
    assert server.wait_for(lambda: phases(server, 'web-') == {
        'web-0': 'Running'}), phases(server, 'web-')
    scale = json.loads(kubectl.ok(
        'get', '--raw',
        '/apis/apps/v1/namespaces/default/statefulsets/web/scale'))
    assert (scale['kind'], scale['spec']['replicas']) == ('Scale', 1)
    result = kubectl('scale', 'statefulset/web', '--replicas=-1')
    assert result.returncode != 0


def test_a_claim_per_template_and_ordinal_outlives_the_set(server,
                                                           kubectl):
    server.create(node('worker-1', address='10.10.0.6'))
    for index in (1, 2):
        kubectl.apply(pv_yaml(f'nfs-pv-{index}'))
    kubectl.apply(yaml.safe_dump(stateful_set('db', 2, ['data'])))
    assert server.wait_for(lambda: phases(server, 'db-') == {
        'db-0': 'Running', 'db-1': 'Running'}, 30), phases(server, 'db-')
    claims = {claim['metadata']['name']: claim['status']['phase']
              for claim in server.objects('pvc')}
    assert claims == {'data-db-0': 'Bound', 'data-db-1': 'Bound'}
    volumes = server.get('pod', 'db-1')['spec']['volumes']
    assert {'name': 'data', 'persistentVolumeClaim': {
        'claimName': 'data-db-1'}} in volumes
    kubectl.ok('delete', 'statefulset', 'db')
    assert server.wait_for(lambda: not phases(server, 'db-'), 30)
    assert sorted(claim['metadata']['name']
                  for claim in server.objects('pvc')) == [
        'data-db-0', 'data-db-1']
