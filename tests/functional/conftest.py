"""Fixtures for end-to-end runs of the driver's hooks on real SSH hosts."""

import pytest

from kubernetes_mgmt_pv import config
from tests.testbed import cluster as cluster_mod
from tests.testbed import hosts


@pytest.fixture(autouse=True)
def _test_options():
    cluster_mod.use_test_options()
    yield
    config.CONF.reset()


@pytest.fixture
def cluster():
    """A fresh virtual cluster: storage (2 volumes), 1 master, 2 workers."""
    reason = hosts.require_testbed()
    if reason:
        pytest.skip(reason)
    with cluster_mod.VirtualCluster() as virtual:
        yield virtual


@pytest.fixture
def instantiated(cluster):
    cluster.instantiate_end()
    return cluster
