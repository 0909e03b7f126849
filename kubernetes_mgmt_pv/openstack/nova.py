"""Nova calls of the driver: the console log of a server.

They go through the keystoneauth1 session of the Heat client, so the VIM
credentials are sent to Keystone once per hook, and the compute endpoint
comes from the same service catalog, region and interface as Heat's. No
error message (nor an error chained to it) ever contains the VIM password,
token or the user info of the auth_url.
"""

from keystoneauth1 import adapter
from keystoneauth1 import exceptions as keystone_exc

from kubernetes_mgmt_pv import exceptions
from kubernetes_mgmt_pv.openstack import heat
from kubernetes_mgmt_pv import redaction

# Answers after which asking again later may succeed: the server is still
# building (409), Nova is rate limiting or briefly unavailable.
TRANSIENT_STATUSES = frozenset((409, 429, 500, 502, 503, 504))


class ConsoleOutputError(exceptions.MgmtDriverError):
    """Nova did not give the console log of a server.

    ``retry`` is true when asking again later may succeed; otherwise waiting
    cannot help (no such server, console logs not readable by the VIM user
    or not supported by the hypervisor).
    """

    def __init__(self, message, retry):
        super().__init__(message)
        self.retry = retry


class Compute:
    """Nova's compute API on the keystoneauth1 session of a Heat client."""

    def __init__(self, heat_client):
        # heatclient's SessionClient is a keystoneauth1 Adapter: reusing its
        # session, auth, region and interface keeps one token and one
        # endpoint choice for both services.
        heat_http = heat_client.http_client
        self._adapter = adapter.Adapter(
            session=heat_http.session, auth=heat_http.auth,
            service_type='compute', interface=heat_http.interface,
            region_name=heat_http.region_name)
        self._secrets = heat.vim_secrets(heat_client)

    def console_output(self, server_id, length=None) -> str:
        """The last ``length`` lines of server_id's console log, or all."""
        action = 'reading the console log of Nova server %s' % server_id
        if not heat.NOVA_SERVER_ID.fullmatch(str(server_id)):
            raise ConsoleOutputError(
                '%s: not a Nova server id' % action, retry=False)
        try:
            response = self._adapter.post(
                '/servers/%s/action' % server_id,
                json={'os-getConsoleOutput': {'length': length}},
                raise_exc=False)
        except keystone_exc.ClientException as error:
            reason, retry = _failure(error)
            raise ConsoleOutputError(
                redaction.redact('%s: %s' % (action, reason), self._secrets),
                retry=retry) from redaction.safe_cause(error, self._secrets)
        if response.status_code != 200:
            raise ConsoleOutputError(redaction.redact(
                '%s: Nova answered HTTP %d%s' % (
                    action, response.status_code, _explain(response)),
                self._secrets),
                retry=response.status_code in TRANSIENT_STATUSES)
        try:
            output = response.json()['output']
        except (ValueError, KeyError, TypeError):
            output = None
        if not isinstance(output, str):
            raise ConsoleOutputError(
                '%s: Nova answered without an "output" text' % action,
                retry=False)
        return output


def _failure(error):
    """Why keystoneauth failed, and whether asking again may help."""
    if isinstance(error, keystone_exc.Unauthorized):
        return 'Keystone rejected the VIM credentials (HTTP 401)', False
    if isinstance(error, keystone_exc.EndpointNotFound):
        return ('the Keystone service catalog has no compute endpoint (in '
                'the VIM region, if one is set)', False)
    if isinstance(error, keystone_exc.ConnectionError):
        return 'cannot connect: %s' % error, True
    return '%s: %s' % (type(error).__name__, error), False


def _explain(response):
    """Nova's fault message, plus what an operator can do for 403 and 501."""
    try:
        fault = next(iter(response.json().values()))
        message = ': %s' % fault['message']
    except (ValueError, StopIteration, KeyError, TypeError, AttributeError):
        message = ''
    if response.status_code == 403:
        message += (' (the VIM user may not read console logs: see Nova '
                    'policy os_compute_api:os-console-output)')
    elif response.status_code == 501:
        message += ' (the hypervisor keeps no console log)'
    return message
