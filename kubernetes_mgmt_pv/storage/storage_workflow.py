"""The persistent-volume step sequence of each LCM hook, free of Tacker.

Every flow first resolves all it needs from Heat (the topology, devices) so
a bad stack fails before any host is touched; then it opens one SSH session
per host for the whole flow and runs the idempotent steps.
"""

import dataclasses
import functools

from oslo_log import log as logging

from kubernetes_mgmt_pv import exceptions
from kubernetes_mgmt_pv import flow
from kubernetes_mgmt_pv.remote import dpkg
from kubernetes_mgmt_pv.request import lcm_requests
from kubernetes_mgmt_pv import step_report
from kubernetes_mgmt_pv.storage import dynamic
from kubernetes_mgmt_pv.storage import export_access
from kubernetes_mgmt_pv.storage import nfs_client
from kubernetes_mgmt_pv.storage import pv
from kubernetes_mgmt_pv.storage import storage_setup

LOG = logging.getLogger(__name__)

REGISTRATION = 'PersistentVolume registration'


@dataclasses.dataclass(frozen=True)
class DeployCheck(object):
    """What ``PvWorkflow.deploy`` would do, from the gathered facts."""
    clients: dict  # nfs_client.ClientFacts by node address
    storage: str  # the storage server's address
    server: object  # its storage.ServerPlan
    registrar: str = None  # the Master kubectl registers the PVs on
    registration: object = None  # pv.RegistrationPlan; None: no PV


class PvWorkflow(flow.Flow):
    """Storage server, NFS clients and PersistentVolumes of one VNF.

    Each flow returns the Report of what it alone did.
    """

    def __init__(self, params, manifests, heat, conf=None,
                 credential_overrides=None, sessions=None, key_project=None,
                 csi=None):
        super().__init__(params, heat, conf=conf,
                         credential_overrides=credential_overrides,
                         sessions=sessions, key_project=key_project)
        self.manifests = manifests
        # csi_driver.CsiManifests of the storage classes; None: no class.
        self.csi = csi

    # -- lookups (no host touched) -----------------------------------------

    def _volume_attachments(self):
        return {volume.volume_resource_id:
                self.heat.volume_attachment(volume.volume_resource_id)
                for volume in self.params.storage.volumes}

    def _nfs_servers(self):
        """NFS server address per nfs_server_cp: the CP's fixed IP, which
        the cluster nodes reach on the internal network."""
        cps = {manifest.nfs_server_cp for manifest in self.manifests}
        return {cp: self.heat.cp_address(cp).fixed_ip for cp in sorted(cps)}

    def _server_addresses(self, servers):
        """The addresses the nodes mount from: the PVs' NFS servers, else
        the Storage server's fixed IP."""
        return sorted(set(servers.values())) or [
            self.topology.storage.fixed_ip]

    # -- the export check (before any change) -------------------------------

    def _client_preflight(self, sessions, nodes, server_addresses,
                          storage=None, reachable_only=False):
        """{address: nfs_client.ClientFacts} of the nodes, each from one
        command, with their OS checked; the Storage server's OS too, when
        given, at the same time.

        ``reachable_only``: nodes that do not answer SSH are left out (the
        export check then uses their nic_cp_name address) and their OS is
        not checked: nothing is installed on them.
        """
        facts = {}

        def client(node):
            if reachable_only and not flow.answers_ssh(node.address):
                LOG.warning('%s does not answer SSH: its route to the '
                            'Storage server is unknown', node.address)
                return
            executor = self.session(sessions, node)
            found = nfs_client.gather_facts(executor, server_addresses)
            if not reachable_only:
                dpkg.check_os_release(executor.host, found.os_release,
                                      self.conf.supported_os)
            facts[node.address] = found

        tasks = {node.address: functools.partial(client, node)
                 for node in nodes}
        if storage is not None:
            tasks[storage.address] = functools.partial(
                self._check_os, sessions, storage)
        self.on_hosts('pre-flight check', tasks)
        return facts

    def _check_os(self, sessions, node):
        dpkg.check_supported_os(self.session(sessions, node),
                                self.conf.supported_os)

    def _clients(self, nodes, facts, server_addresses):
        """export_access.Client of each address a node mounts from."""
        clients = []
        for node in nodes:
            named = '%s %s (%s)' % (node.role, node.address, node.name)
            sources = facts[node.address].sources if node.address in facts \
                else {}
            for address in server_addresses:
                source = sources.get(address)
                if source is None:
                    LOG.warning('%s: no route to the Storage server %s found;'
                                ' the exports are checked against its '
                                'nic_cp_name address %s', named, address,
                                node.fixed_ip)
                    client = export_access.Client(named, node.fixed_ip,
                                                  from_route=False)
                else:
                    client = export_access.Client(named, source)
                if client not in clients:
                    clients.append(client)
        return clients

    def _check_exports(self, sessions, nodes, facts, server_addresses):
        """Refuse, before any change, exports that leave a node out."""
        exports = self.params.storage.exports
        clients = self._clients(nodes, facts, server_addresses)
        wanted = export_access.lookups(
            exports, [client.address for client in clients])
        resolution = export_access.Resolution()
        if wanted:
            storage = self.topology.storage
            with step_report.step(storage.address, 'export_to resolution'):
                resolution = export_access.resolve(
                    self.session(sessions, storage), wanted)
        findings = export_access.check(exports, clients, resolution)
        for node, address, directory, targets in findings.unverified:
            LOG.warning('%s at %s: cannot check whether %s grants it %s; '
                        'if not, it cannot mount that PersistentVolume',
                        node, address, ', '.join(targets), directory)
        if findings.violations:
            raise exceptions.StorageSetupError(
                export_access.refusal(findings.violations))

    # -- flows --------------------------------------------------------------

    def _setup_storage(self, sessions, node, attachments, report,
                       volumes_kept=False):
        storage_setup.setup_storage_server(
            self.session(sessions, node), self.params.storage, attachments,
            self.params.proxy, self.conf, report, volumes_kept)

    def _install_client(self, sessions, node, facts, report):
        nfs_client.install_nfs_client(self.session(sessions, node),
                                      self.params.proxy, self.conf, report,
                                      facts[node.address].statuses)

    def _registrar(self, sessions):
        """kubectl for the registration, its Master checked before the
        flow changes anything; None when there is nothing to register."""
        if not self.manifests and self.csi is None:
            return None
        return self.kubectl_session(sessions, self.topology.masters,
                                    REGISTRATION)

    def _register(self, kubectl, servers, report):
        if kubectl is not None and self.manifests:
            with step_report.step(kubectl.host, REGISTRATION):
                pv.register_volumes(kubectl, self.manifests, servers,
                                    self.conf.pv_available_timeout, report)

    def _provision(self, kubectl, report):
        """csi-driver-nfs, then the StorageClasses on the Storage
        server's fixed IP (which the nodes mount from)."""
        if kubectl is None or self.csi is None:
            return
        with step_report.step(kubectl.host, dynamic.DRIVER_STEP):
            dynamic.install_driver(
                kubectl, self.csi, self.params.offline.registry_mirror_url,
                self.conf.csi_driver_ready_timeout, report)
        with step_report.step(kubectl.host, dynamic.CLASSES_STEP):
            dynamic.register_classes(kubectl,
                                     self.params.storage.storage_classes,
                                     self.topology.storage.fixed_ip, report)

    def deploy(self):
        """instantiate_end and entire-cluster heal: storage, clients, PVs."""
        report = step_report.Report()
        storage, nodes = self.topology.storage, self.topology.cluster_nodes
        attachments, servers = self._volume_attachments(), self._nfs_servers()
        addresses = self._server_addresses(servers)
        with self.sessions() as sessions:
            facts = self._client_preflight(sessions, nodes, addresses,
                                           storage=storage)
            self._check_exports(sessions, nodes, facts, addresses)
            kubectl = self._registrar(sessions)
            # The storage server and the clients do not depend on each
            # other: set them up at the same time.
            tasks = {node.address: functools.partial(
                self._install_client, sessions, node, facts, report)
                for node in nodes}
            tasks[storage.address] = functools.partial(
                self._setup_storage, sessions, storage, attachments, report)
            self.on_hosts('storage server and NFS client setup', tasks)
            self._register(kubectl, servers, report)
            self._provision(kubectl, report)
        return self.finish('deploy', report)

    def check_deploy(self, sessions, report):
        """What ``deploy`` would change, changing nothing: its
        ``DeployCheck``. The exports are checked against the nodes as
        ``deploy`` does."""
        storage, nodes = self.topology.storage, self.topology.cluster_nodes
        attachments, servers = self._volume_attachments(), self._nfs_servers()
        addresses = self._server_addresses(servers)
        facts = self._client_preflight(sessions, nodes, addresses,
                                       storage=storage)
        self._check_exports(sessions, nodes, facts, addresses)
        server, _ = storage_setup.plan(self.session(sessions, storage),
                                       self.params.storage, attachments,
                                       report)
        kubectl = self._registrar(sessions)
        if kubectl is None:
            return DeployCheck(facts, storage.address, server)
        with step_report.step(kubectl.host, REGISTRATION):
            live = pv.live_volumes(kubectl, [manifest.name
                                             for manifest in self.manifests])
            return DeployCheck(facts, storage.address, server, kubectl.host,
                               pv.plan_registration(self.manifests, servers,
                                                    live))

    def release_storage(self, skip_if_unreachable=False):
        """heal_start of the storage server or of the entire cluster (both
        re-create the storage VM and its volume): refuse if a PV is Bound,
        one of the package or of a storage class, else delete the
        package's PVs and wait until they are gone.

        When the PVs cannot be read (no Master answers, or kubectl fails on
        it), ``skip_if_unreachable`` (the request's SKIP_PV_CHECK) lets the
        heal go on without them; otherwise it is refused.
        """
        report = step_report.Report()
        names = [manifest.name for manifest in self.manifests]
        classes = [] if self.csi is None else [
            spec.name for spec in self.params.storage.storage_classes]
        if not names and not classes:
            return self.finish('release_storage', report)
        masters = self.topology.masters
        with self.sessions() as sessions:
            step = 'PersistentVolume check'
            try:
                kubectl = self.kubectl_session(sessions, masters, step)
                with step_report.step(kubectl.host, step):
                    live = pv.live_volumes(kubectl, names, classes)
            except (exceptions.RemoteConnectError,
                    exceptions.StepError) as error:
                reason = pv.unchecked_release(
                    error, skip_if_unreachable,
                    'additionalParams.' + lcm_requests.SKIP_PV_CHECK)
                LOG.warning('The PersistentVolumes %s are neither checked '
                            'nor deleted, as %s asks: %s', ', '.join(
                                names + ['of StorageClass %s' % name
                                         for name in classes]),
                            lcm_requests.SKIP_PV_CHECK, reason)
                return self.finish('release_storage', report)
            pv.refuse_if_bound(live, kubectl.host)
            if names:
                with step_report.step(kubectl.host,
                                      'PersistentVolume deletion'):
                    pv.delete_volumes(kubectl, names,
                                      self.conf.pv_delete_timeout, report)
        return self.finish('release_storage', report)

    def rebuild_storage(self, volumes_kept=False):
        """heal_end of the storage server: set up the new VM, PVs again.

        ``volumes_kept``: the heal kept the volumes (their data) and the
        port: their filesystems are mounted and exported again, never
        formatted, and the PVs, still there and maybe Bound, are left
        untouched. The storage classes are checked either way.
        """
        report = step_report.Report()
        storage, nodes = self.topology.storage, self.topology.cluster_nodes
        attachments, servers = self._volume_attachments(), self._nfs_servers()
        addresses = self._server_addresses(servers)
        with self.sessions() as sessions:
            kubectl = self._registrar(sessions)
            facts = self._client_preflight(sessions, nodes, addresses,
                                           storage=storage,
                                           reachable_only=True)
            self._check_exports(sessions, nodes, facts, addresses)
            self._setup_storage(sessions, storage, attachments, report,
                                volumes_kept)
            if not volumes_kept:
                self._register(kubectl, servers, report)
            self._provision(kubectl, report)
        return self.finish('rebuild_storage', report)

    def install_clients(self, nodes):
        """NFS client on new or healed nodes (topology.Node)."""
        report = step_report.Report()
        addresses = self._server_addresses(self._nfs_servers())
        with self.sessions() as sessions:
            facts = self._client_preflight(sessions, nodes, addresses)
            self._check_exports(sessions, nodes, facts, addresses)
            self.on_hosts('NFS client installation', {
                node.address: functools.partial(self._install_client,
                                                sessions, node, facts, report)
                for node in nodes})
            if self.csi is not None:
                self._wait_node_plugin(sessions)
        return self.finish('install_clients', report)

    def _wait_node_plugin(self, sessions):
        """Until csi-driver-nfs's node plugin runs on every node, the
        new ones too (they joined before this flow)."""
        kubectl = self.kubectl_session(sessions, self.topology.masters,
                                       dynamic.NODE_PLUGIN_STEP)
        with step_report.step(kubectl.host, dynamic.NODE_PLUGIN_STEP):
            for namespace, name in self.csi.node_daemonsets:
                dynamic.wait_rolled_out(kubectl, 'daemonset', namespace,
                                        name,
                                        self.conf.csi_driver_ready_timeout)
