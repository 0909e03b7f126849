"""The persistent-volume step sequence of each LCM hook, free of Tacker.

Every flow first resolves all it needs from Heat (addresses, devices) so a
bad stack fails before any host is touched; then it opens one SSH session
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

LOG = logging.getLogger(__name__)

REGISTRATION = 'PersistentVolume registration'


class PvWorkflow(object):
    """Storage server, NFS clients and PersistentVolumes of one VNF."""

    def __init__(self, params, manifests, heat, conf=None):
        self.params = params
        self.manifests = manifests
        self.heat = heat
        self.conf = conf or config.options()
        self.report = report_mod.Report()
        # SSH address -> (CP name, stack id) it was found at, so the host
        # key of the VM behind it can be checked against Nova's console.
        self._found_at = {}

    # -- lookups (no host touched) -----------------------------------------

    def _address(self, cp_name, stack_id=None):
        address = self.heat.cp_address(cp_name, stack_id=stack_id).ssh_host
        self._found_at[address] = (cp_name, stack_id)
        return address

    def storage_address(self):
        return self._address(self.params.storage.ssh_cp_name)

    def _volume_attachments(self):
        return {volume.volume_resource_id:
                self.heat.volume_attachment(volume.volume_resource_id)
                for volume in self.params.storage.volumes}

    def _nfs_servers(self):
        """NFS server address per nfs_server_cp: the CP's fixed IP, which
        the cluster nodes reach on the internal network."""
        cps = {manifest.nfs_server_cp for manifest in self.manifests}
        return {cp: self.heat.cp_address(cp).fixed_ip for cp in sorted(cps)}

    def _nodes(self, access):
        if access is None:
            return []
        if access.aspect_id is None:
            return [self.node_in_stack(access, None)]
        return self.member_nodes(
            access, self.heat.group_member_stack_ids(access.aspect_id))

    def masters(self):
        return self._nodes(self.params.master)

    def all_nodes(self):
        return self.masters() + self._nodes(self.params.worker)

    def node_in_stack(self, access, stack_id):
        """(address, access) of the node whose CP is in stack_id (None: the
        top-level stack)."""
        return self._address(access.ssh_cp_name, stack_id), access

    def member_nodes(self, access, member_stack_ids):
        """Nodes of the given scaling-group members (new VMs of a scale-out)."""
        return [self.node_in_stack(access, member)
                for member in member_stack_ids]

    # -- flows --------------------------------------------------------------

    def _sessions(self):
        params = self.params
        secrets = [params.storage.password] + list(params.proxy.secrets())
        secrets += [n.password for n in (params.master, params.worker) if n]
        return remote.SessionPool(conf=self.conf, secrets=secrets,
                                  host_key_policy=self._host_key_policy)

    def _host_key_policy(self, address):
        """How to check the host key at address (None: as configured)."""
        if self.conf.host_key_policy != 'console':
            return None
        cp_name, stack_id = self._found_at[address]
        server_id = self.heat.cp_server_id(cp_name, stack_id)
        return host_keys.console_policy(self.heat.client, server_id,
                                        self.conf)

    def _preflight(self, sessions, targets):
        """Log in to every host of the flow and check its OS, concurrently,
        before anything is changed: an unreachable host, a wrong password
        or an unsupported OS leaves every host as it was."""
        def check(address, access):
            executor = sessions.get(address, access.username, access.password)
            packages.check_supported_os(executor, self.conf.supported_os)

        self._on_hosts('pre-flight check', {
            address: functools.partial(check, address, access)
            for address, access in targets})

    def _kubectl_session(self, sessions, masters, step):
        """An SSH session on the first Master that accepts one."""
        errors = []
        for address, access in masters:
            try:
                return sessions.get(address, access.username, access.password)
            except exceptions.RemoteConnectError as error:
                LOG.warning('Master %s unreachable: %s', address, error)
                errors.append('%s: %s' % (
                    address, exceptions.failure_reason(error, address)))
        raise exceptions.RemoteConnectError(
            '%s failed: no Master node reachable for kubectl: %s' % (
                step, '; '.join(errors) or 'the stack has no Master node'))

    def _setup_storage(self, sessions, address, attachments):
        storage = self.params.storage
        executor = sessions.get(address, storage.username, storage.password)
        storage_mod.setup_storage_server(executor, storage, attachments,
                                         self.params.proxy, self.conf,
                                         self.report)

    def _install_client(self, sessions, node):
        address, access = node
        executor = sessions.get(address, access.username, access.password)
        nfs_client.install_nfs_client(executor, self.params.proxy, self.conf,
                                      self.report)

    def _on_hosts(self, step, tasks):
        """Run independent per-host tasks ({address: callable}) at once."""
        parallel.run_on_nodes(step, lambda task: task(), tasks,
                              self.conf.max_concurrent_nodes)

    def _register(self, executor, servers):
        if self.manifests:
            with report_mod.step(executor.host, REGISTRATION):
                pv.register_volumes(executor, self.manifests, servers,
                                    self.conf.pv_available_timeout,
                                    self.report)

    def _finish(self, flow):
        LOG.info('%s done: %s', flow, self.report.summary())
        return self.report

    def deploy(self):
        """instantiate_end and entire-cluster heal: storage, clients, PVs."""
        address, attachments = self.storage_address(), self._volume_attachments()
        servers, nodes = self._nfs_servers(), self.all_nodes()
        masters = self.masters()
        with self._sessions() as sessions:
            self._preflight(sessions,
                            [(address, self.params.storage)] + nodes)
            # The storage server and the clients do not depend on each
            # other: set them up at the same time.
            tasks = {node[0]: functools.partial(self._install_client,
                                                sessions, node)
                     for node in nodes}
            tasks[address] = functools.partial(self._setup_storage, sessions,
                                               address, attachments)
            self._on_hosts('storage server and NFS client setup', tasks)
            self._register(
                self._kubectl_session(sessions, masters, REGISTRATION),
                servers)
        return self._finish('deploy')

    def release_storage(self):
        """heal_start of the storage server or of the entire cluster (both
        re-create the storage VM and its volume): refuse if a PV is Bound,
        else delete the package's PVs and wait until they are gone."""
        names = [manifest.name for manifest in self.manifests]
        if not names:
            return self._finish('release_storage')
        masters = self.masters()
        with self._sessions() as sessions:
            step = 'PersistentVolume check'
            executor = self._kubectl_session(sessions, masters, step)
            with report_mod.step(executor.host, step):
                live = pv.live_volumes(executor, names)
            pv.refuse_if_bound(live)
            with report_mod.step(executor.host, 'PersistentVolume deletion'):
                pv.delete_volumes(executor, names,
                                  self.conf.pv_delete_timeout, self.report)
        return self._finish('release_storage')

    def rebuild_storage(self):
        """heal_end of the storage server: set up the new VM, PVs again."""
        address, attachments = self.storage_address(), self._volume_attachments()
        servers, masters = self._nfs_servers(), self.masters()
        with self._sessions() as sessions:
            kubectl = self._kubectl_session(sessions, masters, REGISTRATION)
            self._preflight(sessions, [(address, self.params.storage)])
            self._setup_storage(sessions, address, attachments)
            self._register(kubectl, servers)
        return self._finish('rebuild_storage')

    def install_clients(self, nodes):
        """NFS client on new or healed nodes, given as (address, access)."""
        with self._sessions() as sessions:
            self._preflight(sessions, nodes)
            self._on_hosts('NFS client installation', {
                node[0]: functools.partial(self._install_client, sessions,
                                           node) for node in nodes})
        return self._finish('install_clients')
