"""The Kubernetes minor upgrade of a cluster, free of Tacker: what the
v2 door runs for ChangeCurrentVnfPackage when the new VNF package's
install script installs the next minor.

Every decision is taken by ``upgrade_plan`` from facts read first; this
module only sequences the steps, one Master at a time, then the Workers
in waves (``upgrade_plan.UpgradePlan.waves``), so that a re-run
after a failure anywhere converges. The package commands are the new
install script's (``-U kubeadm``, ``-U kubelet``); kubeadm, the drain and
the waits are the driver's. haproxy and keepalived are left alone: with
HA, the other Masters serve the VIP while one Master's control plane
restarts.
"""

import functools
import time

from oslo_log import log as logging

from kubernetes_mgmt_pv.cluster import budgets
from kubernetes_mgmt_pv.cluster import cert_renewal
from kubernetes_mgmt_pv.cluster import cluster
from kubernetes_mgmt_pv.cluster import drain
from kubernetes_mgmt_pv.cluster import etcd
from kubernetes_mgmt_pv.cluster import etcd_snapshot
from kubernetes_mgmt_pv.cluster import upgrade_plan
from kubernetes_mgmt_pv import exceptions
from kubernetes_mgmt_pv.remote import host_lock
from kubernetes_mgmt_pv.remote import parallel
from kubernetes_mgmt_pv.request import lcm_requests
from kubernetes_mgmt_pv.request import param_model
from kubernetes_mgmt_pv import step_report

LOG = logging.getLogger(__name__)

SCRIPT_PATH_PARAM = param_model.ROOT + '.script_path'
# The step of a wave of Workers in which some failed (NodeStepError).
WAVE_STEP = 'upgrade of a wave of Workers'
BUDGET_STEP = 'disruption budget check'


def upgrade_cluster(workflow, new_script, drain_force=None,
                    check_only=False, max_unavailable=None):
    """Upgrade the cluster of ``workflow`` in place to the Kubernetes
    version the new package's install script installs.

    ``workflow``: a ``cluster_workflow.ClusterWorkflow`` of the hook (the
    VNF instance's parameters, its Heat stack, the hook's SessionPool;
    its own ``script`` is not used). ``new_script``: the bytes of the new
    VNF package's install script; its ``K8S_PACKAGE_VERSION`` is the
    target, and it is uploaded to every node before that node's packages
    change (its ``-U`` upgrade mode switches the apt source to the new
    minor's repository and installs the held packages). ``drain_force``:
    None takes the driver's option; True lets a drain delete pods that a
    PodDisruptionBudget protects. ``check_only``: refuse or plan, change
    nothing (``change_current_package_start``). ``max_unavailable``:
    Workers upgraded at once, a count or a percentage ('25%',
    ``lcm_requests.max_unavailable``); None: the driver's option.

    Order: the Masters one at a time, then the Workers in waves
    (``UpgradePlan.waves``; each cordoned, drained, upgraded, uncordoned),
    each Ready at the target before the next Master or wave; then the
    certificates are checked, admin.conf copied again.

    Returns ``(upgrade_plan.UpgradePlan, step_report.Report)``.

    Raises, before any change:
      ``exceptions.ParameterErrors`` when ``new_script`` names no
      K8S_PACKAGE_VERSION;
      ``exceptions.NodeStepError`` with step ``'upgrade check'`` and
      ``failures`` {host address: ClusterInstallError(reason)}: a jump of
      more than one minor or a downgrade (host: the Master asked), a Node
      not Ready, an unhealthy etcd, a PodDisruptionBudget that allows no
      eviction without ``drain_force``. Its message ends "nothing was
      changed".
    Raises, during the upgrade:
      ``exceptions.StepError`` (``step``, ``host``, ``reason``), e.g.
      step ``'kubeadm upgrade node'`` on the second Master; the nodes
      before it are upgraded, a re-run continues from that node.
      ``exceptions.NodeStepError`` (WAVE_STEP, {Worker address:
      StepError}) after a wave of several Workers, naming each that failed.
      A failure after the etcd snapshot names it (``etcd_snapshot``).
      ``exceptions.RemoteConnectError`` when a node cannot be logged in.
    """
    upgrade = _Upgrade(workflow, new_script, _package_version(new_script),
                       drain_force, max_unavailable)
    with etcd_snapshot.named_in_errors(upgrade):
        return upgrade.run(check_only)


def _package_version(new_script):
    """The install script's K8S_PACKAGE_VERSION, the upgrade's target."""
    package_version = upgrade_plan.script_package_version(new_script)
    if package_version is None:
        raise exceptions.ParameterErrors([exceptions.ParameterError(
            SCRIPT_PATH_PARAM, 'the new VNF package\'s install script has '
            'no "readonly K8S_PACKAGE_VERSION=\'X.Y.Z-R\'" line')])
    return package_version


class _Upgrade(object):
    """One run of ``upgrade_cluster``."""

    def __init__(self, workflow, script, package_version, drain_force,
                 max_unavailable):
        self.flow = workflow
        self.conf = workflow.conf
        self.script = script
        self.package_version = package_version
        self.target = upgrade_plan.parse_version(package_version)
        self.drain_force = self.conf.drain_force if drain_force is None \
            else bool(drain_force)
        self.max_unavailable = lcm_requests.max_unavailable(
            self.conf.upgrade_max_unavailable, 'upgrade_max_unavailable '
            'option') if max_unavailable is None else max_unavailable
        self.report = step_report.Report()
        self.endpoint = None
        self.etcd_snapshot = None

    def run(self, check_only):
        topology = self.flow.topology
        masters = topology.masters
        workers = topology.of_role('worker')
        self.endpoint = self.flow.control_plane_endpoint()
        with self.flow.sessions() as sessions:
            self.flow.preflight(sessions, masters + workers)
            kubectl = self.flow.kubectl_session(sessions, masters,
                                                upgrade_plan.CHECK_STEP)
            leader = self.flow.session(
                sessions, topology.at_address(kubectl.host))
            plan = self._plan(sessions, kubectl, leader, masters, workers)
            self._log_plan(plan)
            if check_only:
                return plan, self.report
            for step in plan.steps:
                if step.done:
                    self.report.record(step.node.address, 'upgrade to %s'
                                       % upgrade_plan.shown(self.target),
                                       False, 'already at the target')
            for wave in plan.waves:
                self._upgrade_wave(sessions, kubectl, wave)
            cert_renewal.renew_expiring(self.flow, sessions, masters,
                                        self.report)
            self._refresh_kubeconfigs(sessions, masters)
            self._log_versions(kubectl)
        return plan, self.flow.finish('cluster upgrade', self.report)

    # -- facts and refusals -------------------------------------------------

    def _plan(self, sessions, kubectl, leader, masters, workers):
        host = kubectl.host
        with step_report.step(host, upgrade_plan.CHECK_STEP):
            listing = kubectl.run(['get', 'nodes', '-o', 'json']).stdout
            api_nodes = upgrade_plan.parse_nodes(listing)
            config = kubectl.run(upgrade_plan.KUBEADM_CONFIG, check=False)
            cluster_version = upgrade_plan.parse_cluster_version(
                config.stdout) if config.ok else None
            budgets = upgrade_plan.never_evicting_budgets(kubectl.run(
                ['get', 'poddisruptionbudgets', '-A', '-o', 'json']).stdout)
            cordons = upgrade_plan.driver_cordons(listing)
        problems = upgrade_plan.refusals(cluster_version, self.target,
                                         api_nodes, budgets,
                                         self.drain_force)
        if len(masters) > 1:
            problems += self._etcd_problems(leader)
        if problems:
            raise upgrade_plan.refusal_error(problems, host)
        host_facts = {}

        def gather(node):
            result = self.flow.session(sessions, node).run(
                ['sh', '-c', upgrade_plan.FACTS_SCRIPT], sudo=True,
                description='upgrade facts')
            host_facts[node.address] = upgrade_plan.parse_host_facts(
                result.stdout)

        self.flow.on_hosts('upgrade fact check', {
            node.address: functools.partial(gather, node)
            for node in masters + workers})
        problems = upgrade_plan.identity_refusals(masters + workers,
                                                  api_nodes, host_facts)
        if problems:
            raise upgrade_plan.refusal_error(problems, host)
        return upgrade_plan.plan_upgrade(
            masters, workers, cluster_version, self.target,
            self.package_version, api_nodes, host_facts, cordons,
            self.max_unavailable)

    def _etcd_problems(self, leader):
        """etcd's health as a refusal: every member must answer. Asked
        without installing anything (the check of _start changes no
        host); not checked, with a note, on a Master without curl."""
        try:
            with step_report.step(leader.host, 'etcd check'):
                checked = etcd.check_health(leader)
        except exceptions.StepError as error:
            return [('cluster', 'etcd is not healthy: %s' % error.reason)]
        if not checked:
            LOG.warning('%s has no curl: etcd\'s health was not checked',
                        leader.host)
            self.report.record(leader.host, 'etcd check', False,
                               'not checked: no curl on the Master')
        return []

    def _log_plan(self, plan):
        LOG.info('Kubernetes upgrade %s -> %s: %s; Workers %d at a time',
                 upgrade_plan.shown(plan.cluster_version),
                 upgrade_plan.shown(plan.target), '; '.join(
                     '%s %s (%s)' % (step.name, 'done' if step.done
                                     else step.action,
                                     step.reason or 'at the target')
                     for step in plan.steps), plan.wave_size)

    # -- one wave, one node ---------------------------------------------------

    def _upgrade_wave(self, sessions, kubectl, wave):
        """The nodes of one wave at once (a Master or a lone Worker
        directly: its StepError names host and step). Every node of the
        wave runs to its end; then the Workers that failed are named
        together, and the operation stops. Their drains take turns on the
        PodDisruptionBudgets they share (``budgets.WaveGate``)."""
        upgrade_node = functools.partial(self._upgrade_node, sessions,
                                         kubectl, gate=self._wave_gate(
                                             kubectl, wave))
        if len(wave) == 1:
            upgrade_node(wave[0])
            return
        LOG.info('Upgrading a wave of %d Workers at once: %s', len(wave),
                 ', '.join(step.name for step in wave))
        parallel.run_on_nodes(WAVE_STEP, upgrade_node, {
            step.node.address: step for step in wave},
            min(len(wave), self.conf.max_concurrent_nodes))

    def _wave_gate(self, kubectl, wave):
        """The WaveGate of the wave's drains; None when none drains, with
        drain_force (no budget is asked) or when there is no budget."""
        drained = [step.name for step in wave if step.action == 'worker']
        if not drained or self.drain_force:
            return None
        with step_report.step(kubectl.host, BUDGET_STEP):
            listed = kubectl.run(['get', 'poddisruptionbudgets', '-A', '-o',
                                  'json']).stdout
            if not budgets.listed_any(listed):
                return None
            pods = kubectl.run(['get', 'pods', '-A', '-o', 'json']).stdout
            return budgets.WaveGate(budgets.coverage(pods, listed, drained),
                                    self.conf.drain_timeout)

    # -- one node -------------------------------------------------------------

    def _upgrade_node(self, sessions, kubectl, step, gate=None):
        executor = self.flow.session(sessions, step.node)
        host = executor.host
        LOG.info('Upgrading %s (%s) to %s: %s', step.name, host,
                 upgrade_plan.shown(self.target), step.reason)
        if step.action == 'apply':
            self.etcd_snapshot = etcd_snapshot.take(
                self.flow, sessions, executor, etcd_snapshot.UPGRADE,
                self.report)
        if step.action != 'uncordon':
            self._upgrade_software(executor, kubectl, step, gate)
        if step.action in ('worker', 'uncordon'):
            self._uncordon(kubectl, host, step)
        with step_report.step(host, 'Node readiness'):
            self._wait_ready_at_target(kubectl, step)
        self.report.record(host, 'Node %s' % step.name, True,
                           'Ready at %s' % upgrade_plan.shown(self.target))

    def _upgrade_software(self, executor, kubectl, step, gate):
        """The packages and kubeadm upgrade of a node; a Worker cordoned
        and drained first."""
        host = executor.host
        with step_report.step(host, 'install script upload'):
            executor.install_file(self.script, cluster.SCRIPT_PATH,
                                  mode='0755')
        self._stage(executor, 'kubeadm')
        if step.action == 'worker':
            if not step.keep_cordon:
                with step_report.step(host, 'cordon'):
                    kubectl.run(upgrade_plan.cordon_argv(step.name,
                                                         self.target))
            self._drain(kubectl, step.name, gate)
        argv = self._kubeadm_argv(step.action)
        with step_report.step(host, 'kubeadm upgrade %s' % (
                'apply' if step.action == 'apply' else 'node')):
            host_lock.run_exclusive(executor, argv, ' '.join(argv),
                                    self.conf.cluster_install_timeout)
            if step.action != 'worker':
                cert_renewal.wait_for_api(self.flow.kubectl(executor),
                                          self.conf.node_ready_timeout)
        self.report.record(host, 'kubeadm upgrade %s' % step.action, True,
                           upgrade_plan.shown(self.target))
        self._stage(executor, 'kubelet')

    def _uncordon(self, kubectl, host, step):
        """Uncordon a Worker the upgrade cordoned; one the operator had
        cordoned before stays so."""
        if step.keep_cordon:
            self.report.record(host, 'uncordon of %s' % step.name, False,
                               'cordoned before the upgrade: left cordoned')
            return
        with step_report.step(host, 'uncordon'):
            kubectl.run(upgrade_plan.uncordon_argv(step.name))
        self.report.record(host, 'uncordon of %s' % step.name, True)

    def _kubeadm_argv(self, action):
        if action == 'apply':
            return ['kubeadm', 'upgrade', 'apply',
                    upgrade_plan.shown(self.target), '--yes']
        return ['kubeadm', 'upgrade', 'node']

    def _stage(self, executor, stage):
        """The new install script's ``-U stage`` on the node."""
        argv = ['bash', cluster.SCRIPT_PATH, '-U', stage]
        if stage == 'kubeadm':
            argv += upgrade_plan.script_sources(
                self.flow.params.offline.script_options(), self.target)
        env = cluster.script_environment(
            self.flow.params.proxy, self.flow.params.network,
            self.endpoint, [node.fixed_ip
                            for node in self.flow.topology.cluster_nodes])
        with step_report.step(executor.host, '%s package upgrade' % stage):
            result = host_lock.run_exclusive(
                executor, argv, 'install_k8s_cluster.sh -U %s' % stage,
                self.conf.package_install_timeout, env=env or None)
        self.report.record(executor.host, '%s packages' % stage, True,
                           ', '.join(line for line in
                                     result.stdout.splitlines()
                                     if line.startswith(('kube',)))[-300:])

    def _drain(self, kubectl, name, gate):
        """Evict the Worker's pods (kubectl drain uses the Eviction API,
        respecting PodDisruptionBudgets unless drain_force), once ``gate``
        lets it, all within drain_timeout."""
        timeout = self.conf.drain_timeout

        def run_drain(seconds):
            result = kubectl.run(cluster.drain_argv(name, seconds,
                                                    self.drain_force),
                                 check=False, timeout=seconds + 60)
            if not result.ok:
                outcome = drain.classify(result.stderr)
                raise drain.failure(name, outcome, timeout,
                                    drain.budgets_of(kubectl,
                                                     outcome.budget_refused))

        with step_report.step(kubectl.host, 'drain of %s' % name):
            if gate:
                gate.drain(kubectl, name, run_drain)
            else:
                run_drain(timeout)
        self.report.record(kubectl.host, 'drain of %s' % name, True)

    def _wait_ready_at_target(self, kubectl, step):
        """Until the node's Node reports the target kubelet, then Ready:
        two watches (kubectl wait), within node_ready_timeout."""
        timeout = self.conf.node_ready_timeout
        deadline = time.monotonic() + timeout
        target = upgrade_plan.shown(self.target)
        for condition in ('jsonpath={.status.nodeInfo.kubeletVersion}=%s'
                          % target, 'condition=Ready'):
            left = max(1, int(deadline - time.monotonic()))
            result = kubectl.run(['wait', '--for=' + condition,
                                  '--timeout=%ds' % left,
                                  'node/%s' % step.name],
                                 check=False, timeout=left + 60)
            if not result.ok:
                raise exceptions.ClusterInstallError(
                    'Node %s is not Ready at %s after %ds: %s' % (
                        step.name, target, timeout,
                        self._node_state(kubectl, step)))

    def _node_state(self, kubectl, step):
        """'kubelet v1.36.1, not Ready' of the step's Node, for an error."""
        result = kubectl.run(['get', 'nodes', '-o', 'json'], check=False)
        try:
            node = upgrade_plan.parse_nodes(result.stdout).get(
                step.node.fixed_ip) if result.ok else None
        except exceptions.ClusterInstallError:
            node = None
        return 'kubelet %s, %s' % (
            upgrade_plan.shown(node.kubelet) if node and node.kubelet
            else 'unknown', 'Ready' if node and node.ready else 'not Ready')

    # -- afterwards -----------------------------------------------------------

    def _refresh_kubeconfigs(self, sessions, masters):
        """The login user's copy of admin.conf follows the one kubeadm
        upgrade renewed."""
        def refresh(node):
            executor = self.flow.session(sessions, node)
            executor.run(['sh', '-c', cert_renewal.USER_KUBECONFIG_SCRIPT],
                         sudo=True, description='kubeconfig update')

        self.flow.on_hosts('kubeconfig update', {
            node.address: functools.partial(refresh, node)
            for node in masters})

    def _log_versions(self, kubectl):
        listing = kubectl.run(['get', 'nodes', '-o', 'json']).stdout
        try:
            nodes = upgrade_plan.parse_nodes(listing)
        except exceptions.ClusterInstallError as error:  # the upgrade is done
            LOG.warning('Kubernetes upgraded to %s; Node versions not '
                        'listed: %s', upgrade_plan.shown(self.target), error)
            return
        LOG.info('Kubernetes upgraded to %s: %s', upgrade_plan.shown(
            self.target), ', '.join('%s kubelet %s' % (
                node.name, upgrade_plan.shown(node.kubelet)
                if node.kubelet else 'unknown')
                for node in sorted(nodes.values(), key=lambda n: n.name)))
