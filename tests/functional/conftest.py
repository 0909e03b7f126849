"""Fixtures for end-to-end runs of the driver's hooks on real SSH hosts."""

import paramiko
import pytest

from kubernetes_mgmt_pv import config
from testbed import hosts
from testbed import virtual_vnf


@pytest.fixture(autouse=True)
def _test_options():
    virtual_vnf.use_test_options()
    yield
    config.CONF.reset()


def skip_without_testbed():
    reason = hosts.require_testbed()
    if reason:
        pytest.skip(reason)


@pytest.fixture
def logins(monkeypatch):
    """Hosts logged in to during the test, one entry per successful SSH
    login, counted at paramiko's connect: the driver keeps no counter."""
    made = []
    connect = paramiko.SSHClient.connect

    def counting_connect(client, hostname, *args, **kwargs):
        connect(client, hostname, *args, **kwargs)
        made.append(hostname)

    monkeypatch.setattr(paramiko.SSHClient, 'connect', counting_connect)
    return made


@pytest.fixture(scope='module')
def testbed():
    """Bare SSH hosts; tests add the ones they need."""
    skip_without_testbed()
    with hosts.Testbed() as bed:
        yield bed


@pytest.fixture
def cluster():
    """A fresh virtual cluster: storage (2 volumes), 1 master, 2 workers,
    from the stock image: the driver installs the NFS packages."""
    skip_without_testbed()
    with virtual_vnf.VirtualCluster(**virtual_vnf.STOCK_IMAGE) as virtual:
        yield virtual


@pytest.fixture
def k8s_cluster():
    """Storage (1 volume), 1 Master and 2 Workers, the Kubernetes cluster
    installed by instantiate_end."""
    skip_without_testbed()
    with virtual_vnf.VirtualCluster(masters=1, workers=2, volumes=1,
                                    install_cluster=True) as virtual:
        virtual.instantiate_end()
        yield virtual


@pytest.fixture
def instantiated(cluster):
    cluster.instantiate_end()
    return cluster


def pytest_report_header(config):
    from testbed import kubeapi
    binary = kubeapi.kubectl_binary()
    return 'kubectl: %s (%s)' % (binary, kubeapi.kubectl_version(binary))
