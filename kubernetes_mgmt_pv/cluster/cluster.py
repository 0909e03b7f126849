"""Decisions of the Kubernetes cluster half, as pure functions of facts.

Nothing here touches a host: ``cluster_workflow`` gathers the facts (what
each VM is, which Nodes the API server knows), asks these functions what
to do and runs it. The install script's command line and output are the
contract documented in the operator guide ("The install script contract").
"""

import base64
import collections
import dataclasses
import ipaddress
import json
import re

from kubernetes_mgmt_pv import admin_kubectl
from kubernetes_mgmt_pv.cluster import etcd
from kubernetes_mgmt_pv.cluster import ha
from kubernetes_mgmt_pv.cluster import node_identity
from kubernetes_mgmt_pv.cluster import node_names
from kubernetes_mgmt_pv import exceptions

# Root-owned, outside the world-writable /tmp: the script runs as root.
SCRIPT_PATH = '/usr/local/lib/kubernetes-mgmt-pv/install_k8s_cluster.sh'
INFO_BEGIN = '----- BEGIN KUBERNETES CLUSTER INFO -----'
INFO_END = '----- END KUBERNETES CLUSTER INFO -----'
# Where kubeadm uploads the control-plane certificates for joining Masters.
CERTIFICATES_SECRET = 'kubeadm-certs'
INFO_KEYS = ('server', 'token', 'ca_cert_hash', 'certificate_key', 'ca_cert')
# The line by which an install script says it reads the join secrets from
# its standard input; scripts without it (packages built for earlier
# releases) get them as -t/-k.
SECRETS_ON_STDIN = re.compile(
    rb'^# kubernetes-mgmt-pv-join-secrets: stdin[ \t]*\r?$', re.M)
KUBELET_KUBECONFIG = '/etc/kubernetes/kubelet.conf'
# The identity Tacker uses on the cluster: a ServiceAccount with a
# long-lived token Secret (Kubernetes >= 1.24 creates none by itself).
VIM_ACCOUNT = 'tacker-vim'
VIM_NAMESPACE = 'kube-system'
VIM_TOKEN_SECRET = 'tacker-vim-token'

# What one fact-gathering command prints before the /etc/hosts content.
FACTS_SCRIPT = (
    'hostname; '
    'if [ -e %s ]; then echo joined; else echo fresh; fi; '
    'cat /etc/hosts 2>/dev/null || true' % KUBELET_KUBECONFIG)

# cloud-init would set the host name back to Nova's at the next boot, and
# kubelet registers with the host name.
CLOUD_INIT_HOST_NAME = '/etc/cloud/cloud.cfg.d/90-kubernetes-mgmt-pv.cfg'
# Sets the host name given as $1 for now and for every boot.
HOST_NAME_SCRIPT = (
    'printf "%%s\\n" "$1" > /etc/hostname && hostname "$1" && '
    'mkdir -p /etc/cloud/cloud.cfg.d && '
    'echo "preserve_hostname: true" > %s' % CLOUD_INIT_HOST_NAME)


@dataclasses.dataclass(frozen=True)
class NodeFacts(object):
    """What the cluster half needs to know about one VM."""
    hostname: str
    joined: bool  # kubeadm init/join ran here (kubelet.conf exists)
    hosts_file: bytes = b''

    @property
    def node_name(self):
        """The Node name kubelet registers: the host name, lower-cased."""
        return self.hostname.lower()


@dataclasses.dataclass(frozen=True)
class JoinInfo(object):
    """What the install script prints on a Master: how to join and reach
    the cluster."""
    server: str
    token: str
    ca_cert_hash: str
    certificate_key: str
    ca_cert: str  # PEM

    @property
    def secrets(self):
        return (self.token, self.certificate_key)


@dataclasses.dataclass(frozen=True)
class InstallPlan(object):
    """Who does what in an install: computed from the facts, so a re-run
    after a failure anywhere skips what is done."""
    leader: object  # the Master that inits (or is already in the cluster)
    master_addresses: tuple  # for -m: the leader's first
    join_masters: tuple  # Masters to join, one after another
    join_workers: tuple  # Workers to join, all at once
    reset: tuple  # VMs joined to a cluster the API server does not know
    stale_api_nodes: tuple  # Node names to delete before the joins
    members: tuple  # already in the cluster: left alone
    half_joined: tuple = ()  # Masters with a Node but no etcd member
    leader_joined: bool = False  # the leader is in the cluster already

    @property
    def script_nodes(self):
        return (self.leader,) + self.join_masters + self.join_workers


def parse_facts(output):
    """NodeFacts from the output (bytes) of FACTS_SCRIPT."""
    parts = output.split(b'\n', 2)
    if len(parts) < 2 or parts[1] not in (b'joined', b'fresh'):
        raise exceptions.ClusterInstallError(
            'unexpected output of the node fact check: %r' % output[:200])
    return NodeFacts(hostname=parts[0].decode('utf-8', 'replace').strip(),
                     joined=parts[1] == b'joined',
                     hosts_file=parts[2] if len(parts) > 2 else b'')


_JOIN_VALUES = {
    'token': re.compile(r'[a-z0-9]{6}\.[a-z0-9]{16}'),
    'ca_cert_hash': re.compile(r'sha256:[0-9a-f]{64}'),
    # kubeadm's key is 32 bytes in hex; no longer value can be a secret
    # that every later message must be searched for.
    'certificate_key': re.compile(r'[0-9a-f]{64}'),
}


def parse_join_info(stdout):
    """JoinInfo from the install script's output (the last block wins)."""
    lines = stdout.splitlines()
    try:
        begin = len(lines) - 1 - lines[::-1].index(INFO_BEGIN)
        end = lines.index(INFO_END, begin)
    except ValueError:
        raise exceptions.ClusterInstallError(
            'the install script printed no "%s" block' % INFO_BEGIN)
    values = {}
    for line in lines[begin + 1:end]:
        key, sep, value = line.partition('=')
        if sep:
            values[key.strip()] = value.strip()
    missing = [key for key in INFO_KEYS if not values.get(key)]
    if missing:
        raise exceptions.ClusterInstallError(
            'the install script\'s cluster info lacks %s'
            % ', '.join(missing))
    # They go to the other nodes' install scripts: in kubeadm's formats,
    # which those scripts check too (not echoed: two are secrets).
    malformed = [key for key, pattern in _JOIN_VALUES.items()
                 if not pattern.fullmatch(values[key])]
    if malformed:
        raise exceptions.ClusterInstallError(
            'the install script\'s cluster info has a malformed %s'
            % ', '.join(malformed))
    try:
        ca_cert = base64.b64decode(values['ca_cert'],
                                   validate=True).decode('ascii')
    except (ValueError, UnicodeDecodeError):
        raise exceptions.ClusterInstallError(
            'the install script\'s ca_cert is not base64 of a PEM file')
    if '-----BEGIN CERTIFICATE-----' not in ca_cert:
        raise exceptions.ClusterInstallError(
            'the install script\'s ca_cert is not a PEM certificate')
    return JoinInfo(server=values['server'], token=values['token'],
                    ca_cert_hash=values['ca_cert_hash'],
                    certificate_key=values['certificate_key'],
                    ca_cert=ca_cert)


def control_plane_endpoint(master_addresses, vip):
    """host:port every node reaches the API servers at: the VIP through
    haproxy (on every Master) with several Masters, else the one Master's
    API server."""
    if len(master_addresses) > 1:
        if not vip:
            raise exceptions.ParameterErrors([exceptions.ParameterError(
                'k8s_cluster_installation_param.master_node.cluster_cp_name',
                'is required with more than one Master (%d): it names the '
                'port of the virtual IP the Masters share'
                % len(master_addresses))])
        return '%s:%d' % (admin_kubectl.url_host(vip), ha.FRONTEND_PORT)
    return '%s:%d' % (admin_kubectl.url_host(master_addresses[0]),
                      admin_kubectl.API_SERVER_PORT)


def vim_url(endpoint, floating_ip=None):
    """The API server URL Tacker's VIM uses: the endpoint, or its floating
    IP with the same port (for a Tacker outside the VNF's network)."""
    host, _, port = endpoint.rpartition(':')
    if floating_ip:
        host = admin_kubectl.url_host(floating_ip)
    return 'https://%s:%s' % (host, port)


def no_proxy(proxy, network, endpoint_host, node_addresses):
    """no_proxy for the nodes: what the user gave, plus everything inside
    the cluster (loopback, the nodes, the endpoint, the pod and Service
    networks), as CIDRs rather than one entry per address."""
    entries = [entry.strip() for entry in (proxy.no_proxy or '').split(',')]
    entries += ['localhost', '127.0.0.1', endpoint_host.strip('[]')]
    entries += [cidr for value in (proxy.k8s_node_cidr, network.pod_cidr,
                                   network.cluster_cidr) if value
                for cidr in value.split(',')]
    node_networks = [ipaddress.ip_network(cidr.strip(), strict=False)
                     for cidr in (proxy.k8s_node_cidr or '').split(',')
                     if cidr.strip()]
    entries += [address for address in node_addresses
                if not any(ipaddress.ip_address(address) in net
                           for net in node_networks)]
    return ','.join(dict.fromkeys(entry.strip() for entry in entries
                                  if entry.strip()))


def script_environment(proxy, network, endpoint, node_addresses):
    """The install script's environment: the proxy, if any."""
    env = proxy.environment()
    if env.get('http_proxy') or env.get('https_proxy'):
        env['no_proxy'] = no_proxy(proxy, network,
                                   endpoint.rpartition(':')[0],
                                   node_addresses)
    return env


def hosts_lines(nodes_facts):
    """/etc/hosts block lines: every node's name at its address, so nodes
    resolve each other's names without DNS. ``nodes_facts`` is a list of
    (topology.Node, NodeFacts)."""
    return ['%s %s' % (node.fixed_ip, facts.hostname)
            for node, facts in nodes_facts]


def _node_items(output):
    try:
        items = json.loads(output)['items']
        return [(item['metadata']['name'], item.get('status') or {})
                for item in items]
    except (ValueError, KeyError, TypeError, AttributeError):
        raise exceptions.ClusterInstallError(
            'kubectl get nodes -o json did not return a list of Nodes')


def parse_api_nodes(output):
    """{Node name: InternalIP} from ``kubectl get nodes -o json``; an
    address several Nodes report is refused (``node_identity``)."""
    nodes = {}
    for name, status in _node_items(output):
        internal = [a.get('address') for a in status.get('addresses') or []
                    if isinstance(a, dict) and a.get('type') == 'InternalIP']
        nodes[name] = internal[0] if internal else None
    node_identity.check_addresses(nodes)
    return nodes


def not_ready(output, names):
    """The ``names`` whose Node is missing or not Ready, in
    ``kubectl get nodes -o json`` output."""
    ready = {name for name, status in _node_items(output)
             if any(isinstance(c, dict) and c.get('type') == 'Ready' and
                    c.get('status') == 'True'
                    for c in status.get('conditions') or [])}
    return [name for name in names if name not in ready]


def has_node(node, facts, api_nodes):
    """kubeadm ran on the VM and the cluster has its Node at its address
    (``facts``: NodeFacts by address; ``api_nodes``: {name: InternalIP})."""
    own = facts[node.address]
    return own.joined and api_nodes.get(own.node_name) == node.fixed_ip


def plan_install(masters, workers, facts, api_nodes, etcd_members=None):
    """The InstallPlan for the Masters and Workers (topology.Node lists).

    ``facts``: NodeFacts by node address; ``api_nodes``: {name:
    InternalIP} as the cluster knows them (empty when no Master is in a
    cluster yet); ``etcd_members``: etcd.parse_members of the cluster, or
    None where etcd is not checked (one Master, or none in a cluster).

    A VM is a member when kubeadm ran on it and the cluster has its Node
    at its address, and, for a Master, etcd has its member (name and peer
    URL). A Master with its Node but no etcd member is half-joined (its
    join stopped before etcd's): like any VM kubeadm ran on that is not a
    member, it is reset and joined again. A Node of the cluster that has
    the name or address of a VM to join is stale (a re-created VM, a
    half-joined Master) and is deleted first, or kubeadm join would refuse
    the name.
    """
    half_joined = tuple(
        node for node in masters
        if etcd_members is not None and has_node(node, facts, api_nodes) and
        not etcd.is_member(etcd_members, facts[node.address].node_name,
                           node.fixed_ip))

    def member(node):
        return has_node(node, facts, api_nodes) and node not in half_joined

    in_cluster = [node for node in masters if member(node)]
    leader = (in_cluster or masters)[0]
    others = [node for node in masters if node is not leader]
    join_masters = tuple(node for node in others if not member(node))
    join_workers = tuple(node for node in workers if not member(node))
    joining = join_masters + join_workers + (
        () if member(leader) else (leader,))
    stale = {name for name, address in api_nodes.items()
             for node in joining
             if name == facts[node.address].node_name or
             address == node.fixed_ip}
    return InstallPlan(
        leader=leader,
        master_addresses=tuple(node.fixed_ip for node in [leader] + others),
        join_masters=join_masters,
        join_workers=join_workers,
        reset=tuple(node for node in joining if facts[node.address].joined),
        stale_api_nodes=tuple(sorted(stale)),
        members=tuple(node for node in masters + workers
                      if node is not leader and member(node)),
        half_joined=half_joined, leader_joined=member(leader))


def secrets_on_stdin(script):
    """Whether the install script (bytes) reads the join secrets from its
    standard input."""
    return SECRETS_ON_STDIN.search(script) is not None


def script_argv(role, plan, node, endpoint, network, join_info=None,
                floating_ip=None, legacy_secrets=False, offline=None):
    """The install script's command line for node in ``role`` (leader,
    master or worker); the VIM's ``floating_ip`` goes into the API server
    certificate, which Tacker checks against it. The join secrets go to
    ``script_input``, unless ``legacy_secrets``: a script of the earlier
    contract takes them here. ``offline``: the site's package sources
    (offline.OfflineSources), whose files the driver uploaded."""
    argv = ['bash', SCRIPT_PATH]
    if role == 'worker':
        argv += ['-w', node.fixed_ip]
    else:
        argv += ['-m', ','.join(plan.master_addresses)]
    argv += ['-i', endpoint]
    if offline is not None:
        argv += offline.script_options()
    if role != 'worker':
        if network.pod_cidr:
            argv += ['-p', network.pod_cidr]
        if network.cluster_cidr:
            argv += ['-a', network.cluster_cidr]
    if role == 'leader' and floating_ip:
        argv += ['-e', floating_ip]
    if role != 'leader':
        argv += ['-s', join_info.ca_cert_hash]
        if legacy_secrets:
            argv += ['-t', join_info.token]
            if role == 'master':
                argv += ['-k', join_info.certificate_key]
    return argv


def script_input(role, join_info=None):
    """The install script's standard input: the join secrets of a node
    that joins (none for the leader)."""
    if role == 'leader':
        return b''
    lines = ['token=%s' % join_info.token]
    if role == 'master':
        lines.append('certificate_key=%s' % join_info.certificate_key)
    return ''.join(line + '\n' for line in lines).encode('ascii')


def credentials_manifest():
    """The ServiceAccount Tacker uses, bound to cluster-admin (a VIM
    deploys any CNF), and its long-lived token Secret."""
    labels = {'app.kubernetes.io/managed-by': 'kubernetes-mgmt-pv'}
    documents = [
        {'apiVersion': 'v1', 'kind': 'ServiceAccount',
         'metadata': {'name': VIM_ACCOUNT, 'namespace': VIM_NAMESPACE,
                      'labels': labels}},
        {'apiVersion': 'v1', 'kind': 'Secret',
         'type': 'kubernetes.io/service-account-token',
         'metadata': {'name': VIM_TOKEN_SECRET, 'namespace': VIM_NAMESPACE,
                      'labels': labels,
                      'annotations': {'kubernetes.io/service-account.name':
                                      VIM_ACCOUNT}}},
        {'apiVersion': 'rbac.authorization.k8s.io/v1',
         'kind': 'ClusterRoleBinding',
         'metadata': {'name': VIM_ACCOUNT, 'labels': labels},
         'roleRef': {'apiGroup': 'rbac.authorization.k8s.io',
                     'kind': 'ClusterRole', 'name': 'cluster-admin'},
         'subjects': [{'kind': 'ServiceAccount', 'name': VIM_ACCOUNT,
                       'namespace': VIM_NAMESPACE}]},
    ]
    return {'apiVersion': 'v1', 'kind': 'List', 'items': documents}


def parse_token_secret(output):
    """(bearer token, CA PEM) from ``kubectl get secret -o json``, or None
    while the token controller has not filled the Secret yet."""
    try:
        data = json.loads(output).get('data') or {}
        if not data.get('token') or not data.get('ca.crt'):
            return None
        return (base64.b64decode(data['token']).decode('utf-8'),
                base64.b64decode(data['ca.crt']).decode('utf-8'))
    except (ValueError, AttributeError, UnicodeDecodeError):
        raise exceptions.ClusterInstallError(
            'the VIM token Secret %s/%s is not a valid Secret'
            % (VIM_NAMESPACE, VIM_TOKEN_SECRET))


# A host name as Nova and cloud-init make one: a single DNS label.
_HOST_NAME = re.compile(r'[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?')


def address_host_name(role, address):
    """``<role>-<address>`` (``worker-10-0-0-12``): unique in the cluster
    because addresses are, and the same for a VM re-created at the same
    port."""
    ip = ipaddress.ip_address(address)
    text = ip.exploded if ip.version == 6 else str(ip)
    return '%s-%s' % (role, re.sub('[.:]', '-', text))


def host_names(nodes, facts, api_nodes):
    """{address: host name} every Master and Worker must have before
    kubeadm runs (``nodes``: topology.Node; ``facts``: NodeFacts by
    address; ``api_nodes``: {Node name: InternalIP}).

    A VM kubeadm ran on whose Node the cluster has at its address keeps
    that Node's name: kubelet's certificate carries it. That Node must be
    the one the VM itself names (its host name): the address is the
    word of a kubelet, maybe another VM's (``node_identity``). Any other
    VM keeps the name cloud-init gave it when that is one DNS label no
    other VM has or keeps; otherwise (Nova gives every member of a
    scaling group the group's server name) it is named after its role
    and address.
    """
    names = {}
    for node in nodes:
        if facts[node.address].joined:
            name = name_at(api_nodes, node.fixed_ip)
            if name is not None:
                node_identity.check_own_node(node, name,
                                             facts[node.address].hostname)
                names[node.address] = name
    taken = set(names.values())
    given = collections.Counter(facts[node.address].node_name
                                for node in nodes if node.address not in names)
    for node in nodes:
        if node.address in names:
            continue
        own = facts[node.address].node_name
        unique = given[own] == 1 and own not in taken
        names[node.address] = (own if unique and _HOST_NAME.fullmatch(own)
                               else address_host_name(node.role,
                                                      node.fixed_ip))
    return names


def check_node_names(nodes_facts):
    """Node names must be valid and unique in the cluster: two VMs with
    one host name would fight over one Node."""
    seen = {}
    for node, facts in nodes_facts:
        if not node_names.is_valid(facts.hostname):
            raise exceptions.ClusterInstallError(
                '%s: host name %r is not a valid Kubernetes Node name'
                % (node.address, facts.hostname))
        if facts.node_name in seen:
            raise exceptions.ClusterInstallError(
                'VMs %s and %s have the same host name %r: their Nodes '
                'would collide' % (seen[facts.node_name], node.address,
                                   facts.hostname))
        seen[facts.node_name] = node.address


def name_at(api_nodes, address):
    """The name of the Node at ``address``, or None (already gone)."""
    names = [name for name, internal in api_nodes.items()
             if internal == address]
    return names[0] if names else None


UNREACHABLE_TAINT = 'node.kubernetes.io/unreachable'


def undrainable(ready, taints):
    """Why a Node cannot be drained, or None when it can.

    An eviction ends a pod only when the Node's kubelet confirms it: on a
    Node that is not Ready (its VM down or its kubelet gone) or that the
    node lifecycle controller tainted unreachable, the evicted pods stay
    Terminating and kubectl drain waits for them until its timeout.
    ``ready``: the status of its Ready condition (None: none); ``taints``:
    the keys of its taints.
    """
    reasons = []
    if ready != 'True':
        reasons.append('Ready is %s' % (ready or 'not reported'))
    if UNREACHABLE_TAINT in taints:
        reasons.append('tainted %s' % UNREACHABLE_TAINT)
    return ', '.join(reasons) or None


def undrainable_nodes(output):
    """{Node name: why it cannot be drained} of ``kubectl get nodes -o
    json`` output, for the Nodes ``undrainable`` rules out."""
    try:
        items = json.loads(output)['items']
        found = {}
        for item in items:
            conditions = (item.get('status') or {}).get('conditions') or []
            ready = next((c.get('status') for c in conditions
                          if isinstance(c, dict) and c.get('type') == 'Ready'),
                         None)
            taints = [t.get('key') for t in
                      (item.get('spec') or {}).get('taints') or []
                      if isinstance(t, dict)]
            reason = undrainable(ready, taints)
            if reason:
                found[item['metadata']['name']] = reason
        return found
    except (ValueError, KeyError, TypeError, AttributeError):
        raise exceptions.ClusterInstallError(
            'kubectl get nodes -o json did not return a list of Nodes')


def drain_argv(name, timeout, force):
    """kubectl drain of a node: evicts its pods, respecting their
    PodDisruptionBudgets, and leaves DaemonSet pods (they go with the
    node); ``force`` also deletes pods without controller and bypasses
    the budgets."""
    argv = ['drain', name, '--ignore-daemonsets', '--delete-emptydir-data',
            '--timeout=%ds' % timeout]
    if force:
        argv += ['--force', '--disable-eviction']
    return argv
