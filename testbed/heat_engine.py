"""A small Heat engine for the fake Heat API: templates become testbed VMs.

``HeatEngine`` interprets the HOT templates Tacker sends (the sample
BaseHOT: a top template, nested member templates in ``files`` and the
``nfv`` parameter the package's UserData computed) and does what Heat
would, on the testbed (testbed/hosts.py) instead of Nova, Neutron and
Cinder:

* ``OS::Nova::Server`` boots a test host (a network namespace with sshd)
  from a stock cloud image, or from the seeds' prepared one when its
  ``image`` is one of ``prepared_images``; cloud-init's first boot gives
  it the public key of its ``key_name`` (a keypair of the fake Nova, or
  the server fails as Heat refuses it) and runs its user data
  (testbed.cloud_init: without either, a stock guest has no login); it is
  made a VM of the user guide's VNF with ``virtual_vnf.prepare_guest``; as
  on Nova, the server is ACTIVE while its guest still boots: sshd starts
  later, and cloud-init prints the host keys on the console later still;
  Nova's console log of the server is the host's (with its real host key); its
  guest host name is the one cloud-init would set from its Nova name
  (testbed.cloud_init), so the members of a scaling group share it;
* ``OS::Neutron::Port`` gets the address of the host whose ``networks``
  name it; a port no server uses (the HA virtual IP) gets a free address
  of the testbed subnet that no host uses. Nothing else is ever handed out:
  every address is checked to be on the testbed's own bridge subnet;
* ``OS::Neutron::SecurityGroup`` and a port's ``security_groups`` (none:
  the project's ``default`` group) are enforced with iptables on the
  testbed bridge, ``allowed_address_pairs`` included (heat_security);
* ``OS::Cinder::Volume`` in a server's ``block_device_mapping_v2`` is a
  loop device attached to that host as /dev/vdb, /dev/vdc, ... in order;
* ``OS::Heat::AutoScalingGroup`` is a nested stack of member stacks (one
  per ``desired_capacity``), each built from the member template in
  ``files``; ``OS::Heat::ScalingPolicy`` signals add or remove members
  within ``min_size``/``max_size`` (scale-in removes the oldest members,
  by creation time and name, as Heat does and as Tacker predicts; members
  marked unhealthy go first, which is how Tacker v2 picks its victims);
* stack update (``PATCH`` with ``existing``) replaces every resource
  marked unhealthy: a server gets a fresh root file system (same port,
  same address, new Nova id and host key); its volumes are kept unless a
  volume was marked unhealthy too, which gives blank new volumes; a group
  whose ``desired_capacity`` changed is resized;
* Nova's ``os-stop`` of a server (``stop_server``) powers its host off:
  the Node on it becomes unreachable after ``node_grace_period``
  (testbed.node_lifecycle) and the server SHUTOFF, until a heal replaces
  it;
* stack delete removes every host and volume; the stack keeps answering by
  id with ``DELETE_COMPLETE``.

The Kubernetes side: when a stack's first Master or Worker boots, a fresh
test Kubernetes API server (testbed.kubeapi) is started for that top-level
stack, the cluster's state, and stopped when the stack is deleted (an
entire-VNF heal thus starts a new cluster, as new VMs would).

Each resource type is created by a handler of ``HeatEngine._CREATORS``
(heat_servers: servers, ports, volumes; heat_groups: scaling groups);
templates are read by heat_template.

Work (booting, replacing, removing hosts) runs in one worker thread, in
order; the HTTP calls answer at once with ``*_IN_PROGRESS`` states, as
Heat does. A failure puts the stack (and the group member) in
``*_FAILED`` with the error as reason, and is kept in ``errors``.
"""

import logging
import queue
import threading
import time
import traceback
import uuid

from testbed import heat_groups
from testbed import heat_security
from testbed import heat_servers
from testbed import heat_template
from testbed import hosts
from testbed import openstack_model
from testbed import virtual_vnf

LOG = logging.getLogger(__name__)
# Seconds from ACTIVE to sshd, and from sshd to the host keys on the
# console: a real guest takes tens of seconds for both, in this order;
# short here, as every operation of the Tacker lab waits for them.
BOOT_DELAYS = (2.0, 1.0)


class HeatEngine(heat_servers.ServersMixin, heat_groups.GroupsMixin,
                 heat_security.SecurityMixin):
    """Heat's engine over a testbed; see the module docstring.

    ``testbed``: a started hosts.Testbed to boot VMs in (default: one of its
    own, started by ``start()`` and stopped by ``stop()``, whose VMs boot
    from the user guide's stock image while ``stock_image`` is true: no
    NFS packages (virtual_vnf.STOCK_ROLE_PURGES), so the driver installs
    them; else they come with them, as from a site's own image).
    ``prepare``: called as ``prepare(host, kube)`` on every booted host
    (default: ``virtual_vnf.prepare_guest(host, kube, install_cluster=True)``).
    ``boot_hooks``: callables run as ``hook(host)`` on every server's host
    once it is prepared, before the server is ACTIVE: a test arms faults
    (testbed.faults) on the VMs an operation boots.
    ``prepared_images``: the Glance image names that are the seeds'
    prepared image (testbed.cloud_init.PREPARED); any other is a stock one.
    ``boot_delays``: (seconds from ACTIVE until sshd starts, seconds from
    then until the host keys are on the console).
    ``node_grace_period``: seconds from a server's os-stop until its Node is
    unreachable (node_lifecycle.GRACE_PERIOD for a test that depends on
    the real one, e.g. an auto-heal; at once by default).
    ``enforce_security_groups``: filter the bridge as the ports' security
    groups say (heat_security); off, every VM takes any traffic.
    """

    def __init__(self, testbed=None, stock_image=True,
                 volume_size_mb=256, prepare=None, prepared_images=(),
                 boot_delays=BOOT_DELAYS, node_grace_period=0.0,
                 enforce_security_groups=True):
        self.testbed = testbed
        self.prepared_images = frozenset(prepared_images)
        self.boot_delays = boot_delays
        self.node_grace_period = node_grace_period
        self._own_testbed = testbed is None
        self.stock_image = stock_image
        self.volume_size_mb = volume_size_mb
        self._prepare = prepare
        self.boot_hooks = []
        self.enforce_security_groups = enforce_security_groups
        self.bridge_filter = None  # a security_groups.BridgeFilter
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
            self.testbed = hosts.Testbed(
                role_purge_packages=virtual_vnf.STOCK_ROLE_PURGES)
        if self._own_testbed and self.testbed.bridge_ip is None:
            self.testbed.start()
        self._start_filter()
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
        self._stop_filter()
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
        return openstack_model.heat_time()

    def _resource(self, stack, name, resource_type, physical_id=None,
                  attributes=None, nested_stack_id=None, properties=None,
                  status='CREATE_COMPLETE'):
        resource = openstack_model.FakeResource(
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
            name, template, files, params = heat_template.parse_create(
                body)
        except heat_template.TemplateError as error:
            return heat_template.bad_request(str(error))
        if self.fake.find_stack(name) is not None:
            return 409, {}, heat_template.error(
                409, 'StackExists', 'The Stack (%s) already exists.' % name)
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
            return heat_template.bad_request(
                'The request body must be a JSON object.')
        if stack.deleted or stack.status.endswith('IN_PROGRESS'):
            return 409, {}, heat_template.error(
                409, 'ActionInProgress', 'Stack %s in progress: %s'
                % (stack.name, stack.status))
        try:
            template = heat_template.load(body['template']) \
                if body.get('template') else stack.template
        except heat_template.TemplateError as error:
            return heat_template.bad_request(str(error))
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
            return heat_template.not_found(stack.id)
        self._set_status(stack, 'DELETE', 'IN_PROGRESS')
        self._note('delete stack %s' % stack.name)

        def delete():
            self._delete_tree(stack)
            self._note('stack %s DELETE_COMPLETE' % stack.name)
        self._submit('delete stack %s' % stack.name, delete,
                     lambda reason: self._set_status(stack, 'DELETE',
                                                     'FAILED', reason))
        return 204, {}, None

    # -- building -------------------------------------------------------------

    # How each resource type is created, and what deleting it undoes;
    # handlers take (self, stack, name, type, properties, files,
    # definitions) and (self, resource).
    _CREATORS = {
        heat_template.SERVER: heat_servers.ServersMixin._create_server,
        heat_template.PORT: heat_servers.ServersMixin._create_port,
        heat_template.VOLUME: heat_servers.ServersMixin._create_volume,
        heat_template.GROUP: heat_groups.GroupsMixin._create_group,
        heat_template.SECURITY_GROUP:
            heat_security.SecurityMixin._create_security_group}
    _DELETERS = {
        heat_template.SERVER: heat_servers.ServersMixin._delete_server,
        heat_template.PORT: heat_servers.ServersMixin._release_port}

    def _build(self, stack, template, files, given):
        """Create the resources of ``template`` in ``stack`` in dependency
        order (get_resource, get_attr, depends_on), template order among
        the ready ones, resolving properties as each one is created."""
        params = heat_template.parameters(template, given)
        definitions = template.get('resources') or {}
        needs = heat_template.dependencies(definitions, files)
        for ready in heat_template.creation_rounds(needs):
            for name in ready:
                definition = definitions[name]
                props = heat_template.resolve(
                    definition.get('properties') or {}, params, stack)
                self._create_resource(stack, name, definition['type'], props,
                                      files, definitions)
                stack.resources[name].required_by = sorted(
                    other for other, refers in needs.items() if name in refers)

    def _create_resource(self, stack, name, resource_type, props, files,
                         definitions):
        """Create one resource with the handler of its type: a nested
        template resource if ``files`` has its type, else one without side
        effects (a policy, a server group)."""
        create = self._CREATORS.get(resource_type)
        if create is None:
            create = (HeatEngine._create_nested if resource_type in files
                      else HeatEngine._create_passive)
        create(self, stack, name, resource_type, props, files, definitions)

    def _create_nested(self, stack, name, resource_type, props, files,
                       definitions):
        nested = self.fake.add_stack(
            '%s-%s-%s' % (stack.name, name, openstack_model.short_id()),
            parent_id=stack.id, parent_resource=name,
            status='CREATE_IN_PROGRESS')
        nested_stack = self._stack(nested)
        resource = self._resource(stack, name, resource_type,
                                  nested_stack_id=nested, properties=props,
                                  status='CREATE_IN_PROGRESS')
        template = heat_template.load(files[resource_type])
        with self._lock:
            nested_stack.template = template
        self._build(nested_stack, template, files, props)
        self._set_status(nested_stack, 'CREATE', 'COMPLETE')
        self._complete(resource)

    def _create_passive(self, stack, name, resource_type, props, files,
                        definitions):
        attributes = {}
        if resource_type == heat_template.SERVER_GROUP:
            policies = props.get('policies') or []
            attributes = {'name': props.get('name', name),
                          'policies': policies,
                          'policy': policies[0] if policies else None}
        resource = self._resource(stack, name, resource_type,
                                  properties=props, attributes=attributes)
        if resource_type == heat_template.SERVER_GROUP:
            resource.attributes['id'] = resource.physical_resource_id

    # -- update (heal) --------------------------------------------------------

    def _update(self, root):
        # Groups whose desired_capacity changed are resized first.
        self._resize_changed_groups(root)
        # Then every resource marked unhealthy is replaced.
        for stack in self._descendants(root):
            unhealthy = [r for r in stack.resources.values() if r.unhealthy]
            servers = [r for r in stack.resources.values()
                       if r.resource_type == heat_template.SERVER]
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

    # -- delete ---------------------------------------------------------------

    def _delete_tree(self, stack):
        """Delete a stack and its nested stacks: hosts go, the stack keeps
        answering by id with DELETE_COMPLETE."""
        self._set_status(stack, 'DELETE', 'IN_PROGRESS')
        for resource in list(stack.resources.values()):
            nested = self.fake._stacks.get(resource.nested_stack_id)
            if nested is not None and not nested.deleted:
                self._delete_tree(nested)
            delete = self._DELETERS.get(resource.resource_type)
            if delete is not None:
                delete(self, resource)
        with self._lock:
            stack.resources.clear()
            stack.deleted = True
        self._set_status(stack, 'DELETE', 'COMPLETE')
        self._refresh_filter()
        if stack.parent_id is None:
            kube = self.kubes.pop(stack.id, None)
            if kube is not None:
                kube.stop()
                self._note('stopped the Kubernetes API server of %s'
                           % stack.name)
