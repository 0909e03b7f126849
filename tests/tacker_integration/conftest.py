"""Fixtures for running the driver and its VNF package inside real Tacker.

Tacker is imported lazily (but for its key manager interface, when it is
installed): every test module starts with
``pytest.importorskip('tacker.objects')``, so without Tacker nothing here
runs.

Only Tacker's database lookups are stubbed; configuration, stevedore
loading, package extraction, VNFD reading and objects are Tacker's own.

The VIM registry fixtures (``tacker_db``, ``vim_conf``, ``hook_context``,
``vim_secrets``, ``kube_api``, ``credentials``) give Tacker's real
NfvoPlugin, Kubernetes VIM driver and VnfInstance objects a database:

Database: Tacker's models created on SQLite with create_all (Tacker's
migrations do not run on SQLite), through Tacker's own engine facade, as
Tacker's unit tests do (tacker.tests.unit.db.base.SqlFixture), but in a
file in WAL mode rather than in memory, so that every session has its own
connection and transaction as on MySQL (see tacker_db).

Key manager: Tacker 16 keeps the Fernet key of a Kubernetes VIM only in
Barbican ([k8s_vim] use_barbican; False is refused with "Barbican must be
enabled"). Tacker's key manager is pluggable with [key_manager] api_class:
the fixtures plug an in-memory one in, everything else is Tacker's.
"""

import json
import os
import sqlite3
import threading
import types
import uuid

import pytest

from kubernetes_mgmt_pv.cluster import cluster as cluster_lib
from kubernetes_mgmt_pv import config
from kubernetes_mgmt_pv.vnf_package import csar
# Imported here, before any test module imports Tacker, on purpose:
# Tacker's imports load eventlet's green BaseHTTPServer, which rebinds the
# `server` attribute of the stdlib `http` package to an eventlet-patched
# copy. The testbed's fake Keystone/Heat and Kubernetes API servers subclass
# http.server classes when imported; bound to the patched copy they serve
# on green threads that never run, and every Heat call of the driver hangs.
from testbed import hosts
from testbed import kubeapi
from testbed import virtual_vnf
from tests.tacker_integration.support import CONFIGURED_DRIVERS
from tests.tacker_integration.support import SAMPLE

try:
    # Light (abc, oslo.config): no eventlet, no http.server rebinding.
    from tacker.keymgr import key_manager as _tacker_key_manager
except ImportError:  # without Tacker every test module here is skipped
    _tacker_key_manager = None

# The project of the request contexts hook_context makes by default.
PROJECT = 'a1b2c3d4e5f60718293a4b5c6d7e8f90'


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
    virtual_vnf.use_test_options()
    try:
        with virtual_vnf.VirtualCluster(
                **virtual_vnf.STOCK_IMAGE) as virtual:
            yield virtual
    finally:
        config.CONF.reset()


# -- Tacker's VIM registry on SQLite ------------------------------------------

class InMemoryKeyManager(_tacker_key_manager.KeyManager
                         if _tacker_key_manager else object):
    """Tacker's key manager interface, keeping secrets in memory (what
    BarbicanKeyManager does with Barbican). Tacker loads it by name from
    [key_manager] api_class (see vim_conf)."""

    secrets = {}
    lock = threading.Lock()

    def __init__(self, auth_url):
        self.auth_url = auth_url

    def store(self, context, managed_object, expiration=None):
        secret_id = str(uuid.uuid4())
        with self.lock:
            self.secrets[secret_id] = managed_object
        return secret_id

    def get(self, context, managed_object_id, metadata_only=False):
        from tacker.keymgr import exception as keymgr_exception
        with self.lock:
            if managed_object_id not in self.secrets:
                raise keymgr_exception.ManagedObjectNotFoundError(
                    uuid=managed_object_id)
            return types.SimpleNamespace(
                payload=self.secrets[managed_object_id])

    def delete(self, context, managed_object_id):
        # Like BarbicanKeyManager, a missing secret is not an error.
        with self.lock:
            self.secrets.pop(managed_object_id, None)


@pytest.fixture(scope='session')
def tacker_db(tmp_path_factory):
    """Path of the SQLite file behind Tacker's engine facade (configured
    once per process, like Tacker's).

    The file is in WAL mode: readers do not block writers, as in MySQL
    (InnoDB), where Tacker's NfvoPlugin reads and writes VIMs through the
    request context's session while VnfInstance.save() commits through
    another. In SQLite's default mode a read transaction left open by the
    context's session (oslo.db emits BEGIN for reads too) makes every
    other writer fail with "database is locked".
    """
    from oslo_config import cfg
    from tacker.db import api as db_api
    _load_tacker_models()  # and their options ([database] ...)
    path = tmp_path_factory.mktemp('tacker-db') / 'tacker.sqlite'
    connection = sqlite3.connect(path)
    try:
        assert connection.execute(
            'PRAGMA journal_mode=WAL').fetchone()[0] == 'wal'
    finally:
        connection.close()
    if db_api._FACADE is None:
        cfg.CONF.set_override('connection', 'sqlite:///%s' % path,
                              group='database')
        try:
            engine = db_api.get_engine()
        finally:
            cfg.CONF.clear_override('connection', group='database')
    engine = db_api.get_engine()
    if engine.url.get_backend_name() != 'sqlite' or not engine.url.database:
        pytest.skip('Tacker\'s database was configured elsewhere: %s' %
                    engine.url)
    return engine.url.database


def _load_tacker_models():
    """Import what registers Tacker's models and the options its VIM code
    reads."""
    # noqa: F401 for all: imported for their side effects.
    from tacker.common import config as tacker_config  # noqa: F401
    # The conductor registers [keystone_authtoken], read by Tacker to
    # build the service context it hands to the key manager.
    from tacker.conductor import conductor_server  # noqa: F401
    from tacker.db.common_services import common_services_db  # noqa: F401
    from tacker.db.db_sqlalchemy import models as lcm_models  # noqa: F401
    from tacker.db.migration.models import head  # noqa: F401
    from tacker.db.vnfm import vnfm_db  # noqa: F401
    from tacker.nfvo.drivers.vim import kubernetes_driver  # noqa: F401
    from tacker.nfvo.drivers.vim import openstack_driver  # noqa: F401
    from tacker.nfvo import nfvo_plugin  # noqa: F401


def _create_tables(engine):
    # Every model Tacker has loaded by now (more come with its plugins).
    from tacker.db import model_base
    model_base.BASE.metadata.create_all(engine)


def _empty_tables(engine):
    import sqlalchemy
    from tacker.db import model_base
    existing = set(sqlalchemy.inspect(engine).get_table_names())
    with engine.begin() as connection:
        for table in reversed(model_base.BASE.metadata.sorted_tables):
            if table.name in existing:
                connection.execute(table.delete())


def _forget_plugins():
    from kubernetes_mgmt_pv.doors import tacker_compat
    from tacker import manager
    from tacker.vnfm import vim_client
    tacker_compat._reset_nfvo_plugin()
    manager.TackerManager.clear_instance()
    vim_client.reset_keymgr_apis()


@pytest.fixture
def vim_conf(tacker_conf, tacker_db, tmp_path):
    """Tacker's configuration for VIMs: a writable [vim_keys] directory
    (the OpenStack VIM driver creates it when NfvoPlugin starts), Barbican
    on ([k8s_vim] use_barbican, the default) through the in-memory key
    manager. Empties Tacker's tables and forgets plugins afterwards."""
    from oslo_config import cfg
    from tacker.db import api as db_api
    from tacker import keymgr
    _load_tacker_models()
    cfg.CONF.register_opts(keymgr.key_manager_opts, group='key_manager')
    overrides = [
        ('openstack', str(tmp_path / 'fernet_keys'), 'vim_keys'),
        ('api_class', '%s.%s' % (InMemoryKeyManager.__module__,
                                 InMemoryKeyManager.__qualname__),
         'key_manager'),
        ('use_barbican', True, 'k8s_vim'),
    ]
    for name, value, group in overrides:
        cfg.CONF.set_override(name, value, group=group)
    _forget_plugins()
    engine = db_api.get_engine()
    _create_tables(engine)
    yield cfg.CONF
    _forget_plugins()
    for name, _, group in overrides:
        cfg.CONF.clear_override(name, group=group)
    InMemoryKeyManager.secrets.clear()
    _empty_tables(engine)


@pytest.fixture
def vim_secrets(vim_conf):
    """What the in-memory key manager holds (Barbican's secrets): secret
    id -> payload."""
    return InMemoryKeyManager.secrets


@pytest.fixture
def hook_context(vim_conf):
    """Makes request contexts as tacker-conductor gets them, a new one per
    call (each RPC brings its own); their sessions are closed afterwards.
    Without project_id, a context of PROJECT.

    One context reused for a registration and then a deletion works on
    MySQL but not on this SQLite file: NfvoPlugin leaves a read
    transaction open on the context's session, VnfInstance.save() commits
    through another connection, and SQLite (WAL) refuses the later write in
    the older transaction ("database is locked", SQLITE_BUSY_SNAPSHOT)."""
    from tacker import context as tacker_context
    made = []

    def make(project_id=PROJECT, admin=False):
        context = tacker_context.Context(
            user_id='operator', project_id=project_id, is_admin=admin,
            roles=['admin', 'member', 'reader'] if admin else
            ['member', 'reader'])
        made.append(context)
        return context
    yield make
    for context in made:
        if context._session is not None:
            context._session.close()


@pytest.fixture
def kube_api():
    """A test Kubernetes API server on 127.0.0.1 (HTTPS, its own CA)."""
    with kubeapi.KubeApiServer(host='127.0.0.1') as api:
        yield api


def _service_account_credentials(api, documents):
    for document in documents:
        api.create(document)
    [secret] = [document['metadata'] for document in documents
                if document['kind'] == 'Secret']

    def filled():
        stored = api.get('secret', secret['name'], secret['namespace'])
        return cluster_lib.parse_token_secret(json.dumps(stored or {}))
    assert api.wait_for(lambda: filled() is not None), 'no token minted'
    return filled()


@pytest.fixture
def service_account_credentials():
    """f(api, documents): create the documents (a ServiceAccount, its
    token Secret, maybe a binding) on a test API server and return
    (token, CA PEM) from the Secret once the token controller has filled
    it, as the driver reads them."""
    return _service_account_credentials


@pytest.fixture
def credentials(kube_api):
    """(token, CA PEM) Tacker registers the VIM with: those of the
    ServiceAccount the driver creates on the cluster for Tacker (bound to
    cluster-admin), from its token Secret."""
    return _service_account_credentials(
        kube_api, cluster_lib.credentials_manifest()['items'])
