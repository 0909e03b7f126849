"""A small Heat engine for the fake Heat API: templates become testbed VMs.

``HeatEngine`` interprets the HOT templates Tacker sends (the sample
BaseHOT: a top template, nested member templates in ``files`` and the
``nfv`` parameter the package's UserData computed) and does what Heat
would, on the testbed (testbed/hosts.py) instead of Nova, Neutron and
Cinder:

* ``OS::Nova::Server`` boots a test host (a network namespace with sshd),
  made a VM of the user guide's VNF with ``cluster.prepare_guest``; Nova's
  console log of the server is the host's (with its real host key); its
  guest host name is the one cloud-init would set from its Nova name
  (testbed.cloud_init), so the members of a scaling group share it;
* ``OS::Neutron::Port`` gets the address of the host whose ``networks``
  name it; a port no server uses (the HA virtual IP) gets a free address
  of the testbed subnet that no host uses. Nothing else is ever handed out:
  every address is checked to be on the testbed's own bridge subnet;
* ``OS::Cinder::Volume`` in a server's ``block_device_mapping_v2`` is a
  loop device attached to that host as /dev/vdb, /dev/vdc, ... in order;
* ``OS::Heat::AutoScalingGroup`` is a nested stack of member stacks (one
  per ``desired_capacity``), each built from the member template in
  ``files``; ``OS::Heat::ScalingPolicy`` signals add or remove members
  within ``min_size``/``max_size`` (scale-in removes the oldest members,
  by creation time and name, as Heat does and as Tacker predicts);
* stack update (``PATCH`` with ``existing``) replaces every resource
  marked unhealthy: a server gets a fresh root file system (same port,
  same address, new Nova id and host key); its volumes are kept unless a
  volume was marked unhealthy too, which gives blank new volumes; a group
  whose ``desired_capacity`` changed is resized;
* Nova's ``os-stop`` of a server (``stop_server``) powers its host off:
  the Node on it becomes unreachable (testbed.node_lifecycle) and the
  server SHUTOFF, until a heal replaces it;
* stack delete removes every host and volume; the stack keeps answering by
  id with ``DELETE_COMPLETE``.

The Kubernetes side: when a stack's first Master or Worker boots, a fresh
test Kubernetes API server (testbed.kubeapi) is started for that top-level
stack, the cluster's state, and stopped when the stack is deleted (an
entire-VNF heal thus starts a new cluster, as new VMs would).

Work (booting, replacing, removing hosts) runs in one worker thread, in
order; the HTTP calls answer at once with ``*_IN_PROGRESS`` states, as
Heat does. A failure puts the stack (and the group member) in
``*_FAILED`` with the error as reason, and is kept in ``errors``.
"""

import ipaddress
import logging
import queue
import threading
import time
import traceback
import uuid

import yaml

from testbed import cloud_init
from testbed import hosts
from testbed import kubeapi
from testbed import node_lifecycle

LOG = logging.getLogger(__name__)

SERVER = 'OS::Nova::Server'
PORT = 'OS::Neutron::Port'
VOLUME = 'OS::Cinder::Volume'
GROUP = 'OS::Heat::AutoScalingGroup'
POLICY = 'OS::Heat::ScalingPolicy'
SUPPORTED = (SERVER, PORT, VOLUME, GROUP, POLICY)
# Resources that only carry properties here (no VM, address or disk).
PASSIVE = ('OS::Nova::ServerGroup', 'OS::Heat::None')


class TemplateError(Exception):
    """The template cannot be processed (Heat would refuse it)."""


def _short_id():
    return uuid.uuid4().hex[:12]


class HeatEngine(object):
    """Heat's engine over a testbed; see the module docstring.

    ``testbed``: a started hosts.Testbed to boot VMs in (default: one of its
    own, started by ``start()`` and stopped by ``stop()``).
    ``prepare``: called as ``prepare(host, kube)`` on every booted host
    (default: ``cluster.prepare_guest(host, kube, install_cluster=True)``).
    """

    def __init__(self, testbed=None, purge_packages=('nfs-kernel-server',),
                 volume_size_mb=256, prepare=None):
        self.testbed = testbed
        self._own_testbed = testbed is None
        self._purge = purge_packages
        self.volume_size_mb = volume_size_mb
        self._prepare = prepare
        self.fake = None
        self.kubes = {}  # top-level stack id -> KubeApiServer
        self.hosts = {}  # Nova server id -> testbed host name
        self.errors = []  # (what, traceback text)
        self.history = []  # (seconds since start, message)
        self._reserved = set()  # addresses of ports without a server
        self.ever_handed_out = set()  # every address put in a port
        self._counters = {}
        self._queue = queue.Queue()
        self._worker = None
        self._t0 = time.monotonic()

    # -- lifecycle ------------------------------------------------------------

    def attach(self, fake):
        self.fake = fake

    def start(self):
        if self.testbed is None:
            self.testbed = hosts.Testbed(purge_packages=self._purge)
        if self._own_testbed and self.testbed.bridge_ip is None:
            self.testbed.start()
        if self._worker is None:
            self._worker = threading.Thread(target=self._work,
                                            name='heat-engine', daemon=True)
            self._worker.start()
        return self

    def stop(self):
        """Stop the worker, every API server and (if ours) the testbed."""
        if self._worker is not None:
            self._queue.put(None)
            self._worker.join(timeout=600)
            self._worker = None
        for kube in list(self.kubes.values()):
            kube.stop()
        self.kubes.clear()
        if self._own_testbed and self.testbed is not None:
            self.testbed.stop()

    def idle(self):
        """True when no queued or running work is left."""
        return self._queue.unfinished_tasks == 0

    def _note(self, message):
        self.history.append((round(time.monotonic() - self._t0, 2), message))
        LOG.info('heat engine: %s', message)

    def _work(self):
        while True:
            job = self._queue.get()
            try:
                if job is None:
                    return
                what, func, on_error = job
                try:
                    func()
                except Exception as error:  # noqa: BLE001 - reported
                    self.errors.append((what, traceback.format_exc()))
                    self._note('%s failed: %s' % (what, error))
                    on_error('%s: %s' % (type(error).__name__, error))
            finally:
                self._queue.task_done()

    def _submit(self, what, func, on_error):
        self._queue.put((what, func, on_error))

    # -- helpers on the model -------------------------------------------------

    @property
    def _lock(self):
        return self.fake._lock

    def _stack(self, stack_id):
        return self.fake._stacks[stack_id]

    def _root(self, stack):
        while stack.parent_id is not None:
            stack = self._stack(stack.parent_id)
        return stack

    def _descendants(self, stack):
        """The stack and every live stack nested in it."""
        found = [stack]
        for resource in list(stack.resources.values()):
            nested = self.fake._stacks.get(resource.nested_stack_id)
            if nested is not None and not nested.deleted:
                found.extend(self._descendants(nested))
        return found

    def _set_status(self, stack, action, state, reason=None):
        with self._lock:
            stack.status = '%s_%s' % (action, state)
            stack.status_reason = reason or 'Stack %s %s' % (
                action, {'COMPLETE': 'completed successfully',
                         'IN_PROGRESS': 'started',
                         'FAILED': 'failed'}[state])
            if action != 'CREATE':
                stack.updated_time = self.fake_time()

    @staticmethod
    def fake_time():
        from testbed.openstack_api import heat_time
        return heat_time()

    def _resource(self, stack, name, resource_type, physical_id=None,
                  attributes=None, nested_stack_id=None, properties=None,
                  status='CREATE_COMPLETE'):
        from testbed.openstack_api import FakeResource
        resource = FakeResource(
            name=name, resource_type=resource_type,
            physical_resource_id=physical_id or nested_stack_id or str(
                uuid.uuid4()),
            attributes=dict(attributes or {}),
            nested_stack_id=nested_stack_id, status=status,
            properties=dict(properties or {}))
        with self._lock:
            stack.resources[name] = resource
        self.fake.add_event(resource, 'CREATE_IN_PROGRESS', 'state changed')
        if status == 'CREATE_COMPLETE':
            self.fake.add_event(resource, status, 'state changed')
        return resource

    def _complete(self, resource, action='CREATE'):
        with self._lock:
            resource.status = '%s_COMPLETE' % action
            resource.status_reason = 'state changed'
            resource.unhealthy = False
            if action != 'CREATE':
                resource.updated_time = self.fake_time()
        self.fake.add_event(resource, resource.status, 'state changed')

    # -- the HTTP API (called by FakeOpenStack) -------------------------------

    def create_stack(self, body):
        try:
            name, template, files, params = self._parse_create(body)
        except TemplateError as error:
            return _bad_request(str(error))
        if self.fake.find_stack(name) is not None:
            return 409, {}, _error(409, 'StackExists',
                                   'The Stack (%s) already exists.' % name)
        stack_id = self.fake.add_stack(
            name, status='CREATE_IN_PROGRESS',
            status_reason='Stack CREATE started', template=template,
            files=files, parameters=params)
        stack = self._stack(stack_id)
        self._note('create stack %s' % name)

        def create():
            self._build(stack, template, files, params)
            self._set_status(stack, 'CREATE', 'COMPLETE')
            self._note('stack %s CREATE_COMPLETE' % name)
        self._submit('create stack %s' % name, create,
                     lambda reason: self._set_status(stack, 'CREATE',
                                                     'FAILED', reason))
        return 201, {}, {'stack': {'id': stack_id, 'links': [
            {'href': self.fake._stack_url(stack), 'rel': 'self'}]}}

    def update_stack(self, stack, body, existing=True):
        if not isinstance(body, dict):
            return _bad_request('The request body must be a JSON object.')
        if stack.deleted or stack.status.endswith('IN_PROGRESS'):
            return 409, {}, _error(409, 'ActionInProgress',
                                   'Stack %s in progress: %s'
                                   % (stack.name, stack.status))
        try:
            template = _load(body['template']) if body.get('template') \
                else stack.template
        except TemplateError as error:
            return _bad_request(str(error))
        files = dict(stack.files if existing else {}, **(body.get(
            'files') or {}))
        params = dict(stack.parameters if existing else {}, **(body.get(
            'parameters') or {}))
        self._set_status(stack, 'UPDATE', 'IN_PROGRESS')
        self._note('update stack %s' % stack.name)

        def update():
            with self._lock:
                stack.template, stack.files, stack.parameters = (
                    template, files, params)
            self._update(stack)
            self._set_status(stack, 'UPDATE', 'COMPLETE')
            self._note('stack %s UPDATE_COMPLETE' % stack.name)
        self._submit('update stack %s' % stack.name, update,
                     lambda reason: self._set_status(stack, 'UPDATE',
                                                     'FAILED', reason))
        return 202, {}, None

    def delete_stack(self, stack):
        if stack.deleted:
            return _not_found(stack.id)
        self._set_status(stack, 'DELETE', 'IN_PROGRESS')
        self._note('delete stack %s' % stack.name)

        def delete():
            self._delete_tree(stack)
            self._note('stack %s DELETE_COMPLETE' % stack.name)
        self._submit('delete stack %s' % stack.name, delete,
                     lambda reason: self._set_status(stack, 'DELETE',
                                                     'FAILED', reason))
        return 204, {}, None

    def signal(self, stack, resource, body):
        """POST .../resources/<policy>/signal: run a scaling policy."""
        if resource.resource_type != POLICY:
            return _bad_request('Resource %s cannot be signalled.'
                                % resource.name)
        props = resource.properties
        group_id = props.get('auto_scaling_group_id')
        group = next((r for r in stack.resources.values()
                      if group_id in (r.physical_resource_id, r.name)), None)
        if group is None or group.resource_type != GROUP:
            return _bad_request('Policy %s has no scaling group.'
                                % resource.name)
        adjustment = int(props.get('scaling_adjustment', 0))
        group_stack = self._stack(group.nested_stack_id)
        members = self._members(group_stack)
        target = len(members) + adjustment
        target = max(int(group.properties.get('min_size', 0)),
                     min(int(group.properties.get('max_size', target)),
                         target))
        # Synchronously, so a poller never sees the group idle first.
        self.fake.add_event(resource, 'SIGNAL_IN_PROGRESS', 'Signal: '
                            'adjustment %+d' % adjustment)
        self.fake.add_event(resource, 'SIGNAL_COMPLETE',
                            'alarm state changed')
        if target == len(members):
            self._note('signal %s: %s stays at %d' % (
                resource.name, group.name, target))
            return 200, {}, {}
        with self._lock:
            group.status = 'UPDATE_IN_PROGRESS'
            group.metadata['scaling_in_progress'] = True
        plan = self._plan_resize(group_stack, group, target)
        self._note('signal %s: %s %d -> %d' % (
            resource.name, group.name, len(members), target))

        def resize():
            self._resize(group_stack, group, plan)
            self._complete(group, 'UPDATE')
            with self._lock:
                group.metadata['scaling_in_progress'] = False

        def failed(reason):
            with self._lock:
                group.status, group.status_reason = 'UPDATE_FAILED', reason
                group.metadata['scaling_in_progress'] = False
        self._submit('signal %s' % resource.name, resize, failed)
        return 200, {}, {}

    # -- template handling ----------------------------------------------------

    def _parse_create(self, body):
        if not isinstance(body, dict):
            raise TemplateError('The request body must be a JSON object.')
        name = body.get('stack_name')
        if not name or not isinstance(name, str):
            raise TemplateError('stack_name is required.')
        if 'template' not in body:
            raise TemplateError('A template is required (template_url is '
                                'not supported).')
        template = _load(body['template'])
        files = body.get('files') or {}
        params = body.get('parameters') or {}
        return name, template, files, params

    def _parameters(self, template, given):
        """Parameter values of a template: given, else default; Heat
        refuses a stack whose parameter has neither."""
        values = {}
        for name, spec in (template.get('parameters') or {}).items():
            spec = spec or {}
            if name in given:
                value = given[name]
                if spec.get('type') == 'json' and isinstance(value, str):
                    value = yaml.safe_load(value)
            elif 'default' in spec:
                value = spec['default']
            else:
                raise TemplateError('The Parameter (%s) was not provided.'
                                    % name)
            values[name] = value
        return values

    def _resolve(self, node, params, stack):
        """Resolve get_param, get_resource (the physical id), get_attr and
        list_join against the parameters and the resources of ``stack``
        created so far."""
        if isinstance(node, dict):
            if len(node) == 1:
                (function, argument), = node.items()
                if function == 'get_param':
                    path = argument if isinstance(argument, list) \
                        else [argument]
                    if path[0] not in params:
                        raise TemplateError('The Parameter (%s) was not '
                                            'defined in template.' % path[0])
                    return _walk(params[path[0]], path[1:],
                                 'get_param %s' % path)
                if function == 'get_resource':
                    resource = stack.resources.get(argument)
                    if resource is None:
                        raise TemplateError('The specified reference '
                                            '"%s" was not found.' % argument)
                    return resource.physical_resource_id
                if function == 'get_attr':
                    resource = stack.resources.get(argument[0])
                    if resource is None:
                        raise TemplateError('The specified reference '
                                            '"%s" was not found.'
                                            % argument[0])
                    path = [self._resolve(item, params, stack)
                            for item in argument[1:]]
                    return _walk(resource.attributes, path,
                                 'get_attr %s' % argument)
                if function == 'list_join':
                    separator, items = argument[0], argument[1]
                    return separator.join(
                        str(self._resolve(item, params, stack))
                        for item in items)
            return {key: self._resolve(value, params, stack)
                    for key, value in node.items()}
        if isinstance(node, list):
            return [self._resolve(item, params, stack) for item in node]
        return node

    # -- building -------------------------------------------------------------

    def _build(self, stack, template, files, given):
        """Create the resources of ``template`` in ``stack`` in dependency
        order (get_resource, get_attr, depends_on), template order among
        the ready ones, resolving properties as each one is created."""
        params = self._parameters(template, given)
        definitions = template.get('resources') or {}
        needs = {}
        for name, definition in definitions.items():
            resource_type = (definition or {}).get('type')
            if not resource_type:
                raise TemplateError('Resource %s has no type.' % name)
            if resource_type not in SUPPORTED + PASSIVE and \
                    resource_type not in files:
                raise TemplateError('The resource type %s of %s is not '
                                    'supported by the test Heat.'
                                    % (resource_type, name))
            depends = definition.get('depends_on') or []
            needs[name] = _references(definition.get('properties')) | set(
                [depends] if isinstance(depends, str) else depends)
            unknown = needs[name] - set(definitions)
            if unknown:
                raise TemplateError('%s refers to unknown resource(s) %s'
                                    % (name, sorted(unknown)))
        created = set()
        while len(created) < len(definitions):
            ready = [name for name in definitions
                     if name not in created and needs[name] <= created]
            if not ready:
                raise TemplateError('Circular dependency among %s' % sorted(
                    set(definitions) - created))
            for name in ready:
                definition = definitions[name]
                props = self._resolve(definition.get('properties') or {},
                                      params, stack)
                self._create_resource(stack, name, definition['type'], props,
                                      files, definitions)
                stack.resources[name].required_by = sorted(
                    other for other, refers in needs.items() if name in refers)
                created.add(name)

    def _create_resource(self, stack, name, resource_type, props, files,
                         definitions):
        if resource_type == VOLUME:
            volume_id = str(uuid.uuid4())
            self._resource(stack, name, VOLUME, volume_id, {
                'id': volume_id, 'name': props.get('name', name),
                'size': props.get('size', 1), 'status': 'available',
                'attachments': []}, properties=props)
        elif resource_type == GROUP:
            self._create_group(stack, name, props, files)
        elif resource_type == SERVER:
            self._create_server(stack, name, props)
        elif resource_type == PORT:
            self._create_port(stack, name, props, definitions)
        elif resource_type in files:  # a nested template resource
            nested = self.fake.add_stack(
                '%s-%s-%s' % (stack.name, name, _short_id()),
                parent_id=stack.id, parent_resource=name,
                status='CREATE_IN_PROGRESS')
            nested_stack = self._stack(nested)
            resource = self._resource(stack, name, resource_type,
                                      nested_stack_id=nested,
                                      properties=props,
                                      status='CREATE_IN_PROGRESS')
            template = _load(files[resource_type])
            with self._lock:
                nested_stack.template = template
            self._build(nested_stack, template, files, props)
            self._set_status(nested_stack, 'CREATE', 'COMPLETE')
            self._complete(resource)
        else:  # a policy or another resource without side effects
            attributes = {}
            if resource_type == 'OS::Nova::ServerGroup':
                policies = props.get('policies') or []
                attributes = {'name': props.get('name', name),
                              'policies': policies,
                              'policy': policies[0] if policies else None}
            resource = self._resource(stack, name, resource_type,
                                      properties=props, attributes=attributes)
            if resource_type == 'OS::Nova::ServerGroup':
                resource.attributes['id'] = resource.physical_resource_id

    def _create_group(self, stack, name, props, files):
        member = props.get('resource') or {}
        member_type = member.get('type')
        if member_type not in files:
            raise TemplateError('Scaling group %s: member template %s is '
                                'not in files.' % (name, member_type))
        group_stack_id = self.fake.add_stack(
            '%s-%s-%s' % (stack.name, name, _short_id()),
            parent_id=stack.id, parent_resource=name,
            status='CREATE_IN_PROGRESS')
        group_stack = self._stack(group_stack_id)
        with self._lock:
            group_stack.files = files
        group = self._resource(stack, name, GROUP,
                               nested_stack_id=group_stack_id,
                               attributes={'current_size': 0},
                               properties=props, status='CREATE_IN_PROGRESS')
        desired = int(props.get('desired_capacity',
                                props.get('min_size', 0)))
        for _ in range(desired):
            self._add_member(group_stack, group)
        self._set_status(group_stack, 'CREATE', 'COMPLETE')
        self._complete(group)

    def _members(self, group_stack):
        """Live members of a group, oldest first (Heat's order)."""
        with self._lock:
            members = [r for r in group_stack.resources.values()
                       if not r.status.startswith('DELETE')]
        return sorted(members, key=lambda r: (r.creation_time, r.created_at,
                                              r.name))

    def _new_member(self, group_stack, group):
        """A member resource and its (empty) stack, CREATE_IN_PROGRESS."""
        member = group.properties['resource']
        name = _short_id()
        member_stack_id = self.fake.add_stack(
            '%s-%s-%s' % (group_stack.name, name, _short_id()),
            parent_id=group_stack.id, parent_resource=name,
            status='CREATE_IN_PROGRESS',
            status_reason='Stack CREATE started')
        return self._resource(group_stack, name, member['type'],
                              nested_stack_id=member_stack_id,
                              properties=member.get('properties'),
                              status='CREATE_IN_PROGRESS')

    def _build_member(self, group_stack, group, resource):
        member = group.properties['resource']
        member_stack = self._stack(resource.nested_stack_id)
        template = _load(group_stack.files[member['type']])
        with self._lock:
            member_stack.template = template
        try:
            self._build(member_stack, template, group_stack.files,
                        member.get('properties') or {})
        except Exception as error:
            self._set_status(member_stack, 'CREATE', 'FAILED', str(error))
            with self._lock:
                resource.status, resource.status_reason = (
                    'CREATE_FAILED', str(error))
            raise
        self._set_status(member_stack, 'CREATE', 'COMPLETE')
        self._complete(resource)
        self._update_size(group_stack, group)

    def _add_member(self, group_stack, group):
        self._build_member(group_stack, group,
                           self._new_member(group_stack, group))

    def _update_size(self, group_stack, group):
        with self._lock:
            group.attributes['current_size'] = len(self._members(group_stack))

    def _plan_resize(self, group_stack, group, target):
        """Mark what a resize will do at once: new members in
        CREATE_IN_PROGRESS, the oldest ones in DELETE_IN_PROGRESS."""
        members = self._members(group_stack)
        plan = []
        if target > len(members):
            for _ in range(target - len(members)):
                plan.append(('add', self._new_member(group_stack, group)))
        else:
            for resource in members[:len(members) - target]:
                with self._lock:
                    resource.status = 'DELETE_IN_PROGRESS'
                self.fake.add_event(resource, 'DELETE_IN_PROGRESS',
                                    'state changed')
                plan.append(('remove', resource))
        return plan

    def _resize(self, group_stack, group, plan):
        for action, resource in plan:
            if action == 'add':
                self._build_member(group_stack, group, resource)
            else:
                self._remove_member(group_stack, resource)
        self._update_size(group_stack, group)

    def _remove_member(self, group_stack, resource):
        nested = self.fake._stacks.get(resource.nested_stack_id)
        if nested is not None:
            self._delete_tree(nested)
        with self._lock:
            group_stack.resources.pop(resource.name, None)

    # -- servers, ports, volumes ----------------------------------------------

    def _role(self, name, props):
        lowered = name.lower()
        if 'master' in lowered:
            return 'master'
        if 'worker' in lowered:
            return 'worker'
        if 'storage' in lowered or props.get('block_device_mapping_v2'):
            return 'storage'
        return 'worker'

    def _host_name(self, role):
        self._counters[role] = self._counters.get(role, 0) + 1
        return '%s%d' % (role, self._counters[role])

    def _kube(self, stack, create=True):
        root = self._root(stack)
        kube = self.kubes.get(root.id)
        if kube is None and create:
            kube = kubeapi.KubeApiServer(
                host=self.testbed.bridge_ip,
                extra_sans=tuple(str(a) for a in
                                 self.testbed._subnet.hosts())).start()
            self.kubes[root.id] = kube
            self._note('Kubernetes API server for %s at %s'
                       % (root.name, kube.url))
        return kube

    def _prepare_host(self, host, stack):
        kube = self._kube(stack, create=host.role != 'storage')
        if self._prepare is not None:
            self._prepare(host, kube)
        else:
            from testbed import cluster
            cluster.prepare_guest(host, kube, install_cluster=True)

    def _server_volumes(self, stack, props):
        """The volume resources of a server's block_device_mapping_v2."""
        by_id = {r.physical_resource_id: r for r in stack.resources.values()
                 if r.resource_type == VOLUME}
        volumes = []
        for mapping in props.get('block_device_mapping_v2') or []:
            volume = by_id.get(mapping.get('volume_id'))
            if volume is None:
                raise TemplateError('volume %s of a server is not a volume '
                                    'of its stack' % mapping.get('volume_id'))
            volumes.append(volume)
        return volumes

    def _server_ports(self, stack, server):
        """The port resources of a server's networks."""
        wanted = {network.get('port') for network in
                  server.properties.get('networks') or []}
        return [r for r in stack.resources.values()
                if r.resource_type == PORT
                and r.physical_resource_id in wanted]

    def _create_server(self, stack, name, props):
        role = self._role(props.get('name') or name, props)
        volumes = self._server_volumes(stack, props)
        host_name = self._host_name(role)  # the testbed's, not the guest's
        display_name = cloud_init.server_name(props, stack.name, name,
                                              _short_id())
        server = self._resource(stack, name, SERVER, str(uuid.uuid4()),
                                properties=props,
                                status='CREATE_IN_PROGRESS')
        server.attributes['name'] = display_name
        started = time.monotonic()
        host = self.testbed.add_host(
            host_name, role, volumes=len(volumes),
            volume_size_mb=self.volume_size_mb,
            hostname=cloud_init.guest_host_name(display_name))
        self._check_address(host.ip)
        self._prepare_host(host, stack)
        self._bind_server(stack, server, host, volumes)
        self._complete(server)
        self._note('booted %s (%s, %s, host name %s) for %s/%s in %.1fs' % (
            host_name, role, host.ip, host.hostname, stack.name, name,
            time.monotonic() - started))

    def _bind_server(self, stack, server, host, volumes):
        """Point a server resource (and its volumes) at a booted host."""
        server_id = server.physical_resource_id
        with self._lock:
            self.hosts[server_id] = host.name
            self.fake._consoles[server_id] = host.console_output()
            server.attributes = {
                'id': server_id, 'name': server.attributes['name'],
                'status': 'ACTIVE', 'OS-EXT-STS:vm_state': 'active',
                'OS-EXT-SRV-ATTR:host': 'testbed',
                'addresses': {'testbed': [{
                    'addr': host.ip, 'version': 4,
                    'OS-EXT-IPS:type': 'fixed'}]}}
            for volume, device in zip(volumes, host.volumes):
                volume.attributes['status'] = 'in-use'
                volume.attributes['attachments'] = [{
                    'id': volume.physical_resource_id,
                    'volume_id': volume.physical_resource_id,
                    'attachment_id': str(uuid.uuid4()),
                    'server_id': server_id, 'host_name': None,
                    'device': device,
                    'attached_at': self.fake_time()}]
            # The ports of its networks get its address.
            for port in self._server_ports(stack, server):
                self._set_port(port, host.ip, server_id)
                if port.status != 'CREATE_COMPLETE':
                    self._complete(port)

    def _create_port(self, stack, name, props, definitions):
        """A port; a server of the template naming it in its networks will
        give it its host's address when it boots (until then the port is
        CREATE_IN_PROGRESS), any other port gets a free address."""
        port_id = str(uuid.uuid4())
        network = props.get('network') or props.get('network_id') or ''
        port = self._resource(stack, name, PORT, port_id, {
            'id': port_id, 'name': name, 'status': 'DOWN',
            'network_id': network, 'admin_state_up': True,
            'mac_address': 'fa:16:3e:%02x:%02x:%02x' % tuple(
                uuid.uuid4().bytes[:3]),
            'allowed_address_pairs': props.get('allowed_address_pairs', []),
            'device_id': '', 'device_owner': '', 'fixed_ips': []},
            properties=props, status='CREATE_IN_PROGRESS')
        used_by_server = any(
            (definition or {}).get('type') == SERVER and
            {'get_resource': name} in [
                {'get_resource': (n or {}).get('port', {}).get(
                    'get_resource')} if isinstance((n or {}).get('port'),
                                                   dict) else None
                for n in ((definition.get('properties') or {}).get(
                    'networks') or [])]
            for definition in definitions.values())
        if not used_by_server:
            address = self._free_address()
            self._reserved.add(address)
            self._set_port(port, address, '')
            self._complete(port)

    def _set_port(self, port, address, device_id):
        self._check_address(address)
        self.ever_handed_out.add(address)
        with self._lock:
            port.attributes['fixed_ips'] = [{
                'subnet_id': 'testbed-subnet', 'ip_address': address}]
            port.attributes['device_id'] = device_id
            port.attributes['device_owner'] = (
                'compute:nova' if device_id else '')
            port.attributes['status'] = 'ACTIVE' if device_id else 'DOWN'

    def _free_address(self):
        """An address of the testbed subnet no host, port or the bridge
        uses, from the top of the subnet (hosts take it from the bottom)."""
        used = {h.ip for h in self.testbed.hosts.values()} | self._reserved
        used.add(self.testbed.bridge_ip)
        for address in reversed(list(self.testbed._subnet.hosts())):
            if str(address) not in used:
                return str(address)
        raise RuntimeError('no free address in %s' % self.testbed.subnet)

    def _check_address(self, address):
        """Never hand out anything but the testbed's own subnet."""
        ip = ipaddress.ip_address(address)
        if ip not in self.testbed._subnet or str(ip) == self.testbed.bridge_ip:
            raise RuntimeError('refusing to hand out %s: not a host address '
                               'of the testbed subnet %s'
                               % (address, self.testbed.subnet))

    def handed_out_addresses(self):
        """Every address in a port of a live stack (for tests)."""
        with self._lock:
            return sorted({
                entry['ip_address']
                for stack in self.fake._stacks.values() if not stack.deleted
                for resource in stack.resources.values()
                for entry in resource.attributes.get('fixed_ips') or []})

    # -- update (heal) --------------------------------------------------------

    def _update(self, root):
        # Groups whose desired_capacity changed are resized first.
        definitions = (root.template or {}).get('resources') or {}
        params = self._parameters(root.template or {}, root.parameters)
        for stack in [root]:
            for resource in list(stack.resources.values()):
                if resource.resource_type != GROUP:
                    continue
                props = self._resolve(
                    (definitions.get(resource.name) or {}).get(
                        'properties') or {}, params, root)
                with self._lock:
                    resource.properties.update(
                        {k: v for k, v in props.items() if k != 'resource'})
                desired = props.get('desired_capacity')
                group_stack = self._stack(resource.nested_stack_id)
                if desired is not None and int(desired) != len(
                        self._members(group_stack)):
                    self._resize(group_stack, resource, self._plan_resize(
                        group_stack, resource, int(desired)))
        # Then every resource marked unhealthy is replaced.
        for stack in self._descendants(root):
            unhealthy = [r for r in stack.resources.values() if r.unhealthy]
            servers = [r for r in stack.resources.values()
                       if r.resource_type == SERVER]
            done = set()
            for server in servers:
                volumes = self._server_volumes(stack, server.properties)
                blank = any(v.unhealthy for v in volumes)
                if server.unhealthy or blank:
                    self._replace_server(stack, server, volumes, blank)
                    done.add(server.name)
                    done.update(v.name for v in volumes)
            for resource in unhealthy:
                if resource.name not in done:
                    # A port or a lone volume: Heat re-creates it in place.
                    self._complete(resource, 'UPDATE')
            if stack is not root and unhealthy:
                self._set_status(stack, 'UPDATE', 'COMPLETE')

    def _replace_server(self, stack, server, volumes, blank):
        """Heat's replacement of a server: a new VM at the same port; blank
        new volumes when a volume was marked unhealthy, else the old ones
        re-attached."""
        old_id = server.physical_resource_id
        host_name = self.hosts.pop(old_id)
        started = time.monotonic()
        with self._lock:
            server.status = 'UPDATE_IN_PROGRESS'
            self.fake._consoles.pop(old_id, None)
        host = self.testbed.replace_host(host_name, same_ip=True,
                                         keep_volumes=not blank)
        self._check_address(host.ip)
        self._prepare_host(host, stack)
        new_id = str(uuid.uuid4())
        with self._lock:
            server.physical_resource_id = new_id
            server.creation_time = self.fake_time()
            server.created_at = time.time()
            if blank:
                for volume in volumes:
                    volume_id = str(uuid.uuid4())
                    volume.physical_resource_id = volume_id
                    volume.attributes['id'] = volume_id
                    volume.creation_time = self.fake_time()
        self._bind_server(stack, server, host, volumes)
        self._complete(server)
        for volume in volumes:
            if blank:
                self._complete(volume)
        self._note('replaced %s (%s) of %s/%s%s in %.1fs' % (
            host_name, host.ip, stack.name, server.name,
            ' with blank volumes' if blank and volumes else '',
            time.monotonic() - started))

    # -- Nova's os-stop -----------------------------------------------------

    def stop_server(self, server_id):
        """Power a server off in the work queue (Nova answers before it is
        done); False when it is not running."""
        with self._lock:
            found = [(stack, resource)
                     for stack in self.fake._stacks.values()
                     if not stack.deleted
                     for resource in stack.resources.values()
                     if resource.resource_type == SERVER and
                     resource.physical_resource_id == server_id]
            if not found or server_id not in self.hosts:
                return False
            stack, server = found[0]
            if server.attributes.get('status') != 'ACTIVE' or \
                    server.attributes.get('OS-EXT-STS:task_state'):
                return False
            server.attributes['OS-EXT-STS:task_state'] = 'powering-off'
            host_name = self.hosts[server_id]

        def stop():
            node_lifecycle.power_off(self.testbed,
                                     self._kube(stack, create=False),
                                     host_name)
            with self._lock:
                server.attributes.update({
                    'status': 'SHUTOFF', 'OS-EXT-STS:vm_state': 'stopped',
                    'OS-EXT-STS:task_state': None})
            self._note('stopped %s' % host_name)

        def failed(reason):
            with self._lock:
                server.attributes.update({'status': 'ERROR',
                                          'OS-EXT-STS:task_state': None})

        self._submit('stop of %s' % host_name, stop, failed)
        return True

    # -- delete ---------------------------------------------------------------

    def _delete_tree(self, stack):
        """Delete a stack and its nested stacks: hosts go, the stack keeps
        answering by id with DELETE_COMPLETE."""
        self._set_status(stack, 'DELETE', 'IN_PROGRESS')
        for resource in list(stack.resources.values()):
            nested = self.fake._stacks.get(resource.nested_stack_id)
            if nested is not None and not nested.deleted:
                self._delete_tree(nested)
            if resource.resource_type == SERVER:
                host_name = self.hosts.pop(resource.physical_resource_id,
                                           None)
                with self._lock:
                    self.fake._consoles.pop(resource.physical_resource_id,
                                            None)
                if host_name in self.testbed.hosts:
                    self.testbed.remove_host(host_name)
                    self._note('removed %s' % host_name)
            if resource.resource_type == PORT:
                for entry in resource.attributes.get('fixed_ips') or []:
                    self._reserved.discard(entry['ip_address'])
        with self._lock:
            stack.resources.clear()
            stack.deleted = True
        self._set_status(stack, 'DELETE', 'COMPLETE')
        if stack.parent_id is None:
            kube = self.kubes.pop(stack.id, None)
            if kube is not None:
                kube.stop()
                self._note('stopped the Kubernetes API server of %s'
                           % stack.name)


def _walk(value, path, what):
    for key in path:
        try:
            value = value[key]
        except (KeyError, IndexError, TypeError):
            raise TemplateError('%s: no %r' % (what, key))
    return value


def _references(node):
    """Names of the resources that get_resource/get_attr refer to."""
    found = set()
    if isinstance(node, dict):
        if len(node) == 1:
            (function, argument), = node.items()
            if function == 'get_resource' and isinstance(argument, str):
                found.add(argument)
            elif function == 'get_attr' and isinstance(argument, list) \
                    and argument:
                found.add(argument[0])
        for value in node.values():
            found |= _references(value)
    elif isinstance(node, list):
        for value in node:
            found |= _references(value)
    return found


def _load(template):
    if isinstance(template, dict):
        return template
    try:
        loaded = yaml.safe_load(template)
    except yaml.YAMLError as error:
        raise TemplateError('The template is not valid YAML: %s' % error)
    if not isinstance(loaded, dict):
        raise TemplateError('The template must be a mapping.')
    return loaded


def _error(code, error_type, message):
    return {'code': code, 'title': 'Error', 'explanation': message,
            'error': {'type': error_type, 'message': message,
                      'traceback': None}}


def _bad_request(message):
    return 400, {}, _error(400, 'HTTPBadRequest', message)


def _not_found(stack_id):
    return 404, {}, _error(404, 'EntityNotFound',
                           'The Stack (%s) could not be found.' % stack_id)
