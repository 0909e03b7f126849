"""The persistent-volume step sequence of each LCM hook, free of Tacker.

Every flow first resolves all it needs from Heat (the topology, devices) so
a bad stack fails before any host is touched; then it opens one SSH session
per host for the whole flow and runs the idempotent steps.
"""

import functools

from oslo_log import log as logging

from kubernetes_mgmt_pv import config
from kubernetes_mgmt_pv import exceptions
from kubernetes_mgmt_pv import host_keys
from kubernetes_mgmt_pv import nfs_client
from kubernetes_mgmt_pv import packages
from kubernetes_mgmt_pv import parallel
from kubernetes_mgmt_pv import pv
from kubernetes_mgmt_pv import remote
from kubernetes_mgmt_pv import report as report_mod
from kubernetes_mgmt_pv import storage as storage_mod
from kubernetes_mgmt_pv import topology as topology_mod

LOG = logging.getLogger(__name__)

REGISTRATION = 'PersistentVolume registration'


class PvWorkflow(object):
    """Storage server, NFS clients and PersistentVolumes of one VNF.

    Each flow returns the Report of what it alone did.
    """

    def __init__(self, params, manifests, heat, conf=None,
                 credential_overrides=None):
        self.params = params
        self.manifests = manifests
        self.heat = heat
        self.conf = conf or config.options()
        self._credential_overrides = credential_overrides
        self._topology = None

    # -- lookups (no host touched) -----------------------------------------

    @property
    def topology(self):
        """Every node of the VNF, resolved from Heat once per workflow (the
        workflow lives for one hook)."""
        if self._topology is None:
            self._topology = topology_mod.Topology.resolve(
                self.heat, self.params, self._credential_overrides)
        return self._topology

    def _volume_attachments(self):
        return {volume.volume_resource_id:
                self.heat.volume_attachment(volume.volume_resource_id)
                for volume in self.params.storage.volumes}

    def _nfs_servers(self):
        """NFS server address per nfs_server_cp: the CP's fixed IP, which
        the cluster nodes reach on the internal network."""
        cps = {manifest.nfs_server_cp for manifest in self.manifests}
        return {cp: self.heat.cp_address(cp).fixed_ip for cp in sorted(cps)}

    # -- flows --------------------------------------------------------------

    def _sessions(self):
        secrets = self.topology.passwords() + list(self.params.proxy.secrets())
        return remote.SessionPool(conf=self.conf, secrets=secrets,
                                  host_key_policy=self._host_key_policy)

    def _host_key_policy(self, address):
        """How to check the host key at address (None: as configured)."""
        if self.conf.host_key_policy != 'console':
            return None
        server_id = self.topology.server_id(self.topology.at_address(address))
        return host_keys.console_policy(self.heat.client, server_id,
                                        self.conf)

    @staticmethod
    def _session(sessions, node):
        return sessions.get(node.address, node.access.username,
                            node.access.password)

    def _preflight(self, sessions, nodes):
        """Log in to every host of the flow and check its OS, concurrently,
        before anything is changed: an unreachable host, a wrong password
        or an unsupported OS leaves every host as it was."""
        def check(node):
            packages.check_supported_os(self._session(sessions, node),
                                        self.conf.supported_os)

        self._on_hosts('pre-flight check', {
            node.address: functools.partial(check, node) for node in nodes})

    def _kubectl_session(self, sessions, masters, step):
        """An SSH session on the first Master that accepts one."""
        errors = []
        for node in masters:
            try:
                return self._session(sessions, node)
            except exceptions.RemoteConnectError as error:
                LOG.warning('Master %s unreachable: %s', node.address, error)
                errors.append('%s: %s' % (node.address,
                                          exceptions.failure_reason(
                                              error, node.address)))
        raise exceptions.RemoteConnectError(
            '%s failed: no Master node reachable for kubectl: %s' % (
                step, '; '.join(errors) or 'the stack has no Master node'))

    def _setup_storage(self, sessions, node, attachments, report):
        storage_mod.setup_storage_server(self._session(sessions, node),
                                         self.params.storage, attachments,
                                         self.params.proxy, self.conf,
                                         report)

    def _install_client(self, sessions, node, report):
        nfs_client.install_nfs_client(self._session(sessions, node),
                                      self.params.proxy, self.conf, report)

    def _on_hosts(self, step, tasks):
        """Run independent per-host tasks ({address: callable}) at once."""
        parallel.run_on_nodes(step, lambda task: task(), tasks,
                              self.conf.max_concurrent_nodes)

    def _register(self, executor, servers, report):
        if self.manifests:
            with report_mod.step(executor.host, REGISTRATION):
                pv.register_volumes(executor, self.manifests, servers,
                                    self.conf.pv_available_timeout, report)

    @staticmethod
    def _finish(flow, report):
        LOG.info('%s done: %s', flow, report.summary())
        return report

    def deploy(self):
        """instantiate_end and entire-cluster heal: storage, clients, PVs."""
        report = report_mod.Report()
        storage, nodes = self.topology.storage, self.topology.cluster_nodes
        attachments, servers = self._volume_attachments(), self._nfs_servers()
        with self._sessions() as sessions:
            self._preflight(sessions, [storage] + nodes)
            # The storage server and the clients do not depend on each
            # other: set them up at the same time.
            tasks = {node.address: functools.partial(
                self._install_client, sessions, node, report)
                for node in nodes}
            tasks[storage.address] = functools.partial(
                self._setup_storage, sessions, storage, attachments, report)
            self._on_hosts('storage server and NFS client setup', tasks)
            self._register(
                self._kubectl_session(sessions, self.topology.masters,
                                      REGISTRATION),
                servers, report)
        return self._finish('deploy', report)

    def release_storage(self):
        """heal_start of the storage server or of the entire cluster (both
        re-create the storage VM and its volume): refuse if a PV is Bound,
        else delete the package's PVs and wait until they are gone."""
        report = report_mod.Report()
        names = [manifest.name for manifest in self.manifests]
        if not names:
            return self._finish('release_storage', report)
        masters = self.topology.masters
        with self._sessions() as sessions:
            step = 'PersistentVolume check'
            executor = self._kubectl_session(sessions, masters, step)
            with report_mod.step(executor.host, step):
                live = pv.live_volumes(executor, names)
            pv.refuse_if_bound(live)
            with report_mod.step(executor.host, 'PersistentVolume deletion'):
                pv.delete_volumes(executor, names,
                                  self.conf.pv_delete_timeout, report)
        return self._finish('release_storage', report)

    def rebuild_storage(self):
        """heal_end of the storage server: set up the new VM, PVs again."""
        report = report_mod.Report()
        storage, masters = self.topology.storage, self.topology.masters
        attachments, servers = self._volume_attachments(), self._nfs_servers()
        with self._sessions() as sessions:
            kubectl = self._kubectl_session(sessions, masters, REGISTRATION)
            self._preflight(sessions, [storage])
            self._setup_storage(sessions, storage, attachments, report)
            self._register(kubectl, servers, report)
        return self._finish('rebuild_storage', report)

    def install_clients(self, nodes):
        """NFS client on new or healed nodes (topology.Node)."""
        report = report_mod.Report()
        with self._sessions() as sessions:
            self._preflight(sessions, nodes)
            self._on_hosts('NFS client installation', {
                node.address: functools.partial(self._install_client,
                                                sessions, node, report)
                for node in nodes})
        return self._finish('install_clients', report)
