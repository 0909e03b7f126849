"""Fixtures for running the driver and its VNF package inside real Tacker.

Tacker is imported lazily: every test module starts with
``pytest.importorskip('tacker.objects')``, so without Tacker nothing here
runs.

Only Tacker's database lookups are stubbed; configuration, stevedore
loading, package extraction, VNFD reading and objects are Tacker's own.
"""

import os
import uuid

import pytest

from kubernetes_mgmt_pv import config
from kubernetes_mgmt_pv import csar
from tests.tacker_integration.support import CONFIGURED_DRIVERS
from tests.tacker_integration.support import SAMPLE
# Imported here, before any test module imports Tacker, on purpose:
# Tacker's imports load eventlet's green BaseHTTPServer, which rebinds the
# `server` attribute of the stdlib `http` package to an eventlet-patched
# copy. The testbed's fake Keystone/Heat and Kubernetes API servers subclass
# http.server classes when imported; bound to the patched copy they serve
# on green threads that never run, and every Heat call of the driver hangs.
from testbed import cluster as cluster_mod
from testbed import hosts


@pytest.fixture(scope='session')
def built_package(tmp_path_factory):
    """The sample package as `kubernetes-mgmt-pv package` builds it."""
    path = tmp_path_factory.mktemp('csar') / 'sample.zip'
    csar.build(SAMPLE, str(path))
    return path


@pytest.fixture
def tacker_conf(tmp_path):
    """Tacker's CONF as in a running service (parsed, no config file),
    with the driver enabled as the operator guide says (``[tacker]
    vnflcm_mgmt_driver``) and a private package store."""
    from oslo_config import cfg
    import tacker.conf  # noqa: F401  (registers [vnf_package])
    from tacker.vnflcm import vnflcm_driver  # noqa: F401  (registers [tacker])
    store = tmp_path / 'vnfpackages'
    store.mkdir()
    cfg.CONF(args=[], project='tacker', default_config_files=[])
    cfg.CONF.set_override('vnflcm_mgmt_driver', CONFIGURED_DRIVERS,
                          group='tacker')
    cfg.CONF.set_override('vnf_package_csar_path', str(store),
                          group='vnf_package')
    yield cfg.CONF
    cfg.CONF.clear_override('vnflcm_mgmt_driver', group='tacker')
    cfg.CONF.clear_override('vnf_package_csar_path', group='vnf_package')
    cfg.CONF.clear()


@pytest.fixture
def context():
    from tacker import context as tacker_context
    from tacker import objects
    objects.register_all()
    return tacker_context.get_admin_context_without_session()


@pytest.fixture
def onboard(tacker_conf, monkeypatch):
    """Extract a CSAR into Tacker's package store with Tacker's own code;
    returns a VnfInstance whose vnfd_id leads Tacker's lookups to it.

    The one stub: vnfd_id -> package id is a database query in Tacker.
    """
    from tacker.common import csar_utils
    from tacker import objects
    from tacker.vnflcm import utils as vnflcm_utils
    packages = {}
    monkeypatch.setattr(vnflcm_utils, '_get_vnf_package_id',
                        lambda context, vnfd_id: packages[vnfd_id])
    objects.register_all()

    def extract(zip_path):
        package_id, vnfd_id = str(uuid.uuid4()), str(uuid.uuid4())
        csar_utils.extract_csar_zip_file(str(zip_path), os.path.join(
            tacker_conf.vnf_package.vnf_package_csar_path, package_id))
        packages[vnfd_id] = package_id
        return objects.VnfInstance(id=str(uuid.uuid4()), vnfd_id=vnfd_id)
    return extract


@pytest.fixture
def cluster(context):
    """A fresh virtual cluster (storage, 1 master, 2 workers) with the
    testbed's fast-failure options, reset afterwards."""
    reason = hosts.require_testbed()
    if reason:
        pytest.skip(reason)
    cluster_mod.use_test_options()
    try:
        with cluster_mod.VirtualCluster() as virtual:
            yield virtual
    finally:
        config.CONF.reset()
