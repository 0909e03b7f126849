"""The key manager the testbed's Tacker processes use instead of Barbican.

Kubernetes VIMs need Barbican in Tacker 16 (``[k8s_vim] use_barbican``);
``FileKeyManager`` is plugged in through ``[key_manager] api_class``:
secrets in files of a private directory, shared by tacker-server and
tacker-conductor. Tacker imports this module, so it imports nothing of
the testbed.
"""

import contextlib
import os
import sys
import types
import uuid

KEYMGR_DIR_ENV = 'TESTBED_KEYMGR_DIR'


def _key_manager_base():
    """Tacker's KeyManager base in a Tacker process (which imports this
    module through [key_manager] api_class); ``object`` elsewhere, so that
    tests and tools never import Tacker (and its eventlet) themselves."""
    if 'tacker' not in sys.modules:
        return object
    from tacker.keymgr import key_manager
    return key_manager.KeyManager


class FileKeyManager(_key_manager_base()):
    """Tacker's key manager interface with secrets in files of the
    directory ``$TESTBED_KEYMGR_DIR`` (what BarbicanKeyManager keeps in
    Barbican), so that every Tacker process of one service sees them."""

    def __init__(self, auth_url):
        self.auth_url = auth_url
        self.directory = os.environ[KEYMGR_DIR_ENV]

    def _path(self, secret_id):
        if not secret_id or '/' in secret_id or secret_id.startswith('.'):
            raise ValueError('bad secret id %r' % secret_id)
        return os.path.join(self.directory, secret_id)

    def store(self, context, managed_object, expiration=None):
        secret_id = str(uuid.uuid4())
        payload = managed_object.get_encoded() if hasattr(
            managed_object, 'get_encoded') else managed_object
        if isinstance(payload, str):
            payload = payload.encode()
        tmp = self._path(secret_id) + '.tmp'
        with open(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600),
                  'wb') as handle:
            handle.write(payload)
        os.rename(tmp, self._path(secret_id))
        return secret_id

    def get(self, context, managed_object_id, metadata_only=False):
        from tacker.keymgr import exception as keymgr_exception
        try:
            with open(self._path(managed_object_id), 'rb') as handle:
                payload = handle.read()
        except FileNotFoundError:
            raise keymgr_exception.ManagedObjectNotFoundError(
                uuid=managed_object_id)
        return types.SimpleNamespace(payload=payload,
                                     get_encoded=lambda: payload)

    def delete(self, context, managed_object_id):
        # Like BarbicanKeyManager, a missing secret is not an error.
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self._path(managed_object_id))


def conductor_options_filter(global_conf, **local_conf):
    """A paste filter factory that only registers tacker-conductor's
    [keystone_authtoken] options in tacker-server. Tacker reads
    ``[keystone_authtoken] auth_url`` whenever it builds the key manager
    of a VIM's secret, in the server too (the VIM of a v2 CNF
    instantiate); with keystone authentication the auth middleware
    registers it, with ``noauth`` nothing does."""
    from tacker.conductor import conductor_server  # noqa: F401
    return lambda app: app
