"""The minor upgrade's decisions: the target, the refusals, the plan."""

import collections
import json

import pytest

from kubernetes_mgmt_pv.cluster import upgrade_plan as up
from kubernetes_mgmt_pv import exceptions

Node = collections.namedtuple('Node', 'address fixed_ip')
M1, M2 = Node('10.0.0.11', '192.168.0.11'), Node('10.0.0.12', '192.168.0.12')
W1 = Node('10.0.0.21', '192.168.0.21')
V35, V36, V37 = (1, 35, 4), (1, 36, 1), (1, 37, 0)
PKG36 = '1.36.1-1.1'
P364, PKG364 = (1, 36, 4), '1.36.4-1.1'


@pytest.mark.parametrize('script, expected', [
    (b"x\nreadonly K8S_PACKAGE_VERSION='1.36.1-1.1'\ny", '1.36.1-1.1'),
    (b"K8S_PACKAGE_VERSION='1.36.1-1.1'", None),  # not the readonly line
    (b"readonly K8S_PACKAGE_VERSION='1.36'", None),
    (b"readonly K8S_PACKAGE_VERSION='1.36.1-1.1'; rm -rf /", None),
])
def test_script_package_version(script, expected):
    assert up.script_package_version(script) == expected


@pytest.mark.parametrize('url, expected', [
    ('http://m/core:/stable:/v1.35/deb/', 'http://m/core:/stable:/v1.36/deb/'),
    ('http://m/k8s/v1.35/', 'http://m/k8s/v1.36/'),
    # A re-run after the first Master's apply: the same repository.
    ('http://m/k8s/v1.36/', 'http://m/k8s/v1.36/'),
    ('http://m/all-minors/', 'http://m/all-minors/'),
])
def test_repository_for(url, expected):
    assert up.repository_for(url, V36) == expected


def test_script_sources():
    options = ['-r', 'http://m/k8s/v1.35/', '-g', '/k.asc', '-n', '/c.yaml',
               '-M', 'http://reg', '-P', 'pause']
    assert up.script_sources(options, V36) == [
        '-r', 'http://m/k8s/v1.36/', '-g', '/k.asc']
    assert up.script_sources([], V36) == []


def nodes_json(*nodes):
    return json.dumps({'items': [{
        'metadata': {'name': name}, 'spec': {'unschedulable': cordoned},
        'status': {'addresses': [{'type': 'InternalIP', 'address': ip}],
                   'conditions': [{'type': 'Ready',
                                   'status': 'True' if ready else 'False'}],
                   'nodeInfo': {'kubeletVersion': version}}}
        for name, ip, ready, version, cordoned in nodes]})


def test_parse_nodes():
    nodes = up.parse_nodes(nodes_json(
        ('m1', '192.168.0.11', True, 'v1.35.4', False),
        ('w1', '192.168.0.21', False, 'v1.36.1', True)))
    assert nodes['192.168.0.11'] == up.ApiNode('m1', '192.168.0.11', True,
                                               V35, False)
    assert nodes['192.168.0.21'] == up.ApiNode('w1', '192.168.0.21', False,
                                               V36, True)
    with pytest.raises(exceptions.ClusterInstallError):
        up.parse_nodes('not json')


@pytest.mark.parametrize('data, expected', [
    ({'ClusterConfiguration': 'apiVersion: x\nkubernetesVersion: v1.35.4\n'},
     V35),
    ({'ClusterConfiguration': 'kubernetesVersion: "v1.36.1"'}, V36),
    ({'ClusterConfiguration': 'clusterName: kubernetes\n'}, None),
    ({}, None),
])
def test_parse_cluster_version(data, expected):
    assert up.parse_cluster_version(json.dumps({'data': data})) == expected


@pytest.mark.parametrize('status, blocking', [
    ({'expectedPods': 2, 'desiredHealthy': 2, 'disruptionsAllowed': 0},
     True),  # maxUnavailable 0: never an eviction
    ({'expectedPods': 2, 'desiredHealthy': 3, 'disruptionsAllowed': 0},
     True),
    # Short of healthy pods now: the wave waits for the budget instead.
    ({'expectedPods': 2, 'desiredHealthy': 1, 'disruptionsAllowed': 0},
     False),
    ({'expectedPods': 2, 'desiredHealthy': 1, 'disruptionsAllowed': 1},
     False),
    ({'expectedPods': 0, 'desiredHealthy': 0, 'disruptionsAllowed': 0},
     False),  # covers no pod
    ({}, False),  # not yet processed by the disruption controller
])
def test_never_evicting_budgets(status, blocking):
    output = json.dumps({'items': [
        {'metadata': {'namespace': 'a', 'name': 'budget'},
         'status': status}]})
    assert up.never_evicting_budgets(output) == (
        ['a/budget'] if blocking else [])


def test_never_evicting_budgets_of_no_list():
    with pytest.raises(exceptions.ClusterInstallError):
        up.never_evicting_budgets('{"kind": "Status"}')


def test_parse_host_facts():
    facts = up.parse_host_facts(
        'kubeadm v1.35.4\npackage kubeadm installed 1.35.4-1.1\n'
        'package kubelet installed 1.36.1-1.1\n'
        'package kubectl config-files 1.35.4-1.1\napiserver v1.35.4\n')
    assert facts == up.HostFacts(V35, {'kubeadm': '1.35.4-1.1',
                                       'kubelet': '1.36.1-1.1',
                                       'kubectl': None}, V35)
    assert up.parse_host_facts('kubeadm -\napiserver \n') == up.HostFacts(
        None, {'kubeadm': None, 'kubelet': None, 'kubectl': None}, None)


def api(ready=True, version=V35, name='n'):
    return up.ApiNode(name, None, ready, version)


@pytest.mark.parametrize('cluster, target, nodes, budgets, force, expected', [
    (V35, V36, {'a': api()}, [], False, []),
    (V36, V36, {'a': api(version=V36)}, [], False, []),  # a re-run
    (V36, V36, {'a': api()}, [], False, []),  # apply done, node not
    (V35, V37, {'a': api()}, [], False,
     [('cluster', 'more than one minor'), ('a', 'one minor before')]),
    (V36, V35, {'a': api()}, [], False, [('cluster', 'downgrade')]),
    ((2, 0, 0), (1, 99, 0), {}, [], False, [('cluster', 'downgrade')]),
    ((1, 99, 0), (2, 0, 0), {}, [], False, [('cluster', 'one minor')]),
    (None, V36, {}, [], False, [('cluster', 'kubeadm-config')]),
    (V35, V36, {'a': api(ready=False), 'b': api()}, [], False,
     [('a', 'not Ready')]),
    (V35, V36, {'a': api(version=(1, 35, 0))}, [], False, []),
    (V35, V36, {'a': api(version=(1, 34, 9))}, [], False,
     [('a', 'more than one minor before')]),
    (V35, V36, {'a': api(version=V37)}, [], False, [('a', 'newer')]),
    (V35, V36, {'a': api(version=None)}, [], False, [('a', 'no kubelet')]),
    (V35, V36, {'a': api()}, ['ns/pdb'], False, [('cluster', 'ns/pdb')]),
    (V35, V36, {'a': api()}, ['ns/pdb'], True, []),
    # Every Node at the target (a package that keeps the version, or a
    # re-run left with an uncordon): nothing is drained, budgets or not.
    (V36, V36, {'a': api(version=V36)}, ['ns/pdb'], False, []),
    (V36, V36, {'a': api(version=V36), 'b': api()}, ['ns/pdb'], False,
     [('cluster', 'ns/pdb')]),
    # Patch releases of one minor: up, or the same version again.
    (V36, P364, {'a': api(version=V36)}, [], False, []),
    (P364, P364, {'a': api(version=P364)}, [], False, []),
    (P364, P364, {'a': api(version=P364)}, ['ns/pdb'], False, []),
    (V35, P364, {'a': api()}, [], False, []),  # a minor to its newest patch
    (P364, V36, {'a': api(version=P364)}, [], False,
     [('cluster', 'downgrade'), ('a', 'newer')]),
])
def test_refusals(cluster, target, nodes, budgets, force, expected):
    problems = up.refusals(cluster, target, nodes, budgets, force)
    assert [what for what, _ in problems] == [what for what, _ in expected]
    for (_, reason), (_, part) in zip(problems, expected):
        assert part in reason


def test_refusal_error_names_hosts_and_step():
    error = up.refusal_error([('cluster', 'too far'), ('10.0.0.21', 'x'),
                              ('cluster', 'budgets')], '10.0.0.11')
    assert error.step == up.CHECK_STEP
    assert sorted(error.failures) == ['10.0.0.11', '10.0.0.21']
    assert 'too far; budgets' in str(error.failures['10.0.0.11'])
    assert 'nothing was changed' in str(error)
    assert exceptions.failure_of(error).host == '10.0.0.11, 10.0.0.21'


def facts(version, pkg, apiserver=None):
    return up.HostFacts(version, {name: pkg for name in up.PACKAGES},
                        apiserver)


OLD = facts(V35, '1.35.4-1.1', V35)
NEW = facts(V36, PKG36, V36)


@pytest.mark.parametrize('cluster, state, expected', [
    # Nothing done yet: the first Master applies.
    (V35, {M1: (OLD, V35), M2: (OLD, V35), W1: (OLD, V35)},
     [('apply', False), ('node', False), ('worker', False)]),
    # The apply ran, then the first Master's kubelet failed: it runs
    # `upgrade node` (harmless where apply ran), the rest follow.
    (V36, {M1: (up.HostFacts(V36, {'kubeadm': PKG36,
                                   'kubelet': '1.35.4-1.1',
                                   'kubectl': '1.35.4-1.1'}, V36), V35),
           M2: (OLD, V35), W1: (OLD, V35)},
     [('node', False), ('node', False), ('worker', False)]),
    # Interrupted on the second Master: the first is skipped.
    (V36, {M1: (NEW, V36), M2: (facts(V36, PKG36, V35), V35),
           W1: (OLD, V35)},
     [('node', True), ('node', False), ('worker', False)]),
    # Everything at the target: nothing left.
    (V36, {M1: (NEW, V36), M2: (NEW, V36), W1: (facts(V36, PKG36), V36)},
     [('node', True), ('node', True), ('worker', True)]),
    # A Worker whose kubelet restarted but kubectl was not held yet.
    (V36, {M1: (NEW, V36), M2: (NEW, V36),
           W1: (up.HostFacts(V36, {'kubeadm': PKG36, 'kubelet': PKG36,
                                   'kubectl': None}), V36)},
     [('node', True), ('node', True), ('worker', False)]),
])
def test_plan_upgrade(cluster, state, expected):
    api_nodes = {node.fixed_ip: up.ApiNode('n' + node.fixed_ip[-2:],
                                           node.fixed_ip, True, kubelet)
                 for node, (_, kubelet) in state.items()}
    host_facts = {node.address: host for node, (host, _) in state.items()}
    plan = up.plan_upgrade([M1, M2], [W1], cluster, V36, PKG36, api_nodes,
                           host_facts)
    assert [(step.action, step.done) for step in plan.steps] == expected
    assert [step.node for step in plan.steps] == [M1, M2, W1]
    assert len(plan.pending) == [done for _, done in expected].count(False)


AT_364 = facts(P364, PKG364, P364)


@pytest.mark.parametrize('cluster, state, expected', [
    # A patch release: the same path as a minor, apply first.
    (V36, {M1: (NEW, V36), M2: (NEW, V36), W1: (facts(V36, PKG36), V36)},
     [('apply', False), ('node', False), ('worker', False)]),
    # Stopped after the apply on the first Master: the others follow.
    (P364, {M1: (AT_364, P364), M2: (NEW, V36),
            W1: (facts(V36, PKG36), V36)},
     [('node', True), ('node', False), ('worker', False)]),
    # A package that keeps the cluster's version: nothing to do.
    (P364, {M1: (AT_364, P364), M2: (AT_364, P364),
            W1: (facts(P364, PKG364), P364)},
     [('node', True), ('node', True), ('worker', True)]),
])
def test_plan_of_a_patch_release_and_of_the_same_version(
        cluster, state, expected):
    api_nodes = {node.fixed_ip: up.ApiNode('n' + node.fixed_ip[-2:],
                                           node.fixed_ip, True, kubelet)
                 for node, (_, kubelet) in state.items()}
    host_facts = {node.address: host for node, (host, _) in state.items()}
    plan = up.plan_upgrade([M1, M2], [W1], cluster, P364, PKG364,
                           api_nodes, host_facts)
    assert [(step.action, step.done) for step in plan.steps] == expected
    assert len(plan.pending) == [done for _, done in expected].count(False)
    for step in plan.pending:
        assert 'v1.36.1' in step.reason or 'package kube' in step.reason


def test_plan_upgrade_refuses_a_node_the_cluster_lacks():
    with pytest.raises(exceptions.NodeStepError) as raised:
        up.plan_upgrade([M1], [W1], V35, V36, PKG36,
                        {M1.fixed_ip: api()}, {M1.address: OLD,
                                               W1.address: OLD})
    assert list(raised.value.failures) == [W1.address]


# The Worker's state after a run of the upgrade: its kubelet and facts,
# whether its Node is unschedulable, whether it carries the upgrade's mark.
AT_TARGET = (facts(V36, PKG36), V36)
BEFORE = (OLD, V35)


@pytest.mark.parametrize('worker, unschedulable, marked, expected', [
    # Upgraded, then the uncordon failed or the connection was cut after
    # the kubelet package: only the uncordon is left.
    (AT_TARGET, True, True, ('uncordon', False, up.CORDON_LEFT, False)),
    # Uncordoned by hand meanwhile, the mark still there: remove it.
    (AT_TARGET, False, True, ('uncordon', False, up.CORDON_LEFT, False)),
    # Cordoned and marked, stopped before its packages: the whole path.
    (BEFORE, True, True, ('worker', False, 'kubelet v1.35.4', False)),
    # The operator cordoned it, not the upgrade: done at the target,
    # and upgraded but left cordoned otherwise.
    (AT_TARGET, True, False, ('worker', True, '', True)),
    (BEFORE, True, False, ('worker', False, 'kubelet v1.35.4', True)),
    (AT_TARGET, False, False, ('worker', True, '', False)),
])
def test_a_worker_the_upgrade_cordoned_is_done_once_uncordoned(
        worker, unschedulable, marked, expected):
    api_nodes = {M1.fixed_ip: up.ApiNode('m1', M1.fixed_ip, True, V36),
                 W1.fixed_ip: up.ApiNode('w1', W1.fixed_ip, True, worker[1],
                                         unschedulable)}
    plan = up.plan_upgrade([M1], [W1], V36, V36, PKG36, api_nodes,
                           {M1.address: NEW, W1.address: worker[0]},
                           frozenset(['w1'] if marked else []))
    step = plan.steps[1]
    assert (step.action, step.done, step.reason.split(',')[0],
            step.keep_cordon) == expected
    if marked and expected[0] == 'worker':
        assert up.CORDON_LEFT in step.reason


def test_a_master_is_never_taken_for_a_cordoned_worker():
    api_nodes = {M1.fixed_ip: up.ApiNode('m1', M1.fixed_ip, True, V36,
                                         True)}
    plan = up.plan_upgrade([M1], [], V36, V36, PKG36, api_nodes,
                           {M1.address: NEW}, frozenset(['m1']))
    assert [(s.action, s.done, s.keep_cordon) for s in plan.steps] == [
        ('node', True, False)]


def test_driver_cordons_reads_the_upgrades_mark():
    listing = json.loads(nodes_json(
        ('w1', '192.168.0.21', True, 'v1.36.1', True),
        ('w2', '192.168.0.22', True, 'v1.36.1', True),
        ('w3', '192.168.0.23', True, 'v1.36.1', False)))
    listing['items'][0]['metadata']['annotations'] = {
        up.CORDON_ANNOTATION: 'v1.36.1', 'other': 'x'}
    listing['items'][1]['metadata']['annotations'] = {'other': 'x'}
    assert up.driver_cordons(json.dumps(listing)) == frozenset(['w1'])
    with pytest.raises(exceptions.ClusterInstallError):
        up.driver_cordons('{"items": [{}]}')


def test_cordon_and_uncordon_are_one_patch_each():
    # The operator guide names the mark.
    assert up.CORDON_ANNOTATION == 'kubernetes-mgmt-pv/cordoned-for-upgrade'

    def patch(argv):
        assert argv[:6] == ['patch', 'node', 'w1', '--type', 'merge', '-p']
        return json.loads(argv[6])

    assert patch(up.cordon_argv('w1', V36)) == {
        'metadata': {'annotations': {up.CORDON_ANNOTATION: 'v1.36.1'}},
        'spec': {'unschedulable': True}}
    # JSON merge patch: null removes the mark and the cordon.
    assert patch(up.uncordon_argv('w1')) == {
        'metadata': {'annotations': {up.CORDON_ANNOTATION: None}},
        'spec': {'unschedulable': None}}
