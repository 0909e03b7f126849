"""PodDisruptionBudgets: which cover the pods a drain evicts (tables) and
how the drains of one wave take turns on them (WaveGate, with a kubectl
that answers from a script)."""

import json
import threading
import types

import pytest

from kubernetes_mgmt_pv.cluster import budgets
from kubernetes_mgmt_pv import exceptions


def pod(name, node, labels=None, namespace='shop', owner=None, phase=None,
        mirror=False):
    meta = {'name': name, 'namespace': namespace, 'labels': labels or {}}
    if owner:
        meta['ownerReferences'] = [{'kind': owner, 'name': 'x'}]
    if mirror:
        meta['annotations'] = {budgets.MIRROR_ANNOTATION: 'hash'}
    return {'metadata': meta, 'spec': {'nodeName': node},
            'status': {'phase': phase or 'Running'}}


def budget(name, selector, allowed=0, namespace='shop'):
    return {'metadata': {'name': name, 'namespace': namespace},
            'spec': {'selector': selector},
            'status': {'disruptionsAllowed': allowed}}


def listing(*items):
    return json.dumps({'items': list(items)})


DB = {'matchLabels': {'app': 'db'}}


def test_blocking_budgets_are_found_by_their_selectors():
    pods = listing(pod('db-0', 'w1', {'app': 'db', 'tier': 'data'}),
                   pod('web-0', 'w1', {'app': 'web'}))
    found = listing(
        budget('db-budget', DB),
        budget('tier-budget', {'matchExpressions': [
            {'key': 'tier', 'operator': 'In', 'values': ['data']}]}),
        budget('relaxed', DB, allowed=1),
        budget('elsewhere', DB, namespace='other'),
        budget('web-budget', {'matchLabels': {'app': 'web'}}))
    assert budgets.blocking_budgets(pods, found, ['shop/db-0']) == [
        'shop/db-budget', 'shop/tier-budget']
    assert budgets.blocking_budgets('not json', '{}', ['shop/db-0']) == []


@pytest.mark.parametrize('pods, expected', [
    # A budget covers the pods its selector picks in its namespace.
    ([pod('db-1', 'w1', {'app': 'db'}), pod('db-2', 'w2', {'app': 'db'})],
     {'w1': ('shop/db',), 'w2': ('shop/db',)}),
    ([pod('db-1', 'w1', {'app': 'db'}, namespace='other')],
     {'w1': (), 'w2': ()}),
    ([pod('web-1', 'w1', {'app': 'web'})], {'w1': (), 'w2': ()}),
    # Pods a drain does not evict, and pods of other Nodes, do not count.
    ([pod('db-1', 'w1', {'app': 'db'}, owner='DaemonSet')],
     {'w1': (), 'w2': ()}),
    ([pod('db-1', 'w1', {'app': 'db'}, mirror=True)], {'w1': (), 'w2': ()}),
    ([pod('db-1', 'w1', {'app': 'db'}, phase='Succeeded')],
     {'w1': (), 'w2': ()}),
    ([pod('db-1', 'w3', {'app': 'db'})], {'w1': (), 'w2': ()}),
    ([pod('db-1', 'w1', {'app': 'db'}, owner='ReplicaSet')],
     {'w1': ('shop/db',), 'w2': ()}),
    # A name that is no Kubernetes name never reaches an argv.
    ([pod('DB;x', 'w1', {'app': 'db'})], {'w1': (), 'w2': ()}),
])
def test_coverage(pods, expected):
    covered = budgets.coverage(listing(*pods), listing(budget('db', DB)),
                               ['w1', 'w2'])
    assert covered.by_node == expected
    assert covered.allowed == {'shop/db': 0}


def test_coverage_names_the_pods_and_two_budgets_in_order():
    covered = budgets.coverage(
        listing(pod('db-2', 'w1', {'app': 'db'}),
                pod('db-1', 'w1', {'app': 'db'})),
        listing(budget('z', DB, allowed=1), budget('a', DB)), ['w1'])
    assert covered.by_node == {'w1': ('shop/a', 'shop/z')}
    assert covered.pods[('w1', 'shop/a')] == ('shop/db-1', 'shop/db-2')
    assert covered.allowed == {'shop/a': 0, 'shop/z': 1}


@pytest.mark.parametrize('output', ['', '{"kind": "Status"}',
                                    '{"items": [1]}'])
def test_a_listing_that_is_no_list_is_an_error(output):
    with pytest.raises(exceptions.ClusterInstallError):
        budgets.coverage(output, listing(), ['w1'])
    with pytest.raises(exceptions.ClusterInstallError):
        budgets.listed_any(output)


class ScriptedKubectl(object):
    """kubectl whose ``wait`` answers in turn from ``waits`` and whose
    ``get`` of a budget finds it unless ``deleted``."""

    def __init__(self, *waits, deleted=False):
        self.waits = list(waits)
        self.deleted = deleted
        self.calls = []

    def run(self, args, check=True, timeout=None):
        self.calls.append(args)
        if args[0] == 'wait':
            return types.SimpleNamespace(ok=self.waits.pop(0), stdout='')
        return types.SimpleNamespace(
            ok=True, stdout='' if self.deleted else 'pdb/db\n')


def gate(allowed, nodes=('w1', 'w2'), timeout=30):
    covered = budgets.Coverage(
        {node: ('shop/db',) for node in nodes},
        {(node, 'shop/db'): ('shop/db-%s' % node,) for node in nodes},
        {'shop/db': allowed})
    return budgets.WaveGate(covered, timeout)


def test_the_first_drain_trusts_the_listing_the_next_watches():
    wave = gate(allowed=1)
    kubectl = ScriptedKubectl(True)
    drained = []
    for node in ('w1', 'w2'):
        wave.drain(kubectl, node, drained.append)
    [watch] = kubectl.calls
    assert watch[:2] == ['wait', '--for=condition=DisruptionAllowed']
    assert watch[3:] == ['-n', 'shop', 'poddisruptionbudget/db']
    assert len(drained) == 2 and all(1 <= left <= 30 for left in drained)


def test_a_budget_allowing_nothing_now_is_watched_first():
    kubectl = ScriptedKubectl(True)
    gate(allowed=0).drain(kubectl, 'w1', lambda left: None)
    assert [call[0] for call in kubectl.calls] == ['wait']


def test_a_node_without_budgets_drains_at_once():
    kubectl = ScriptedKubectl()
    assert gate(0, nodes=('w1',)).drain(kubectl, 'w2', lambda left: left) \
        == 30
    assert kubectl.calls == []


def test_a_budget_that_stays_closed_names_itself_the_node_and_pods():
    kubectl = ScriptedKubectl(False)
    with pytest.raises(exceptions.ClusterInstallError) as raised:
        gate(allowed=0, timeout=5).drain(
            kubectl, 'w2', lambda left: pytest.fail('drained'))
    message = str(raised.value)
    for named in ('Node w2', 'within 5s', 'PodDisruptionBudget shop/db',
                  'shop/db-w2', 'drain_force', 'cordoned'):
        assert named in message
    assert kubectl.calls[-1][:1] == ['get']


def test_a_budget_deleted_during_the_watch_lets_the_drain_through():
    kubectl = ScriptedKubectl(False, deleted=True)
    drained = []
    gate(allowed=0).drain(kubectl, 'w1', drained.append)
    assert len(drained) == 1


def test_two_drains_of_one_budget_take_turns():
    """While w1 drains it holds the budget: w2 waits for its turn, then
    watches the budget (w1 took the disruption it allowed)."""
    wave = gate(allowed=1)
    kubectl = ScriptedKubectl(True)
    draining, release = threading.Event(), threading.Event()
    order = []

    def drain_w1(left):
        order.append('w1 drains')
        draining.set()
        assert release.wait(30)
        order.append('w1 drained')

    first = threading.Thread(target=wave.drain,
                             args=(kubectl, 'w1', drain_w1))
    first.start()
    assert draining.wait(30)
    second = threading.Thread(target=wave.drain, args=(
        kubectl, 'w2', lambda left: order.append('w2 drains')))
    second.start()
    second.join(0.2)
    assert second.is_alive() and kubectl.calls == []
    release.set()
    first.join(30)
    second.join(30)
    assert order == ['w1 drains', 'w1 drained', 'w2 drains']
    assert [call[0] for call in kubectl.calls] == ['wait']


def test_a_turn_not_had_within_the_timeout_is_the_budgets_error():
    wave = gate(allowed=1, timeout=1)
    release = threading.Event()
    first = threading.Thread(target=wave.drain, args=(
        ScriptedKubectl(), 'w1', lambda left: release.wait(30)))
    first.start()
    with pytest.raises(exceptions.ClusterInstallError) as raised:
        wave.drain(ScriptedKubectl(), 'w2', lambda left: None)
    release.set()
    first.join(30)
    assert 'PodDisruptionBudget shop/db' in str(raised.value)
    assert 'Node w2' in str(raised.value)
