"""Heat v1 of the fake OpenStack, served from its model: stack lists
(``name``, ``owner_id``, ``show_nested``), the stack lookup that answers
``302`` with the canonical ``stacks/<name>/<id>`` URL (heatclient's
``_resolve_stack_id`` reads that ``Location``; keystoneauth follows it),
stacks, resources (with ``nested_depth``), events, metadata, templates and
``mark_unhealthy``. Creating, updating and deleting stacks and signalling
policies go to the Heat engine (405 without one).

Mixed into openstack_api.FakeOpenStack.
"""

import json
import re
import urllib.parse
import uuid

from testbed import openstack_model

HEAT_PREFIX = '/heat/v1'
# Heat answers these sub-paths of /stacks/<name or id> with a redirect to the
# canonical stacks/<name>/<id>/<sub-path> URL (heat/api/openstack/v1).
LOOKUP_SUBPATHS = ('resources', 'events', 'template', 'actions',
                   'environment', 'files', 'outputs')


class HeatMixin(object):
    """The Heat API of a FakeOpenStack."""

    def _heat(self, method, path, query, body):
        """Route a Heat request below /heat/v1: (status, headers, body)."""
        match = re.fullmatch(r'/([^/]+)/stacks(/.*)?', path)
        if not match or match.group(1) != self.project_id:
            return heat_error(404, 'NotFound', 'Unknown project path.')
        parts = [urllib.parse.unquote(part)
                 for part in (match.group(2) or '').split('/')[1:]]
        if parts and parts[-1] == '':
            parts.pop()
        if not parts:
            if method == 'GET':
                return self._list_stacks(query)
            if method == 'POST':
                return self._engine_call('create_stack', body)
            return heat_error(405, 'MethodNotAllowed', 'Not allowed.')
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
        return heat_error(404, 'NotFound', 'Unknown Heat path.')

    def _heat_get(self, path):
        """Route a Heat GET below /heat/v1/<project_id> (no query)."""
        return self._heat('GET', path, {}, None)

    def _engine_call(self, name, *args, **kwargs):
        if self.engine is None:
            return heat_error(405, 'MethodNotAllowed',
                              'This fake has no Heat engine.')
        return getattr(self.engine, name)(*args, **kwargs)

    def _mark_unhealthy(self, stack, resource, body):
        """PATCH .../resources/<name>: Heat's resource mark-unhealthy."""
        if not isinstance(body, dict) or not isinstance(
                body.get('mark_unhealthy'), bool):
            return heat_error(400, 'HTTPBadRequest',
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
                'event_time': openstack_model.heat_time(),
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
                return 200, {}, stack.template or self._implicit_template(
                    stack)
            if rest == ['files']:
                return 200, {}, stack.files
            if rest == ['resources']:
                depth = int((query.get('nested_depth') or ['0'])[0] or 0)
                return 200, {}, {'resources': self._resource_list(
                    stack, depth)}
            if rest[0] != 'resources' or len(rest) < 2:
                return heat_error(404, 'NotFound', 'Unknown Heat path.')
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
        return heat_error(404, 'NotFound', 'Unknown Heat path.')

    @staticmethod
    def _implicit_template(stack):
        """The template Heat shows for a stack it made itself (a scaling
        group's): one resource per member, with its properties (Tacker
        v2 reads a member's flavor there)."""
        return {'heat_template_version': '2015-04-30', 'resources': {
            resource.name: {'type': resource.resource_type,
                            'properties': resource.properties}
            for resource in stack.resources.values()}}

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
            'deletion_time': (openstack_model.heat_time() if stack.deleted
                              else None),
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


def heat_error(code, error_type, message):
    return code, {}, {
        'code': code,
        'title': 'Not Found' if code == 404 else 'Error',
        'explanation': message,
        'error': {'type': error_type, 'message': message, 'traceback': None},
    }


def _resource_not_found(name):
    return heat_error(404, 'ResourceNotFound',
                      'The Resource (%s) could not be found.' % name)


def _stack_not_found(name_or_id):
    return heat_error(404, 'EntityNotFound',
                      'The Stack (%s) could not be found.' % name_or_id)


def _truthy(values):
    return bool(values) and str(values[0]).lower() in ('true', '1', 'yes')
