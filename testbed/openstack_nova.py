"""Nova of the fake OpenStack: the console log of a server
(``POST /servers/<id>/action`` with ``os-getConsoleOutput``), for the
servers of the model, and ``os-stop``, which the Heat engine carries out
(202; 409 when the server is not running or there is no engine), as an
operator's ``openstack server stop`` does.

Mixed into openstack_api.FakeOpenStack.
"""

import re
import urllib.parse

from testbed import cloud_init

NOVA_PREFIX = '/compute/v2.1'


class NovaMixin(object):
    """The Nova API of a FakeOpenStack."""

    def _nova_post(self, path, body):
        """Route a Nova POST below /compute/v2.1: a server action."""
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


def nova_error(code, fault, message):
    return code, {}, {fault: {'code': code, 'message': message}}
