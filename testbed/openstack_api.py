"""An HTTP fake of Keystone v3, Heat v1 and Nova's console log for tests.

The driver talks to Heat through the real python-heatclient on a real
keystoneauth1 session, so the fake speaks their wire protocol instead of
being a mock: password authentication at ``POST /v3/auth/tokens`` with a
service catalog, then the Heat calls heatclient makes, including the stack
lookup that answers ``302`` with the canonical ``stacks/<name>/<id>`` URL
(heatclient's ``_resolve_stack_id`` reads that ``Location``; keystoneauth
follows it for ``resources.list`` and ``stacks.get``).

Resource attributes follow real Heat: for OpenStack resources Heat returns
the ``show`` attribute, i.e. the Neutron/Cinder/Nova API representation of
the resource, so a port carries ``fixed_ips``, a floating IP carries
``floating_ip_address`` and ``fixed_ip_address``, and a volume carries the
Cinder ``attachments`` list.

Nova answers the console log of a server (``POST /servers/<id>/action``
with ``os-getConsoleOutput``), for the servers added with ``add_server``;
a server leaves Nova when its resource is removed. Its keypairs
(``/os-keypairs``) are the public keys an operator imported. With a Heat
engine, ``os-stop`` powers a server it booted off (202; 409 when it is not
running), as an operator's ``openstack server stop`` does.

Tests build the model with the ``add_*`` helpers, mutate it between calls
(``remove_*``, or ``resource(...).attributes``) and assert on ``requests``.

With a ``heat_engine`` (testbed.heat_engine.HeatEngine) the fake is a Heat
that creates what templates say: ``POST /stacks``, ``PATCH`` (update and
``mark_unhealthy``), ``DELETE`` and scaling-policy signals are handed to
the engine, which boots testbed hosts for servers. Without one those calls
answer 405. Stack lists (``name``, ``owner_id``, ``show_nested``), resource
lists with ``nested_depth``, events, metadata, templates (a scaling
group's nested stack shows one made of its members, as Heat does) and
files are served from the model either way. Deleted stacks keep answering
by id (with ``DELETE_COMPLETE``) but leave lists and name lookups, as in
Heat.

``FakeOpenStack`` holds the model (testbed.openstack_model) and the HTTP
server; each API is a mixin of its own: testbed.openstack_keystone,
testbed.openstack_heat, testbed.openstack_nova and testbed.openstack_glance
(an image service without images, for Tacker v2's grants).
"""

# The classes of the module itself: Tacker's imports rebind the `http`
# package's `server` attribute to an eventlet copy whose servers run on
# green threads, which never run in a test process (conftest of
# tests/tacker_integration).
from http.server import BaseHTTPRequestHandler
from http.server import ThreadingHTTPServer
import json
import re
import socket
import threading
import urllib.parse
import uuid

from testbed import openstack_glance
from testbed import openstack_heat
from testbed import openstack_keystone
from testbed import openstack_model
from testbed import openstack_nova


class FakeOpenStack(openstack_keystone.KeystoneMixin,
                    openstack_heat.HeatMixin, openstack_nova.NovaMixin,
                    openstack_glance.GlanceMixin):
    """Keystone v3 + Heat v1 (+ Nova's console, os-stop and keypairs, an
    empty Glance) on a local HTTP server, with an in-memory model.

    Use as a context manager (or start()/stop()). ``host`` and ``port`` are
    the bind address (port 0 picks a free port); ``advertise_host`` is the
    host written into the catalog and redirects when clients reach the fake
    through another address than the bind one (e.g. binding 0.0.0.0).
    """

    def __init__(self, host='127.0.0.1', port=0, advertise_host=None,
                 username='admin', password='fake-password',
                 project_name='admin', project_id=None,
                 user_domain_name='Default', project_domain_name='Default',
                 regions=('RegionOne',), heat_engine=None):
        self.host = host
        self.port = port
        self.advertise_host = advertise_host or host
        self.username = username
        self.password = password
        self.project_name = project_name
        self.project_id = project_id or uuid.uuid4().hex
        self.user_id = uuid.uuid4().hex
        self.user_domain_name = user_domain_name
        self.project_domain_name = project_domain_name
        self.regions = tuple(regions)
        self._lock = threading.RLock()
        self._stacks = {}
        self._consoles = {}  # Nova server id -> console log
        # (Nova server id, whether it showed host keys) of each console read
        self.console_reads = []
        self._console_failures = {}  # Nova server id -> HTTP status
        self._keypairs = {}  # Nova keypair name -> its public key
        self._tokens = set()
        self._accounts = []  # openstack_keystone.add_account
        self._requests = []
        self._failures = []  # InjectedFailure, see fail_requests()
        self._server = None
        self._thread = None
        self.engine = heat_engine
        if heat_engine is not None:
            heat_engine.attach(self)

    # -- lifecycle ---------------------------------------------------------

    def start(self):
        server_class = _IPv6Server if ':' in self.host else _IPv4Server
        self._server = server_class((self.host, self.port),
                                    _handler_class(self))
        self.port = self._server.server_address[1]
        # A short poll interval keeps stop(), hence each test, fast.
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        kwargs={'poll_interval': 0.02},
                                        name='fake-openstack', daemon=True)
        self._thread.start()
        return self

    def stop(self):
        if self._server is None:
            return
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()
        self._server = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc_info):
        self.stop()

    # -- addresses and credentials ----------------------------------------

    @property
    def base_url(self):
        host = self.advertise_host
        if ':' in host:
            host = '[%s]' % host
        return 'http://%s:%d' % (host, self.port)

    @property
    def auth_url(self):
        return self.base_url + '/v3'

    @property
    def heat_url(self):
        return '%s%s/%s' % (self.base_url, openstack_heat.HEAT_PREFIX,
                            self.project_id)

    @property
    def compute_url(self):
        return self.base_url + openstack_nova.NOVA_PREFIX

    def access_info(self, **overrides):
        """VIM access_info as Tacker hands it to a management driver."""
        info = {
            'auth_url': self.auth_url,
            'username': self.username,
            'password': self.password,
            'project_name': self.project_name,
            'user_domain_name': self.user_domain_name,
            'project_domain_name': self.project_domain_name,
            'cert_verify': 'False',
        }
        info.update(overrides)
        return info

    # -- request log -------------------------------------------------------

    @property
    def requests(self):
        with self._lock:
            return list(self._requests)

    def heat_requests(self):
        return [record for record in self.requests
                if record.path.startswith(openstack_heat.HEAT_PREFIX + '/')]

    def nova_requests(self):
        return [record for record in self.requests
                if record.path.startswith(openstack_nova.NOVA_PREFIX + '/')]

    def clear_requests(self):
        with self._lock:
            self._requests.clear()

    # -- injected failures -------------------------------------------------

    def fail_requests(self, method, path, count=1, status=500,
                      message='injected fault'):
        """Answer matching requests with an error instead of serving them.

        The next ``count`` (None: every one until clear_failures()) requests
        whose method is ``method`` and whose path fully matches the regular
        expression ``path``; the returned record lists the paths answered.
        """
        failure = openstack_model.InjectedFailure(
            method.upper(), re.compile(path), count, status, message)
        with self._lock:
            self._failures.append(failure)
        return failure

    def clear_failures(self):
        with self._lock:
            self._failures.clear()

    def _injected_failure(self, method, path):
        """(status, headers, body) of an injected failure, or None."""
        with self._lock:
            for failure in self._failures:
                if failure.remaining != 0 and failure.method == method and \
                        failure.path.fullmatch(path):
                    if failure.remaining is not None:
                        failure.remaining -= 1
                    failure.hits.append(path)
                    return openstack_heat.heat_error(
                        failure.status, 'InjectedFault', failure.message)
        return None

    # -- model: stacks and generic resources -------------------------------

    def add_stack(self, name, parent_id=None, **fields):
        """Add a stack and return its id."""
        stack = openstack_model.FakeStack(id=str(uuid.uuid4()), name=name,
                                          parent_id=parent_id, **fields)
        with self._lock:
            self._stacks[stack.id] = stack
        return stack.id

    def stack(self, stack_id):
        with self._lock:
            return self._stacks[stack_id]

    def stacks(self, include_deleted=False):
        """Every stack of the model (top-level and nested)."""
        with self._lock:
            return [stack for stack in self._stacks.values()
                    if include_deleted or not stack.deleted]

    def find_stack(self, name):
        """The live stack called ``name``, or None."""
        with self._lock:
            return next((stack for stack in self._stacks.values()
                         if stack.name == name and not stack.deleted), None)

    def resource(self, stack_id, name):
        with self._lock:
            return self._stacks[stack_id].resources[name]

    def add_resource(self, stack_id, name, resource_type,
                     physical_resource_id=None, attributes=None,
                     nested_stack_id=None):
        """Add a resource to a stack and return its physical_resource_id."""
        resource = openstack_model.FakeResource(
            name=name, resource_type=resource_type,
            physical_resource_id=(physical_resource_id or nested_stack_id
                                  or str(uuid.uuid4())),
            attributes=dict(attributes or {}),
            nested_stack_id=nested_stack_id)
        with self._lock:
            self._stacks[stack_id].resources[name] = resource
        return resource.physical_resource_id

    def remove_resource(self, stack_id, name):
        """Remove a resource; like Heat, its nested stack goes with it."""
        with self._lock:
            resource = self._stacks[stack_id].resources.pop(name)
            if resource.resource_type == 'OS::Nova::Server':
                self._consoles.pop(resource.physical_resource_id, None)
            if resource.nested_stack_id:
                self.remove_stack(resource.nested_stack_id)

    def remove_stack(self, stack_id):
        """Remove a stack and, recursively, its nested stacks."""
        with self._lock:
            stack = self._stacks.pop(stack_id)
            for resource in stack.resources.values():
                if resource.nested_stack_id in self._stacks:
                    self.remove_stack(resource.nested_stack_id)

    # -- model: typed resources -------------------------------------------

    def add_port(self, stack_id, name, fixed_ips, port_id=None,
                 device_id=''):
        """Add an OS::Neutron::Port; fixed_ips are IP strings or dicts.

        device_id is the Nova server the port is attached to ('' when none,
        as Neutron says). A port never has floating_ip_address: model a CP
        reached through a floating IP with add_floating_ip.
        """
        port_id = port_id or str(uuid.uuid4())
        attributes = {
            'id': port_id,
            'name': name,
            'status': 'ACTIVE',
            'network_id': str(uuid.uuid4()),
            'mac_address': 'fa:16:3e:00:00:01',
            'device_id': device_id,
            'device_owner': 'compute:nova' if device_id else '',
            'fixed_ips': [_fixed_ip_entry(entry) for entry in fixed_ips],
        }
        return self.add_resource(stack_id, name, 'OS::Neutron::Port',
                                 port_id, attributes)

    def add_floating_ip(self, stack_id, name, floating_ip, port_name=None,
                        port_details=True):
        """Add an OS::Neutron::FloatingIP, associated to port_name if given.

        port_details is what Neutron's fip-port-details extension adds
        (with the port's device_id); False models a Neutron without it.
        """
        fip_id = str(uuid.uuid4())
        attributes = {
            'id': fip_id,
            'status': 'ACTIVE' if port_name else 'DOWN',
            'floating_ip_address': floating_ip,
            'floating_network_id': str(uuid.uuid4()),
            'fixed_ip_address': None,
            'port_id': None,
        }
        if port_name:
            port = self.resource(stack_id, port_name)
            attributes['port_id'] = port.physical_resource_id
            attributes['fixed_ip_address'] = (
                port.attributes['fixed_ips'][0]['ip_address'])
            if port_details:
                attributes['port_details'] = {
                    key: port.attributes[key] for key in (
                        'name', 'network_id', 'mac_address', 'status',
                        'device_id', 'device_owner')}
        return self.add_resource(stack_id, name, 'OS::Neutron::FloatingIP',
                                 fip_id, attributes)

    def add_volume(self, stack_id, name, device='/dev/vdb', server_id=None):
        """Add an OS::Cinder::Volume, attached at device unless it is None."""
        volume_id = str(uuid.uuid4())
        attachments = []
        if device is not None:
            attachments.append({
                'id': volume_id,
                'volume_id': volume_id,
                'attachment_id': str(uuid.uuid4()),
                'server_id': server_id or str(uuid.uuid4()),
                'host_name': None,
                'device': device,
                'attached_at': openstack_model.now().isoformat(),
            })
        attributes = {
            'id': volume_id,
            'name': name,
            'size': 1,
            'status': 'in-use' if attachments else 'available',
            'attachments': attachments,
        }
        return self.add_resource(stack_id, name, 'OS::Cinder::Volume',
                                 volume_id, attributes)

    def add_server(self, stack_id, name, server_id=None, console_output=''):
        """Add an OS::Nova::Server whose physical_resource_id is server_id.

        Nova serves console_output as its console log: empty, as for a VM
        that has just started, unless given.
        """
        server_id = server_id or str(uuid.uuid4())
        with self._lock:
            self._consoles[server_id] = console_output
        attributes = {'id': server_id, 'name': name, 'status': 'ACTIVE',
                      'addresses': {}}
        return self.add_resource(stack_id, name, 'OS::Nova::Server',
                                 server_id, attributes)

    def set_console_output(self, server_id, console_output):
        """Replace the console log of a server, e.g. as its boot goes on."""
        with self._lock:
            self._consoles[server_id] = console_output

    def fail_console(self, server_id, status):
        """Answer the server's console requests with an HTTP error status
        (409 while building, 403 by policy, 501 unsupported; None stops)."""
        with self._lock:
            if status is None:
                self._console_failures.pop(server_id, None)
            else:
                self._console_failures[server_id] = status

    def add_scaling_group(self, stack_id, aspect_id):
        """Add an OS::Heat::AutoScalingGroup and return its nested stack id."""
        group_stack_id = self.add_stack(
            '%s-%s-%s' % (self.stack(stack_id).name, aspect_id,
                          openstack_model.short_id()),
            parent_id=stack_id)
        self.add_resource(stack_id, aspect_id, 'OS::Heat::AutoScalingGroup',
                          attributes={'current_size': 0},
                          nested_stack_id=group_stack_id)
        return group_stack_id

    def add_group_member(self, group_stack_id, name=None,
                         template='member.hot.yaml'):
        """Add a member (a nested template resource) and return its stack id.

        Heat names members with random short ids; pass name to pin one.
        """
        name = name or openstack_model.short_id()
        member_stack_id = self.add_stack(
            '%s-%s-%s' % (self.stack(group_stack_id).name, name,
                          openstack_model.short_id()),
            parent_id=group_stack_id)
        self.add_resource(group_stack_id, name, template,
                          nested_stack_id=member_stack_id)
        self._update_group_size(group_stack_id)
        return member_stack_id

    def remove_group_member(self, group_stack_id, member_stack_id):
        """Scale in: drop the member whose nested stack is member_stack_id."""
        with self._lock:
            group = self._stacks[group_stack_id]
            name = next(resource.name for resource in group.resources.values()
                        if resource.nested_stack_id == member_stack_id)
            self.remove_resource(group_stack_id, name)
            self._update_group_size(group_stack_id)

    def _update_group_size(self, group_stack_id):
        with self._lock:
            group_stack = self._stacks[group_stack_id]
            parent = self._stacks[group_stack.parent_id]
            for resource in parent.resources.values():
                if resource.nested_stack_id == group_stack_id:
                    resource.attributes['current_size'] = len(
                        group_stack.resources)

    def _record(self, method, path, had_token, status):
        with self._lock:
            self._requests.append(
                openstack_model.RequestRecord(method, path, had_token, status))


class _IPv4Server(ThreadingHTTPServer):
    daemon_threads = True
    # socketserver listens with a backlog of 5: the driver's concurrent
    # requests (one per host) overflowed it, and each dropped SYN cost a
    # one-second TCP retransmission. A real API listens with a deep one.
    request_queue_size = 128


class _IPv6Server(_IPv4Server):
    address_family = socket.AF_INET6


def _handler_class(fake):
    """A request handler class bound to one FakeOpenStack."""

    class Handler(BaseHTTPRequestHandler):

        def _body(self):
            length = int(self.headers.get('Content-Length') or 0)
            try:
                return json.loads(self.rfile.read(length) or b'{}')
            except ValueError:
                return None

        def _dispatch(self, method):
            split = urllib.parse.urlsplit(self.path)
            path = split.path
            query = urllib.parse.parse_qs(split.query)
            body = self._body() if method in ('POST', 'PATCH', 'PUT') \
                else None
            injected = fake._injected_failure(method, path)
            if injected is not None:
                return self._answer(method, path, False, *injected)
            if method == 'POST' and path == '/v3/auth/tokens':
                return self._answer(method, path, False,
                                    *fake._issue_token(body))
            if method == 'GET' and path in ('/v3', '/v3/'):
                return self._answer(method, path, False,
                                    *fake._version_document())
            if method == 'GET' and fake.is_glance_versions(path):
                return self._answer(method, path, False,
                                    *fake._glance_versions())
            had_token = fake._token_is_valid(self.headers.get('X-Auth-Token'))
            heat = openstack_heat.HEAT_PREFIX
            nova = openstack_nova.NOVA_PREFIX
            glance = openstack_glance.GLANCE_PREFIX
            known = (path.startswith(heat + '/') or path.startswith(nova + '/')
                     or path.startswith(glance + '/')
                     or path == '/v3/regions')
            if not known:
                return self._answer(method, path, False, *(
                    openstack_heat.heat_error(404, 'NotFound',
                                              'Unknown path.')))
            if not had_token:
                return self._answer(method, path, False, *(
                    openstack_keystone.keystone_error(
                        401, 'Unauthorized', 'The request you have made '
                        'requires authentication.')))
            if path == '/v3/regions':
                if method != 'GET':
                    return self._answer(method, path, True, *(
                        openstack_heat.heat_error(405, 'MethodNotAllowed',
                                                  'Not allowed.')))
                return self._answer(method, path, True, *fake._regions())
            if path.startswith(glance + '/'):
                return self._answer(method, path, True, *fake._glance_get(
                    path[len(glance):], query))
            if path.startswith(nova + '/'):
                return self._answer(method, path, True, *fake._nova(
                    method, path[len(nova):], body))
            try:
                answer = fake._heat(method, path[len(heat):], query, body)
            except Exception as error:  # noqa: BLE001 - a 500, as Heat
                answer = openstack_heat.heat_error(
                    500, type(error).__name__, str(error))
            return self._answer(method, path, True, *answer)

        def do_GET(self):
            self._dispatch('GET')

        def do_POST(self):
            self._dispatch('POST')

        def do_PATCH(self):
            self._dispatch('PATCH')

        def do_PUT(self):
            self._dispatch('PUT')

        def do_DELETE(self):
            self._dispatch('DELETE')

        def _answer(self, method, path, had_token, status, headers, body):
            fake._record(method, path, had_token, status)
            # default=str: a template's heat_template_version, a date to
            # YAML, is the string Heat shows.
            payload = b'' if body is None else json.dumps(
                body, default=str).encode()
            self.send_response(status)
            self.send_header('Content-Type', 'application/json')
            self.send_header('Content-Length', str(len(payload)))
            for name, value in headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, format, *args):
            """Keep test output clean; fake.requests is the request log."""

    return Handler


def _fixed_ip_entry(entry):
    if isinstance(entry, dict):
        return dict(entry)
    return {'subnet_id': str(uuid.uuid4()), 'ip_address': entry}
