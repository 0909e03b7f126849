"""The order of the cluster's steps, as pure plans of gathered facts.

``cluster`` decides who joins; this module decides the sequence around
it: the names every VM gets, what each VM needs before kubeadm runs, the
haproxy backends of each HA round, the etcd steps of an install, and what
a node removal does to each leaving node. ``cluster_workflow`` gathers the
facts and applies these plans; the check mode (``check_mode``) prints
them. Nothing here touches a host.
"""

import dataclasses

from kubernetes_mgmt_pv.cluster import cluster
from kubernetes_mgmt_pv.cluster import etcd
from kubernetes_mgmt_pv.cluster import node_identity
from kubernetes_mgmt_pv import exceptions
from kubernetes_mgmt_pv.openstack import vnf_topology
from kubernetes_mgmt_pv.remote import managed_block

HOSTS_FILE = '/etc/hosts'


@dataclasses.dataclass(frozen=True)
class Preparation(object):
    """What one VM needs before the install script runs on it."""
    node: object  # vnf_topology.Node
    host_name: str = None  # the name to set; None: it has it already
    was_named: str = ''  # its host name before
    hosts_lines: tuple = ()  # its /etc/hosts block
    hosts_current: bytes = b''  # its /etc/hosts as gathered
    upload_script: bool = False
    reset: str = None  # why kubeadm reset runs; None: it does not

    @property
    def hosts_file(self):
        """The new /etc/hosts content, or None when its block holds the
        lines already; refuses a file whose block is broken."""
        return managed_block.planned_content(
            HOSTS_FILE, self.hosts_current, self.hosts_lines)


@dataclasses.dataclass(frozen=True)
class InstallSequence(object):
    """The install in order: prepare every VM, configure HA with the
    first round's backends, delete stale Nodes, run the leader's script,
    remove stale etcd members, join the Masters one by one (each followed
    by the next HA round), join the Workers, wait, check etcd."""
    plan: object  # cluster.InstallPlan
    preparations: tuple  # Preparation of every node
    ha_masters: tuple  # (Node name, address) of every Master; () no VIP
    # haproxy backends ((name, address), ...) of each HA configuration:
    # before the leader's script, then after each joining Master.
    ha_rounds: tuple
    remove_stale_etcd: bool  # before the first Master joins
    etcd_expected: dict  # {Node name: address} checked at the end; {}: not
    ready_names: tuple  # the Nodes waited for


@dataclasses.dataclass(frozen=True)
class NodeRemoval(object):
    """What taking one node out of the cluster does, on the leader."""
    node: object  # vnf_topology.Node
    name: str = None  # its Node's name; None: the Node is gone already
    undrainable: str = None  # why it is not drained (its VM is down)
    master: bool = False  # leaves haproxy and etcd too

    @property
    def drain(self):
        return self.name is not None and self.undrainable is None


@dataclasses.dataclass(frozen=True)
class RemovalPlan(object):
    """A removal: who stays, and each leaving node's NodeRemoval."""
    staying: tuple
    staying_masters: tuple
    removals: tuple = ()


def named_facts(nodes, gathered, api_nodes):
    """NodeFacts by address with every VM as it will be named
    (``cluster.host_names``), refusing invalid or colliding names."""
    names = cluster.host_names(nodes, gathered, api_nodes)
    named = {address: dataclasses.replace(own, hostname=names[address])
             for address, own in gathered.items()}
    cluster.check_node_names([(node, named[node.address]) for node in nodes])
    return named


def etcd_askable(masters, facts, api_nodes):
    """The Masters etcd's member list is asked on, in turn: those with
    their Node (a half-joined one runs no member); none with one Master."""
    if len(masters) < 2:
        return []
    return [node for node in masters
            if cluster.has_node(node, facts, api_nodes)]


def preparation(node, gathered, named, lines, plan):
    """The Preparation of ``node`` (``gathered``: its own NodeFacts,
    ``named``: as it will be named; ``lines``: the /etc/hosts block)."""
    reset = None
    if node in plan.reset:
        reset = ('half-joined: not an etcd member'
                 if node in plan.half_joined else
                 'its cluster does not know it')
    rename = gathered.hostname != named.hostname
    return Preparation(
        node, host_name=named.hostname if rename else None,
        was_named=gathered.hostname,
        hosts_lines=tuple(lines), hosts_current=gathered.hosts_file,
        upload_script=node in plan.script_nodes, reset=reset)


def ha_rounds(masters, facts, plan):
    """haproxy's backends at each HA round: the Masters whose API server
    runs (the leader and the members), then one more per joining Master
    once it has joined."""
    def named(nodes):
        return tuple((facts[node.address].node_name, node.fixed_ip)
                     for node in masters if node in nodes)

    serving = [node for node in masters
               if node is plan.leader or node in plan.members]
    rounds = [named(serving)]
    for node in plan.join_masters:
        serving.append(node)
        rounds.append(named(serving))
    return tuple(rounds)


def ha_members(masters, facts):
    """(Node name, address) of each Master, as haproxy and keepalived
    name them."""
    return tuple((facts[node.address].node_name, node.fixed_ip)
                 for node in masters)


def plan_install_sequence(masters, workers, gathered, facts, api_nodes,
                          etcd_members, vip):
    """The InstallSequence of the Masters and Workers.

    ``gathered``: NodeFacts by address as found; ``facts``: as
    ``named_facts`` names them; ``etcd_members``: see
    ``cluster.plan_install``; ``vip``: the Masters' VIP, or None.
    """
    nodes = list(masters) + list(workers)
    plan = cluster.plan_install(masters, workers, facts, api_nodes,
                                etcd_members)
    lines = cluster.hosts_lines([(node, facts[node.address])
                                 for node in nodes])
    several = len(masters) > 1
    return InstallSequence(
        plan=plan,
        preparations=tuple(preparation(
            node, gathered[node.address], facts[node.address], lines, plan)
            for node in nodes),
        ha_masters=ha_members(masters, facts) if vip else (),
        ha_rounds=ha_rounds(masters, facts, plan) if vip else (),
        remove_stale_etcd=several and bool(plan.join_masters),
        etcd_expected={facts[node.address].node_name: node.fixed_ip
                       for node in masters} if several else {},
        ready_names=tuple(facts[node.address].node_name for node in nodes))


def split_leaving(masters, cluster_nodes, leaving):
    """A RemovalPlan without removals yet: who stays. Taking out every
    Master is refused: the cluster would be lost."""
    staying = tuple(node for node in cluster_nodes if node not in leaving)
    staying_masters = tuple(node for node in masters if node in staying)
    leaving_masters = [node for node in masters if node in leaving]
    if leaving_masters and not staying_masters:
        raise exceptions.ClusterInstallError(
            'cannot take out the only Master (%s): its cluster would be '
            'lost; heal the entire VNF instead' % ', '.join(
                node.address for node in leaving_masters))
    return RemovalPlan(staying, staying_masters)


def removal_leader(staying_masters, facts):
    """The staying Master the removal runs kubectl and etcdctl on: the
    first one in the cluster."""
    joined = [node for node in staying_masters if facts[node.address].joined]
    if not joined:
        raise exceptions.ClusterInstallError(
            'no staying Master is in the cluster: nothing to remove the '
            'nodes from')
    return joined[0]


def leaving_node_name(node, api_nodes, facts, staying):
    """The name of the Node a leaving VM takes with it (None: gone), as
    ``node_identity`` checks it: the Node at its address must be the one
    the VM names when it answered (``facts``: NodeFacts by address), and
    in any case not one a ``staying`` VM names. A VM that is down cannot
    vouch for its Node, and the driver records no Node names: then any
    other Node at its address is its own or a lying kubelet's."""
    name = cluster.name_at(api_nodes, node.fixed_ip)
    if name is None:
        return None
    if node.address in facts:
        node_identity.check_own_node(node, name,
                                     facts[node.address].hostname)
    node_identity.check_not_taken(node, name, {
        other.address: facts[other.address].hostname for other in staying
        if other.address in facts})
    return name


def plan_removals(split, leaving, api_nodes, undrainable, facts):
    """``split`` (see ``split_leaving``) with the NodeRemoval of each
    leaving node, from the Nodes the cluster knows ({name: InternalIP}),
    those that cannot be drained ({name: why}) and the NodeFacts (by
    address) of the staying VMs and of the leaving ones that answered
    (see ``leaving_node_name``)."""
    removals = []
    for node in leaving:
        name = leaving_node_name(node, api_nodes, facts, split.staying)
        removals.append(NodeRemoval(
            node, name, undrainable.get(name) if name else None,
            node.role == vnf_topology.MASTER))
    return dataclasses.replace(split, removals=tuple(removals))


def leaving_member(members, removal):
    """The etcd member id of a leaving Master, or None: by its Node name
    and address, or by its peer URL when its Node is gone already."""
    if removal.name is not None:
        return etcd.member_of(members, removal.name, removal.node.fixed_ip)
    return next(iter(etcd.stale_members(members, [removal.node.fixed_ip])),
                None)
