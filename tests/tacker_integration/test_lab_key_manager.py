"""The lab's key manager (testbed/tacker_keymgr.py) refuses what Barbican
refuses Tacker, through Tacker's own code: ``tacker.keymgr.API`` with
``[key_manager] api_class`` and the service context
``generate_tacker_service_context`` builds from ``[keystone_authtoken]``,
authenticated by the testbed's Keystone (testbed/openstack_keystone.py).

Barbican (23, default policy) keeps a secret in the project of the token
that stored it: another project's user reads or deletes it only with an
ACL or the admin role (deletion); creating needs the member role; a user
Keystone does not authenticate gets no token, so nothing.
"""

import os

import pytest

pytest.importorskip('tacker.keymgr')

from testbed import openstack_api  # noqa: E402
from testbed import tacker_keymgr  # noqa: E402

PAYLOAD = b'fernet-key-of-a-vim'
SERVICE_USER_OPTIONS = ('auth_url', 'username', 'password', 'project_name')


@pytest.fixture
def keystone():
    with openstack_api.FakeOpenStack() as cloud:
        yield cloud


@pytest.fixture
def service_conf(keystone, tmp_path, monkeypatch):
    """Tacker's options of the key manager: the lab's, with its
    directory; ``use(account)`` makes that account the service user."""
    from oslo_config import cfg
    from tacker.conductor import conductor_server  # noqa: F401
    from tacker import keymgr
    cfg.CONF.register_opts(keymgr.key_manager_opts, group='key_manager')
    monkeypatch.setenv(tacker_keymgr.KEYMGR_DIR_ENV, str(tmp_path))
    cfg.CONF.set_override('api_class', '%s.%s' % (
        tacker_keymgr.__name__, tacker_keymgr.FileKeyManager.__name__),
        group='key_manager')

    def use(account, password=None):
        values = (keystone.auth_url, account['username'],
                  password or account['password'], account['project_name'])
        for name, value in zip(SERVICE_USER_OPTIONS, values):
            cfg.CONF.set_override(name, value, group='keystone_authtoken')
    yield use
    for name in SERVICE_USER_OPTIONS:
        cfg.CONF.clear_override(name, group='keystone_authtoken')
    cfg.CONF.clear_override('api_class', group='key_manager')


def _key_manager():
    """What Tacker's VIM drivers and VimClient do for every secret."""
    from oslo_config import cfg
    from tacker import context
    from tacker import keymgr
    return (keymgr.API(cfg.CONF.keystone_authtoken.auth_url),
            context.generate_tacker_service_context())


def _refused(*calls):
    """Each call (key manager method, its argument after the context) is
    refused as Barbican's answer makes Tacker refuse it."""
    from tacker.keymgr import exception
    manager, context = _key_manager()
    for method, argument in calls:
        with pytest.raises(exception.KeyManagerError):
            getattr(manager, method)(context, argument)


def _store(service_conf, account):
    service_conf(account)
    manager, context = _key_manager()
    return manager.store(context, PAYLOAD)


def test_the_service_user_keeps_and_reads_its_projects_secrets(
        keystone, service_conf):
    account = keystone.add_account('tacker', 'secret-1', 'service')
    secret_id = _store(service_conf, account)
    manager, context = _key_manager()
    assert manager.get(context, secret_id).payload == PAYLOAD
    manager.delete(context, secret_id)
    from tacker.keymgr import exception
    with pytest.raises(exception.ManagedObjectNotFoundError):
        manager.get(context, secret_id)


def test_another_projects_user_neither_reads_nor_deletes_a_secret(
        keystone, service_conf, tmp_path):
    """A tacker-server whose [keystone_authtoken] names another project
    than the conductor's: the VIM's key is not readable."""
    owner = keystone.add_account('tacker', 'secret-1', 'service')
    other = keystone.add_account('tacker-api', 'secret-2', 'api')
    secret_id = _store(service_conf, owner)
    service_conf(other)
    _refused(('get', secret_id), ('delete', secret_id))
    assert os.listdir(tmp_path) == [secret_id]


def test_the_admin_role_of_another_project_deletes_but_never_reads(
        keystone, service_conf, tmp_path):
    owner = keystone.add_account('tacker', 'secret-1', 'service')
    admin = keystone.add_account('admin2', 'secret-3', 'ops',
                                 roles=('admin', 'member', 'reader'))
    secret_id = _store(service_conf, owner)
    service_conf(admin)
    _refused(('get', secret_id))
    manager, context = _key_manager()
    manager.delete(context, secret_id)
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize('case', ['wrong password', 'no service user'])
def test_a_service_user_keystone_refuses_gets_nothing(
        keystone, service_conf, tmp_path, case):
    """'no service user': [keystone_authtoken] without one (Tacker's
    defaults: user "default" at http://localhost/identity/v3)."""
    account = keystone.add_account('tacker', 'secret-1', 'service')
    secret_id = _store(service_conf, account)
    if case == 'wrong password':
        service_conf(account, password='not-' + account['password'])
    else:
        from oslo_config import cfg
        for name in SERVICE_USER_OPTIONS:
            cfg.CONF.clear_override(name, group='keystone_authtoken')
    _refused(('store', PAYLOAD), ('get', secret_id))
    assert os.listdir(tmp_path) == [secret_id]


def test_a_reader_cannot_store(keystone, service_conf, tmp_path):
    reader = keystone.add_account('auditor', 'secret-4', 'service',
                                  roles=('reader',))
    service_conf(reader)
    _refused(('store', PAYLOAD))
    assert os.listdir(tmp_path) == []
