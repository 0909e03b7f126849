"""Servers, ports and volumes of the test Heat, on testbed hosts.

Mixed into heat_engine.HeatEngine (whose module docstring says what each
resource type becomes): a server boots a test host prepared as a guest
of its image after cloud-init's first boot (testbed.cloud_init),
its ports get its address, its volumes are loop devices attached to it in
order; a port no server uses gets a free address of the testbed subnet.
"""

import ipaddress
import threading
import time
import uuid

from testbed import cloud_init
from testbed import heat_template
from testbed import host_scripts
from testbed import kubeapi
from testbed import node_lifecycle
from testbed import openstack_model
from testbed import polling
from testbed import virtual_vnf


class ServersMixin(object):
    """Servers, ports and volumes of a HeatEngine."""

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

    def _first_boot(self, name, props):
        """What cloud-init will do on a server's guest (its image's kind,
        its keypair's key, its user data); TemplateError for a key_name
        Nova does not know, as Heat's keypair constraint refuses it."""
        key_name = props.get('key_name')
        public_key = self.fake.keypair(key_name) if key_name else None
        if key_name and public_key is None:
            raise heat_template.TemplateError(
                'Property error: resources.%s.properties.key_name: Error '
                "validating value '%s': The Key (%s) could not be found."
                % (name, key_name, key_name))
        image = (cloud_init.PREPARED if props.get('image') in
                 self.prepared_images else cloud_init.STOCK)
        return cloud_init.plan_first_boot(
            image, public_key, props.get('user_data'),
            props.get('user_data_format', 'HEAT_CFNTOOLS'))

    def _prepare_host(self, host, stack, first_boot):
        cloud_init.first_boot(host, first_boot)
        kube = self._kube(stack, create=host.role != 'storage')
        if self._prepare is not None:
            self._prepare(host, kube)
        else:
            virtual_vnf.prepare_guest(host, kube, install_cluster=True)

    def _server_volumes(self, stack, props):
        """The volume resources of a server's block_device_mapping_v2."""
        by_id = {r.physical_resource_id: r for r in stack.resources.values()
                 if r.resource_type == heat_template.VOLUME}
        volumes = []
        for mapping in props.get('block_device_mapping_v2') or []:
            volume = by_id.get(mapping.get('volume_id'))
            if volume is None:
                raise heat_template.TemplateError(
                    'volume %s of a server is not a volume of its stack'
                    % mapping.get('volume_id'))
            volumes.append(volume)
        return volumes

    def _server_ports(self, stack, server):
        """The port resources of a server's networks."""
        wanted = {network.get('port') for network in
                  server.properties.get('networks') or []}
        return [r for r in stack.resources.values()
                if r.resource_type == heat_template.PORT
                and r.physical_resource_id in wanted]

    def _create_volume(self, stack, name, resource_type, props, files,
                       definitions):
        volume_id = str(uuid.uuid4())
        self._resource(stack, name, heat_template.VOLUME, volume_id, {
            'id': volume_id, 'name': props.get('name', name),
            'size': props.get('size', 1), 'status': 'available',
            'attachments': []}, properties=props)

    def _create_server(self, stack, name, resource_type, props, files,
                       definitions):
        role = self._role(props.get('name') or name, props)
        volumes = self._server_volumes(stack, props)
        first_boot = self._first_boot(name, props)
        host_name = self._host_name(role)  # the testbed's, not the guest's
        display_name = cloud_init.server_name(props, stack.name, name,
                                              openstack_model.short_id())
        server = self._resource(stack, name, heat_template.SERVER,
                                str(uuid.uuid4()), properties=props,
                                status='CREATE_IN_PROGRESS')
        server.attributes['name'] = display_name
        started = time.monotonic()
        host = self.testbed.add_host(
            host_name, role, volumes=len(volumes),
            volume_size_mb=self.volume_size_mb,
            hostname=cloud_init.guest_host_name(display_name),
            hold_sshd=True, role_image=self.stock_image)
        self._check_address(host.ip)
        self._prepare_host(host, stack, first_boot)
        for hook in list(self.boot_hooks):
            hook(host)
        self._bind_server(stack, server, host, volumes)
        self._complete(server)
        self._note('booted %s (%s, %s, host name %s) for %s/%s in %.1fs' % (
            host_name, role, host.ip, host.hostname, stack.name, name,
            time.monotonic() - started))

    def _bind_server(self, stack, server, host, volumes):
        """Point a server resource (and its volumes) at a booted host,
        ACTIVE while the guest still boots (see _finish_boot)."""
        server_id = server.physical_resource_id
        console = host.console_output()
        with self._lock:
            self.hosts[server_id] = host.name
            self.fake._consoles[server_id] = cloud_init.console_so_far(
                console, sshd_started=False)
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
        self._refresh_filter()
        self._finish_boot(server, host, console)

    def _finish_boot(self, server, host, console):
        """The rest of a guest's boot after Nova calls it ACTIVE, as a real
        one takes: sshd starts boot_delays[0] s later, cloud-init prints the
        host keys on the ``console`` boot_delays[1] s after that. sshd is
        started in the work queue, so never on a host replaced, removed or
        powered off meanwhile."""
        server_id = server.physical_resource_id
        sshd_delay, keys_delay = self.boot_delays

        def show(text):
            with self._lock:
                if server_id in self.fake._consoles:  # not gone meanwhile
                    self.fake._consoles[server_id] = text

        def start_sshd():
            with self._lock:
                booting = (self.hosts.get(server_id) == host.name and
                           server.attributes.get('status') == 'ACTIVE')
            if booting:
                host.run('echo > %s' % host_scripts.SSHD_GO)
                polling.wait_until(lambda: host.listens(22),
                                   'sshd of %s' % host.name)
                show(cloud_init.console_so_far(console, sshd_started=True))
                _later(keys_delay, show, console)
                self._note('sshd of %s started' % host.name)

        _later(sshd_delay, self._submit, 'sshd of %s' % host.name,
               start_sshd, lambda reason: None)

    def _create_port(self, stack, name, resource_type, props, files,
                     definitions):
        """A port; a server of the template naming it in its networks will
        give it its host's address when it boots (until then the port is
        CREATE_IN_PROGRESS), any other port gets a free address."""
        port_id = str(uuid.uuid4())
        network = props.get('network') or props.get('network_id') or ''
        port = self._resource(stack, name, heat_template.PORT, port_id, {
            'id': port_id, 'name': name, 'status': 'DOWN',
            'network_id': network, 'admin_state_up': True,
            'mac_address': 'fa:16:3e:%02x:%02x:%02x' % tuple(
                uuid.uuid4().bytes[:3]),
            'allowed_address_pairs': props.get('allowed_address_pairs', []),
            'device_id': '', 'device_owner': '', 'fixed_ips': []},
            properties=props, status='CREATE_IN_PROGRESS')
        used_by_server = any(
            (definition or {}).get('type') == heat_template.SERVER and
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

    def _replace_server(self, stack, server, volumes, blank):
        """Heat's replacement of a server: a new VM at the same port; blank
        new volumes when a volume was marked unhealthy, else the old ones
        re-attached."""
        old_id = server.physical_resource_id
        first_boot = self._first_boot(server.name, server.properties)
        host_name = self.hosts.pop(old_id)
        started = time.monotonic()
        with self._lock:
            server.status = 'UPDATE_IN_PROGRESS'
            self.fake._consoles.pop(old_id, None)
        host = self.testbed.replace_host(host_name, same_ip=True,
                                         keep_volumes=not blank,
                                         hold_sshd=True)
        self._check_address(host.ip)
        self._prepare_host(host, stack, first_boot)
        for hook in list(self.boot_hooks):
            hook(host)
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

    def stop_server(self, server_id):
        """Power a server off in the work queue (Nova answers before it is
        done); False when it is not running."""
        with self._lock:
            found = [(stack, resource)
                     for stack in self.fake._stacks.values()
                     if not stack.deleted
                     for resource in stack.resources.values()
                     if resource.resource_type == heat_template.SERVER and
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
                                     host_name, self.node_grace_period)
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

    def _delete_server(self, resource):
        host_name = self.hosts.pop(resource.physical_resource_id, None)
        with self._lock:
            self.fake._consoles.pop(resource.physical_resource_id, None)
        if host_name in self.testbed.hosts:
            self.testbed.remove_host(host_name)
            self._note('removed %s' % host_name)

    def _release_port(self, resource):
        for entry in resource.attributes.get('fixed_ips') or []:
            self._reserved.discard(entry['ip_address'])


def _later(delay, func, *args):
    """Call func(*args) in delay seconds, from a timer thread."""
    timer = threading.Timer(delay, func, args)
    timer.daemon = True
    timer.start()
