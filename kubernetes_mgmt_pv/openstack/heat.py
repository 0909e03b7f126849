"""Heat lookups on the VNF's stack: CP addresses, volume devices, members.

The driver asks Heat the same questions as Tacker's Kubernetes management
driver (see the contract, section 3), through the real python-heatclient on
a keystoneauth1 session built from the VIM access_info. Every failure is
turned into a HeatLookupError that names the stack, the resource and what
is missing, so the operator can fix the VNF package or the VIM; no message
(and no error chained to it) ever contains the VIM password or the user
info of its auth_url.
"""

from __future__ import annotations

import contextlib
import dataclasses
import ipaddress
import itertools
import posixpath
import re

from heatclient import client as heat_client_module
from heatclient import exc as heat_exc
from keystoneauth1 import exceptions as keystone_exc
from keystoneauth1.identity import v3
from keystoneauth1 import session as keystone_session

from kubernetes_mgmt_pv import exceptions
from kubernetes_mgmt_pv import redaction

AUTO_SCALING_GROUP = 'OS::Heat::AutoScalingGroup'
# Nova server ids are UUIDs; the id goes into a Nova URL, so nothing else
# (no '/', no '..') may pass.
NOVA_SERVER_ID = re.compile(
    r'[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}',
    re.IGNORECASE)
_TRUE_WORDS = ('true', 'yes', 'on', '1')
_FALSE_WORDS = ('false', 'no', 'off', '0')


@dataclasses.dataclass(frozen=True)
class CpAddress:
    """Addresses of one connection point (a port or a floating IP)."""

    cp_name: str
    fixed_ip: str
    floating_ip: str | None

    @property
    def ssh_host(self) -> str:
        """Floating IP first: the fixed IP may be unroutable from Tacker."""
        return self.floating_ip or self.fixed_ip


@dataclasses.dataclass(frozen=True)
class VolumeAttachment:
    """A Cinder volume as attached to its server."""

    volume_id: str | None
    device: str  # as Nova reported it; the guest may name it differently


def build_heat_client(access_info: dict):
    """A heatclient v1 client authenticated with the VIM's credentials.

    Like Tacker's HeatClient: v3 password auth, the endpoint taken from the
    service catalog (of ``region`` when given), TLS verification unless
    ``cert_verify`` is false. Nothing is sent until the first lookup.
    """
    for key in ('auth_url', 'username', 'password'):
        if not access_info.get(key):
            raise exceptions.HeatLookupError(
                'VIM access_info has no %r: cannot authenticate to '
                'Keystone' % key)
    if not (access_info.get('project_name') or access_info.get('project_id')):
        raise exceptions.HeatLookupError(
            "VIM access_info has neither 'project_name' nor 'project_id': "
            'cannot scope the Keystone token')
    auth = v3.Password(
        auth_url=access_info['auth_url'],
        username=access_info['username'],
        password=access_info['password'],
        user_domain_name=access_info.get('user_domain_name') or 'Default',
        project_name=access_info.get('project_name'),
        project_id=access_info.get('project_id'),
        project_domain_name=(access_info.get('project_domain_name')
                             or 'Default'))
    session = keystone_session.Session(
        auth=auth, verify=_cert_verify(access_info.get('cert_verify', True)))
    client_kwargs = {'session': session}
    if access_info.get('region'):
        client_kwargs['region_name'] = access_info['region']
    return heat_client_module.Client('1', **client_kwargs)


def vim_secrets(heat_client):
    """The VIM password (given alone and in the auth_url's user info) of
    a client made by build_heat_client: no message may show it."""
    auth = heat_client.http_client.session.auth
    passwords = tuple(getattr(method, 'password', None)
                      for method in auth.auth_methods)
    return tuple(secret for secret in
                 passwords + redaction.url_secrets(auth.auth_url) if secret)


def _cert_verify(value):
    """Tacker stores cert_verify as the string 'True'/'False'; an absolute
    path is a CA bundle (Tacker v2's [v2_vnfm] heat_ca_cert_file)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.startswith('/'):
        return value
    word = str(value).strip().lower()
    if word in _TRUE_WORDS:
        return True
    if word in _FALSE_WORDS:
        return False
    raise exceptions.HeatLookupError(
        'VIM access_info cert_verify must be True or False, not %r' % value)


class HeatStack:
    """Lookups on one VNF's top-level Heat stack and its nested stacks."""

    def __init__(self, heat_client, stack_id):
        self._heat = heat_client
        self.stack_id = stack_id
        self._secrets = vim_secrets(heat_client)

    @property
    def client(self):
        """The heatclient, whose session also reaches Nova."""
        return self._heat

    def cp_address(self, cp_name, stack_id=None) -> CpAddress:
        """Addresses of a CP resource of stack_id (default: the top stack).

        A floating IP resource gives floating_ip_address plus the fixed IP of
        the port it is associated with; a port gives fixed_ips[0].
        """
        stack_id = stack_id or self.stack_id
        attributes = self._resource_attributes(stack_id, cp_name)
        floating_ip = attributes.get('floating_ip_address')
        fixed_ips = attributes.get('fixed_ips')
        if fixed_ips:
            fixed_ip = fixed_ips[0].get('ip_address')
            fixed_attribute = 'fixed_ips[0].ip_address'
        elif floating_ip:
            fixed_ip = attributes.get('fixed_ip_address')
            fixed_attribute = 'fixed_ip_address'
            if not fixed_ip:
                raise self._missing(
                    stack_id, cp_name, 'fixed_ip_address',
                    'is the floating IP associated with a port?')
        else:
            raise self._missing(
                stack_id, cp_name, 'fixed_ips',
                'is it a port with an IP address, or a floating IP?')
        _check_ip(stack_id, cp_name, fixed_attribute, fixed_ip)
        if floating_ip:
            _check_ip(stack_id, cp_name, 'floating_ip_address', floating_ip)
        return CpAddress(cp_name=cp_name, fixed_ip=fixed_ip,
                         floating_ip=floating_ip or None)

    def cp_server_id(self, cp_name, stack_id=None) -> str:
        """Nova id of the server behind a CP of stack_id (default: top stack).

        A port names its server in ``device_id``. A floating IP names it in
        ``port_details.device_id`` when Neutron has the fip-port-details
        extension; otherwise the driver reads the ``device_id`` of the port
        resource of the same stack that the floating IP is associated with.
        """
        stack_id = stack_id or self.stack_id
        attributes = self._resource_attributes(stack_id, cp_name)
        if 'floating_ip_address' in attributes:
            server_id = (attributes.get('port_details') or {}).get('device_id')
            if not server_id:
                server_id = self._floating_ip_port_device(
                    stack_id, cp_name, attributes.get('port_id'))
        else:
            server_id = attributes.get('device_id')
        if not server_id:
            raise self._missing(stack_id, cp_name, 'device_id',
                                'is the port attached to a server?')
        if not NOVA_SERVER_ID.fullmatch(server_id):
            raise exceptions.HeatLookupError(
                'Heat resource %r of stack %s has device_id %r, which is not '
                'a Nova server id' % (cp_name, stack_id, server_id))
        return server_id

    def _floating_ip_port_device(self, stack_id, cp_name, port_id):
        if not port_id:
            raise self._missing(stack_id, cp_name, 'port_id',
                                'is the floating IP associated with a port?')
        for resource in self._list(stack_id):
            if resource.physical_resource_id == port_id:
                return self._resource_attributes(
                    stack_id, resource.resource_name).get('device_id')
        raise exceptions.HeatLookupError(
            'Heat resource %r of stack %s is associated with port %s, which '
            'is not a resource of that stack: cannot tell which server it '
            'belongs to' % (cp_name, stack_id, port_id))

    def volume_attachment(self, volume_resource_id) -> VolumeAttachment:
        """Cinder id and device path of a volume of the top stack."""
        attributes = self._resource_attributes(self.stack_id,
                                               volume_resource_id)
        attachments = attributes.get('attachments')
        if not attachments:
            raise self._missing(
                self.stack_id, volume_resource_id, 'attachments',
                'is the volume attached to the storage server?')
        device = attachments[0].get('device')
        if not device:
            raise self._missing(
                self.stack_id, volume_resource_id, 'attachments[0].device',
                'is the volume attachment complete?')
        if not device.startswith('/dev/') or (
                posixpath.normpath(device) != device):
            raise exceptions.HeatLookupError(
                'Heat resource %r of stack %s has device %r, which is not a '
                'path under /dev/' % (volume_resource_id, self.stack_id,
                                      device))
        return VolumeAttachment(
            volume_id=attributes.get('id') or attachments[0].get('volume_id'),
            device=device)

    def group_member_stack_ids(self, aspect_id) -> list[str]:
        """Member stack ids of the scaling group aspect_id, in Heat's order."""
        return [stack_id for _, stack_id in self.group_members(aspect_id)]

    def group_members(self, aspect_id) -> list[tuple[str, str]]:
        """(resource name, stack id) of each member of the scaling group
        aspect_id, in Heat's order."""
        group = self._listed_resource(self.stack_id, aspect_id)
        if group.resource_type != AUTO_SCALING_GROUP:
            raise exceptions.HeatLookupError(
                'Heat resource %r of stack %s is a %s, not an %s: is the '
                'aspect id right?' % (aspect_id, self.stack_id,
                                      group.resource_type, AUTO_SCALING_GROUP))
        if not group.physical_resource_id:
            raise self._missing(self.stack_id, aspect_id,
                                'physical_resource_id',
                                'has the scaling group been created?')
        members = []
        for member in self._list(group.physical_resource_id):
            if not member.physical_resource_id:
                raise self._missing(group.physical_resource_id,
                                    member.resource_name,
                                    'physical_resource_id',
                                    'is the group member still being created?')
            members.append((member.resource_name,
                            member.physical_resource_id))
        return members

    def find_member_stack_of_server(self, server_id, aspect_ids) -> str | None:
        """The stack holding the Nova server server_id, or None.

        Looks at the top stack, then at the members of each group, listing
        a group only when the server was not found before it.
        """
        candidate_stack_ids = itertools.chain(
            [self.stack_id],
            itertools.chain.from_iterable(
                self.group_member_stack_ids(aspect_id)
                for aspect_id in aspect_ids))
        for stack_id in candidate_stack_ids:
            if any(resource.physical_resource_id == server_id
                   for resource in self._list(stack_id)):
                return stack_id
        return None

    def _resource_attributes(self, stack_id, resource_name):
        with _heat_errors('reading Heat resource %r of stack %s'
                          % (resource_name, stack_id), self._secrets):
            resource = self._heat.resources.get(stack_id=stack_id,
                                                resource_name=resource_name)
        return getattr(resource, 'attributes', None) or {}

    def _list(self, stack_id):
        with _heat_errors('listing the resources of Heat stack %s'
                          % stack_id, self._secrets):
            return self._heat.resources.list(stack_id=stack_id)

    def _listed_resource(self, stack_id, resource_name):
        for resource in self._list(stack_id):
            if resource.resource_name == resource_name:
                return resource
        raise exceptions.HeatLookupError(
            'Heat stack %s has no resource %r' % (stack_id, resource_name))

    @staticmethod
    def _missing(stack_id, resource_name, attribute, hint):
        return exceptions.HeatLookupError(
            'Heat resource %r of stack %s has no %s: %s'
            % (resource_name, stack_id, attribute, hint))


def _check_ip(stack_id, resource_name, attribute, value):
    try:
        ipaddress.ip_address(value)
    except ValueError:
        raise exceptions.HeatLookupError(
            'Heat resource %r of stack %s has %s %r, which is not an IP '
            'address' % (resource_name, stack_id, attribute, value)) from None


@contextlib.contextmanager
def _heat_errors(action, secrets):
    """Turn heatclient/keystoneauth failures into HeatLookupError.

    The message never shows ``secrets`` or URL user info, and the original
    error is chained only when its traceback shows none either: Tacker
    logs the whole chain.
    """
    try:
        yield
    except (heat_exc.BaseException, keystone_exc.ClientException) as error:
        raise exceptions.HeatLookupError(redaction.redact(
            '%s: %s' % (action, _failure(error)), secrets)) from \
            redaction.safe_cause(error, secrets)


def _failure(error):
    """Why a Heat call failed. Authentication failures get a fixed text:
    the server's reply is not needed to act on them and is kept out of the
    message on principle."""
    if isinstance(error, heat_exc.HTTPNotFound):
        return 'not found (%s)' % _heat_message(error)
    if isinstance(error, (keystone_exc.Unauthorized,
                          heat_exc.HTTPUnauthorized)):
        return ('Keystone or Heat rejected the VIM credentials (HTTP 401); '
                'check the username, password, project and domains of the '
                'VIM')
    if isinstance(error, keystone_exc.EndpointNotFound):
        return ('the Keystone service catalog has no orchestration endpoint '
                '(in the VIM region, if one is set)')
    if isinstance(error, keystone_exc.ConnectionError):
        return 'cannot connect: %s' % error
    if isinstance(error, heat_exc.HTTPException):
        return 'Heat answered HTTP %s: %s' % (error.code,
                                              _heat_message(error))
    return '%s: %s' % (type(error).__name__, error)


def _heat_message(error):
    """Heat's JSON error message, without heatclient's 'ERROR: ' prefix."""
    return error.error.get('error', {}).get('message') or str(error)
