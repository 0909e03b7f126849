"""Security groups of the test Heat, enforced on the testbed bridge.

Mixed into heat_engine.HeatEngine: ``OS::Neutron::SecurityGroup`` is a
group of ingress rules (testbed.security_groups reads them as Heat does);
a port's ``security_groups`` (ids or names; none: the project's
``default`` group) and ``port_security_enabled`` say what reaches its VM.
Whenever a VM boots, is replaced or goes, every live port of the engine is
put back into the bridge's filter (security_groups.BridgeFilter).
"""

from testbed import heat_template
from testbed import security_groups


class SecurityMixin(object):
    """Security groups and port security of a HeatEngine."""

    def _start_filter(self):
        if self.enforce_security_groups and self.bridge_filter is None:
            self.bridge_filter = security_groups.BridgeFilter(
                self.testbed.prefix, self.testbed.bridge)
            self.bridge_filter.start()

    def _stop_filter(self):
        if self.bridge_filter is not None:
            self.bridge_filter.stop()
            self.bridge_filter = None

    def _create_security_group(self, stack, name, resource_type, props,
                               files, definitions):
        resource = self._resource(stack, name, resource_type,
                                  properties=props)
        group_id = resource.physical_resource_id
        try:
            rules = [security_groups.rule_of(spec, group_id)
                     for spec in props.get('rules') or []]
        except security_groups.RuleError as error:
            raise heat_template.TemplateError(
                'security group %s: %s' % (name, error))
        resource.attributes.update({
            'id': group_id, 'name': props.get('name', name),
            'rules': [dict(vars(rule)) for rule in rules]})

    def _live_resources(self, resource_type):
        with self._lock:
            return [resource for stack in self.fake._stacks.values()
                    if not stack.deleted
                    for resource in stack.resources.values()
                    if resource.resource_type == resource_type]

    def _filter_port(self, port, group_ids):
        """The security_groups.Port of a port resource."""
        props = port.properties
        groups = tuple(group_ids.get(g, g) for g in props.get(
            'security_groups') or [security_groups.DEFAULT_GROUP])
        addresses = [entry['ip_address'] for entry in
                     port.attributes.get('fixed_ips') or []]
        addresses += [pair['ip_address'] for pair in
                      props.get('allowed_address_pairs') or []]
        host = self.testbed.hosts.get(self.hosts.get(
            port.attributes.get('device_id')))
        return security_groups.Port(
            addresses=tuple(addresses), groups=groups,
            port_security=props.get('port_security_enabled', True) is not
            False, device=host._veths[0] if host is not None else None)

    def _refresh_filter(self):
        """Put every live port and group into the bridge's filter."""
        if self.bridge_filter is None:
            return
        groups, group_ids = {}, {}
        for group in self._live_resources(heat_template.SECURITY_GROUP):
            group_id = group.physical_resource_id
            group_ids[group.attributes['name']] = group_id
            groups[group_id] = [security_groups.Rule(**rule)
                                for rule in group.attributes['rules']]
        ports = [self._filter_port(port, group_ids) for port in
                 self._live_resources(heat_template.PORT)]
        self.bridge_filter.apply(security_groups.render(
            self.testbed.prefix, ports, groups))
