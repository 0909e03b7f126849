"""What the test Heat makes of a HOT template before anything is built:
the resource types it knows, parameter values, the intrinsic functions
(get_param, get_resource, get_attr, list_join), the dependencies between
resources, and Heat's error bodies."""

import yaml

SERVER = 'OS::Nova::Server'
PORT = 'OS::Neutron::Port'
VOLUME = 'OS::Cinder::Volume'
GROUP = 'OS::Heat::AutoScalingGroup'
POLICY = 'OS::Heat::ScalingPolicy'
SERVER_GROUP = 'OS::Nova::ServerGroup'
SECURITY_GROUP = 'OS::Neutron::SecurityGroup'
SUPPORTED = (SERVER, PORT, VOLUME, GROUP, POLICY, SECURITY_GROUP)
# Resources that only carry properties here (no VM, address or disk).
PASSIVE = (SERVER_GROUP, 'OS::Heat::None')


class TemplateError(Exception):
    """The template cannot be processed (Heat would refuse it)."""


def load(template):
    """A template given as YAML text or as a mapping, as a mapping."""
    if isinstance(template, dict):
        return template
    try:
        loaded = yaml.safe_load(template)
    except yaml.YAMLError as error:
        raise TemplateError('The template is not valid YAML: %s' % error)
    if not isinstance(loaded, dict):
        raise TemplateError('The template must be a mapping.')
    return loaded


def parse_create(body):
    """(name, template, files, parameters) of a POST /stacks body."""
    if not isinstance(body, dict):
        raise TemplateError('The request body must be a JSON object.')
    name = body.get('stack_name')
    if not name or not isinstance(name, str):
        raise TemplateError('stack_name is required.')
    if 'template' not in body:
        raise TemplateError('A template is required (template_url is '
                            'not supported).')
    template = load(body['template'])
    files = body.get('files') or {}
    params = body.get('parameters') or {}
    return name, template, files, params


def parameters(template, given):
    """Parameter values of a template: given, else default; Heat refuses a
    stack whose parameter has neither."""
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


def _get_param(argument, params, stack):
    path = argument if isinstance(argument, list) else [argument]
    if path[0] not in params:
        raise TemplateError('The Parameter (%s) was not defined in '
                            'template.' % path[0])
    return _walk(params[path[0]], path[1:], 'get_param %s' % path)


def _get_resource(argument, params, stack):
    resource = stack.resources.get(argument)
    if resource is None:
        raise TemplateError('The specified reference "%s" was not found.'
                            % argument)
    return resource.physical_resource_id


def _get_attr(argument, params, stack):
    resource = stack.resources.get(argument[0])
    if resource is None:
        raise TemplateError('The specified reference "%s" was not found.'
                            % argument[0])
    path = [resolve(item, params, stack) for item in argument[1:]]
    return _walk(resource.attributes, path, 'get_attr %s' % argument)


def _list_join(argument, params, stack):
    separator, items = argument[0], argument[1]
    return separator.join(str(resolve(item, params, stack))
                          for item in items)


_FUNCTIONS = {'get_param': _get_param, 'get_resource': _get_resource,
              'get_attr': _get_attr, 'list_join': _list_join}


def resolve(node, params, stack):
    """Resolve get_param, get_resource (the physical id), get_attr and
    list_join against the parameters and the resources of ``stack``
    created so far."""
    if isinstance(node, dict):
        if len(node) == 1:
            (function, argument), = node.items()
            if function in _FUNCTIONS:
                return _FUNCTIONS[function](argument, params, stack)
        return {key: resolve(value, params, stack)
                for key, value in node.items()}
    if isinstance(node, list):
        return [resolve(item, params, stack) for item in node]
    return node


def dependencies(definitions, files):
    """{resource name: the names it needs first} (get_resource, get_attr,
    depends_on); TemplateError for an unknown type or reference."""
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
    return needs


def creation_rounds(needs):
    """Yield the names of ``needs`` in rounds: each round's resources need
    only those of earlier rounds (template order within a round); a cycle
    is refused when the rounds before it are done."""
    created = set()
    while len(created) < len(needs):
        ready = [name for name in needs
                 if name not in created and needs[name] <= created]
        if not ready:
            raise TemplateError('Circular dependency among %s' % sorted(
                set(needs) - created))
        yield ready
        created.update(ready)


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


def error(code, error_type, message):
    """Heat's error body."""
    return {'code': code, 'title': 'Error', 'explanation': message,
            'error': {'type': error_type, 'message': message,
                      'traceback': None}}


def bad_request(message):
    return 400, {}, error(400, 'HTTPBadRequest', message)


def not_found(stack_id):
    return 404, {}, error(404, 'EntityNotFound',
                          'The Stack (%s) could not be found.' % stack_id)
