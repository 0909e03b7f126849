"""The cluster's step sequence, as tables: the install's HA rounds, etcd
steps and per-VM preparations, and what a removal does to each node. No
host, no Heat."""

import pytest

from kubernetes_mgmt_pv.cluster import cluster
from kubernetes_mgmt_pv.cluster import cluster_sequence as sequence
from kubernetes_mgmt_pv.cluster import etcd
from kubernetes_mgmt_pv import exceptions
from kubernetes_mgmt_pv.openstack import vnf_topology
from kubernetes_mgmt_pv.remote import managed_block
from kubernetes_mgmt_pv.request import param_model

ACCESS = param_model.NodeAccess('cp', 'cp', 'ubuntu', 'secret')


def node(role, address):
    return vnf_topology.Node(role, address, address, address, 'cp', None,
                             ACCESS)


M1, M2, M3 = (node('master', '10.0.0.1%d' % n) for n in (1, 2, 3))
W1, W2 = (node('worker', '10.0.0.2%d' % n) for n in (1, 2))
NAMES = {M1: 'm1', M2: 'm2', M3: 'm3', W1: 'w1', W2: 'w2'}
ALL_API = {'m1': '10.0.0.11', 'm2': '10.0.0.12', 'm3': '10.0.0.13',
           'w1': '10.0.0.21', 'w2': '10.0.0.22'}
VIP = '10.0.0.100'


def hosts_file(nodes):
    lines = ['%s %s' % (n.fixed_ip, NAMES[n]) for n in nodes]
    return managed_block.with_block(b'127.0.0.1 localhost\n', lines)


def member(n, member_id=None):
    return etcd.Member(member_id or NAMES[n], NAMES[n],
                       ('https://%s:2380' % n.fixed_ip,))


def install(joined=(), api=None, masters=(M1, M2, M3), workers=(W1, W2),
            etcd_members=None, vip=VIP, hosts=b''):
    nodes = list(masters) + list(workers)
    facts = {n.address: cluster.NodeFacts(NAMES[n], n in joined, hosts)
             for n in nodes}
    return sequence.plan_install_sequence(
        list(masters), list(workers), facts, facts, api or {}, etcd_members,
        vip)


def named(*nodes):
    return tuple((NAMES[n], n.fixed_ip) for n in nodes)


CONFIGURED = dict(joined=(M1, M2, M3, W1, W2), api=ALL_API,
                  etcd_members=[member(M1), member(M2), member(M3)])


# -- the install sequence -----------------------------------------------------

@pytest.mark.parametrize('case, kwargs, rounds, stale_etcd, joins', [
    ('fresh HA cluster: the leader serves first, each Master joins it',
     {}, [named(M1), named(M1, M2), named(M1, M2, M3)], True, (M2, M3)),
    ('configured HA cluster: every Master serves, nobody joins',
     CONFIGURED, [named(M1, M2, M3)], False, ()),
    ('healed third Master: the others serve until it has joined',
     dict(joined=(M1, M2, W1, W2), api=ALL_API,
          etcd_members=[member(M1), member(M2), member(M3)]),
     [named(M1, M2), named(M1, M2, M3)], True, (M3,)),
    ('half-joined second Master: out of haproxy until it joins again',
     dict(CONFIGURED, etcd_members=[member(M1), member(M3)]),
     [named(M1, M3), named(M1, M2, M3)], True, (M2,)),
    ('re-created first Master: a member leads, the first joins last',
     dict(joined=(M2, M3, W1, W2), api=ALL_API,
          etcd_members=[member(M2), member(M3)]),
     [named(M2, M3), named(M1, M2, M3)], True, (M1,)),
    ('no VIP with one Master: no HA round, no etcd step',
     dict(masters=(M1,), vip=None), [], False, ()),
])
def test_install_sequence(case, kwargs, rounds, stale_etcd, joins):
    result = install(**kwargs)
    assert list(result.ha_rounds) == rounds, case
    assert result.remove_stale_etcd is stale_etcd, case
    assert result.plan.join_masters == joins, case


@pytest.mark.parametrize('masters, vip, expected', [
    ((M1, M2, M3), VIP, {'m1': '10.0.0.11', 'm2': '10.0.0.12',
                         'm3': '10.0.0.13'}),
    ((M1,), None, {}),  # one Master: etcd is not checked
])
def test_etcd_is_checked_with_several_masters(masters, vip, expected):
    result = install(masters=masters, vip=vip)
    assert result.etcd_expected == expected
    assert result.ha_masters == (named(*masters) if vip else ())


def test_every_node_is_waited_for_by_its_node_name():
    assert install().ready_names == ('m1', 'm2', 'm3', 'w1', 'w2')


@pytest.mark.parametrize('case, kwargs, upload, reset, hosts_changed', [
    ('fresh VMs: script everywhere, /etc/hosts written', {},
     {M1, M2, M3, W1, W2}, {}, True),
    ('configured cluster: the leader runs the script again, nothing else',
     dict(CONFIGURED, hosts=hosts_file((M1, M2, M3, W1, W2))),
     {M1}, {}, False),
    ('a Worker joined to a cluster that is gone is reset',
     dict(joined=(M1, W1), api={'m1': '10.0.0.11'}, masters=(M1,),
          vip=None), {M1, W1, W2}, {W1: 'its cluster does not know it'},
     True),
    ('a half-joined Master is reset and says why',
     dict(CONFIGURED, etcd_members=[member(M1), member(M3)]),
     {M1, M2}, {M2: 'half-joined: not an etcd member'}, True),
])
def test_preparations(case, kwargs, upload, reset, hosts_changed):
    result = install(**kwargs)
    by_node = {p.node: p for p in result.preparations}
    assert set(by_node) == {M1, M2, M3, W1, W2} & set(
        kwargs.get('masters', (M1, M2, M3)) + (W1, W2)), case
    assert {n for n, p in by_node.items() if p.upload_script} == upload
    assert {n: p.reset for n, p in by_node.items() if p.reset} == reset
    assert all((p.hosts_file is not None) is hosts_changed
               for p in by_node.values()), case


def test_a_vm_is_renamed_when_its_name_is_taken():
    gathered = {n.address: cluster.NodeFacts('workernode', False)
                for n in (W1, W2)}
    gathered.update({M1.address: cluster.NodeFacts('m1', False)})
    facts = sequence.named_facts([M1, W1, W2], gathered, {})
    result = sequence.plan_install_sequence(
        [M1], [W1, W2], gathered, facts, {}, None, None)
    renames = {p.node: (p.was_named, p.host_name)
               for p in result.preparations if p.host_name}
    assert renames == {W1: ('workernode', 'worker-10-0-0-21'),
                       W2: ('workernode', 'worker-10-0-0-22')}


@pytest.mark.parametrize('masters, joined, api, asked', [
    ((M1,), (M1,), {'m1': '10.0.0.11'}, []),  # one Master: no etcd
    ((M1, M2), (), {}, []),  # no cluster yet
    ((M1, M2, M3), (M1, M2, M3), ALL_API, [M1, M2, M3]),
    ((M1, M2, M3), (M2, M3), ALL_API, [M2, M3]),  # M1 re-created
    ((M1, M2), (M1, M2), {'m1': '10.0.0.11'}, [M1]),  # M2 has no Node
])
def test_etcd_is_asked_on_masters_with_their_node(masters, joined, api,
                                                  asked):
    facts = {n.address: cluster.NodeFacts(NAMES[n], n in joined)
             for n in masters}
    assert sequence.etcd_askable(list(masters), facts, api) == asked


# -- removal ------------------------------------------------------------------

CLUSTER_NODES = [M1, M2, M3, W1, W2]


@pytest.mark.parametrize('masters, leaving, staying, staying_masters', [
    ((M1, M2, M3), [W1], (M1, M2, M3, W2), (M1, M2, M3)),
    ((M1, M2, M3), [M1], (M2, M3, W1, W2), (M2, M3)),
    ((M1, M2, M3), [M1, M2], (M3, W1, W2), (M3,)),
    ((M1,), [W1, W2], (M1,), (M1,)),
])
def test_who_stays(masters, leaving, staying, staying_masters):
    nodes = list(masters) + [W1, W2]
    split = sequence.split_leaving(list(masters), nodes, leaving)
    assert (split.staying, split.staying_masters) == (staying,
                                                      staying_masters)


@pytest.mark.parametrize('masters, leaving', [
    ((M1,), [M1]),
    ((M1, M2), [M1, M2]),
    ((M1, M2), [M1, M2, W1]),
])
def test_taking_out_every_master_is_refused(masters, leaving):
    with pytest.raises(exceptions.ClusterInstallError,
                       match='cannot take out the only Master'):
        sequence.split_leaving(list(masters), list(masters) + [W1, W2],
                               leaving)


@pytest.mark.parametrize('joined, leader', [
    ((M1, M2, M3), M1),
    ((M2, M3), M2),  # the first Master is not in the cluster (yet)
    ((M3,), M3),
])
def test_the_first_joined_staying_master_leads(joined, leader):
    facts = {n.address: cluster.NodeFacts(NAMES[n], n in joined)
             for n in (M1, M2, M3)}
    assert sequence.removal_leader([M1, M2, M3], facts) is leader


def test_no_joined_staying_master_is_refused():
    facts = {n.address: cluster.NodeFacts(NAMES[n], False)
             for n in (M1, M2)}
    with pytest.raises(exceptions.ClusterInstallError,
                       match='no staying Master is in the cluster'):
        sequence.removal_leader([M1, M2], facts)


def staying_facts(split, **leaving):
    """NodeFacts of the staying VMs, and of the leaving ones given (by
    their names in NAMES) with the host name each reports."""
    facts = {n.address: cluster.NodeFacts(NAMES[n], True)
             for n in split.staying}
    by_name = {name: n for n, name in NAMES.items()}
    facts.update({by_name[name].address: cluster.NodeFacts(hostname, True)
                  for name, hostname in leaving.items()})
    return facts


@pytest.mark.parametrize('leaving, api, undrainable, expected', [
    # A Worker with its Node: drained, deleted.
    ([W1], ALL_API, {}, [(W1, 'w1', None, False, True)]),
    # Its VM is down: not drained, still deleted.
    ([W1], ALL_API, {'w1': 'Ready is Unknown'},
     [(W1, 'w1', 'Ready is Unknown', False, False)]),
    # Its Node is gone already (a re-run): nothing to drain or delete.
    ([W2], {'m1': '10.0.0.11'}, {}, [(W2, None, None, False, False)]),
    # A Master leaves haproxy and etcd too; the Node found by address: a
    # dead VM cannot name its Node, and no staying VM names this one.
    ([M2], dict(ALL_API, m2=None, other='10.0.0.12'), {},
     [(M2, 'other', None, True, True)]),
    ([M3, W2], ALL_API, {'w2': 'tainted'},
     [(M3, 'm3', None, True, True), (W2, 'w2', 'tainted', False, False)]),
])
def test_node_removals(leaving, api, undrainable, expected):
    split = sequence.split_leaving([M1, M2, M3], CLUSTER_NODES, leaving)
    result = sequence.plan_removals(split, leaving, api, undrainable,
                                    staying_facts(split))
    assert [(r.node, r.name, r.undrainable, r.master, r.drain)
            for r in result.removals] == expected
    assert result.staying == split.staying


def test_a_leaving_vm_that_answers_names_its_node():
    split = sequence.split_leaving([M1, M2, M3], CLUSTER_NODES, [W1])
    result = sequence.plan_removals(split, [W1], ALL_API, {},
                                    staying_facts(split, w1='W1'))
    assert [(r.node, r.name) for r in result.removals] == [(W1, 'w1')]


# (leaving, API Nodes, the leaving VMs that answer {name: host name},
# the refusal's words): a Node found at a leaving VM's address is drained
# and deleted only when that VM names it, or, when the VM is down, no
# staying VM does.
REMOVALS_REFUSED = {
    'another Worker\'s Node reports the address of a Worker that answers':
    ([W1], dict(ALL_API, w1=None, w2='10.0.0.21'), {'w1': 'w1'},
     "VM 10.0.0.21 reports host name 'w1', but Node w2 reports its "
     "address"),
    'a Worker that answers with another host name': (
        [W1], ALL_API, {'w1': 'worker-10-0-0-21'},
        "VM 10.0.0.21 reports host name 'worker-10-0-0-21', but Node w1 "
        "reports its address"),
    'a staying Worker\'s Node reports the address of a dead Worker': (
        [W1], dict(ALL_API, w1=None, w2='10.0.0.21'), {},
        "Node w2 reports the address of VM 10.0.0.21, but it is the Node "
        "of VM 10.0.0.22 (host name 'w2')"),
    'a staying Worker\'s Node reports the address of a dead Master': (
        [M2], dict(ALL_API, m2=None, w2='10.0.0.12'), {},
        "Node w2 reports the address of VM 10.0.0.12, but it is the Node "
        "of VM 10.0.0.22 (host name 'w2')"),
}


@pytest.mark.parametrize('leaving, api, answering, refusal',
                         list(REMOVALS_REFUSED.values()),
                         ids=list(REMOVALS_REFUSED))
def test_a_removal_takes_no_other_vms_node(leaving, api, answering, refusal):
    split = sequence.split_leaving([M1, M2, M3], CLUSTER_NODES, leaving)
    with pytest.raises(exceptions.ClusterInstallError) as caught:
        sequence.plan_removals(split, leaving, api, {},
                               staying_facts(split, **answering))
    assert refusal in str(caught.value)
    assert str(caught.value).endswith('nothing was changed')


ETCD = [etcd.Member('a1', 'm1', ('https://10.0.0.11:2380',)),
        etcd.Member('a2', 'm2', ('https://10.0.0.12:2380',)),
        etcd.Member('a3', '', ('https://10.0.0.13:2380',))]


@pytest.mark.parametrize('removal, member_id', [
    (sequence.NodeRemoval(M2, 'm2', master=True), 'a2'),
    # The Node is gone: matched by the peer URL.
    (sequence.NodeRemoval(M2, None, master=True), 'a2'),
    # An unnamed (never started) member, by its peer URL.
    (sequence.NodeRemoval(M3, None, master=True), 'a3'),
    # Not a member (any more): nothing to remove.
    (sequence.NodeRemoval(node('master', '10.0.0.19'), None, master=True),
     None),
])
def test_the_leaving_masters_etcd_member(removal, member_id):
    assert sequence.leaving_member(ETCD, removal) == member_id


def test_plans_are_frozen():
    result = install()
    with pytest.raises(AttributeError):
        result.plan = None
    with pytest.raises(AttributeError):
        result.preparations[0].reset = 'x'
