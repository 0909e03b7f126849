"""The cluster registered as a Kubernetes VIM through Tacker's real
NfvoPlugin and Kubernetes VIM driver, against the testbed's Kubernetes API
server (HTTPS, its own CA, on 127.0.0.1).

Real: NfvoPlugin and its database code, Tacker's Kubernetes VIM driver (it
calls GET /api/ and lists namespaces with the kubernetes client, then
encrypts token and CA with a Fernet key), VimClient decrypting them,
VnfInstance and VimConnectionInfo objects saved and read back.

Database and key manager: the fixtures of conftest (Tacker's models on a
SQLite file in WAL mode; an in-memory key manager plugged in as Barbican).
"""

import datetime
import logging
import sqlite3
import uuid

import pytest

pytest.importorskip('tacker.objects')

from oslo_config import cfg  # noqa: E402
from tacker.db.vnfm import vnfm_db  # noqa: E402
from tacker.extensions import nfvo  # noqa: E402
from tacker import manager  # noqa: E402
from tacker.nfvo import nfvo_plugin  # noqa: E402
from tacker import objects  # noqa: E402
from tacker.vnflcm import utils as vnflcm_utils  # noqa: E402

from kubernetes_mgmt_pv.cluster import cluster  # noqa: E402
from kubernetes_mgmt_pv.doors import tacker_compat  # noqa: E402
from kubernetes_mgmt_pv import exceptions  # noqa: E402
from testbed import kubeapi  # noqa: E402

# The default project of conftest's hook_context.
PROJECT = 'a1b2c3d4e5f60718293a4b5c6d7e8f90'
OTHER_PROJECT = '0f9e8d7c6b5a49382716f5e4d3c2b1a0'
VIM_NAME = 'kubernetes_vim_test'


def new_vnf_instance(context, project_id=PROJECT):
    """A VnfInstance row made as Tacker's v1 API makes it (create, then
    vimConnectionInfo with the OpenStack VIM, save): Tacker's LCM takes
    the VIM of the VNF's VMs from vimConnectionInfo[0]."""
    objects.register_all()
    instance = objects.VnfInstance(
        context=context, vnfd_id=str(uuid.uuid4()), vnf_provider='Company',
        vnf_product_name='Sample VNF', vnf_software_version='1.0',
        vnfd_version='1.0', vnf_pkg_id=str(uuid.uuid4()),
        tenant_id=project_id)
    instance.create()
    instance.vim_connection_info = [objects.VimConnectionInfo(
        id=str(uuid.uuid4()), vim_id=str(uuid.uuid4()), vim_type='openstack',
        access_info={}, interface_info={}, extra={})]
    instance.save()
    return instance


@pytest.fixture
def vnf_instance(hook_context):
    return new_vnf_instance(hook_context())


def reread(hook_context, instance):
    """The instance as the next hook gets it: read from the database."""
    return objects.VnfInstance.get_by_id(hook_context(), instance.id)


def kubernetes_infos(instance):
    return [info for info in instance.vim_connection_info
            if info.vim_type == 'kubernetes']


def register(hook_context, instance, api, credentials, name=VIM_NAME,
             url=None):
    token, ca_pem = credentials
    return tacker_compat.register_kubernetes_vim(
        hook_context(), instance, name, url or api.url, token, ca_pem)


def delete(hook_context, instance, name=VIM_NAME):
    return tacker_compat.delete_kubernetes_vim(hook_context(), instance,
                                               name)


def get_vim(hook_context, vim_id):
    return tacker_compat.nfvo_plugin().get_vim(hook_context(), vim_id)


def db_rows(path, table):
    """Rows of a table read with sqlite3, apart from SQLAlchemy."""
    connection = sqlite3.connect(path)
    connection.row_factory = sqlite3.Row
    try:
        return [dict(row) for row in connection.execute(
            'SELECT * FROM %s' % table)]
    finally:
        connection.close()


def live_vims(path):
    """VIM rows not soft-deleted (Tacker keeps deleted ones)."""
    return [row for row in db_rows(path, 'vims')
            if row['deleted_at'].startswith('0001-01-01')]


def as_text(value):
    return value.decode() if isinstance(value, bytes) else str(value)


def deploy_cnf(hook_context, vim_id):
    """Tacker's "vnf" row of a CNF deployed on the VIM (NfvoPlugin refuses
    to delete a VIM such a row references); its id."""
    cnf_id = str(uuid.uuid4())
    session = hook_context().session
    session.add(vnfm_db.VNF(
        id=cnf_id, tenant_id=PROJECT, name='cnf', status='ACTIVE',
        vim_id=vim_id, deleted_at=datetime.datetime.min))
    session.commit()
    return cnf_id


# -- registration -------------------------------------------------------------


def test_registration_creates_one_vim_and_adds_the_connection_info(
        hook_context, vnf_instance, kube_api, credentials, tacker_db):
    token, ca_pem = credentials
    assert token != kube_api.token and ca_pem == kube_api.ca_pem
    vim_id = register(hook_context, vnf_instance, kube_api, credentials)

    vim = get_vim(hook_context, vim_id)
    assert vim['name'] == VIM_NAME
    assert vim['type'] == 'kubernetes'
    assert vim['auth_url'] == kube_api.url
    assert vim['tenant_id'] == PROJECT
    assert vim['is_default'] is False
    assert vim['vim_project'] == {'name': 'default'}
    assert vim['extra'] == {}
    assert vnf_instance.id in vim['description']
    assert vim['auth_cred']['key_type'] == 'barbican_key'
    # Tacker validated the cluster with the token: discovery, namespaces.
    assert ('GET', '/api/') in kube_api.request_log
    assert ('GET', '/api/v1/namespaces') in kube_api.request_log
    assert 'default' in vim['placement_attr']['regions']

    # Appended after the OpenStack VIM, which Tacker's LCM takes from [0].
    stored = reread(hook_context, vnf_instance)
    assert stored.vim_connection_info[0].vim_type == 'openstack'
    [info] = kubernetes_infos(stored)
    assert (info.vim_id, info.access_info, info.interface_info,
            info.extra) == (vim_id, {'auth_url': kube_api.url}, {}, {})
    assert uuid.UUID(info.id)
    assert [i.id for i in vnf_instance.vim_connection_info] == \
        [i.id for i in stored.vim_connection_info]

    # What Tacker's LCM gets for this connection info: decrypted.
    access = vnflcm_utils._get_vim(hook_context(), [info])
    assert access['vim_type'] == 'kubernetes'
    assert access['access_info']['bearer_token'] == token
    assert access['access_info']['ssl_ca_cert'] == ca_pem
    assert access['access_info']['auth_url'] == kube_api.url

    assert [row['id'] for row in live_vims(tacker_db)] == [vim_id]


def test_second_registration_reuses_the_vim(
        hook_context, vnf_instance, kube_api, credentials, tacker_db,
        vim_secrets):
    first = register(hook_context, vnf_instance, kube_api, credentials)
    requests = len(kube_api.request_log)

    again = register(hook_context, reread(hook_context, vnf_instance),
                     kube_api, credentials)
    # The same object again (its connection info already holds the VIM).
    assert register(hook_context, vnf_instance, kube_api,
                    credentials) == first

    assert again == first
    assert [row['id'] for row in live_vims(tacker_db)] == [first]
    assert len(kubernetes_infos(reread(hook_context, vnf_instance))) == 1
    assert len(kube_api.request_log) == requests  # nothing re-validated
    assert len(vim_secrets) == 1


def stored_credentials(hook_context, instance):
    """(token, CA) of the instance's Kubernetes VIM as Tacker's LCM
    decrypts them."""
    access = vnflcm_utils._get_vim(hook_context(), kubernetes_infos(
        reread(hook_context, instance)))['access_info']
    return access['bearer_token'], access['ssl_ca_cert']


@pytest.fixture
def vim_updates(vim_conf, monkeypatch):
    """The VIM ids NfvoPlugin.update_vim is called with (it still runs)."""
    calls = []
    update = nfvo_plugin.NfvoPlugin.update_vim

    def recorded(self, context, vim_id, vim):
        calls.append(vim_id)
        return update(self, context, vim_id, vim)
    monkeypatch.setattr(nfvo_plugin.NfvoPlugin, 'update_vim', recorded)
    return calls


@pytest.fixture
def rebuild(kube_api, service_account_credentials):
    """rebuild(): the cluster rebuilt at kube_api's address, a new API
    server on the same port with its own CA, and the token of the driver's
    ServiceAccount on it; returns (api, (token, CA))."""
    servers = []

    def new_server():
        kube_api.stop()
        servers.append(kubeapi.KubeApiServer(host='127.0.0.1',
                                             port=kube_api.port).start())
        return servers[-1], service_account_credentials(
            servers[-1], cluster.credentials_manifest()['items'])
    yield new_server
    for server in servers:
        server.stop()


def test_a_cluster_rebuilt_at_the_same_address_updates_the_vim(
        hook_context, vnf_instance, kube_api, credentials, tacker_db,
        vim_secrets, vim_updates, rebuild, caplog):
    vim_id = register(hook_context, vnf_instance, kube_api, credentials)
    old_keys = set(vim_secrets)
    api, new_credentials = rebuild()
    assert api.url == kube_api.url
    assert new_credentials[0] != credentials[0]
    assert new_credentials[1] != credentials[1]

    again = register(hook_context, reread(hook_context, vnf_instance), api,
                     new_credentials)

    assert again == vim_id and vim_updates == [vim_id]
    assert stored_credentials(hook_context, vnf_instance) == new_credentials
    assert [row['id'] for row in live_vims(tacker_db)] == [vim_id]
    assert len(kubernetes_infos(reread(hook_context, vnf_instance))) == 1
    # Tacker checked the new ones on the new cluster, encrypted them with
    # a new key and deleted the old key.
    assert ('GET', '/api/') in api.request_log
    assert len(vim_secrets) == 1 and not set(vim_secrets) & old_keys
    assert new_credentials[0] not in caplog.text

    # Registered once more with the same credentials: nothing to do.
    register(hook_context, reread(hook_context, vnf_instance), api,
             new_credentials)
    assert vim_updates == [vim_id]


def test_the_same_credentials_make_no_update(
        hook_context, vnf_instance, kube_api, credentials, vim_secrets,
        vim_updates, caplog):
    register(hook_context, vnf_instance, kube_api, credentials)
    keys = set(vim_secrets)
    requests = len(kube_api.request_log)
    caplog.set_level(logging.INFO, logger='kubernetes_mgmt_pv')

    register(hook_context, reread(hook_context, vnf_instance), kube_api,
             credentials)

    assert vim_updates == []
    assert set(vim_secrets) == keys
    assert len(kube_api.request_log) == requests  # nothing re-validated
    assert stored_credentials(hook_context, vnf_instance) == credentials
    assert [record for record in caplog.records
            if 'unchanged' in record.getMessage()]


def test_a_rejected_update_keeps_the_old_credentials(
        hook_context, vnf_instance, kube_api, credentials, tacker_db,
        vim_secrets, vim_updates):
    vim_id = register(hook_context, vnf_instance, kube_api, credentials)
    keys = set(vim_secrets)
    wrong = 'not-the-token-%s' % uuid.uuid4().hex

    with pytest.raises(exceptions.MgmtDriverError) as error:
        register(hook_context, reread(hook_context, vnf_instance), kube_api,
                 (wrong, credentials[1]))

    message = str(error.value)
    assert VIM_NAME in message and vim_id in message
    assert '401' in message and wrong not in message
    assert vim_updates == [vim_id]
    assert stored_credentials(hook_context, vnf_instance) == credentials
    assert set(vim_secrets) == keys  # Tacker dropped the new key


def test_a_vim_in_use_with_stale_credentials_is_an_error_naming_its_vnfs(
        hook_context, vnf_instance, kube_api, credentials, vim_secrets,
        rebuild):
    vim_id = register(hook_context, vnf_instance, kube_api, credentials)
    # Tacker's plugins loaded before the CNF's row is added, as in
    # tacker-conductor (VNFMPlugin cannot load this bare row).
    assert stored_credentials(hook_context, vnf_instance) == credentials
    cnf_id = deploy_cnf(hook_context, vim_id)
    api, new_credentials = rebuild()

    with pytest.raises(exceptions.MgmtDriverError) as error:
        register(hook_context, reread(hook_context, vnf_instance), api,
                 new_credentials)

    message = str(error.value)
    assert VIM_NAME in message and vim_id in message and cnf_id in message
    assert new_credentials[0] not in message
    assert stored_credentials(hook_context, vnf_instance) == credentials


def test_a_vim_reused_by_a_new_instance_is_added_to_its_connection_info(
        hook_context, kube_api, credentials, tacker_db):
    # E.g. a retried instantiate whose save had failed: the VIM exists,
    # the instance does not list it yet.
    vim_id = register(hook_context, new_vnf_instance(hook_context()),
                      kube_api, credentials)
    instance = new_vnf_instance(hook_context())

    assert register(hook_context, instance, kube_api, credentials) == vim_id
    assert [info.vim_id for info in kubernetes_infos(
        reread(hook_context, instance))] == [vim_id]
    assert [row['id'] for row in live_vims(tacker_db)] == [vim_id]


def test_same_name_other_url_is_an_error(
        hook_context, vnf_instance, kube_api, credentials, tacker_db):
    vim_id = register(hook_context, vnf_instance, kube_api, credentials)
    other = new_vnf_instance(hook_context())
    other_url = 'https://127.0.0.1:1'

    with pytest.raises(exceptions.MgmtDriverError) as error:
        register(hook_context, other, kube_api, credentials, url=other_url)

    message = str(error.value)
    assert VIM_NAME in message and vim_id in message
    assert kube_api.url in message and other_url in message
    assert credentials[0] not in message
    assert [row['id'] for row in live_vims(tacker_db)] == [vim_id]
    assert kubernetes_infos(reread(hook_context, other)) == []


def test_a_vim_of_the_same_name_in_another_project_is_not_used(
        hook_context, kube_api, credentials, tacker_db):
    # An admin context sees every project's VIMs; the lookup must not.
    def admin():
        return hook_context(admin=True)
    theirs = register(admin, new_vnf_instance(admin(), OTHER_PROJECT),
                      kube_api, credentials)
    mine = register(admin, new_vnf_instance(admin(), PROJECT), kube_api,
                    credentials, url=kube_api.url + '/')

    assert mine != theirs
    assert sorted((row['tenant_id'], row['name'])
                  for row in live_vims(tacker_db)) == \
        [(OTHER_PROJECT, VIM_NAME), (PROJECT, VIM_NAME)]


def test_every_hook_learns_the_token_of_the_registered_vim(
        hook_context, vnf_instance, kube_api, credentials):
    """What a later hook hides: the token Tacker keeps for the instance's
    VIM, found through its vimConnectionInfo, or through the VIM's
    description once terminate has emptied it; none of another
    instance's VIM, nor of a VIM Tacker cannot decrypt."""
    token, _ = credentials
    other = new_vnf_instance(hook_context())
    assert tacker_compat.registered_vim_tokens(hook_context(),
                                               other) == []
    vim_id = register(hook_context, vnf_instance, kube_api, credentials)
    stored = reread(hook_context, vnf_instance)
    assert tacker_compat.registered_vim_tokens(hook_context(),
                                               stored) == [token]
    stored.vim_connection_info = stored.vim_connection_info[:1]
    stored.save()
    assert tacker_compat.registered_vim_tokens(
        hook_context(), reread(hook_context, vnf_instance)) == [token]
    assert tacker_compat.registered_vim_tokens(hook_context(),
                                               other) == []
    assert tacker_compat.vim_tokens(hook_context(),
                                    [vim_id, str(uuid.uuid4())]) == [token]


def test_no_password_is_stored(hook_context, vnf_instance, kube_api,
                               credentials, tacker_db):
    token, _ = credentials
    vim_id = register(hook_context, vnf_instance, kube_api, credentials)

    [vim_row] = db_rows(tacker_db, 'vims')
    [auth_row] = db_rows(tacker_db, 'vimauths')
    assert auth_row['vim_id'] == vim_id
    assert auth_row['password'] is None
    assert as_text(vim_row['extra']) == '{}'
    for row in [vim_row, auth_row] + db_rows(tacker_db, 'vnf_instances'):
        for column, value in row.items():
            text = as_text(value)
            assert 'password' not in text.lower(), (column, text)
            assert 'helm_info' not in text, column
            assert token not in text, column  # encrypted only
            assert 'BEGIN CERTIFICATE' not in text, column


def test_wrong_token_fails_with_a_message_for_the_operator(
        hook_context, vnf_instance, kube_api, credentials, tacker_db,
        vim_secrets):
    wrong = 'not-the-token-%s' % uuid.uuid4().hex

    with pytest.raises(exceptions.MgmtDriverError) as error:
        register(hook_context, vnf_instance, kube_api,
                 (wrong, credentials[1]))

    message = str(error.value)
    assert VIM_NAME in message and kube_api.url in message
    assert '401' in message and 'Unauthorized' in message
    assert 'check of the cluster (GET /api/' in message
    assert wrong not in message
    assert 'HTTP response headers' not in message
    assert isinstance(error.value.__context__,
                      nfvo.VimUnauthorizedException)
    assert live_vims(tacker_db) == []
    assert vim_secrets == {}
    assert kubernetes_infos(reread(hook_context, vnf_instance)) == []


def test_a_token_without_rights_fails_with_the_api_servers_answer(
        hook_context, vnf_instance, kube_api, tacker_db, vim_secrets,
        service_account_credentials):
    # Authenticated (discovery passes) but not bound to any role: Tacker's
    # driver lets the 403 of the namespace list through unwrapped.
    unbound = [document for document in
               cluster.credentials_manifest()['items']
               if document['kind'] != 'ClusterRoleBinding']
    credentials = service_account_credentials(kube_api, unbound)

    with pytest.raises(exceptions.MgmtDriverError) as error:
        register(hook_context, vnf_instance, kube_api, credentials)

    message = str(error.value)
    assert VIM_NAME in message and kube_api.url in message
    assert 'API server answered 403 Forbidden' in message
    assert 'cannot list resource "namespaces"' in message
    assert credentials[0] not in message
    assert live_vims(tacker_db) == []
    assert vim_secrets == {}


def test_an_unreachable_api_server_fails_with_the_vim_name(
        hook_context, vnf_instance, kube_api, credentials, tacker_db):
    url = 'https://127.0.0.1:1'
    with pytest.raises(exceptions.MgmtDriverError) as error:
        register(hook_context, vnf_instance, kube_api, credentials, url=url)

    message = str(error.value)
    assert VIM_NAME in message and url in message
    # Tacker's own check of the cluster (GET /api/) is what failed: the
    # reason is classified by the exception's type, not its wording.
    assert "Tacker's check of the cluster" in message
    assert isinstance(error.value.__cause__,
                      nfvo.VimUnauthorizedException)
    assert live_vims(tacker_db) == []


def test_barbican_disabled_is_explained(hook_context, vnf_instance, kube_api,
                                        credentials, tacker_db):
    cfg.CONF.set_override('use_barbican', False, group='k8s_vim')

    with pytest.raises(exceptions.MgmtDriverError) as error:
        register(hook_context, vnf_instance, kube_api, credentials)

    message = str(error.value)
    assert VIM_NAME in message
    assert 'Barbican must be enabled' in message
    assert 'use_barbican' in message
    assert live_vims(tacker_db) == []


# -- deletion -----------------------------------------------------------------

def test_delete_removes_the_vim_and_its_connection_info(
        hook_context, vnf_instance, kube_api, credentials, tacker_db,
        vim_secrets):
    vim_id = register(hook_context, vnf_instance, kube_api, credentials)
    instance = reread(hook_context, vnf_instance)
    assert vim_secrets

    assert delete(hook_context, instance) is True

    with pytest.raises(nfvo.VimNotFoundException):
        get_vim(hook_context, vim_id)
    assert live_vims(tacker_db) == []
    assert vim_secrets == {}  # its Fernet key too
    stored = reread(hook_context, vnf_instance)
    assert [info.vim_type for info in stored.vim_connection_info] == \
        ['openstack']
    assert [info.id for info in instance.vim_connection_info] == \
        [info.id for info in stored.vim_connection_info]


def test_second_delete_is_a_no_op(hook_context, vnf_instance, kube_api,
                                  credentials):
    register(hook_context, vnf_instance, kube_api, credentials)
    assert delete(hook_context, vnf_instance) is True

    assert delete(hook_context, vnf_instance) is False
    assert delete(hook_context, reread(hook_context, vnf_instance)) is False


def test_delete_without_a_kubernetes_vim_is_a_no_op(hook_context,
                                                    vnf_instance):
    assert delete(hook_context, vnf_instance) is False
    assert [info.vim_type for info in reread(
        hook_context, vnf_instance).vim_connection_info] == ['openstack']


def test_a_vim_already_gone_only_drops_the_connection_info(
        hook_context, vnf_instance, kube_api, credentials):
    vim_id = register(hook_context, vnf_instance, kube_api, credentials)
    tacker_compat.nfvo_plugin().delete_vim(hook_context(), vim_id)  # by hand

    assert delete(hook_context, vnf_instance) is False
    assert kubernetes_infos(reread(hook_context, vnf_instance)) == []


def test_delete_leaves_vims_the_instance_does_not_use(
        hook_context, vnf_instance, kube_api, credentials, tacker_db):
    # Same name, registered for another instance: not this one's to delete.
    theirs = register(hook_context, new_vnf_instance(hook_context()),
                      kube_api, credentials)

    assert delete(hook_context, vnf_instance) is False
    assert [row['id'] for row in live_vims(tacker_db)] == [theirs]

    # In the instance's connection info, but under another name: kept.
    register(hook_context, vnf_instance, kube_api, credentials, name='other')
    assert delete(hook_context, vnf_instance) is False
    assert len(kubernetes_infos(reread(hook_context, vnf_instance))) == 1
    assert len(live_vims(tacker_db)) == 2


def test_a_vim_still_in_use_is_kept_with_a_clear_error(
        hook_context, vnf_instance, kube_api, credentials, tacker_db):
    vim_id = register(hook_context, vnf_instance, kube_api, credentials)
    # Tacker's v1 LCM keeps a "vnf" row per VNF instance, with the VIM it
    # runs on (a CNF deployed on the cluster has this VIM);
    # NfvoPlugin.delete_vim refuses a VIM such a row references.
    cnf_id = deploy_cnf(hook_context, vim_id)

    with pytest.raises(exceptions.MgmtDriverError) as error:
        delete(hook_context, vnf_instance)

    message = str(error.value)
    assert VIM_NAME in message and vim_id in message and cnf_id in message
    assert [row['id'] for row in live_vims(tacker_db)] == [vim_id]
    assert [info.vim_id for info in kubernetes_infos(
        reread(hook_context, vnf_instance))] == [vim_id]


def test_the_users_of_a_vim_are_those_tacker_refuses_its_deletion_for(
        hook_context, vnf_instance, kube_api, credentials, tacker_db):
    assert tacker_compat.kubernetes_vim_users(
        hook_context(), vnf_instance, VIM_NAME) == {}  # none registered
    vim_id = register(hook_context, vnf_instance, kube_api, credentials)
    instance = reread(hook_context, vnf_instance)
    assert tacker_compat.kubernetes_vim_users(
        hook_context(), instance, VIM_NAME) == {}
    cnf_id = deploy_cnf(hook_context, vim_id)

    assert tacker_compat.kubernetes_vim_users(
        hook_context(), instance, VIM_NAME) == {vim_id: [cnf_id]}
    # Only asked: the VIM and the connection info stay.
    assert [row['id'] for row in live_vims(tacker_db)] == [vim_id]
    assert [info.vim_id for info in kubernetes_infos(
        reread(hook_context, vnf_instance))] == [vim_id]
    assert tacker_compat.kubernetes_vim_users(
        hook_context(), instance, 'other name') == {}


# -- the plugin ---------------------------------------------------------------

def test_one_nfvo_plugin_per_process(hook_context, kube_api, credentials):
    first = tacker_compat.nfvo_plugin()
    instance = new_vnf_instance(hook_context())
    register(hook_context, instance, kube_api, credentials)
    delete(hook_context, instance)

    assert tacker_compat.nfvo_plugin() is first
    assert isinstance(first, nfvo_plugin.NfvoPlugin)


def test_the_nfvo_plugin_of_tacker_conductor_is_shared(vim_conf):
    # In tacker-conductor, VnfLcmDriver has TackerManager load its plugins.
    tackers = manager.TackerManager.get_service_plugins()['NFVO']
    assert tacker_compat.nfvo_plugin() is tackers
