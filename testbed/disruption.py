"""Pods of a ReplicaSet placed on chosen Nodes and a PodDisruptionBudget
over them, on a testbed.kubeapi.KubeApiServer: what an upgrade wave's
drains must respect. A ReplicaSet a client creates keeps the pods it is
given (testbed/kubeapi/replication.py), so nothing replaces an evicted
pod unless the test places one (``place``)."""

APP = 'db'
BUDGET = 'db-budget'
IMAGE = 'registry.example/db:1'


def _template():
    return {'metadata': {'labels': {'app': APP}},
            'spec': {'containers': [{'name': 'main', 'image': IMAGE}]}}


def place(kube, owner, name, node):
    """Pod ``name`` of ReplicaSet ``owner`` (as created) bound to
    ``node``: it runs there at once."""
    meta = owner['metadata']
    pod = {'apiVersion': 'v1', 'kind': 'Pod',
           'metadata': {'name': name, 'namespace': meta['namespace'],
                        'ownerReferences': [{
                            'apiVersion': 'apps/v1', 'kind': 'ReplicaSet',
                            'name': meta['name'], 'uid': meta['uid'],
                            'controller': True}]}}
    pod['metadata']['labels'] = _template()['metadata']['labels']
    pod['spec'] = dict(_template()['spec'], nodeName=node)
    return kube.create(pod)


def budget_over(kube, nodes):
    """A pod 'db-<Node>' on each of ``nodes`` and BUDGET keeping all but
    one of them: one eviction allowed. Returns the ReplicaSet."""
    owner = kube.create({
        'apiVersion': 'apps/v1', 'kind': 'ReplicaSet',
        'metadata': {'name': APP, 'namespace': 'default'},
        'spec': {'replicas': len(nodes),
                 'selector': {'matchLabels': {'app': APP}},
                 'template': _template()}})
    for node in nodes:
        place(kube, owner, pod_name(node), node)
    kube.create({
        'apiVersion': 'policy/v1', 'kind': 'PodDisruptionBudget',
        'metadata': {'name': BUDGET, 'namespace': 'default'},
        'spec': {'minAvailable': len(nodes) - 1,
                 'selector': {'matchLabels': {'app': APP}}}})
    assert kube.wait_for(lambda: (kube.get('pdb', BUDGET) or {}).get(
        'status', {}).get('disruptionsAllowed') == 1, 30)
    return owner


def pod_name(node):
    return '%s-%s' % (APP, node)
