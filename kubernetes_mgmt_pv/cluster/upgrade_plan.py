"""The decisions of the Kubernetes minor upgrade, pure functions of the
facts read first: which version the new package installs, whether the
cluster may be upgraded to it, and what is left to do on which node.

kubeadm upgrades one minor at a time, the control plane first: the first
Master ``kubeadm upgrade apply``, the others ``kubeadm upgrade node``,
then the Workers. A node is done when its Node reports the target
kubelet version, its kubeadm is the target's and dpkg has kubeadm,
kubelet and kubectl at the target package version (on a Master, its
kube-apiserver static pod runs the target's image too) and, on a Worker
the upgrade cordoned, it is uncordoned again: a re-run after a failure
skips it, or only uncordons it.

The upgrade cordons a Worker and marks it with CORDON_ANNOTATION in one
patch, and uncordons it and removes the mark in one: a Worker cordoned
without the mark was cordoned by the operator, and stays cordoned.
"""

import dataclasses
import json
import re

from kubernetes_mgmt_pv.cluster import node_identity
from kubernetes_mgmt_pv import exceptions

CHECK_STEP = 'upgrade check'
PACKAGES = ('kubeadm', 'kubelet', 'kubectl')
KUBEADM_CONFIG = ['get', 'configmap', '-n', 'kube-system', 'kubeadm-config',
                  '-o', 'json']
# The line of the install script that names its Kubernetes version.
_SCRIPT_VERSION = re.compile(
    rb"^readonly K8S_PACKAGE_VERSION='(\d+\.\d+\.\d+-[0-9A-Za-z.+~]+)'$",
    re.M)
_VERSION = re.compile(r'v?(\d+)\.(\d+)\.(\d+)')
_MINOR_SEGMENT = re.compile(r'/v\d+\.\d+/')
CORDON_ANNOTATION = 'kubernetes-mgmt-pv/cordoned-for-upgrade'
CORDON_LEFT = 'cordoned by the upgrade'
_CLUSTER_VERSION = re.compile(r'^kubernetesVersion: *"?(v[0-9.]+)"?$', re.M)
# Read on every node: kubeadm's version, the packages' dpkg state, on a
# Master the image of its kube-apiserver static pod, and the host name
# (which Node is the node's: ``node_identity``).
FACTS_SCRIPT = r'''
printf 'hostname %s\n' "$(hostname)"
printf 'kubeadm %s\n' "$(kubeadm version -o short 2>/dev/null || echo -)"
for name in kubeadm kubelet kubectl; do
    printf 'package %s %s\n' "$name" "$(dpkg-query -W \
        -f='${db:Status-Status} ${Version}' "$name" 2>/dev/null || echo -)"
done
printf 'apiserver %s\n' "$(grep -o 'kube-apiserver:v[0-9][0-9.]*' \
    /etc/kubernetes/manifests/kube-apiserver.yaml 2>/dev/null | head -n 1 |
    cut -d: -f2)"
'''


def parse_version(text):
    """(major, minor, patch) of 'v1.35.4' or '1.35.4-1.1', or None."""
    match = _VERSION.match((text or '').strip())
    return tuple(int(part) for part in match.groups()) if match else None


def shown(version):
    return 'v%d.%d.%d' % version


def script_package_version(script):
    """The K8S_PACKAGE_VERSION ('1.36.1-1.1') of an install script
    (bytes), or None."""
    match = _SCRIPT_VERSION.search(script)
    return match[1].decode('ascii') if match else None


def repository_for(url, target):
    """The apt repository of the ``target`` minor: in a pkgs.k8s.io-like
    ``url`` (a path segment 'v1.35', whichever minor the instance was
    installed or last upgraded with) that segment is the target's; any
    other URL is kept, a mirror of several minors."""
    return _MINOR_SEGMENT.sub('/v%d.%d/' % target[:2], url, count=1)


def script_sources(options, target):
    """Of the install script's source ``options`` (argv), those ``-U
    kubeadm`` uses: ``-r`` (the target minor's repository) and ``-g``."""
    kept = []
    for option, value in zip(options[::2], options[1::2]):
        if option == '-r':
            kept += [option, repository_for(value, target)]
        elif option == '-g':
            kept += [option, value]
    return kept


@dataclasses.dataclass(frozen=True)
class ApiNode(object):
    """A Node as the API server lists it."""
    name: str
    address: str
    ready: bool
    kubelet: tuple  # (major, minor, patch) or None
    unschedulable: bool = False


def parse_nodes(output):
    """{InternalIP: ApiNode} of ``kubectl get nodes -o json``; an address
    several Nodes report is refused (``node_identity``)."""
    try:
        items = json.loads(output)['items']
        nodes, names = {}, {}
        for item in items:
            status = item.get('status') or {}
            internal = [a.get('address') for a in status.get('addresses', [])
                        if a.get('type') == 'InternalIP']
            ready = any(c.get('type') == 'Ready' and c.get('status') == 'True'
                        for c in status.get('conditions') or [])
            node = ApiNode(
                item['metadata']['name'], internal[0] if internal else None,
                ready, parse_version(
                    (status.get('nodeInfo') or {}).get('kubeletVersion')),
                bool((item.get('spec') or {}).get('unschedulable')))
            nodes[node.address] = node
            names[node.name] = node.address
    except (ValueError, KeyError, TypeError, AttributeError):
        raise exceptions.ClusterInstallError(
            'kubectl get nodes -o json did not return a list of Nodes')
    node_identity.check_addresses(names)
    return nodes


def driver_cordons(output):
    """Names of the Nodes (``kubectl get nodes -o json``) that the
    upgrade cordoned and has not uncordoned yet: those with
    CORDON_ANNOTATION."""
    try:
        return frozenset(
            item['metadata']['name'] for item in json.loads(output)['items']
            if CORDON_ANNOTATION in (item['metadata'].get('annotations')
                                     or {}))
    except (ValueError, KeyError, TypeError, AttributeError):
        raise exceptions.ClusterInstallError(
            'kubectl get nodes -o json did not return a list of Nodes')


def cordon_argv(name, target):
    """kubectl arguments that cordon Node ``name`` and mark it as
    cordoned by the upgrade to ``target``, in one patch."""
    return ['patch', 'node', name, '--type', 'merge', '-p', json.dumps({
        'metadata': {'annotations': {CORDON_ANNOTATION: shown(target)}},
        'spec': {'unschedulable': True}}, sort_keys=True)]


def uncordon_argv(name):
    """kubectl arguments that uncordon Node ``name`` and remove the
    upgrade's mark, in one patch."""
    return ['patch', 'node', name, '--type', 'merge', '-p', json.dumps({
        'metadata': {'annotations': {CORDON_ANNOTATION: None}},
        'spec': {'unschedulable': None}}, sort_keys=True)]


def parse_cluster_version(output):
    """The kubernetesVersion of the kubeadm-config ConfigMap's
    ClusterConfiguration (``kubectl get -o json``): the control plane's
    version, which ``kubeadm upgrade apply`` sets last. None if absent."""
    try:
        text = json.loads(output)['data']['ClusterConfiguration']
    except (ValueError, KeyError, TypeError):
        return None
    match = _CLUSTER_VERSION.search(text)
    return parse_version(match[1]) if match else None


def never_evicting_budgets(output):
    """'namespace/name' of the PodDisruptionBudgets (``kubectl get pdb -A
    -o json``) that allow no eviction even with every pod they cover
    healthy (maxUnavailable 0, minAvailable all of them): no wait would
    let a drain through. One short of healthy pods now is waited for by
    the wave (``budgets.WaveGate``)."""
    try:
        items = json.loads(output)['items']
    except (ValueError, KeyError, TypeError):
        raise exceptions.ClusterInstallError(
            'kubectl get poddisruptionbudgets did not return a list')
    return sorted(
        '%s/%s' % (item['metadata'].get('namespace'),
                   item['metadata'].get('name'))
        for item in items
        if 0 < (item.get('status') or {}).get('expectedPods', 0) <=
        (item.get('status') or {}).get('desiredHealthy', 0))


@dataclasses.dataclass(frozen=True)
class HostFacts(object):
    """What FACTS_SCRIPT read on a node: kubeadm's version, {package:
    dpkg version of an installed one, else None}, the kube-apiserver
    image's version (None on a Worker), the host name (None: not read)."""
    kubeadm: tuple
    packages: dict
    apiserver: tuple = None
    hostname: str = None


def parse_host_facts(output):
    kubeadm, apiserver, packages, hostname = None, None, {}, None
    for line in output.splitlines():
        words = line.split()
        if words[:1] == ['hostname'] and len(words) == 2:
            hostname = words[1]
        elif words[:1] == ['kubeadm'] and len(words) == 2:
            kubeadm = parse_version(words[1])
        elif words[:1] == ['apiserver'] and len(words) == 2:
            apiserver = parse_version(words[1])
        elif words[:1] == ['package'] and len(words) == 4 and \
                words[1] in PACKAGES and words[2] == 'installed':
            packages[words[1]] = words[3]
    return HostFacts(kubeadm, {name: packages.get(name)
                               for name in PACKAGES}, apiserver, hostname)


def identity_refusals(nodes, api_nodes, host_facts):
    """(node address, reason) of each node whose Node, found by its
    InternalIP (``api_nodes``), is not the one its own host name names
    (``host_facts``): the upgrade would drain, uncordon and wait on
    another VM's Node (``node_identity``)."""
    problems = []
    for node in nodes:
        api_node = api_nodes.get(node.fixed_ip)
        refusal = api_node and node_identity.own_node_refusal(
            node, api_node.name, host_facts[node.address].hostname)
        if refusal:
            problems.append((node.address, refusal))
    return problems


def refusals(cluster_version, target, api_nodes, budgets, drain_force):
    """(what, reason) of everything that refuses the upgrade before any
    change: ``cluster_version`` and ``target`` are (major, minor, patch);
    ``api_nodes`` {address: ApiNode}; ``budgets`` the blocking
    PodDisruptionBudgets. ``what`` is a Node's address, or 'cluster'."""
    problems = []
    if cluster_version is None:
        problems.append(('cluster', 'the kube-system/kubeadm-config '
                         'ConfigMap names no kubernetesVersion: not a '
                         'kubeadm cluster'))
    elif target < cluster_version:
        problems.append(('cluster', 'the new package installs %s, older '
                         'than the cluster\'s %s: kubeadm does not '
                         'downgrade' % (shown(target),
                                        shown(cluster_version))))
    elif target[0] != cluster_version[0] or \
            target[1] > cluster_version[1] + 1:
        problems.append(('cluster', 'the new package installs %s, more '
                         'than one minor after the cluster\'s %s: upgrade '
                         'one minor at a time' % (shown(target),
                                                  shown(cluster_version))))
    for address, node in sorted(api_nodes.items(), key=lambda i: str(i[0])):
        if not node.ready:
            problems.append((address, 'Node %s is not Ready' % node.name))
        elif node.kubelet is None:
            problems.append((address, 'Node %s reports no kubelet version'
                             % node.name))
        elif node.kubelet > target:
            problems.append((address, 'Node %s runs kubelet %s, newer than '
                             'the new package\'s %s' % (
                                 node.name, shown(node.kubelet),
                                 shown(target))))
        elif node.kubelet[:2] < (target[0], target[1] - 1):
            problems.append((address, 'Node %s runs kubelet %s, more than '
                             'one minor before %s' % (
                                 node.name, shown(node.kubelet),
                                 shown(target))))
    # Only a Node left to upgrade is drained: a package that keeps the
    # version drains nothing, whatever the budgets allow.
    drains_left = any(node.kubelet != target for node in api_nodes.values())
    if budgets and not drain_force and drains_left:
        problems.append(('cluster', 'PodDisruptionBudget(s) %s allow no '
                         'eviction even with all their pods healthy: the '
                         'drains would stop the upgrade '
                         '(drain_force deletes such pods regardless)'
                         % ', '.join(budgets)))
    return problems


def refusal_error(problems, host):
    """The NodeStepError of ``refusals``: 'cluster' problems are named on
    ``host``, the Master the cluster was read on."""
    failures = {}
    for what, reason in problems:
        where = host if what == 'cluster' else what
        previous = failures.get(where)
        failures[where] = '%s; %s' % (previous, reason) if previous \
            else reason
    return exceptions.NodeStepError(CHECK_STEP, {
        where: exceptions.ClusterInstallError(reason + '; nothing was '
                                              'changed')
        for where, reason in failures.items()})


@dataclasses.dataclass(frozen=True)
class NodeUpgrade(object):
    """One node's part: ``action`` 'apply' (kubeadm upgrade apply),
    'node' (kubeadm upgrade node on a Master), 'worker' (cordon, drain,
    kubeadm upgrade node, uncordon) or 'uncordon' (a Worker upgraded but
    left cordoned); ``done`` when nothing is left to do; ``keep_cordon``
    for a Worker the operator cordoned, which the upgrade leaves
    cordoned."""
    node: object  # topology.Node
    name: str  # its Node's name
    action: str
    done: bool
    reason: str = ''  # why it is (not) done, for the log
    keep_cordon: bool = False


def wave_size(max_unavailable, workers):
    """How many of ``workers`` Workers are upgraded at once:
    ``max_unavailable`` is a count (int) or a percentage of the Workers
    ('25%', rounded up, as a DaemonSet's maxUnavailable: its rollout too
    takes nodes out); at least 1."""
    if isinstance(max_unavailable, str) and max_unavailable.endswith('%'):
        size = -(-workers * int(max_unavailable[:-1]) // 100)
    else:
        size = int(max_unavailable)
    return max(1, min(size, workers))


@dataclasses.dataclass(frozen=True)
class UpgradePlan(object):
    target: tuple
    package_version: str
    cluster_version: tuple
    steps: tuple  # NodeUpgrade, in the order they run
    wave_size: int = 1  # Workers upgraded at once

    @property
    def pending(self):
        return tuple(step for step in self.steps if not step.done)

    @property
    def waves(self):
        """The pending steps as they run: each Master alone, in order,
        then the Workers in groups of ``wave_size``, in order."""
        waves, workers = [], []
        for step in self.pending:
            if step.action in ('worker', 'uncordon'):
                workers.append(step)
            else:
                waves.append((step,))
        waves += [tuple(workers[start:start + self.wave_size])
                  for start in range(0, len(workers), self.wave_size)]
        return tuple(waves)


def node_done(facts, api_node, target, package_version, master,
              cordoned=False):
    """('', True) when the node is at the target and, if the upgrade
    ``cordoned`` it, uncordoned again, else (what is left, False)."""
    left = []
    if api_node.kubelet != target:
        left.append('kubelet %s' % (shown(api_node.kubelet)
                                    if api_node.kubelet else 'unknown'))
    if facts.kubeadm != target:
        left.append('kubeadm %s' % (shown(facts.kubeadm)
                                    if facts.kubeadm else 'unknown'))
    for name in PACKAGES:
        if facts.packages.get(name) != package_version:
            left.append('package %s %s' % (name, facts.packages.get(name) or
                                           'not installed'))
    if master and facts.apiserver != target:
        left.append('kube-apiserver %s' % (shown(facts.apiserver)
                                           if facts.apiserver else 'unknown'))
    if cordoned:
        left.append(CORDON_LEFT)
    return ', '.join(left), not left


def plan_upgrade(masters, workers, cluster_version, target,
                 package_version, api_nodes, host_facts, cordons=(),
                 max_unavailable=1):
    """The UpgradePlan: Masters in their order, then Workers, in waves
    of ``max_unavailable`` (wave_size) of all the Workers.
    ``api_nodes`` {InternalIP: ApiNode}; ``host_facts`` {address:
    HostFacts}; ``cordons`` the names of the Nodes the upgrade cordoned
    (driver_cordons). The first Master applies the upgrade unless the
    control plane is at the target already (a re-run after the apply)."""
    steps = []
    apply_left = cluster_version < target
    for node in list(masters) + list(workers):
        api_node = api_nodes.get(node.fixed_ip)
        if api_node is None:
            raise refusal_error([(node.address, 'the cluster has no Node at '
                                  '%s' % node.fixed_ip)], node.address)
        master = node in masters
        cordoned = not master and api_node.name in cordons
        left, done = node_done(host_facts[node.address], api_node, target,
                               package_version, master, cordoned)
        if not master:
            action = 'uncordon' if left == CORDON_LEFT else 'worker'
        elif apply_left:
            action, done, apply_left = 'apply', False, False
        else:
            action = 'node'
        steps.append(NodeUpgrade(
            node, api_node.name, action, done, left,
            keep_cordon=not master and api_node.unschedulable and
            not cordoned))
    return UpgradePlan(target, package_version, cluster_version,
                       tuple(steps), wave_size(max_unavailable,
                                               len(workers)))
