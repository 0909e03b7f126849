"""The cluster half's step sequence, free of Tacker: install (or complete)
the Kubernetes cluster on the Masters and Workers, and hand back what the
VIM needs.

Like the persistent-volume flows, it resolves everything from Heat first,
then gathers each VM's facts at once, plans with ``cluster`` and changes
only what the plan says, so a re-run after a failure anywhere converges.
"""

import dataclasses
import functools
import json

from oslo_log import log as logging

from kubernetes_mgmt_pv import cluster
from kubernetes_mgmt_pv import exceptions
from kubernetes_mgmt_pv import flow
from kubernetes_mgmt_pv import ha
from kubernetes_mgmt_pv import managed_block
from kubernetes_mgmt_pv import report as report_mod

LOG = logging.getLogger(__name__)

HOSTS_FILE = '/etc/hosts'


@dataclasses.dataclass(frozen=True)
class ClusterAccess(object):
    """How Tacker reaches the cluster: the VIM's URL and credentials."""
    url: str
    bearer_token: str = dataclasses.field(repr=False)
    ca_cert: str = dataclasses.field(repr=False)


class ClusterWorkflow(flow.Flow):
    """Kubernetes on the Masters and Workers of one VNF.

    ``script``: the install script's content (bytes) from the VNF package.
    """

    def __init__(self, params, heat, script, conf=None,
                 credential_overrides=None, sessions=None):
        super().__init__(params, heat, conf=conf,
                         credential_overrides=credential_overrides,
                         sessions=sessions)
        self.script = script

    # -- lookups (no host touched) -----------------------------------------

    def _addresses(self):
        """(control-plane endpoint, VIP or None, floating IP or None)."""
        network = self.params.network
        masters = [node.fixed_ip for node in self.topology.masters]
        if not masters:
            raise exceptions.HeatLookupError(
                'the stack has no Master node: nothing to install')
        vip = fip = None
        if len(masters) > 1 and network.cluster_cp_name:
            vip = self.heat.cp_address(network.cluster_cp_name).fixed_ip
        if network.cluster_fip_name:
            fip = self.heat.cp_address(network.cluster_fip_name).floating_ip
            if not fip:
                raise exceptions.HeatLookupError(
                    'cluster_fip_name %r has no floating_ip_address'
                    % network.cluster_fip_name)
        return cluster.control_plane_endpoint(masters, vip), vip, fip

    # -- steps --------------------------------------------------------------

    def _gather(self, sessions, nodes):
        """NodeFacts of every node, by address, gathered at once."""
        facts = {}

        def gather(node):
            executor = self.session(sessions, node)
            result = executor.run(['sh', '-c', cluster.FACTS_SCRIPT],
                                  sudo=True, description='node facts')
            facts[node.address] = cluster.parse_facts(result.stdout_bytes)

        self.on_hosts('node fact check', {
            node.address: functools.partial(gather, node) for node in nodes})
        return facts

    def _api_nodes(self, sessions, masters, facts):
        """The Nodes the cluster knows ({name: InternalIP}), asked on a
        Master that is in a cluster; empty when none is."""
        joined = [node for node in masters if facts[node.address].joined]
        if not joined:
            return {}
        executor = self.session(sessions, joined[0])
        with report_mod.step(executor.host, 'Node list'):
            result = self._kubectl(executor, ['get', 'nodes', '-o', 'json'])
        return cluster.parse_api_nodes(result.stdout)

    def _kubectl(self, executor, args, **kwargs):
        """kubectl as the cluster admin, whichever user logs in."""
        return executor.run(['kubectl', '--kubeconfig',
                             cluster.ADMIN_KUBECONFIG] + list(args),
                            sudo=True, **kwargs)

    def _prepare(self, sessions, node, facts, lines, plan, report):
        """The per-VM steps that need no cluster: /etc/hosts, the script,
        and a reset of a VM joined to a cluster that is gone."""
        executor = self.session(sessions, node)
        with report_mod.step(executor.host, 'hosts file'):
            changed = managed_block.ensure_block(
                executor, HOSTS_FILE, facts.hosts_file, lines)
            report.record(executor.host, 'hosts file', changed)
        if node in plan.script_nodes:
            with report_mod.step(executor.host, 'install script upload'):
                executor.run(['install', '-d', '-m', '0755',
                              cluster.SCRIPT_PATH.rpartition('/')[0]],
                             sudo=True)
                executor.install_file(self.script, cluster.SCRIPT_PATH,
                                      mode='0755')
        if node in plan.reset:
            with report_mod.step(executor.host, 'kubeadm reset'):
                executor.run(['kubeadm', 'reset', '-f'], sudo=True)
                report.record(executor.host, 'kubeadm reset', True,
                              'its cluster does not know it')

    def _run_script(self, sessions, node, argv, env, report):
        executor = self.session(sessions, node)
        with report_mod.step(executor.host, 'Kubernetes install script'):
            result = executor.run(
                argv, sudo=True, env=env or None,
                timeout=self.conf.cluster_install_timeout,
                description='install_k8s_cluster.sh on %s' % node.fixed_ip)
        report.record(executor.host, 'kubernetes node', True,
                      'installed with the install script')
        return result

    def _run_master_script(self, sessions, node, argv, env, report):
        """The script on a Master, and the join information it printed
        (its secrets redacted from then on)."""
        join_info = cluster.parse_join_info(
            self._run_script(sessions, node, argv, env, report).stdout)
        sessions.hide(*join_info.secrets)
        return join_info

    def _wait_ready(self, executor, names):
        timeout = self.conf.node_ready_timeout
        with report_mod.step(executor.host, 'Node readiness'):
            self._kubectl(executor, ['wait', '--for=condition=Ready',
                                     '--timeout=%ds' % timeout] +
                          ['node/%s' % name for name in names],
                          timeout=timeout + 60)

    def _vim_credentials(self, executor, report):
        """The VIM's bearer token and CA, from a ServiceAccount token Secret
        created (or kept) idempotently; waits for Kubernetes to fill it."""
        timeout = self.conf.vim_token_timeout
        secret = ['-n', cluster.VIM_NAMESPACE,
                  'secret/%s' % cluster.VIM_TOKEN_SECRET]
        with report_mod.step(executor.host, 'VIM credentials'):
            applied = self._kubectl(
                executor, ['apply', '-f', '-'],
                stdin=json.dumps(cluster.credentials_manifest()).encode())
            self._kubectl(executor, ['wait', '--for=jsonpath={.data.token}',
                                     '--timeout=%ds' % timeout] + secret,
                          timeout=timeout + 60)
            result = self._kubectl(executor, ['get', '-o', 'json'] + secret)
            credentials = cluster.parse_token_secret(result.stdout)
        if credentials is None:
            raise exceptions.ClusterInstallError(
                'the token Secret %s/%s has no token'
                % (cluster.VIM_NAMESPACE, cluster.VIM_TOKEN_SECRET))
        report.record(executor.host, 'VIM ServiceAccount',
                      'created' in applied.stdout or
                      'configured' in applied.stdout)
        executor.hide(credentials[0])
        return credentials

    # -- the flow -----------------------------------------------------------

    def install(self):
        """instantiate_end and entire-cluster heal: the whole cluster.

        Returns (ClusterAccess, Report).
        """
        report = report_mod.Report()
        masters, workers = self.topology.masters, self.topology.of_role(
            'worker')
        nodes = masters + workers
        endpoint, vip, fip = self._addresses()
        with self.sessions() as sessions:
            self.preflight(sessions, nodes)
            facts = self._gather(sessions, nodes)
            named = [(node, facts[node.address]) for node in nodes]
            cluster.check_node_names(named)
            plan = cluster.plan_install(
                masters, workers, facts,
                self._api_nodes(sessions, masters, facts))
            LOG.info('Cluster plan: leader %s, join %d Master(s) and %d '
                     'Worker(s), %d already in the cluster',
                     plan.leader.address, len(plan.join_masters),
                     len(plan.join_workers), len(plan.members))
            lines = cluster.hosts_lines(named)
            self.on_hosts('node preparation', {
                node.address: functools.partial(
                    self._prepare, sessions, node, facts[node.address],
                    lines, plan, report) for node in nodes})
            if vip:
                self._configure_ha(sessions, masters, facts, vip, report)
            leader = self.session(sessions, plan.leader)
            if plan.stale_api_nodes:
                with report_mod.step(leader.host, 'stale Node removal'):
                    self._kubectl(leader, ['delete', 'node',
                                           '--ignore-not-found'] +
                                  list(plan.stale_api_nodes))
            env = cluster.script_environment(
                self.params.proxy, self.params.network,
                endpoint, [node.fixed_ip for node in nodes])
            join_info = self._run_master_script(
                sessions, plan.leader, cluster.script_argv(
                    'leader', plan, plan.leader, endpoint,
                    self.params.network), env, report)
            for node in plan.join_masters:  # etcd grows one member at a time
                # Each Master uploads the certificates again with a new
                # key, which replaces the one it joined with.
                join_info = self._run_master_script(
                    sessions, node, cluster.script_argv(
                        'master', plan, node, endpoint, self.params.network,
                        join_info), env, report)
            self.on_hosts('Worker join', {
                node.address: functools.partial(
                    self._run_script, sessions, node, cluster.script_argv(
                        'worker', plan, node, endpoint, self.params.network,
                        join_info), env, report)
                for node in plan.join_workers})
            self._wait_ready(leader, [facts.node_name for _, facts in named])
            token, ca_cert = self._vim_credentials(leader, report)
        access = ClusterAccess(url=cluster.vim_url(endpoint, fip),
                               bearer_token=token, ca_cert=ca_cert)
        return access, self.finish('cluster install', report)

    def _configure_ha(self, sessions, masters, facts, vip, report):
        """haproxy and keepalived on every Master, before any kubeadm runs:
        kubeadm reaches the API server through the VIP."""
        backends = [(facts[node.address].node_name, node.fixed_ip)
                    for node in masters]
        self.on_hosts('HA control plane', {
            node.address: functools.partial(
                ha.configure, self.session(sessions, node), node.fixed_ip,
                backends, vip, self.params.proxy, self.conf, report)
            for node in masters})
