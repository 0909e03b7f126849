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

from kubernetes_mgmt_pv.cluster import cert_renewal
from kubernetes_mgmt_pv.cluster import cluster
from kubernetes_mgmt_pv.cluster import cluster_sequence
from kubernetes_mgmt_pv.cluster import drain
from kubernetes_mgmt_pv.cluster import etcd
from kubernetes_mgmt_pv.cluster import etcd_snapshot
from kubernetes_mgmt_pv.cluster import ha
from kubernetes_mgmt_pv.cluster import serving_certificate
from kubernetes_mgmt_pv import exceptions
from kubernetes_mgmt_pv import flow
from kubernetes_mgmt_pv.remote import dpkg
from kubernetes_mgmt_pv.remote import host_lock
from kubernetes_mgmt_pv import step_report

LOG = logging.getLogger(__name__)

HOSTS_FILE = cluster_sequence.HOSTS_FILE
RESET_ARGV = ['kubeadm', 'reset', '-f']


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
                 credential_overrides=None, sessions=None, node_files=(),
                 key_project=None):
        super().__init__(params, heat, conf=conf,
                         credential_overrides=credential_overrides,
                         sessions=sessions, key_project=key_project)
        self.script = script
        self.node_files = tuple(node_files)
        # The bootstrap tokens the Master runs of this hook printed.
        self._issued_tokens = []

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

    def control_plane_endpoint(self):
        """HOST:PORT the nodes reach the API servers at."""
        return self._addresses()[0]

    # -- steps --------------------------------------------------------------

    def _node_facts(self, sessions, node):
        result = self.session(sessions, node).run(
            ['sh', '-c', cluster.FACTS_SCRIPT], sudo=True,
            description='node facts')
        return cluster.parse_facts(result.stdout_bytes)

    def _gather(self, sessions, nodes):
        """NodeFacts of every node, by address, gathered at once."""
        facts = {}

        def gather(node):
            facts[node.address] = self._node_facts(sessions, node)

        self.on_hosts('node fact check', {
            node.address: functools.partial(gather, node) for node in nodes})
        return facts

    def _gather_leaving(self, sessions, nodes):
        """NodeFacts of the leaving VMs that still answer, by address:
        their own word on which Node is theirs. One that is down or
        refuses the login has none (``cluster_sequence.leaving_node_name``
        decides without it)."""
        facts = {}

        def gather(node):
            if not flow.answers_ssh(node.address):
                return
            try:
                facts[node.address] = self._node_facts(sessions, node)
            except exceptions.MgmtDriverError as error:
                LOG.warning('The leaving VM %s does not say its host name '
                            '(%s): its Node is chosen without it',
                            node.address,
                            exceptions.failure_reason(error, node.address))

        self.on_hosts('leaving node fact check', {
            node.address: functools.partial(gather, node) for node in nodes})
        return facts

    def _api_nodes(self, sessions, masters, facts):
        """The Nodes the cluster knows ({name: InternalIP}), asked on a
        Master that is in a cluster; empty when none is."""
        joined = [node for node in masters if facts[node.address].joined]
        if not joined:
            return {}
        executor = self.session(sessions, joined[0])
        with step_report.step(executor.host, 'Node list'):
            result = self._kubectl(executor, ['get', 'nodes', '-o', 'json'])
        return cluster.parse_api_nodes(result.stdout)

    def _kubectl(self, executor, args, **kwargs):
        """kubectl on the Master ``executor`` is logged in to, as every
        kubectl step runs it (``admin_kubectl.kubectl_argv``)."""
        return self.kubectl(executor).run(args, **kwargs)

    def _prepare(self, sessions, prepared, report):
        """Apply a ``cluster_sequence.Preparation``: /etc/hosts, the host
        name, the script, and a reset of a VM joined to a cluster that is
        gone."""
        executor = self.session(sessions, prepared.node)
        self._write_hosts(executor, prepared, report)
        if prepared.host_name:  # after /etc/hosts: sudo resolves it
            with step_report.step(executor.host, 'host name'):
                executor.run(['sh', '-c', cluster.HOST_NAME_SCRIPT, 'sh',
                              prepared.host_name], sudo=True)
            report.record(executor.host, 'host name %s' % prepared.host_name,
                          True, 'was %s' % prepared.was_named)
        if prepared.upload_script:
            with step_report.step(executor.host, 'install script upload'):
                executor.run(['install', '-d', '-m', '0755',
                              cluster.SCRIPT_PATH.rpartition('/')[0]],
                             sudo=True)
                executor.install_file(self.script, cluster.SCRIPT_PATH,
                                      mode='0755')
                for path, data in self.node_files:
                    executor.install_file(data, path, mode='0644')
        if prepared.reset:
            with step_report.step(executor.host, 'kubeadm reset'):
                host_lock.run_exclusive(executor, RESET_ARGV,
                                        ' '.join(RESET_ARGV),
                                        self.conf.command_timeout)
                report.record(executor.host, 'kubeadm reset', True,
                              prepared.reset)

    def _script_call(self, role, plan, node, endpoint, join_info=None,
                     floating_ip=None):
        """(argv, stdin) of the install script on node in ``role``."""
        legacy = not cluster.secrets_on_stdin(self.script)
        if legacy and role != 'leader':
            LOG.warning('The install script of the VNF package has no "# '
                        'kubernetes-mgmt-pv-join-secrets: stdin" line: it '
                        'gets the join token and certificate key on its '
                        'command line, where any user of %s sees them '
                        'while it runs and sudo\'s log (syslog, the '
                        'journal) records them for good. Update it to read '
                        'them from standard input (see the install script '
                        'contract).',
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
        with step_report.step(executor.host, 'Kubernetes install script'):
            result = host_lock.run_exclusive(
                executor, argv,
                'install_k8s_cluster.sh on %s' % node.fixed_ip,
                self.conf.cluster_install_timeout, env=env or None,
                stdin=stdin)
        report.record(executor.host, 'kubernetes node', True,
                      'installed with the install script')
        return result

    def _run_master_script(self, sessions, node, call, env, report):
        """The script on a Master, and the join information it printed
        (its secrets redacted from then on)."""
        join_info = cluster.parse_join_info(
            self._run_script(sessions, node, call, env, report).stdout)
        sessions.hide(*join_info.secrets)
        self._issued_tokens.append(join_info.token)
        return join_info

    def _remove_join_secrets(self, leader, report):
        """Delete the bootstrap tokens the Master runs created and the
        certificates they uploaded (the kubeadm-certs Secret): the joins
        are over, and a token would let anyone who saw it join a node for
        two hours. The tokens go by their ID, which is no secret."""
        tokens, self._issued_tokens = self._issued_tokens, []
        token_ids = sorted({token.partition('.')[0] for token in tokens})
        with step_report.step(leader.host, 'join secret removal'):
            if token_ids:
                leader.run(['kubeadm', 'token', 'delete'] + token_ids,
                           sudo=True)
            self._kubectl(leader, ['delete', 'secret', '--ignore-not-found',
                                   '-n', 'kube-system',
                                   cluster.CERTIFICATES_SECRET])
        report.record(leader.host, 'join secrets removed', True,
                      '%d bootstrap token(s), secret %s'
                      % (len(token_ids), cluster.CERTIFICATES_SECRET))

    def _wait_ready(self, executor, names):
        """Until every Node is Ready: one listing, then kubectl wait (a
        watch) on those that are not yet."""
        timeout = self.conf.node_ready_timeout
        with step_report.step(executor.host, 'Node readiness'):
            waiting = cluster.not_ready(self._kubectl(
                executor, ['get', 'nodes', '-o', 'json']).stdout, names)
            if waiting:
                self._kubectl(executor, ['wait', '--for=condition=Ready',
                                         '--timeout=%ds' % timeout] +
                              ['node/%s' % name for name in waiting],
                              timeout=timeout + 60)

    def _vim_credentials(self, sessions, executor, report):
        """The VIM's bearer token and CA, from a ServiceAccount token Secret
        created (or kept) idempotently; waits for Kubernetes to fill it.
        The token is a secret of the hook from then on, on every host."""
        timeout = self.conf.vim_token_timeout
        secret = ['-n', cluster.VIM_NAMESPACE,
                  'secret/%s' % cluster.VIM_TOKEN_SECRET]
        with step_report.step(executor.host, 'VIM credentials'):
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
        sessions.hide(credentials[0])
        return credentials

    def _check_vim_url(self, sessions, url, fip, masters=None):
        """Before the VIM is registered: the API server certificate of
        every Master (or of ``masters``) names the host of its URL, as
        Tacker will check."""
        masters = self.topology.masters if masters is None else masters
        if not masters:
            return
        names = {}

        def read(node):
            names[node.fixed_ip] = serving_certificate.read_names(
                self.session(sessions, node))

        self.on_hosts('API server certificate check', {
            node.address: functools.partial(read, node) for node in masters})
        serving_certificate.check_vim_url(
            url, names, self.params.network.cluster_fip_name if fip else None)

    def vim_access(self):
        """The ClusterAccess the VIM is registered with, read again (its
        CA and token after an upgrade)."""
        endpoint, _, fip = self._addresses()
        url = cluster.vim_url(endpoint, fip)
        with self.sessions() as sessions:
            self._check_vim_url(sessions, url, fip)
            kubectl = self.kubectl_session(sessions, self.topology.masters,
                                           'VIM credentials')
            executor = self.session(sessions,
                                    self.topology.at_address(kubectl.host))
            token, ca_cert = self._vim_credentials(
                sessions, executor, step_report.Report())
        return ClusterAccess(url=url, bearer_token=token, ca_cert=ca_cert)

    # -- the flow -----------------------------------------------------------

    def plan_install(self, sessions, vip, report, install_etcdctl=True):
        """Log in, gather every VM's facts and plan the install: the
        ``cluster_sequence.InstallSequence``. Changes nothing but, with
        ``install_etcdctl``, the etcd client on a Master it asks."""
        masters, workers = self.topology.masters, self.topology.of_role(
            'worker')
        nodes = masters + workers
        self.preflight(sessions, nodes)
        gathered = self._gather(sessions, nodes)
        api_nodes = self._api_nodes(sessions, masters, gathered)
        facts = cluster_sequence.named_facts(nodes, gathered, api_nodes)
        members = self._etcd_members(
            sessions, cluster_sequence.etcd_askable(masters, facts,
                                                    api_nodes),
            report, install_etcdctl)
        sequence = cluster_sequence.plan_install_sequence(
            masters, workers, gathered, facts, api_nodes, members, vip)
        LOG.info('Cluster plan: leader %s, join %d Master(s) and %d '
                 'Worker(s), %d already in the cluster',
                 sequence.plan.leader.address, len(sequence.plan.join_masters),
                 len(sequence.plan.join_workers), len(sequence.plan.members))
        return sequence

    def check_install(self, sessions, report):
        """What ``install`` would change, changing nothing: its
        InstallSequence, and the ha.Plan of each Master ({address: plan})
        for the backends haproxy has once every Master has joined.
        ``report`` gets the etcd client that would be installed."""
        _, vip, _ = self._addresses()
        sequence = self.plan_install(sessions, vip, report,
                                     install_etcdctl=False)
        ha_plans = {}

        def check_ha(node):
            gathered = ha.gather_facts(self.session(sessions, node))
            ha_plans[node.address] = ha.plan(gathered, *ha.wanted_configs(
                gathered.addresses, node.fixed_ip, list(sequence.ha_masters),
                vip, list(sequence.ha_rounds[-1])))

        if sequence.ha_rounds:
            self.on_hosts('HA control plane check', {
                node.address: functools.partial(check_ha, node)
                for node in self.topology.masters})
        return sequence, ha_plans

    def install(self):
        """instantiate_end and entire-cluster heal: the whole cluster.

        Returns (ClusterAccess, Report).
        """
        report = step_report.Report()
        endpoint, vip, fip = self._addresses()
        with self.sessions() as sessions:
            sequence = self.plan_install(sessions, vip, report)
            plan = sequence.plan
            url = cluster.vim_url(endpoint, fip)
            # The Masters already in the cluster keep their certificates:
            # one that cannot serve the URL is refused before any change.
            self._check_vim_url(sessions, url, fip, [
                node for node in self.topology.masters
                if node in plan.members])
            self.on_hosts('node preparation', {
                prepared.node.address: functools.partial(
                    self._prepare, sessions, prepared, report)
                for prepared in sequence.preparations})
            self._ha_round(sessions, sequence, 0, vip, report)
            leader = self.session(sessions, plan.leader)
            self._delete_stale_nodes(leader, plan.stale_api_nodes)
            try:
                call = self._lead(sessions, plan, endpoint, fip, report)
                call = self._join_masters(sessions, leader, sequence, vip,
                                          call, report)
                self._join_workers(sessions, plan, call, report)
            except Exception:
                self._try_remove_join_secrets(leader, report)
                raise
            self._remove_join_secrets(leader, report)
            self._wait_ready(leader, sequence.ready_names)
            self._check_etcd(leader, sequence.etcd_expected, report)
            # Before the VIM's credentials: its CA follows a changed one.
            cert_renewal.renew_expiring(self, sessions, self.topology.masters,
                                        report)
            self._check_vim_url(sessions, url, fip)
            token, ca_cert = self._vim_credentials(sessions, leader,
                                                   report)
        access = ClusterAccess(url=url, bearer_token=token, ca_cert=ca_cert)
        return access, self.finish('cluster install', report)

    def _lead(self, sessions, plan, endpoint, floating_ip, report):
        """The install script on the leader (kubeadm init, or nothing new
        on a member): the (endpoint, environment, join info) the others
        join with."""
        env = cluster.script_environment(
            self.params.proxy, self.params.network, endpoint,
            [node.fixed_ip for node in self.topology.cluster_nodes])
        join_info = self._run_master_script(
            sessions, plan.leader, self._script_call(
                'leader', plan, plan.leader, endpoint,
                floating_ip=floating_ip), env, report)
        return endpoint, env, join_info

    def _try_remove_join_secrets(self, leader, report):
        """``_remove_join_secrets`` after a failed join, without hiding
        that failure: a removal that fails too is logged."""
        try:
            self._remove_join_secrets(leader, report)
        except exceptions.MgmtDriverError as error:
            LOG.warning('Join secrets not removed after the failed join: %s',
                        error)

    def _delete_stale_nodes(self, leader, names):
        """Nodes of the cluster with the name or address of a VM that
        joins: kubeadm join would refuse the name."""
        if names:
            with step_report.step(leader.host, 'stale Node removal'):
                self._kubectl(leader, ['delete', 'node',
                                       '--ignore-not-found'] + list(names))

    def _ha_round(self, sessions, sequence, index, vip, report):
        """haproxy and keepalived with the backends of HA round ``index``
        (nothing without a VIP)."""
        if sequence.ha_rounds:
            self._configure_ha(sessions, self.topology.masters,
                               sequence.ha_masters, vip, report,
                               sequence.ha_rounds[index])

    def _join_masters(self, sessions, leader, sequence, vip, call, report):
        """The joining Masters one after another (etcd grows one member at
        a time), each added to haproxy's backends once it has joined.
        ``call``: (endpoint, environment, join info). Returns it with the
        last join info: each Master uploads the certificates again with a
        new key, which replaces the one it joined with."""
        endpoint, env, join_info = call
        plan = sequence.plan
        if sequence.remove_stale_etcd:
            self._remove_stale_members(leader, plan.join_masters, report)
        for index, node in enumerate(plan.join_masters, 1):
            join_info = self._run_master_script(
                sessions, node, self._script_call(
                    'master', plan, node, endpoint, join_info), env, report)
            self._ha_round(sessions, sequence, index, vip, report)
        return endpoint, env, join_info

    def _join_workers(self, sessions, plan, call, report):
        """The joining Workers, all at once."""
        endpoint, env, join_info = call
        self.on_hosts('Worker join', {
            node.address: functools.partial(
                self._run_script, sessions, node, self._script_call(
                    'worker', plan, node, endpoint, join_info), env, report)
            for node in plan.join_workers})

    def _configure_ha(self, sessions, masters, members, vip, report,
                      backends=None):
        """haproxy and keepalived on every Master, before any kubeadm runs
        (kubeadm reaches the API server through the VIP). ``members``:
        (Node name, address) of every Master; haproxy balances over the
        ``backends`` (default: all)."""
        self.on_hosts('HA control plane', {
            node.address: functools.partial(
                ha.configure, self.session(sessions, node), node.fixed_ip,
                list(members), vip, self.params.proxy, self.conf, report,
                backends=list(members if backends is None else backends))
            for node in masters})

    # -- etcd -----------------------------------------------------------------

    def etcd_session(self, executor, report):
        """The Master's session, with etcdctl installed."""
        dpkg.ensure_installed(executor, [etcd.PACKAGE], self.params.proxy,
                              self.conf.package_install_timeout, report)
        return executor

    def _has_etcdctl(self, executor, report, install):
        """Whether etcdctl can run on the Master: installed now when
        ``install``, else only looked for (the check mode records that it
        would be installed)."""
        if install:
            self.etcd_session(executor, report)
            return True
        missing = dpkg.missing_packages(
            [etcd.PACKAGE], {etcd.PACKAGE: dpkg.query_status(
                executor, etcd.PACKAGE)})
        if missing:
            report.record(executor.host, 'packages %s' % etcd.PACKAGE, True,
                          'to install; etcd members not checked')
        return not missing

    def _etcd_members(self, sessions, asked, report, install_etcdctl=True):
        """The etcd members, for telling joined Masters from half-joined
        ones; None when no Master is ``asked`` (see
        ``cluster_sequence.etcd_askable``). Asked on each in turn."""
        errors = []
        for node in asked:
            try:
                return self._ask_etcd(self.session(sessions, node), report,
                                      install_etcdctl)
            except exceptions.StepError as error:
                errors.append(error)
        if errors:
            raise errors[0]
        return None

    def _ask_etcd(self, executor, report, install_etcdctl):
        with step_report.step(executor.host, 'etcd member list'):
            if self._has_etcdctl(executor, report, install_etcdctl):
                return etcd.members(executor)
            return None

    def _remove_stale_members(self, leader, joining, report):
        """Members left over from earlier VMs of the joining Masters."""
        with step_report.step(leader.host, 'etcd stale members'):
            self.etcd_session(leader, report)
            stale = etcd.stale_members(etcd.members(leader),
                                       [node.fixed_ip for node in joining])
            for member_id in stale:
                etcd.remove_member(leader, member_id)
            report.record(leader.host, 'etcd stale members', bool(stale),
                          ', '.join(stale))

    def _check_etcd(self, leader, expected, report):
        """etcd has exactly the ``expected`` members, healthy (nothing to
        check when empty: one Master)."""
        if not expected:
            return
        with step_report.step(leader.host, 'etcd check'):
            self.etcd_session(leader, report)
            etcd.check_members(etcd.members(leader), expected)
            etcd.check_health_or_etcdctl(leader)

    # -- removal: scale-in and the first half of a node heal -----------------

    def remove(self, leaving, scale_in=False):
        """Take Masters and Workers (topology.Node) out of the cluster
        before their VMs go: drain and delete each Node, take a Master out
        of haproxy and etcd; on a scale-in also take the nodes out of
        every other node's /etc/hosts and reset them (best effort).

        The leaving VMs may be dead: they are only contacted for best-effort
        steps (their host names, keepalived stop, kubeadm reset). A step
        already done is skipped, so a re-run after a failure converges.
        """
        report = step_report.Report()
        split = cluster_sequence.split_leaving(
            self.topology.masters, self.topology.cluster_nodes, leaving)
        _, vip, _ = self._addresses()
        with self.sessions() as sessions:
            self.preflight(sessions, split.staying)
            facts = self._gather(sessions, split.staying)
            # Their names go into the others' /etc/hosts and haproxy:
            # checked as the install checks them, before any change.
            cluster.check_node_names([(node, facts[node.address])
                                      for node in split.staying])
            leader = self.session(sessions, cluster_sequence.removal_leader(
                split.staying_masters, facts))
            asked = {**facts, **self._gather_leaving(sessions, leaving)}
            with step_report.step(leader.host, 'Node list'):
                listing = self._kubectl(leader, ['get', 'nodes', '-o',
                                                 'json']).stdout
                removal = cluster_sequence.plan_removals(
                    split, leaving, cluster.parse_api_nodes(listing),
                    cluster.undrainable_nodes(listing), asked)
            for node_removal in removal.removals:
                self._remove_node(sessions, leader, node_removal,
                                  removal.staying_masters, facts, vip, report)
            if scale_in:
                self._forget_leaving(sessions, removal, facts, report)
            cert_renewal.renew_expiring(self, sessions,
                                        removal.staying_masters, report)
        return self.finish('node removal', report)

    def _forget_leaving(self, sessions, removal, facts, report):
        """After a scale-in: the leaving nodes out of every staying node's
        /etc/hosts, and kubeadm reset on them (best effort)."""
        lines = cluster.hosts_lines(
            [(node, facts[node.address]) for node in removal.staying])
        self.on_hosts('hosts file update', {
            node.address: functools.partial(
                self._write_hosts, self.session(sessions, node),
                cluster_sequence.Preparation(
                    node, hosts_lines=tuple(lines),
                    hosts_current=facts[node.address].hosts_file), report)
            for node in removal.staying})
        for node_removal in removal.removals:
            self._reset_leaving(sessions, node_removal.node, report)

    def _remove_node(self, sessions, leader, removal, staying_masters, facts,
                     vip, report):
        """Apply a ``cluster_sequence.NodeRemoval``: drain (unless its VM
        is down), take a Master out of haproxy and etcd, delete the
        Node."""
        name = removal.name
        if removal.undrainable:
            LOG.warning('Node %s is not drained (%s): its pods cannot be '
                        'evicted; it is deleted with them',
                        name, removal.undrainable)
            report.record(leader.host, 'drain of %s' % name, False,
                          'skipped: %s' % removal.undrainable)
        elif removal.drain:
            self._drain(leader, name, report)
        if removal.master:
            self._remove_master(sessions, leader, removal, staying_masters,
                                facts, vip, report)
        if name is not None:
            with step_report.step(leader.host, 'Node deletion'):
                self._kubectl(leader, ['delete', 'node', '--ignore-not-found',
                                       name])
            report.record(leader.host, 'Node %s' % name, True, 'deleted')

    def _drain(self, leader, name, report):
        with step_report.step(leader.host, 'drain of %s' % name):
            timeout = self.conf.drain_timeout
            result = self._kubectl(
                leader, cluster.drain_argv(name, timeout,
                                           self.conf.drain_force),
                check=False, timeout=timeout + 60)
            if not result.ok:
                outcome = drain.classify(result.stderr)
                raise drain.failure(name, outcome, timeout, drain.budgets_of(
                    self.kubectl(leader), outcome.budget_refused))
        report.record(leader.host, 'drain of %s' % name, True)

    def _remove_master(self, sessions, leader, removal, staying_masters,
                       facts, vip, report):
        """A Master leaves haproxy's backends on the others (before the
        API server goes) and the etcd cluster, snapshot first."""
        node = removal.node
        if vip:
            self._silence_keepalived(sessions, node, report)
            self._configure_ha(sessions, staying_masters,
                               cluster_sequence.ha_members(staying_masters,
                                                           facts),
                               vip, report)
        with step_report.step(leader.host, 'etcd member removal'):
            self.etcd_session(leader, report)
            member = cluster_sequence.leaving_member(etcd.members(leader),
                                                     removal)
            if member is not None:
                etcd_snapshot.take(self, sessions, leader,
                                   etcd_snapshot.MEMBER_REMOVAL, report)
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

    def _write_hosts(self, executor, prepared, report):
        """The /etc/hosts block of a ``cluster_sequence.Preparation``."""
        with step_report.step(executor.host, 'hosts file'):
            content = prepared.hosts_file
            if content is not None:
                executor.install_file(content, HOSTS_FILE)
        report.record(executor.host, 'hosts file', content is not None)

    def _reset_leaving(self, sessions, node, report):
        """kubeadm reset on a VM a scale-in removes: best effort, the VM
        is about to be deleted."""
        try:
            executor = self.session(sessions, node)
            host_lock.run_exclusive(executor, RESET_ARGV,
                                    ' '.join(RESET_ARGV),
                                    self.conf.command_timeout)
            report.record(executor.host, 'kubeadm reset', True)
        except exceptions.MgmtDriverError as error:
            LOG.warning('kubeadm reset of the removed VM %s failed (it is '
                        'deleted anyway): %s', node.address,
                        exceptions.failure_reason(error, node.address))
