"""Tests of testbed/kubeapi/'s Deployments, driven by the real kubectl:
what Tacker's Kubernetes infra driver reads of them (ReplicaSets, pods
named "<deployment>-<hash>-<5>", replicas and readyReplicas, a rolling
replacement, deletion through owner references) and pods that mount a
claim."""

import json
import re

from testbed.kubeapi import deployments
from testbed.tests import kubectl_support
from testbed.tests.kubectl_support import node
from testbed.tests.kubectl_support import pv_yaml
from testbed.tests.kubectl_support import pvc_yaml

pytestmark = kubectl_support.NEEDS_KUBECTL

# Tacker's kubernetes_common.is_match_pod_naming for a Deployment "web".
TACKER_POD_NAME = re.compile('web-([0-9a-f]{1,10})-([0-9a-z]{5})+$')


def deployment(replicas=2, image='nginx:1.27', claim=None):
    spec = {'containers': [{'name': 'main', 'image': image}]}
    if claim:
        spec['volumes'] = [{'name': 'data', 'persistentVolumeClaim': {
            'claimName': claim}}]
    return json.dumps({
        'apiVersion': 'apps/v1', 'kind': 'Deployment',
        'metadata': {'name': 'web', 'namespace': 'default'},
        'spec': {'replicas': replicas,
                 'selector': {'matchLabels': {'app': 'web'}},
                 'template': {'metadata': {'labels': {'app': 'web'}},
                              'spec': spec}}})


def cluster(server):
    """A tainted control-plane Node and two Workers."""
    master = node('master-1', roles=('control-plane',))
    master['spec'] = {'taints': [{
        'key': 'node-role.kubernetes.io/control-plane',
        'effect': 'NoSchedule'}]}
    for manifest in (master, node('worker-1'), node('worker-2')):
        server.create(manifest)


def web_pods(server):
    return {pod['metadata']['name']: pod for pod in server.objects('pod')
            if not pod['metadata'].get('deletionTimestamp')}


def ready(server, replicas, timeout=10.0):
    def done():
        status = (server.get('deployment', 'web') or {}).get('status') or {}
        return (status.get('replicas'), status.get('readyReplicas')) == (
            replicas, replicas) and len(web_pods(server)) == replicas
    return server.wait_for(done, timeout)


def test_deployment_runs_its_pods_through_a_replica_set(server, kubectl):
    cluster(server)
    kubectl.ok('apply', '-f', '-', input=deployment())

    assert ready(server, 2), server.get('deployment', 'web')['status']
    replica_set, = server.objects('replicaset')
    digest = replica_set['metadata']['labels']['pod-template-hash']
    assert replica_set['metadata']['name'] == f'web-{digest}'
    assert replica_set['metadata']['ownerReferences'][0]['uid'] == \
        server.get('deployment', 'web')['metadata']['uid']
    pods = web_pods(server)
    for name, pod in pods.items():
        assert TACKER_POD_NAME.match(name), name
        assert name.startswith(f'web-{digest}-')
        assert pod['status']['phase'] == 'Running'
        assert pod['metadata']['ownerReferences'][0]['name'] == \
            f'web-{digest}'
    # The scheduler spreads them over the Workers, never the tainted
    # control plane.
    assert sorted(pod['spec']['nodeName'] for pod in pods.values()) == [
        'worker-1', 'worker-2']
    assert kubectl_support.rows(kubectl.ok('get', 'deploy'))[1]['web'][1] \
        == '2/2'


def test_template_change_rolls_the_pods_over(server, kubectl):
    cluster(server)
    kubectl.ok('apply', '-f', '-', input=deployment())
    assert ready(server, 2)
    old_pods = set(web_pods(server))

    kubectl.ok('set', 'image', 'deployment/web', 'main=nginx:1.28')

    assert server.wait_for(lambda: ready(server, 2) and not (
        set(web_pods(server)) & old_pods)), web_pods(server)
    replica_sets = {rs['metadata']['name']: rs['spec']['replicas']
                    for rs in server.objects('replicaset')}
    assert sorted(replica_sets.values()) == [0, 2]
    assert server.get('deployment', 'web')['status']['updatedReplicas'] == 2
    assert all(pod['spec']['containers'][0]['image'] == 'nginx:1.28'
               for pod in web_pods(server).values())


def test_foreground_delete_waits_for_the_dependents(server, kubectl):
    """Tacker deletes with propagationPolicy Foreground and waits until
    the Deployment reads 404."""
    cluster(server)
    kubectl.ok('apply', '-f', '-', input=deployment())
    assert ready(server, 2)

    kubectl.ok('delete', 'deployment', 'web', '--cascade=foreground',
               '--wait=false')
    held = server.get('deployment', 'web')
    assert held is not None and deployments_held(held)

    assert server.wait_for(lambda: server.get('deployment', 'web') is None)
    assert server.objects('replicaset') == []
    assert server.objects('pod') == []


def deployments_held(obj):
    return 'foregroundDeletion' in obj['metadata']['finalizers']


def test_background_delete_collects_the_garbage(server, kubectl):
    cluster(server)
    kubectl.ok('apply', '-f', '-', input=deployment(replicas=1))
    assert ready(server, 1)

    kubectl.ok('delete', 'deployment', 'web')

    assert server.wait_for(lambda: not server.objects('replicaset')
                           and not server.objects('pod'))


def test_a_deleted_pod_is_replaced_on_a_schedulable_node(server, kubectl):
    cluster(server)
    kubectl.ok('apply', '-f', '-', input=deployment(replicas=1))
    assert ready(server, 1)
    (name, pod), = web_pods(server).items()
    first = pod['spec']['nodeName']
    kubectl.ok('cordon', first)

    kubectl.ok('delete', 'pod', name)

    assert server.wait_for(lambda: ready(server, 1) and name not in
                           web_pods(server))
    (_, moved), = web_pods(server).items()
    assert moved['spec']['nodeName'] != first


def test_pod_runs_once_its_claim_is_bound(server, kubectl):
    cluster(server)
    kubectl.ok('apply', '-f', '-', input=deployment(replicas=1,
                                                    claim='claim-1'))
    kubectl.ok('apply', '-f', '-', input=pvc_yaml(size='1Gi'))
    assert server.wait_for(lambda: len(web_pods(server)) == 1)
    assert not ready(server, 1, timeout=1)  # no PV yet: Pending
    (_, pod), = web_pods(server).items()
    assert pod['status']['phase'] == 'Pending'

    kubectl.ok('apply', '-f', '-', input=pv_yaml(size='1Gi'))

    assert ready(server, 1)
    claim, volume = server.get('pvc', 'claim-1'), server.get('pv',
                                                             'nfs-pv-1')
    assert (claim['status']['phase'], claim['spec']['volumeName']) == (
        'Bound', 'nfs-pv-1')
    assert (volume['status']['phase'],
            volume['spec']['claimRef']['name']) == ('Bound', 'claim-1')


def test_a_node_agent_holds_the_pod_until_it_mounted_and_unmounted(
        server, kubectl):
    cluster(server)
    for name in ('worker-1', 'worker-2'):
        server.attach_node_agent(name)
    kubectl.ok('apply', '-f', '-', input=pv_yaml(size='1Gi'))
    kubectl.ok('apply', '-f', '-', input=pvc_yaml(size='1Gi'))
    kubectl.ok('apply', '-f', '-', input=deployment(replicas=1,
                                                    claim='claim-1'))
    assert server.wait_for(lambda: server.get('pvc', 'claim-1')['status'][
        'phase'] == 'Bound' and len(web_pods(server)) == 1)
    assert not ready(server, 1, timeout=1)
    (name, pod), = web_pods(server).items()

    server.volumes_mounted(pod['metadata']['uid'])
    assert ready(server, 1)

    kubectl.ok('delete', 'pod', name, '--wait=false')
    assert not server.wait_for(
        lambda: server.get('pod', name) is None, timeout=1)
    server.volumes_unmounted(pod['metadata']['uid'])
    assert server.wait_for(lambda: server.get('pod', name) is None)


def test_template_hash_is_stable_and_hexadecimal():
    template = {'metadata': {'labels': {'app': 'web'}},
                'spec': {'containers': [{'name': 'main', 'image': 'a'}]}}
    digest = deployments.template_hash(template)
    assert digest == deployments.template_hash(json.loads(
        json.dumps(template)))
    assert re.fullmatch('[0-9a-f]{1,10}', digest)
    template['spec']['containers'][0]['image'] = 'b'
    assert deployments.template_hash(template) != digest
