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
a server leaves Nova when its resource is removed. With a Heat engine,
``os-stop`` powers a server it booted off (202; 409 when it is not
running), as an operator's ``openstack server stop`` does.

Tests build the model with the ``add_*`` helpers, mutate it between calls
(``remove_*``, or ``resource(...).attributes``) and assert on ``requests``.

With a ``heat_engine`` (testbed.heat_engine.HeatEngine) the fake is a Heat
that creates what templates say: ``POST /stacks``, ``PATCH`` (update and
``mark_unhealthy``), ``DELETE`` and scaling-policy signals are handed to
the engine, which boots testbed hosts for servers. Without one those calls
answer 405. Stack lists (``name``, ``owner_id``, ``show_nested``), resource
lists with ``nested_depth``, events, metadata and templates are served from
the model either way. Deleted stacks keep answering by id (with
``DELETE_COMPLETE``) but leave lists and name lookups, as in Heat.
"""

import dataclasses
import datetime
import http.server
import json
import re
import socket
import threading
import urllib.parse
import uuid

HEAT_PREFIX = '/heat/v1'
NOVA_PREFIX = '/compute/v2.1'
# Heat answers these sub-paths of /stacks/<name or id> with a redirect to the
# canonical stacks/<name>/<id>/<sub-path> URL (heat/api/openstack/v1).
LOOKUP_SUBPATHS = ('resources', 'events', 'template', 'actions',
                   'environment', 'files', 'outputs')
INTERFACES = ('public', 'internal', 'admin')


def _now():
    return datetime.datetime.now(datetime.timezone.utc)


def _iso(moment):
    return moment.strftime('%Y-%m-%dT%H:%M:%S.%fZ')


def heat_time(moment=None):
    """A time as Heat prints it: whole seconds, no zone."""
    return (moment or _now()).strftime('%Y-%m-%dT%H:%M:%S')


@dataclasses.dataclass
class FakeResource:
    name: str
    resource_type: str
    physical_resource_id: str
    attributes: dict
    nested_stack_id: str = None
    status: str = 'CREATE_COMPLETE'
    status_reason: str = 'state changed'
    creation_time: str = dataclasses.field(default_factory=heat_time)
    updated_time: str = None
    # Heat's view, for the engine: resolved properties, metadata, events
    # (dicts, oldest first) and the mark_unhealthy flag.
    properties: dict = dataclasses.field(default_factory=dict)
    metadata: dict = dataclasses.field(default_factory=dict)
    events: list = dataclasses.field(default_factory=list)
    unhealthy: bool = False
    # Names of the resources of its template that refer to it (Heat's
    # required_by: Tacker finds a server's ports by it).
    required_by: list = dataclasses.field(default_factory=list)
    created_at: float = dataclasses.field(default_factory=lambda: _now(
    ).timestamp())


@dataclasses.dataclass
class FakeStack:
    id: str
    name: str
    parent_id: str = None
    resources: dict = dataclasses.field(default_factory=dict)
    status: str = 'CREATE_COMPLETE'
    status_reason: str = 'Stack CREATE completed successfully'
    creation_time: str = dataclasses.field(default_factory=heat_time)
    updated_time: str = None
    deleted: bool = False
    template: dict = None
    files: dict = dataclasses.field(default_factory=dict)
    parameters: dict = dataclasses.field(default_factory=dict)
    parent_resource: str = None


@dataclasses.dataclass
class InjectedFailure:
    """Requests FakeOpenStack.fail_requests() answers with an error."""
    method: str
    path: re.Pattern
    remaining: int  # None: unlimited
    status: int
    message: str
    hits: list = dataclasses.field(default_factory=list)


@dataclasses.dataclass(frozen=True)
class RequestRecord:
    method: str
    path: str
    had_token: bool
    status: int


class FakeOpenStack:
    """Keystone v3 + Heat v1 on a local HTTP server, with an in-memory model.

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
        self._console_failures = {}  # Nova server id -> HTTP status
        self._tokens = set()
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
        return '%s%s/%s' % (self.base_url, HEAT_PREFIX, self.project_id)

    @property
    def compute_url(self):
        return self.base_url + NOVA_PREFIX

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
                if record.path.startswith(HEAT_PREFIX + '/')]

    def nova_requests(self):
        return [record for record in self.requests
                if record.path.startswith(NOVA_PREFIX + '/')]

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
        failure = InjectedFailure(method.upper(), re.compile(path), count,
                                  status, message)
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
                    return _heat_error(failure.status, 'InjectedFault',
                                       failure.message)
        return None

    # -- model: stacks and generic resources -------------------------------

    def add_stack(self, name, parent_id=None, **fields):
        """Add a stack and return its id."""
        stack = FakeStack(id=str(uuid.uuid4()), name=name, parent_id=parent_id,
                          **fields)
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
        resource = FakeResource(
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
                'attached_at': _now().isoformat(),
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
            '%s-%s-%s' % (self.stack(stack_id).name, aspect_id, _short_id()),
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
        name = name or _short_id()
        member_stack_id = self.add_stack(
            '%s-%s-%s' % (self.stack(group_stack_id).name, name, _short_id()),
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

    # -- HTTP: Keystone ----------------------------------------------------

    def _issue_token(self, body):
        """Check a v3 password auth body; return (status, headers, body)."""
        if not self._credentials_match(body):
            return 401, {}, _keystone_error(
                401, 'Unauthorized',
                'The request you have made requires authentication.')
        token = uuid.uuid4().hex
        with self._lock:
            self._tokens.add(token)
        return 201, {'X-Subject-Token': token}, {'token': self._token_body()}

    def _credentials_match(self, body):
        try:
            identity = body['auth']['identity']
            user = identity['password']['user']
            project = body['auth']['scope']['project']
        except (KeyError, TypeError):
            return False
        if 'password' not in identity.get('methods', []):
            return False
        user_ok = (user.get('id') == self.user_id or (
            user.get('name') == self.username
            and _domain_matches(user.get('domain'), self.user_domain_name)))
        project_ok = (project.get('id') == self.project_id or (
            project.get('name') == self.project_name
            and _domain_matches(project.get('domain'),
                                self.project_domain_name)))
        return user_ok and project_ok and user.get('password') == self.password

    def _token_body(self):
        now = _now()
        return {
            'methods': ['password'],
            'issued_at': _iso(now),
            'expires_at': _iso(now + datetime.timedelta(hours=1)),
            'audit_ids': [uuid.uuid4().hex[:22]],
            'user': {'id': self.user_id, 'name': self.username,
                     'domain': _domain(self.user_domain_name)},
            'project': {'id': self.project_id, 'name': self.project_name,
                        'domain': _domain(self.project_domain_name)},
            'roles': [{'id': uuid.uuid4().hex, 'name': 'admin'}],
            'catalog': [
                _catalog_entry('identity', 'keystone', self.auth_url,
                               self.regions),
                _catalog_entry('orchestration', 'heat', self.heat_url,
                               self.regions),
                _catalog_entry('compute', 'nova', self.compute_url,
                               self.regions),
            ],
        }

    def _token_is_valid(self, token):
        with self._lock:
            return token in self._tokens

    # -- HTTP: Heat --------------------------------------------------------

    def _heat(self, method, path, query, body):
        """Route a Heat request below /heat/v1: (status, headers, body)."""
        match = re.fullmatch(r'/([^/]+)/stacks(/.*)?', path)
        if not match or match.group(1) != self.project_id:
            return _heat_error(404, 'NotFound', 'Unknown project path.')
        parts = [urllib.parse.unquote(part)
                 for part in (match.group(2) or '').split('/')[1:]]
        if parts and parts[-1] == '':
            parts.pop()
        if not parts:
            if method == 'GET':
                return self._list_stacks(query)
            if method == 'POST':
                return self._engine_call('create_stack', body)
            return _heat_error(405, 'MethodNotAllowed', 'Not allowed.')
        with self._lock:
            if len(parts) == 1 or (method == 'GET' and len(parts) == 2
                                   and parts[1] in LOOKUP_SUBPATHS):
                return self._lookup_redirect(parts[0], parts[1:], query)
            stack = self._find_canonical(parts[0], parts[1])
            if stack is None:
                return _stack_not_found(parts[1])
        rest = parts[2:]
        if method == 'GET':
            return self._heat_show(stack, rest, query)
        if method == 'PATCH' and not rest:
            return self._engine_call('update_stack', stack, body)
        if method == 'PUT' and not rest:
            return self._engine_call('update_stack', stack, body,
                                     existing=False)
        if method == 'DELETE' and not rest:
            return self._engine_call('delete_stack', stack)
        if len(rest) >= 2 and rest[0] == 'resources':
            with self._lock:
                resource = stack.resources.get(rest[1])
            if resource is None:
                return _resource_not_found(rest[1])
            if method == 'PATCH' and len(rest) == 2:
                return self._mark_unhealthy(stack, resource, body)
            if method == 'POST' and rest[2:] == ['signal']:
                return self._engine_call('signal', stack, resource, body)
        return _heat_error(404, 'NotFound', 'Unknown Heat path.')

    def _heat_get(self, path):
        """Route a Heat GET below /heat/v1/<project_id> (no query)."""
        return self._heat('GET', path, {}, None)

    def _engine_call(self, name, *args, **kwargs):
        if self.engine is None:
            return _heat_error(405, 'MethodNotAllowed',
                               'This fake has no Heat engine.')
        return getattr(self.engine, name)(*args, **kwargs)

    def _mark_unhealthy(self, stack, resource, body):
        """PATCH .../resources/<name>: Heat's resource mark-unhealthy."""
        if not isinstance(body, dict) or not isinstance(
                body.get('mark_unhealthy'), bool):
            return _heat_error(400, 'HTTPBadRequest',
                               'mark_unhealthy must be a boolean.')
        with self._lock:
            if body['mark_unhealthy']:
                resource.unhealthy = True
                resource.status = 'CHECK_FAILED'
                resource.status_reason = body.get(
                    'resource_status_reason') or 'marked unhealthy'
            else:
                resource.unhealthy = False
                resource.status = 'CHECK_COMPLETE'
                resource.status_reason = ''
            self.add_event(resource, resource.status, resource.status_reason)
        return 200, {}, {}

    def add_event(self, resource, status, reason=''):
        """Record an event of a resource (Heat's event list)."""
        with self._lock:
            resource.events.append({
                'id': str(uuid.uuid4()),
                'event_time': heat_time(),
                'seq': len(resource.events),
                'resource_name': resource.name,
                'logical_resource_id': resource.name,
                'physical_resource_id': resource.physical_resource_id,
                'resource_status': status,
                'resource_status_reason': reason,
            })

    def _list_stacks(self, query):
        """GET /stacks: live stacks, top-level unless show_nested;
        filters name, id, owner_id (parent), status."""
        show_nested = _truthy(query.get('show_nested'))
        with self._lock:
            stacks = [s for s in self._stacks.values() if not s.deleted]
            if not show_nested:
                stacks = [s for s in stacks if s.parent_id is None]
            for key, attribute in (('name', 'name'), ('id', 'id'),
                                   ('owner_id', 'parent_id'),
                                   ('status', 'status')):
                if key in query:
                    wanted = set(query[key])
                    stacks = [s for s in stacks
                              if getattr(s, attribute) in wanted]
            stacks.sort(key=lambda s: s.creation_time, reverse=True)
            return 200, {}, {'stacks': [self._stack_body(s, summary=True)
                                        for s in stacks]}

    def _heat_show(self, stack, rest, query):
        with self._lock:
            if not rest:
                return 200, {}, {'stack': self._stack_body(stack)}
            if rest == ['template']:
                return 200, {}, stack.template or {}
            if rest == ['resources']:
                depth = int((query.get('nested_depth') or ['0'])[0] or 0)
                return 200, {}, {'resources': self._resource_list(
                    stack, depth)}
            if rest[0] != 'resources' or len(rest) < 2:
                return _heat_error(404, 'NotFound', 'Unknown Heat path.')
            resource = stack.resources.get(rest[1])
            if resource is None:
                return _resource_not_found(rest[1])
            if len(rest) == 2:
                return 200, {}, {'resource': self._resource_body(
                    stack, resource, detail=True)}
            if rest[2:] == ['metadata']:
                return 200, {}, {'metadata': resource.metadata}
            if rest[2:] == ['events']:
                return 200, {}, {'events': self._events(stack, resource,
                                                        query)}
        return _heat_error(404, 'NotFound', 'Unknown Heat path.')

    def _resource_list(self, stack, depth):
        """Resources of a stack and, down to ``depth`` levels, of its
        nested stacks (each with parent_resource), as Heat lists them."""
        listed = []
        for resource in stack.resources.values():
            listed.append(self._resource_body(stack, resource, detail=False))
            nested = self._stacks.get(resource.nested_stack_id)
            if depth > 0 and nested is not None and not nested.deleted:
                for entry in self._resource_list(nested, depth - 1):
                    entry.setdefault('parent_resource', resource.name)
                    listed.append(entry)
        return listed

    def _events(self, stack, resource, query):
        events = sorted(resource.events,
                        key=lambda e: (e['event_time'], e['seq']))
        if (query.get('sort_dir') or ['asc'])[0] == 'desc':
            events.reverse()
        limit = (query.get('limit') or [None])[0]
        if limit:
            events = events[:int(limit)]
        url = self._stack_url(stack)
        return [dict({key: value for key, value in event.items()
                      if key != 'seq'},
                     links=[{'href': '%s/resources/%s/events/%s' % (
                         url, resource.name, event['id']), 'rel': 'self'},
                         {'href': url, 'rel': 'stack'}])
                for event in events]

    # -- HTTP: Keystone extras --------------------------------------------

    def _version_document(self):
        return 200, {}, {'version': {
            'id': 'v3.14', 'status': 'stable',
            'updated': '2020-04-07T00:00:00Z',
            'links': [{'rel': 'self', 'href': self.auth_url + '/'}],
            'media-types': [{
                'base': 'application/json',
                'type': 'application/vnd.openstack.identity-v3+json'}]}}

    def _regions(self):
        return 200, {}, {'regions': [
            {'id': region, 'description': '', 'parent_region_id': None,
             'links': {'self': '%s/regions/%s' % (self.auth_url, region)}}
            for region in self.regions], 'links': {
                'self': self.auth_url + '/regions', 'previous': None,
                'next': None}}

    # -- HTTP: Nova ----------------------------------------------------------

    def _nova_post(self, path, body):
        """Route a Nova POST below /compute/v2.1: a server action."""
        match = re.fullmatch(r'/servers/([^/]+)/action', path)
        if not match:
            return _nova_error(404, 'itemNotFound', 'Unknown Nova path.')
        server_id = urllib.parse.unquote(match.group(1))
        if isinstance(body, dict) and 'os-stop' in body:
            return self._stop_server(server_id)
        request = body.get('os-getConsoleOutput') if isinstance(
            body, dict) else None
        if not isinstance(request, dict):
            return _nova_error(400, 'badRequest',
                               'Only os-getConsoleOutput is supported.')
        length = request.get('length')
        if length is not None and (not isinstance(length, int)
                                   or length < -1):
            return _nova_error(400, 'badRequest',
                               'Invalid input for field/attribute length.')
        with self._lock:
            if server_id not in self._consoles:
                return _nova_error(404, 'itemNotFound',
                                   'Instance %s could not be found.'
                                   % server_id)
            status = self._console_failures.get(server_id)
            output = self._consoles[server_id]
        if status is not None:
            return _nova_error(status, 'computeFault',
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
            return _nova_error(404, 'itemNotFound',
                               'Instance %s could not be found.' % server_id)
        if self.engine is None:
            return _nova_error(409, 'conflictingRequest',
                               'This fake has no Heat engine to stop %s.'
                               % server_id)
        if not self.engine.stop_server(server_id):
            return _nova_error(409, 'conflictingRequest',
                               "Cannot 'stop' instance %s while it is not "
                               'active.' % server_id)
        return 202, {}, None

    def _lookup_redirect(self, name_or_id, subpath, query=None):
        """Heat's stacks:lookup: 302 to stacks/<name>/<id>[/<subpath>],
        keeping the query (nested_depth, ...). A deleted stack is still
        found by its id, never by its name."""
        stack = self._stacks.get(name_or_id) or next(
            (stack for stack in self._stacks.values()
             if stack.name == name_or_id and not stack.deleted), None)
        if stack is None:
            return _stack_not_found(name_or_id)
        location = '/'.join([self._stack_url(stack)] + subpath)
        if query:
            location += '?' + urllib.parse.urlencode(query, doseq=True)
        return 302, {'Location': location}, {
            'code': 302, 'title': 'Found',
            'explanation': 'The resource was found at %s' % location}

    def _find_canonical(self, name, stack_id):
        stack = self._stacks.get(stack_id)
        if stack is None or stack.name != name:
            return None
        return stack

    def _stack_url(self, stack):
        return '%s/stacks/%s/%s' % (
            self.heat_url, urllib.parse.quote(stack.name, safe=''), stack.id)

    def _stack_body(self, stack, summary=False):
        body = {
            'id': stack.id,
            'stack_name': stack.name,
            'description': (stack.template or {}).get('description', ''),
            'parent': stack.parent_id,
            'stack_owner': None,
            'stack_user_project_id': self.project_id,
            'project': self.project_id,
            'stack_status': stack.status,
            'stack_status_reason': stack.status_reason,
            'creation_time': stack.creation_time,
            'updated_time': stack.updated_time,
            'deletion_time': heat_time() if stack.deleted else None,
            'tags': None,
            'links': [{'href': self._stack_url(stack), 'rel': 'self'}],
        }
        if not summary:
            body.update({
                'parameters': {key: value if isinstance(value, str)
                               else json.dumps(value)
                               for key, value in stack.parameters.items()},
                'outputs': [],
                'disable_rollback': True,
                'timeout_mins': None,
                'capabilities': [],
                'notification_topics': [],
                'template_description': body['description'],
            })
        return body

    def _resource_body(self, stack, resource, detail):
        stack_url = self._stack_url(stack)
        links = [
            {'href': '%s/resources/%s' % (
                stack_url, urllib.parse.quote(resource.name, safe='')),
             'rel': 'self'},
            {'href': stack_url, 'rel': 'stack'},
        ]
        nested = self._stacks.get(resource.nested_stack_id)
        if nested is not None:
            links.append({'href': self._stack_url(nested), 'rel': 'nested'})
        body = {
            'resource_name': resource.name,
            'logical_resource_id': resource.name,
            'physical_resource_id': resource.physical_resource_id,
            'resource_type': resource.resource_type,
            'resource_status': resource.status,
            'resource_status_reason': resource.status_reason,
            'creation_time': resource.creation_time,
            'updated_time': resource.updated_time or resource.creation_time,
            'required_by': list(resource.required_by),
            'links': links,
        }
        if stack.parent_resource:
            body['parent_resource'] = stack.parent_resource
        if detail:
            body['attributes'] = resource.attributes
            body['description'] = ''
            body['metadata'] = resource.metadata
        return body

    def _record(self, method, path, had_token, status):
        with self._lock:
            self._requests.append(
                RequestRecord(method, path, had_token, status))


class _IPv4Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    # socketserver listens with a backlog of 5: the driver's concurrent
    # requests (one per host) overflowed it, and each dropped SYN cost a
    # one-second TCP retransmission. A real API listens with a deep one.
    request_queue_size = 128


class _IPv6Server(_IPv4Server):
    address_family = socket.AF_INET6


def _handler_class(fake):
    """A request handler class bound to one FakeOpenStack."""

    class Handler(http.server.BaseHTTPRequestHandler):

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
            had_token = fake._token_is_valid(self.headers.get('X-Auth-Token'))
            known = (path.startswith(HEAT_PREFIX + '/')
                     or path.startswith(NOVA_PREFIX + '/')
                     or path == '/v3/regions')
            if not known:
                return self._answer(method, path, False, *_heat_error(
                    404, 'NotFound', 'Unknown path.'))
            if not had_token:
                return self._answer(method, path, False, *_keystone_error(
                    401, 'Unauthorized',
                    'The request you have made requires authentication.'))
            if path == '/v3/regions':
                if method != 'GET':
                    return self._answer(method, path, True, *_heat_error(
                        405, 'MethodNotAllowed', 'Not allowed.'))
                return self._answer(method, path, True, *fake._regions())
            if path.startswith(NOVA_PREFIX + '/'):
                if method != 'POST':
                    return self._answer(method, path, True, *_nova_error(
                        404, 'itemNotFound', 'Unknown Nova path.'))
                return self._answer(method, path, True, *fake._nova_post(
                    path[len(NOVA_PREFIX):], body))
            try:
                answer = fake._heat(method, path[len(HEAT_PREFIX):], query,
                                    body)
            except Exception as error:  # noqa: BLE001 - a 500, as Heat
                answer = _heat_error(500, type(error).__name__, str(error))
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
            payload = b'' if body is None else json.dumps(body).encode()
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


def _keystone_error(code, title, message):
    return code, {}, {'error': {'code': code, 'title': title,
                                'message': message}}


def _heat_error(code, error_type, message):
    return code, {}, {
        'code': code,
        'title': 'Not Found' if code == 404 else 'Error',
        'explanation': message,
        'error': {'type': error_type, 'message': message, 'traceback': None},
    }


def _nova_error(code, fault, message):
    return code, {}, {fault: {'code': code, 'message': message}}


def _resource_not_found(name):
    return _heat_error(404, 'ResourceNotFound',
                       'The Resource (%s) could not be found.' % name)


def _truthy(values):
    return bool(values) and str(values[0]).lower() in ('true', '1', 'yes')


def _stack_not_found(name_or_id):
    return _heat_error(404, 'EntityNotFound',
                       'The Stack (%s) could not be found.' % name_or_id)


def _catalog_entry(service_type, name, url, regions):
    return {
        'id': uuid.uuid4().hex,
        'type': service_type,
        'name': name,
        'endpoints': [{'id': uuid.uuid4().hex, 'interface': interface,
                       'region': region, 'region_id': region, 'url': url}
                      for region in regions for interface in INTERFACES],
    }


def _domain(name):
    return {'id': _domain_id(name), 'name': name}


def _domain_id(name):
    """Keystone's built-in 'Default' domain has the id 'default'."""
    return 'default' if name == 'Default' else name


def _domain_matches(spec, name):
    spec = spec or {}
    return spec.get('name') == name or spec.get('id') == _domain_id(name)


def _fixed_ip_entry(entry):
    if isinstance(entry, dict):
        return dict(entry)
    return {'subnet_id': str(uuid.uuid4()), 'ip_address': entry}


def _short_id():
    return uuid.uuid4().hex[:12]
