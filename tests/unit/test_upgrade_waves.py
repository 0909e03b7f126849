"""The Workers of the minor upgrade in waves: the request's and the
option's upgrade_max_unavailable, the wave size, the plan's waves."""

import collections
import re

from oslo_config import cfg
import pytest

from kubernetes_mgmt_pv.cluster import upgrade_plan as up
from kubernetes_mgmt_pv import config
from kubernetes_mgmt_pv import exceptions
from kubernetes_mgmt_pv.request import lcm_requests

Node = collections.namedtuple('Node', 'address fixed_ip')
M1, M2 = Node('10.0.0.11', '192.168.0.11'), Node('10.0.0.12', '192.168.0.12')
WORKERS = tuple(Node('10.0.0.2%d' % i, '192.168.0.2%d' % i)
                for i in range(1, 6))
W1, W2, W3, W4, W5 = WORKERS
V35, V36 = (1, 35, 4), (1, 36, 1)
PKG35, PKG36 = '1.35.4-1.1', '1.36.1-1.1'
PATH = 'additionalParams.upgrade_max_unavailable'


@pytest.mark.parametrize('value, expected', [
    (1, 1), (3, 3), ('3', 3), ('25%', '25%'), ('100%', '100%'),
    ('1%', '1%'), (' 2 ', 2),
])
def test_max_unavailable_accepts_a_count_or_a_percentage(value, expected):
    assert lcm_requests.max_unavailable(value, PATH) == expected
    assert lcm_requests.request_max_unavailable(
        {lcm_requests.MAX_UNAVAILABLE: value}) == expected


@pytest.mark.parametrize('value', [
    0, -1, '0', '0%', '101%', '25.5%', 2.5, True, '', 'all', '1e3', '%',
    '25 %', [2], {'count': 2}, '3%%', '1234567',
])
def test_max_unavailable_refuses_anything_else_naming_its_path(value):
    with pytest.raises(exceptions.ParameterErrors) as raised:
        lcm_requests.request_max_unavailable(
            {lcm_requests.MAX_UNAVAILABLE: value})
    assert [error.path for error in raised.value.errors] == [PATH]


def test_max_unavailable_unset_or_null_takes_the_option():
    assert lcm_requests.request_max_unavailable({}) is None
    assert lcm_requests.request_max_unavailable(
        {lcm_requests.MAX_UNAVAILABLE: None}) is None
    assert lcm_requests.request_max_unavailable(None) is None


def option():
    [found] = [opt for opt in config.cluster_opts
               if opt.name == 'upgrade_max_unavailable']
    return found


@pytest.mark.parametrize('value', [
    '1', '3', '999999', '1%', '10%', '99%', '100%', '0', '0%', '101%',
    '2.5', '-1', 'x', '10 %', '',
])
def test_the_option_takes_what_the_request_takes(value):
    try:
        lcm_requests.max_unavailable(value, PATH)
        accepted = True
    except exceptions.ParameterErrors:
        accepted = False
    assert bool(re.match(option().type.regex.pattern, value)) == accepted


def test_the_option_defaults_to_a_tenth_of_the_workers():
    conf = cfg.ConfigOpts()
    config.register_opts(conf)
    conf([])
    assert config.options(conf).upgrade_max_unavailable == '10%'
    assert lcm_requests.max_unavailable(option().default, 'o') == '10%'
    with pytest.raises(ValueError):
        conf.set_override('upgrade_max_unavailable', '0%', config.GROUP_NAME)


@pytest.mark.parametrize('max_unavailable, workers, size', [
    (1, 5, 1), (2, 5, 2), (5, 5, 5), (10, 5, 5),
    ('10%', 5, 1), ('10%', 32, 4),  # rounded up
    ('10%', 100, 10), ('25%', 8, 2), ('25%', 7, 2), ('40%', 5, 2),
    ('1%', 250, 3), ('100%', 4, 4), ('1%', 1, 1), (3, 0, 1),
])
def test_wave_size(max_unavailable, workers, size):
    assert up.wave_size(max_unavailable, workers) == size


def facts(version, pkg, apiserver=None):
    return up.HostFacts(version, {name: pkg for name in up.PACKAGES},
                        apiserver)


# A node's state: (HostFacts, its Node's kubelet); Masters' apiserver.
BEFORE = (facts(V35, PKG35, V35), V35)
MASTER_DONE = (facts(V36, PKG36, V36), V36)
WORKER_DONE = (facts(V36, PKG36), V36)
# Packages at the target, the kubelet not restarted yet: still upgraded.
OLDER_KUBELET = (facts(V36, PKG36), V35)
# An older patch of the target's minor.
OLDER_PATCH = (facts(V36, PKG36), (1, 36, 0))


def plan(max_unavailable, state=None, cordoned=(), marked=()):
    """The plan of M1, M2 and W1..W5; ``state`` {node: (facts,
    kubelet)} for the nodes not BEFORE."""
    state = {**dict.fromkeys((M1, M2) + WORKERS, BEFORE), **(state or {})}
    api_nodes = {node.fixed_ip: up.ApiNode(
        'n' + node.fixed_ip[-2:], node.fixed_ip, True, kubelet,
        node in cordoned) for node, (_, kubelet) in state.items()}
    host_facts = {node.address: host for node, (host, _) in state.items()}
    masters_done = state[M1] == MASTER_DONE
    return up.plan_upgrade(
        [M1, M2], list(WORKERS), V36 if masters_done else V35, V36, PKG36,
        api_nodes, host_facts,
        frozenset('n' + node.fixed_ip[-2:] for node in marked),
        max_unavailable)


def waves(found):
    return [[(step.node, step.action) for step in wave]
            for wave in found.waves]


M1_APPLY, M2_NODE = [(M1, 'apply')], [(M2, 'node')]


@pytest.mark.parametrize('max_unavailable, state, expected', [
    # One at a time: every node alone, in order.
    (1, {}, [M1_APPLY, M2_NODE] + [[(w, 'worker')] for w in WORKERS]),
    # Masters alone, Workers in pairs, the last wave what is left.
    (2, {}, [M1_APPLY, M2_NODE, [(W1, 'worker'), (W2, 'worker')],
             [(W3, 'worker'), (W4, 'worker')], [(W5, 'worker')]]),
    ('40%', {}, [M1_APPLY, M2_NODE, [(W1, 'worker'), (W2, 'worker')],
                 [(W3, 'worker'), (W4, 'worker')], [(W5, 'worker')]]),
    # More than there are Workers: all of them at once; never the Masters.
    (10, {}, [M1_APPLY, M2_NODE, [(w, 'worker') for w in WORKERS]]),
    ('10%', {}, [M1_APPLY, M2_NODE] + [[(w, 'worker')] for w in WORKERS]),
    # Nodes at the target are left out; the size stays a share of all
    # the Workers; the pending ones close up.
    (2, {M1: MASTER_DONE, W2: WORKER_DONE, W3: WORKER_DONE},
     [[(M2, 'node')], [(W1, 'worker'), (W4, 'worker')], [(W5, 'worker')]]),
    ('40%', {M1: MASTER_DONE, M2: MASTER_DONE, W1: WORKER_DONE,
             W2: WORKER_DONE, W3: WORKER_DONE, W4: WORKER_DONE},
     [[(W5, 'worker')]]),
    # Everything done: no wave.
    (3, {M1: MASTER_DONE, M2: MASTER_DONE,
         **dict.fromkeys(WORKERS, WORKER_DONE)}, []),
    # A kubelet older than the target (not restarted yet, or an older
    # patch) is still upgraded, in its place.
    (3, {M1: MASTER_DONE, M2: MASTER_DONE, W1: WORKER_DONE,
         W2: OLDER_KUBELET, W3: WORKER_DONE, W4: OLDER_PATCH,
         W5: WORKER_DONE}, [[(W2, 'worker'), (W4, 'worker')]]),
])
def test_plan_waves(max_unavailable, state, expected):
    found = plan(max_unavailable, state)
    assert waves(found) == expected
    # Every pending step runs once, in the plan's order.
    assert [step for wave in found.waves for step in wave] == list(
        found.pending)


def test_cordoned_workers_in_waves():
    """An operator's cordon is kept, the upgrade's own (the mark) is
    only lifted when the Worker is at the target; both ride in waves."""
    found = plan(2, {M1: MASTER_DONE, M2: MASTER_DONE, W1: WORKER_DONE,
                     W2: WORKER_DONE}, cordoned=(W2, W3, W4),
                 marked=(W2, W4))
    assert [[(step.node, step.action, step.keep_cordon) for step in wave]
            for wave in found.waves] == [
        [(W2, 'uncordon', False), (W3, 'worker', True)],
        [(W4, 'worker', False), (W5, 'worker', False)]]
