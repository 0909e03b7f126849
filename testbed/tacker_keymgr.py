"""The key manager the testbed's Tacker processes use instead of Barbican.

Kubernetes VIMs need Barbican in Tacker 16 (``[k8s_vim] use_barbican``);
``FileKeyManager`` is plugged in through ``[key_manager] api_class``:
secrets in files of a private directory, which every Tacker process of
one service reaches (as every host reaches one Barbican). It refuses what
Barbican (23, its default policy) refuses Tacker's service context
(``[keystone_authtoken]``, see ``tacker.context``): a user Keystone does
not authenticate, a secret of another project, storing without the
``member`` role. Tacker imports this module, so it imports nothing of the
testbed.
"""

import base64
import contextlib
import json
import os
import sys
import urllib.error
import urllib.request
import uuid

KEYMGR_DIR_ENV = 'TESTBED_KEYMGR_DIR'
# Barbican's default policy: creating needs member (admin implies it);
# reading a secret's payload, member or admin of the secret's project;
# deleting, that or admin of any project.
STORE_ROLES = READ_ROLES = frozenset(('member', 'admin'))


def _key_manager_base():
    """Tacker's KeyManager base in a Tacker process (which imports this
    module through [key_manager] api_class); ``object`` elsewhere, so that
    tests and tools never import Tacker (and its eventlet) themselves."""
    if 'tacker' not in sys.modules:
        return object
    from tacker.keymgr import key_manager
    return key_manager.KeyManager


def _errors():
    from tacker.keymgr import exception
    return exception


class FileKeyManager(_key_manager_base()):
    """Tacker's key manager interface with secrets in files of the
    directory ``$TESTBED_KEYMGR_DIR`` (what BarbicanKeyManager keeps in
    Barbican), each owned by the project of the token that stored it."""

    def __init__(self, auth_url):
        self.auth_url = auth_url
        self.directory = os.environ[KEYMGR_DIR_ENV]

    def _path(self, secret_id):
        if not secret_id or '/' in secret_id or secret_id.startswith('.'):
            raise _errors().KeyManagerError(
                reason='bad secret id %r' % secret_id)
        return os.path.join(self.directory, secret_id)

    def _token(self, context):
        """The token Keystone issues the context (a KeystonePassword, as
        ``generate_tacker_service_context`` makes): {user, project,
        roles}. BarbicanKeyManager authenticates so, and its errors are
        these: Forbidden without a context, KeyManagerError when Keystone
        refuses it."""
        if type(context).__name__ != 'KeystonePassword':
            raise _errors().Forbidden(
                reason='no KeystonePassword context: %s'
                % type(context).__name__)
        if not self.auth_url:
            raise _errors().KeyManagerError(
                reason='no [keystone_authtoken] auth_url')
        user = _given(id=context.user_id, name=context.username,
                      password=context.password,
                      domain=_given(name=context.user_domain_name))
        project = _given(id=context.project_id, name=context.project_name,
                         domain=_given(name=context.project_domain_name))
        body = {'auth': {
            'identity': {'methods': ['password'],
                         'password': {'user': user}},
            'scope': {'project': project}}}
        request = urllib.request.Request(
            self.auth_url.rstrip('/') + '/auth/tokens',
            data=json.dumps(body).encode(), method='POST',
            headers={'Content-Type': 'application/json'})
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                token = json.load(response)['token']
        except (OSError, ValueError, KeyError) as error:
            raise _errors().KeyManagerError(
                reason='Keystone at %s refused the service user %r: %s' % (
                    self.auth_url, context.username, error))
        return {'user': token['user']['id'],
                'project': token['project']['id'],
                'roles': {role['name'] for role in token['roles']}}

    @staticmethod
    def _forbidden(action, token, secret_id):
        return _errors().KeyManagerError(
            reason='403 Forbidden: %s of secret %s by project %s (roles %s)'
            % (action, secret_id, token['project'],
               ','.join(sorted(token['roles'])) or 'none'))

    def store(self, context, managed_object, expiration=None):
        token = self._token(context)
        secret_id = str(uuid.uuid4())
        if not token['roles'] & STORE_ROLES:
            raise self._forbidden('creation', token, secret_id)
        payload = managed_object.get_encoded() if hasattr(
            managed_object, 'get_encoded') else managed_object
        if isinstance(payload, str):
            payload = payload.encode()
        record = {'project': token['project'], 'creator': token['user'],
                  'payload': base64.b64encode(payload).decode()}
        tmp = self._path(secret_id) + '.tmp'
        with open(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600),
                  'w') as handle:
            json.dump(record, handle)
        os.rename(tmp, self._path(secret_id))
        return secret_id

    def _record(self, secret_id):
        try:
            with open(self._path(secret_id)) as handle:
                return json.load(handle)
        except FileNotFoundError:
            return None

    def get(self, context, managed_object_id, metadata_only=False):
        token = self._token(context)
        record = self._record(managed_object_id)
        if record is None:
            raise _errors().ManagedObjectNotFoundError(
                uuid=managed_object_id)
        if record['project'] != token['project'] or \
                not token['roles'] & READ_ROLES:
            raise self._forbidden('read', token, managed_object_id)
        payload = base64.b64decode(record['payload'])
        return _Secret(payload)

    def delete(self, context, managed_object_id):
        token = self._token(context)
        record = self._record(managed_object_id)
        if record is None:
            return  # like BarbicanKeyManager: a missing secret is no error
        own = record['project'] == token['project'] and \
            token['roles'] & READ_ROLES
        if not own and 'admin' not in token['roles']:
            raise self._forbidden('deletion', token, managed_object_id)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self._path(managed_object_id))


def _given(**fields):
    """The fields that are set, as keystoneauth sends them."""
    return {key: value for key, value in fields.items()
            if value is not None}


class _Secret(object):
    """What barbicanclient's secret offers Tacker: its payload."""

    def __init__(self, payload):
        self.payload = payload

    def get_encoded(self):
        return self.payload


def conductor_options_filter(global_conf, **local_conf):
    """A paste filter factory that only registers tacker-conductor's
    [keystone_authtoken] options in tacker-server. Tacker reads
    ``[keystone_authtoken] auth_url`` whenever it builds the key manager
    of a VIM's secret, in the server too (the VIM of a v2 CNF
    instantiate); with keystone authentication the auth middleware
    registers it, with ``noauth`` nothing does."""
    from tacker.conductor import conductor_server  # noqa: F401
    return lambda app: app
