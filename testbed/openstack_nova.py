"""Nova of the fake OpenStack: the console log of a server
(``POST /servers/<id>/action`` with ``os-getConsoleOutput``), for the
servers of the model, and ``os-stop``, which the Heat engine carries out
(202; 409 when the server is not running or there is no engine), as an
operator's ``openstack server stop`` does.

Keypairs (``/os-keypairs``), as ``openstack keypair create --public-key``
imports them: the Heat engine refuses a server whose ``key_name`` is not
one, as Heat's ``nova.keypair`` constraint does, and hands the key to the
guest's cloud-init (testbed.cloud_init).

Mixed into openstack_api.FakeOpenStack.
"""

import base64
import binascii
import hashlib
import re
import struct
import urllib.parse

from testbed import cloud_init

NOVA_PREFIX = '/compute/v2.1'
# Nova's keypair names: 1 to 255 of these characters.
KEYPAIR_NAME = re.compile(r'[A-Za-z0-9 _.@-]{1,255}')


class NovaMixin(object):
    """The Nova API of a FakeOpenStack."""

    def _nova(self, method, path, body):
        """Route a Nova call below /compute/v2.1."""
        if path.rstrip('/') == '/os-keypairs' or path.startswith(
                '/os-keypairs/'):
            return self._keypairs_call(method, path, body)
        if method != 'POST':
            return nova_error(404, 'itemNotFound', 'Unknown Nova path.')
        return self._nova_post(path, body)

    def _nova_post(self, path, body):
        """A Nova POST that is not a keypair's: a server action."""
        match = re.fullmatch(r'/servers/([^/]+)/action', path)
        if not match:
            return nova_error(404, 'itemNotFound', 'Unknown Nova path.')
        server_id = urllib.parse.unquote(match.group(1))
        if isinstance(body, dict) and 'os-stop' in body:
            return self._stop_server(server_id)
        request = body.get('os-getConsoleOutput') if isinstance(
            body, dict) else None
        if not isinstance(request, dict):
            return nova_error(400, 'badRequest',
                              'Only os-getConsoleOutput is supported.')
        length = request.get('length')
        if length is not None and (not isinstance(length, int)
                                   or length < -1):
            return nova_error(400, 'badRequest',
                              'Invalid input for field/attribute length.')
        with self._lock:
            if server_id not in self._consoles:
                return nova_error(404, 'itemNotFound',
                                  'Instance %s could not be found.'
                                  % server_id)
            status = self._console_failures.get(server_id)
            output = self._consoles[server_id]
            self.console_reads.append(
                (server_id, cloud_init.KEYS_BEGIN in output))
        if status is not None:
            return nova_error(status, 'computeFault',
                              'Console output of %s is not available.'
                              % server_id)
        if length not in (None, -1):
            # Nova returns the last `length` lines of the log.
            output = ''.join(output.splitlines(keepends=True)[-length:]
                             if length else [])
        return 200, {}, {'output': output}

    def _stop_server(self, server_id):
        """os-stop: the engine powers the server off, after the answer."""
        with self._lock:
            known = server_id in self._consoles
        if not known:
            return nova_error(404, 'itemNotFound',
                              'Instance %s could not be found.' % server_id)
        if self.engine is None:
            return nova_error(409, 'conflictingRequest',
                              'This fake has no Heat engine to stop %s.'
                              % server_id)
        if not self.engine.stop_server(server_id):
            return nova_error(409, 'conflictingRequest',
                              "Cannot 'stop' instance %s while it is not "
                              'active.' % server_id)
        return 202, {}, None

    def add_keypair(self, name, public_key):
        """Import a keypair (``openstack keypair create --public-key``);
        its Nova representation, or ValueError saying why Nova refuses
        it."""
        if not isinstance(name, str) or not KEYPAIR_NAME.fullmatch(name):
            raise ValueError('Keypair name contains unsafe characters')
        _fingerprint(public_key)  # ValueError if it is not a public key
        with self._lock:
            if name in self._keypairs:
                raise KeyError("Key pair '%s' already exists." % name)
            self._keypairs[name] = public_key.strip()
        return self._shown_keypair(name)

    def keypair(self, name):
        """The public key of a keypair, or None."""
        with self._lock:
            return self._keypairs.get(name)

    def _keypairs_call(self, method, path, body):
        """/os-keypairs: import (POST), list, show (GET), DELETE."""
        if path.startswith('/os-keypairs/'):
            return self._keypair_call(
                method, urllib.parse.unquote(path[len('/os-keypairs/'):]))
        if method == 'GET':
            with self._lock:
                listed = sorted(self._keypairs)
            return 200, {}, {'keypairs': [
                {'keypair': self._shown_keypair(name)} for name in listed]}
        if method != 'POST':
            return nova_error(405, 'methodNotAllowed', 'Not allowed.')
        given = body.get('keypair') if isinstance(body, dict) else None
        if not isinstance(given, dict) or not isinstance(
                given.get('public_key'), str):
            return nova_error(400, 'badRequest', 'This fake Nova only '
                              'imports keypairs: give public_key.')
        try:
            return 200, {}, {'keypair': self.add_keypair(
                given.get('name'), given['public_key'])}
        except KeyError as error:
            return nova_error(409, 'conflictingRequest', error.args[0])
        except ValueError as error:
            return nova_error(400, 'badRequest', str(error))

    def _keypair_call(self, method, name):
        """GET or DELETE /os-keypairs/<name>."""
        if method not in ('GET', 'DELETE'):
            return nova_error(405, 'methodNotAllowed', 'Not allowed.')
        shown = self._shown_keypair(name)
        if shown is None:
            return nova_error(404, 'itemNotFound', 'Keypair %s not found for '
                              'user %s' % (name, self.user_id))
        if method == 'GET':
            return 200, {}, {'keypair': shown}
        with self._lock:
            self._keypairs.pop(name, None)
        return 202, {}, None

    def _shown_keypair(self, name):
        key = self.keypair(name)
        return None if key is None else {
            'name': name, 'public_key': key, 'type': 'ssh',
            'fingerprint': _fingerprint(key), 'user_id': self.user_id}


def _fingerprint(public_key):
    """Nova's fingerprint of an OpenSSH public key (MD5 of the key blob);
    ValueError for anything else, as Nova refuses it."""
    fields = public_key.split() if isinstance(public_key, str) else []
    try:
        blob = base64.b64decode(fields[1], validate=True)
        length, = struct.unpack('>I', blob[:4])
        ok = blob[4:4 + length].decode('ascii') == fields[0]
    except (IndexError, binascii.Error, struct.error, UnicodeDecodeError):
        ok = False
    if not ok:
        raise ValueError('Keypair data is invalid: failed to generate '
                         'fingerprint')
    digest = hashlib.md5(blob, usedforsecurity=False).hexdigest()
    return ':'.join(digest[i:i + 2] for i in range(0, len(digest), 2))


def nova_error(code, fault, message):
    return code, {}, {fault: {'code': code, 'message': message}}
