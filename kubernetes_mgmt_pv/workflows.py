"""The persistent-volume step sequence of each LCM hook, free of Tacker.

Every flow first resolves all it needs from Heat (the topology, devices) so
a bad stack fails before any host is touched; then it opens one SSH session
per host for the whole flow and runs the idempotent steps.
"""

import functools

from kubernetes_mgmt_pv import flow
from kubernetes_mgmt_pv import nfs_client
from kubernetes_mgmt_pv import pv
from kubernetes_mgmt_pv import report as report_mod
from kubernetes_mgmt_pv import storage as storage_mod

REGISTRATION = 'PersistentVolume registration'


class PvWorkflow(flow.Flow):
    """Storage server, NFS clients and PersistentVolumes of one VNF.

    Each flow returns the Report of what it alone did.
    """

    def __init__(self, params, manifests, heat, conf=None,
                 credential_overrides=None, sessions=None):
        super().__init__(params, heat, conf=conf,
                         credential_overrides=credential_overrides,
                         sessions=sessions)
        self.manifests = manifests

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

    # -- flows --------------------------------------------------------------

    def _setup_storage(self, sessions, node, attachments, report):
        storage_mod.setup_storage_server(self.session(sessions, node),
                                         self.params.storage, attachments,
                                         self.params.proxy, self.conf,
                                         report)

    def _install_client(self, sessions, node, report):
        nfs_client.install_nfs_client(self.session(sessions, node),
                                      self.params.proxy, self.conf, report)

    def _register(self, executor, servers, report):
        if self.manifests:
            with report_mod.step(executor.host, REGISTRATION):
                pv.register_volumes(executor, self.manifests, servers,
                                    self.conf.pv_available_timeout, report)

    def deploy(self):
        """instantiate_end and entire-cluster heal: storage, clients, PVs."""
        report = report_mod.Report()
        storage, nodes = self.topology.storage, self.topology.cluster_nodes
        attachments, servers = self._volume_attachments(), self._nfs_servers()
        with self.sessions() as sessions:
            self.preflight(sessions, [storage] + nodes)
            # The storage server and the clients do not depend on each
            # other: set them up at the same time.
            tasks = {node.address: functools.partial(
                self._install_client, sessions, node, report)
                for node in nodes}
            tasks[storage.address] = functools.partial(
                self._setup_storage, sessions, storage, attachments, report)
            self.on_hosts('storage server and NFS client setup', tasks)
            self._register(
                self.kubectl_session(sessions, self.topology.masters,
                                      REGISTRATION),
                servers, report)
        return self.finish('deploy', report)

    def release_storage(self):
        """heal_start of the storage server or of the entire cluster (both
        re-create the storage VM and its volume): refuse if a PV is Bound,
        else delete the package's PVs and wait until they are gone."""
        report = report_mod.Report()
        names = [manifest.name for manifest in self.manifests]
        if not names:
            return self.finish('release_storage', report)
        masters = self.topology.masters
        with self.sessions() as sessions:
            step = 'PersistentVolume check'
            executor = self.kubectl_session(sessions, masters, step)
            with report_mod.step(executor.host, step):
                live = pv.live_volumes(executor, names)
            pv.refuse_if_bound(live)
            with report_mod.step(executor.host, 'PersistentVolume deletion'):
                pv.delete_volumes(executor, names,
                                  self.conf.pv_delete_timeout, report)
        return self.finish('release_storage', report)

    def rebuild_storage(self):
        """heal_end of the storage server: set up the new VM, PVs again."""
        report = report_mod.Report()
        storage, masters = self.topology.storage, self.topology.masters
        attachments, servers = self._volume_attachments(), self._nfs_servers()
        with self.sessions() as sessions:
            kubectl = self.kubectl_session(sessions, masters, REGISTRATION)
            self.preflight(sessions, [storage])
            self._setup_storage(sessions, storage, attachments, report)
            self._register(kubectl, servers, report)
        return self.finish('rebuild_storage', report)

    def install_clients(self, nodes):
        """NFS client on new or healed nodes (topology.Node)."""
        report = report_mod.Report()
        with self.sessions() as sessions:
            self.preflight(sessions, nodes)
            self.on_hosts('NFS client installation', {
                node.address: functools.partial(self._install_client,
                                                sessions, node, report)
                for node in nodes})
        return self.finish('install_clients', report)
