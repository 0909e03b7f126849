"""What every flow of a hook shares: the parameters, the Heat stack, the
topology resolved once, one SSH session per host, and per-host steps run
concurrently.

The cluster flows (``cluster_workflow``) and the persistent-volume flows
(``storage_workflow``) both build on ``Flow``. Within one hook they share the
hook's ``remote.SessionPool``, so a host is logged in to once per hook
whichever features touch it.
"""

import contextlib
import functools
import socket

from oslo_log import log as logging

from kubernetes_mgmt_pv import admin_kubectl
from kubernetes_mgmt_pv import config
from kubernetes_mgmt_pv import exceptions
from kubernetes_mgmt_pv.openstack import vnf_topology
from kubernetes_mgmt_pv import redaction
from kubernetes_mgmt_pv.remote import dpkg
from kubernetes_mgmt_pv.remote import host_keys
from kubernetes_mgmt_pv.remote import parallel
from kubernetes_mgmt_pv.remote import remote
from kubernetes_mgmt_pv.remote import ssh_keys
from kubernetes_mgmt_pv import step_report

LOG = logging.getLogger(__name__)


def answers_ssh(address, timeout=3.0):
    """Whether something accepts connections on the SSH port of address:
    a quick look before a best-effort step on a VM that may be dead, which
    a login would wait for through all its retries."""
    try:
        with socket.create_connection((address, 22), timeout=timeout):
            return True
    except OSError:
        return False


class MasterKubectl(object):
    """kubectl on one Master, built by ``admin_kubectl.kubectl_argv``
    whichever feature runs it; ``host`` and ``failure`` are its
    session's."""

    def __init__(self, executor, address):
        self._executor = executor
        self._address = address  # the Master's nic_cp_name address
        self.host = executor.host

    def run(self, args, **kwargs):
        return self._executor.run(
            admin_kubectl.kubectl_argv(self._address, args), sudo=True,
            **kwargs)

    def failure(self, description, result):
        return self._executor.failure(description, result)


class Flow(object):
    """The plumbing of one feature's flows in one hook.

    ``sessions``: the hook's SessionPool (the flow does not close it); by
    default each flow opens and closes its own. ``key_project``: called
    for the project id of the VNF instance when key files are looked up
    per project (``ssh_keys.load_configured``).
    """

    def __init__(self, params, heat, conf=None, credential_overrides=None,
                 sessions=None, key_project=None):
        self.params = params
        self.heat = heat
        self.conf = conf or config.options()
        self._credential_overrides = credential_overrides
        self._shared_sessions = sessions
        self._key_project = key_project
        self._topology = None
        self._keys = None

    @property
    def topology(self):
        """Every node of the VNF, resolved from Heat once per flow object
        (which lives for one hook)."""
        if self._topology is None:
            self._topology = vnf_topology.Topology.resolve(
                self.heat, self.params, self._credential_overrides)
        return self._topology

    @contextlib.contextmanager
    def sessions(self):
        """The SSH sessions of the flow, with the nodes' passwords and the
        proxy credentials redacted from everything they log or raise, and
        a session permit reserved for each node of the VNF; the key files
        the logins name are read first, so an unusable one refuses the
        hook before any host is touched."""
        self._load_keys()
        secrets = self.topology.passwords() + list(self.params.proxy.secrets())
        hosts = len({node.address for node in self.topology.nodes})
        if self._shared_sessions is not None:
            self._shared_sessions.hide(*secrets)
            self._shared_sessions.reserve(hosts)
            yield self._shared_sessions
            return
        with remote.SessionPool(conf=self.conf, secrets=secrets) as pool:
            pool.reserve(hosts)
            yield pool

    def _host_key_policy(self, address):
        """How to check the host key at address (None: as configured)."""
        if self.conf.host_key_policy != 'console':
            return None
        server_id = self.topology.server_id(self.topology.at_address(address))
        return host_keys.console_policy(self.heat.client, server_id,
                                        self.conf)

    def _load_keys(self):
        if self._keys is None:
            self._keys = ssh_keys.load_configured(
                vnf_topology.named_key_files(self.params,
                                             self._credential_overrides),
                self.conf, self._key_project)
        return self._keys

    def session(self, sessions, node):
        name = node.access.ssh_key
        return sessions.get(node.address, node.access.username,
                            node.access.password,
                            host_key_policy=self._host_key_policy,
                            pkey=self._load_keys()[name] if name else None)

    def preflight(self, sessions, nodes):
        """Log in to every host of the flow and check its OS, concurrently,
        before anything is changed: an unreachable host, a wrong password
        or an unsupported OS leaves every host as it was."""
        def check(node):
            dpkg.check_supported_os(self.session(sessions, node),
                                    self.conf.supported_os)

        self.on_hosts('pre-flight check', {
            node.address: functools.partial(check, node) for node in nodes})

    def kubectl(self, executor):
        """kubectl on the Master that ``executor`` is logged in to."""
        node = self.topology.at_address(executor.host)
        return MasterKubectl(executor, node.fixed_ip)

    def kubectl_session(self, sessions, masters, step):
        """kubectl on the first Master that accepts an SSH session.

        A Master without the cluster admin's kubeconfig refuses ``step``
        here, before the flow changes anything.
        """
        errors = []
        for node in masters:
            try:
                executor = self.session(sessions, node)
            except exceptions.RemoteConnectError as error:
                LOG.warning('Master %s unreachable: %s', node.address,
                            redaction.one_line(str(error)))
                errors.append('%s: %s' % (node.address,
                                          exceptions.failure_reason(
                                              error, node.address)))
                continue
            with step_report.step(executor.host, step):
                found = executor.run(
                    ['test', '-r', admin_kubectl.ADMIN_KUBECONFIG],
                    sudo=True, check=False)
                if not found.ok:
                    raise exceptions.ClusterInstallError(
                        admin_kubectl.MISSING_ADMIN_KUBECONFIG)
            return self.kubectl(executor)
        raise exceptions.RemoteConnectError(
            '%s failed: no Master node reachable for kubectl: %s' % (
                step, '; '.join(errors) or 'the stack has no Master node'))

    def on_hosts(self, step, tasks):
        """Run independent per-host tasks ({address: callable}) at once."""
        parallel.run_on_nodes(step, lambda task: task(), tasks,
                              self.conf.max_concurrent_nodes)

    @staticmethod
    def finish(flow, report):
        LOG.info('%s done: %s', flow, report.summary())
        return report
