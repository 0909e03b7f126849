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
from kubernetes_mgmt_pv import etcd
from kubernetes_mgmt_pv import exceptions
from kubernetes_mgmt_pv import flow
from kubernetes_mgmt_pv import ha
from kubernetes_mgmt_pv import managed_block
from kubernetes_mgmt_pv import packages
from kubernetes_mgmt_pv import report as report_mod
from kubernetes_mgmt_pv import topology as topology_mod

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

    ``script``: the install script's content (bytes) from the VNF package;
    ``node_files``: (path on the node, bytes) of the package files it
    uses (offline.OfflineSources.package_files), uploaded with it.
    """

    def __init__(self, params, heat, script, conf=None,
                 credential_overrides=None, sessions=None, node_files=()):
        super().__init__(params, heat, conf=conf,
                         credential_overrides=credential_overrides,
                         sessions=sessions)
        self.script = script
        self.node_files = tuple(node_files)

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
        """kubectl on the Master ``executor`` is logged in to, as every
        kubectl step runs it (``cluster.kubectl_argv``)."""
        return self.kubectl(executor).run(args, **kwargs)

    def _prepare(self, sessions, node, facts, host_name, lines, plan,
                 report):
        """The per-VM steps that need no cluster: /etc/hosts, the host
        name, the script, and a reset of a VM joined to a cluster that is
        gone."""
        self._update_hosts(sessions, node, facts, lines, report)
        executor = self.session(sessions, node)
        if facts.hostname != host_name:  # after /etc/hosts: sudo resolves it
            with report_mod.step(executor.host, 'host name'):
                executor.run(['sh', '-c', cluster.HOST_NAME_SCRIPT, 'sh',
                              host_name], sudo=True)
            report.record(executor.host, 'host name %s' % host_name, True,
                          'was %s' % facts.hostname)
        if node in plan.script_nodes:
            with report_mod.step(executor.host, 'install script upload'):
                executor.run(['install', '-d', '-m', '0755',
                              cluster.SCRIPT_PATH.rpartition('/')[0]],
                             sudo=True)
                executor.install_file(self.script, cluster.SCRIPT_PATH,
                                      mode='0755')
                for path, data in self.node_files:
                    executor.install_file(data, path, mode='0644')
        if node in plan.reset:
            with report_mod.step(executor.host, 'kubeadm reset'):
                executor.run(['kubeadm', 'reset', '-f'], sudo=True)
                report.record(executor.host, 'kubeadm reset', True,
                              'half-joined: not an etcd member'
                              if node in plan.half_joined else
                              'its cluster does not know it')

    def _script_call(self, role, plan, node, endpoint, join_info=None,
                     floating_ip=None):
        """(argv, stdin) of the install script on node in ``role``."""
        legacy = not cluster.secrets_on_stdin(self.script)
        if legacy and role != 'leader':
            LOG.warning('The install script of the VNF package has no "# '
                        'kubernetes-mgmt-pv-join-secrets: stdin" line: it '
                        'gets the join token and certificate key on its '
                        'command line, where any user of %s sees them '
                        'while it runs. Update it to read them from '
                        'standard input (see the install script contract).',
                        node.address)
        return (cluster.script_argv(role, plan, node, endpoint,
                                    self.params.network, join_info,
                                    floating_ip, legacy_secrets=legacy,
                                    offline=self.params.offline),
                cluster.script_input(role, join_info))

    def _run_script(self, sessions, node, call, env, report):
        """The install script with ``call`` (argv, stdin): the join
        secrets travel on its standard input."""
        argv, stdin = call
        executor = self.session(sessions, node)
        with report_mod.step(executor.host, 'Kubernetes install script'):
            result = executor.run(
                argv, sudo=True, env=env or None, stdin=stdin,
                timeout=self.conf.cluster_install_timeout,
                description='install_k8s_cluster.sh on %s' % node.fixed_ip)
        report.record(executor.host, 'kubernetes node', True,
                      'installed with the install script')
        return result

    def _run_master_script(self, sessions, node, call, env, report):
        """The script on a Master, and the join information it printed
        (its secrets redacted from then on)."""
        join_info = cluster.parse_join_info(
            self._run_script(sessions, node, call, env, report).stdout)
        sessions.hide(*join_info.secrets)
        return join_info

    def _wait_ready(self, executor, names):
        """Until every Node is Ready: one listing, then kubectl wait (a
        watch) on those that are not yet."""
        timeout = self.conf.node_ready_timeout
        with report_mod.step(executor.host, 'Node readiness'):
            waiting = cluster.not_ready(self._kubectl(
                executor, ['get', 'nodes', '-o', 'json']).stdout, names)
            if waiting:
                self._kubectl(executor, ['wait', '--for=condition=Ready',
                                         '--timeout=%ds' % timeout] +
                              ['node/%s' % name for name in waiting],
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
            gathered = self._gather(sessions, nodes)
            api_nodes = self._api_nodes(sessions, masters, gathered)
            names = cluster.host_names(nodes, gathered, api_nodes)
            # From here on, every VM as it will be named.
            facts = {address: dataclasses.replace(own, hostname=names[address])
                     for address, own in gathered.items()}
            named = [(node, facts[node.address]) for node in nodes]
            cluster.check_node_names(named)
            plan = cluster.plan_install(
                masters, workers, facts, api_nodes,
                self._etcd_members(sessions, masters, facts, api_nodes,
                                   report))
            LOG.info('Cluster plan: leader %s, join %d Master(s) and %d '
                     'Worker(s), %d already in the cluster',
                     plan.leader.address, len(plan.join_masters),
                     len(plan.join_workers), len(plan.members))
            lines = cluster.hosts_lines(named)
            self.on_hosts('node preparation', {
                node.address: functools.partial(
                    self._prepare, sessions, node, gathered[node.address],
                    names[node.address], lines, plan, report)
                for node in nodes})
            # haproxy sends requests only to the Masters whose API server
            # runs: the leader (up once it has run kubeadm init) and the
            # members; each joining Master is added once it has joined.
            serving = [node for node in masters
                       if node is plan.leader or node in plan.members]
            if vip:
                self._configure_ha(sessions, masters, facts, vip, report,
                                   serving)
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
                sessions, plan.leader, self._script_call(
                    'leader', plan, plan.leader, endpoint, floating_ip=fip),
                env, report)
            several_masters = len(masters) > 1
            if several_masters and plan.join_masters:
                self._remove_stale_members(leader, plan.join_masters, report)
            for node in plan.join_masters:  # etcd grows one member at a time
                # Each Master uploads the certificates again with a new
                # key, which replaces the one it joined with.
                join_info = self._run_master_script(
                    sessions, node, self._script_call(
                        'master', plan, node, endpoint, join_info), env,
                    report)
                serving.append(node)
                if vip:
                    self._configure_ha(sessions, masters, facts, vip, report,
                                       serving)
            self.on_hosts('Worker join', {
                node.address: functools.partial(
                    self._run_script, sessions, node, self._script_call(
                        'worker', plan, node, endpoint, join_info), env,
                    report)
                for node in plan.join_workers})
            self._wait_ready(leader, [facts.node_name for _, facts in named])
            if several_masters:
                self._check_etcd(leader, {
                    facts[node.address].node_name: node.fixed_ip
                    for node in masters}, report)
            token, ca_cert = self._vim_credentials(leader, report)
        access = ClusterAccess(url=cluster.vim_url(endpoint, fip),
                               bearer_token=token, ca_cert=ca_cert)
        return access, self.finish('cluster install', report)

    def _configure_ha(self, sessions, masters, facts, vip, report,
                      serving=None):
        """haproxy and keepalived on every Master, before any kubeadm runs
        (kubeadm reaches the API server through the VIP); haproxy balances
        over the ``serving`` Masters (default: all)."""
        def named(nodes):
            return [(facts[node.address].node_name, node.fixed_ip)
                    for node in masters if node in nodes]

        self.on_hosts('HA control plane', {
            node.address: functools.partial(
                ha.configure, self.session(sessions, node), node.fixed_ip,
                named(masters), vip, self.params.proxy, self.conf, report,
                backends=named(masters if serving is None else serving))
            for node in masters})

    # -- etcd -----------------------------------------------------------------

    def _etcd_session(self, executor, report):
        """The Master's session, with etcdctl installed."""
        packages.ensure_installed(executor, [etcd.PACKAGE], self.params.proxy,
                                  self.conf.package_install_timeout, report)
        return executor

    def _etcd_members(self, sessions, masters, facts, api_nodes, report):
        """The etcd members, for telling joined Masters from half-joined
        ones; None with one Master or none in a cluster yet. Asked on the
        Masters that have their Node in turn: a half-joined one runs no
        etcd member to ask."""
        asked = [node for node in masters
                 if cluster.has_node(node, facts, api_nodes)]
        if len(masters) < 2 or not asked:
            return None
        errors = []
        for node in asked:
            executor = self.session(sessions, node)
            try:
                with report_mod.step(executor.host, 'etcd member list'):
                    return etcd.members(self._etcd_session(executor, report))
            except exceptions.StepError as error:
                errors.append(error)
        raise errors[0]

    def _remove_stale_members(self, leader, joining, report):
        """Members left over from earlier VMs of the joining Masters."""
        with report_mod.step(leader.host, 'etcd stale members'):
            self._etcd_session(leader, report)
            stale = etcd.stale_members(etcd.members(leader),
                                       [node.fixed_ip for node in joining])
            for member_id in stale:
                etcd.remove_member(leader, member_id)
            report.record(leader.host, 'etcd stale members', bool(stale),
                          ', '.join(stale))

    def _check_etcd(self, leader, expected, report):
        with report_mod.step(leader.host, 'etcd check'):
            self._etcd_session(leader, report)
            etcd.check_members(etcd.members(leader), expected)
            etcd.check_health(leader)

    # -- removal: scale-in and the first half of a node heal -----------------

    def remove(self, leaving, scale_in=False):
        """Take Masters and Workers (topology.Node) out of the cluster
        before their VMs go: drain and delete each Node, take a Master out
        of haproxy and etcd; on a scale-in also take the nodes out of
        every other node's /etc/hosts and reset them (best effort).

        The leaving VMs may be dead: they are only contacted for best-effort
        steps (keepalived stop, kubeadm reset). A step already done is
        skipped, so a re-run after a failure converges.
        """
        report = report_mod.Report()
        masters = self.topology.masters
        staying = [node for node in self.topology.cluster_nodes
                   if node not in leaving]
        staying_masters = [node for node in masters if node in staying]
        leaving_masters = [node for node in masters if node in leaving]
        if leaving_masters and not staying_masters:
            raise exceptions.ClusterInstallError(
                'cannot take out the only Master (%s): its cluster would be '
                'lost; heal the entire VNF instead' % ', '.join(
                    node.address for node in leaving_masters))
        endpoint, vip, _ = self._addresses()
        with self.sessions() as sessions:
            self.preflight(sessions, staying)
            facts = self._gather(sessions, staying)
            joined = [node for node in staying_masters
                      if facts[node.address].joined]
            if not joined:
                raise exceptions.ClusterInstallError(
                    'no staying Master is in the cluster: nothing to remove '
                    'the nodes from')
            leader = self.session(sessions, joined[0])
            with report_mod.step(leader.host, 'Node list'):
                listing = self._kubectl(leader, ['get', 'nodes', '-o',
                                                 'json']).stdout
                api_nodes = cluster.parse_api_nodes(listing)
                undrainable = cluster.undrainable_nodes(listing)
            for node in leaving:
                self._remove_node(sessions, leader, node, api_nodes,
                                  undrainable, staying_masters, facts, vip,
                                  report)
            if scale_in:
                lines = cluster.hosts_lines(
                    [(node, facts[node.address]) for node in staying])
                self.on_hosts('hosts file update', {
                    node.address: functools.partial(
                        self._update_hosts, sessions, node,
                        facts[node.address], lines, report)
                    for node in staying})
                for node in leaving:
                    self._reset_leaving(sessions, node, report)
        return self.finish('node removal', report)

    def _remove_node(self, sessions, leader, node, api_nodes, undrainable,
                     staying_masters, facts, vip, report):
        """Drain (unless ``undrainable`` says why it cannot be: its VM is
        down), take a Master out of haproxy and etcd, delete the Node."""
        name = cluster.name_at(api_nodes, node.fixed_ip)
        if name in undrainable:
            LOG.warning('Node %s is not drained (%s): its pods cannot be '
                        'evicted; it is deleted with them',
                        name, undrainable[name])
            report.record(leader.host, 'drain of %s' % name, False,
                          'skipped: %s' % undrainable[name])
        elif name is not None:
            with report_mod.step(leader.host, 'drain of %s' % name):
                timeout = self.conf.drain_timeout
                result = self._kubectl(
                    leader, cluster.drain_argv(name, timeout,
                                               self.conf.drain_force),
                    check=False, timeout=timeout + 60)
                if not result.ok:
                    raise cluster.drain_failure(
                        name, result.stderr, timeout, self._budgets(
                            leader, cluster.blocking_pods(result.stderr)))
            report.record(leader.host, 'drain of %s' % name, True)
        if node.role == topology_mod.MASTER:
            self._remove_master(sessions, leader, node, name,
                                staying_masters, facts, vip, report)
        if name is not None:
            with report_mod.step(leader.host, 'Node deletion'):
                self._kubectl(leader, ['delete', 'node', '--ignore-not-found',
                                       name])
            report.record(leader.host, 'Node %s' % name, True, 'deleted')

    def _budgets(self, leader, pods):
        """The PodDisruptionBudgets that block ``pods``, for the error."""
        if not pods:
            return []
        listings = [self._kubectl(leader, ['get', kind, '-A', '-o', 'json'],
                                  check=False)
                    for kind in ('pods', 'poddisruptionbudgets')]
        if not all(result.ok for result in listings):
            return []
        return cluster.blocking_budgets(listings[0].stdout,
                                        listings[1].stdout, pods)

    def _remove_master(self, sessions, leader, node, name, staying_masters,
                       facts, vip, report):
        """A Master leaves haproxy's backends on the others (before the
        API server goes) and the etcd cluster."""
        if vip:
            self._silence_keepalived(sessions, node, report)
            self._configure_ha(sessions, staying_masters, facts, vip, report)
        with report_mod.step(leader.host, 'etcd member removal'):
            self._etcd_session(leader, report)
            members = etcd.members(leader)
            if name is not None:
                member = etcd.member_of(members, name, node.fixed_ip)
            else:  # the Node is gone already: match by the peer URL
                member = next(iter(etcd.stale_members(
                    members, [node.fixed_ip])), None)
            if member is not None:
                etcd.remove_member(leader, member)
            report.record(leader.host, 'etcd member of %s' % node.fixed_ip,
                          member is not None,
                          'removed %s' % member if member else '')

    def _silence_keepalived(self, sessions, node, report):
        """Stop keepalived on a leaving Master whose VM still runs: the
        others stop talking VRRP with it, and it would claim the VIP too
        until Heat deletes it. Best effort: the VM may be dead."""
        if not flow.answers_ssh(node.address):
            return
        try:
            executor = self.session(sessions, node)
            result = executor.run(['service', 'keepalived', 'stop'],
                                  sudo=True, check=False)
            report.record(executor.host, 'keepalived stop', result.ok)
        except exceptions.MgmtDriverError as error:
            LOG.warning('Could not stop keepalived on the leaving Master %s: '
                        '%s', node.address,
                        exceptions.failure_reason(error, node.address))

    def _update_hosts(self, sessions, node, facts, lines, report):
        executor = self.session(sessions, node)
        with report_mod.step(executor.host, 'hosts file'):
            changed = managed_block.ensure_block(
                executor, HOSTS_FILE, facts.hosts_file, lines)
        report.record(executor.host, 'hosts file', changed)

    def _reset_leaving(self, sessions, node, report):
        """kubeadm reset on a VM a scale-in removes: best effort, the VM
        is about to be deleted."""
        try:
            executor = self.session(sessions, node)
            executor.run(['kubeadm', 'reset', '-f'], sudo=True)
            report.record(executor.host, 'kubeadm reset', True)
        except exceptions.MgmtDriverError as error:
            LOG.warning('kubeadm reset of the removed VM %s failed (it is '
                        'deleted anyway): %s', node.address,
                        exceptions.failure_reason(error, node.address))
