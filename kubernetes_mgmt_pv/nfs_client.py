"""NFS client installation on Master/Worker nodes."""

from kubernetes_mgmt_pv import packages
from kubernetes_mgmt_pv import parallel

CLIENT_PACKAGES = ('nfs-common',)


def install_nfs_clients(sessions, nodes, proxy, conf, report):
    """Install nfs-common on every node concurrently.

    ``nodes`` is a list of (address, NodeAccess). Every node is attempted;
    the error names each node that failed.
    """
    def install(node):
        address, access = node
        executor = sessions.get(address, access.username, access.password)
        packages.ensure_installed(executor, CLIENT_PACKAGES, proxy,
                                  conf.package_install_timeout, report)

    parallel.run_on_nodes('NFS client installation', install,
                          {address: (address, access)
                           for address, access in nodes},
                          conf.max_concurrent_nodes)
