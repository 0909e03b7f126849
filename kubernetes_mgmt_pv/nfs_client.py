"""NFS client installation on Master/Worker nodes."""

from kubernetes_mgmt_pv import packages

CLIENT_PACKAGES = ('nfs-common',)


def install_nfs_client(executor, proxy, conf, report):
    """Install nfs-common on one node unless it is already installed."""
    packages.ensure_installed(executor, CLIENT_PACKAGES, proxy,
                              conf.package_install_timeout, report)
