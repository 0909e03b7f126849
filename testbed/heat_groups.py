"""Scaling groups of the test Heat: OS::Heat::AutoScalingGroup is a
nested stack of member stacks, each built from the member template in
``files``; a ScalingPolicy signal or a changed ``desired_capacity`` adds
members or removes the oldest ones (by creation time and name, as Heat
does and as Tacker predicts), within ``min_size``/``max_size``.

Mixed into heat_engine.HeatEngine.
"""


from testbed import heat_template
from testbed import openstack_model


class GroupsMixin(object):
    """Scaling groups and policies of a HeatEngine."""

    def signal(self, stack, resource, body):
        """POST .../resources/<policy>/signal: run a scaling policy."""
        if resource.resource_type != heat_template.POLICY:
            return heat_template.bad_request(
                'Resource %s cannot be signalled.' % resource.name)
        props = resource.properties
        group_id = props.get('auto_scaling_group_id')
        group = next((r for r in stack.resources.values()
                      if group_id in (r.physical_resource_id, r.name)), None)
        if group is None or group.resource_type != heat_template.GROUP:
            return heat_template.bad_request(
                'Policy %s has no scaling group.' % resource.name)
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

    def _create_group(self, stack, name, resource_type, props, files,
                      definitions):
        member = props.get('resource') or {}
        member_type = member.get('type')
        if member_type not in files:
            raise heat_template.TemplateError(
                'Scaling group %s: member template %s is not in files.'
                % (name, member_type))
        group_stack_id = self.fake.add_stack(
            '%s-%s-%s' % (stack.name, name, openstack_model.short_id()),
            parent_id=stack.id, parent_resource=name,
            status='CREATE_IN_PROGRESS')
        group_stack = self._stack(group_stack_id)
        with self._lock:
            group_stack.files = files
        group = self._resource(stack, name, heat_template.GROUP,
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
        """Live members of a group in Heat's removal order: those marked
        unhealthy first (Tacker v2 marks the members it scales in), then
        oldest first: by creation time in whole seconds, as Heat stores
        it, and by name among those created in the same second."""
        with self._lock:
            members = [r for r in group_stack.resources.values()
                       if not r.status.startswith('DELETE')]
        return sorted(members, key=lambda r: (not r.unhealthy,
                                              r.creation_time, r.name))

    def _new_member(self, group_stack, group):
        """A member resource and its (empty) stack, CREATE_IN_PROGRESS."""
        member = group.properties['resource']
        name = openstack_model.short_id()
        member_stack_id = self.fake.add_stack(
            '%s-%s-%s' % (group_stack.name, name, openstack_model.short_id()),
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
        template = heat_template.load(group_stack.files[member['type']])
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

    def _resize_changed_groups(self, root):
        """Resize the groups of ``root`` whose desired_capacity changed."""
        definitions = (root.template or {}).get('resources') or {}
        params = heat_template.parameters(root.template or {},
                                          root.parameters)
        for resource in list(root.resources.values()):
            if resource.resource_type != heat_template.GROUP:
                continue
            props = heat_template.resolve(
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
