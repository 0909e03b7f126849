"""NFS client installation on Master/Worker nodes."""

from kubernetes_mgmt_pv import packages
from kubernetes_mgmt_pv import report as report_mod

CLIENT_PACKAGES = ('nfs-common',)


def install_nfs_client(executor, proxy, conf, report):
    """Install nfs-common on one node unless it is already installed."""
    with report_mod.step(executor.host, 'NFS client installation'):
        packages.ensure_installed(executor, CLIENT_PACKAGES, proxy,
                                  conf.package_install_timeout, report)
