"""Authentication and authorization: the admin and service-account users,
public and discovery paths, and RBAC rules."""

import dataclasses

from testbed.kubeapi import model


@dataclasses.dataclass(frozen=True)
class User:
    name: str
    groups: tuple


# The admin token's user: in system:masters, which RBAC does not restrict.
ADMIN = User('kubernetes-admin', ('system:masters',
                                  'system:authenticated'))
_HEALTH_PATHS = ('/healthz', '/livez', '/readyz')


def is_public(path: str) -> bool:
    """Paths anyone may read, even without credentials."""
    return path == '/version' or any(
        path == health or path.startswith(health + '/')
        for health in _HEALTH_PATHS)


def is_discovery(path: str) -> bool:
    """Non-resource paths every authenticated user may read (the
    system:discovery ClusterRole)."""
    return any(path == root or path.startswith(root + '/')
               for root in ('/api', '/apis', '/openapi'))


def service_account_user(namespace: str, name: str) -> User:
    return User(f'system:serviceaccount:{namespace}:{name}',
                ('system:serviceaccounts',
                 f'system:serviceaccounts:{namespace}',
                 'system:authenticated'))


def names_user(subject: dict, user: User) -> bool:
    kind = subject.get('kind')
    if kind == 'ServiceAccount':
        return user.name == service_account_user(
            subject.get('namespace'), subject.get('name')).name
    if kind == 'User':
        return subject.get('name') == user.name
    return kind == 'Group' and subject.get('name') in user.groups


def rule_allows(rule: dict, request: model.Request) -> bool:
    """Whether a PolicyRule of a ClusterRole covers the request."""
    def covers(allowed, value):
        return '*' in allowed or value in allowed

    if not covers(rule.get('verbs') or [], request.verb):
        return False
    if not request.is_resource:
        return any(url == request.path or url == '*' or (
            url.endswith('*') and request.path.startswith(url[:-1]))
            for url in rule.get('nonResourceURLs') or [])
    resources = rule.get('resources') or []
    wanted = request.resource + (
        f'/{request.subresource}' if request.subresource else '')
    return (covers(rule.get('apiGroups') or [], request.group)
            and (covers(resources, wanted) or (
                request.subresource and f'*/{request.subresource}'
                in resources))
            and (not rule.get('resourceNames')
                 or request.name in rule['resourceNames']))


def access_denied(user: User, request: model.Request) -> model.ApiError:
    """A 403 in the API server's words."""
    if not request.is_resource:
        return model.ApiError(
            403, 'Forbidden', f'forbidden: User "{user.name}" '
            f'cannot {request.verb} path "{request.path}"')
    resource = request.resource + (
        f'/{request.subresource}' if request.subresource else '')
    scope = (f'in the namespace "{request.namespace}"' if request.namespace
             else 'at the cluster scope')
    qualified = request.resource + (
        f'.{request.group}' if request.group else '')
    details = {'name': request.name, 'group': request.group,
               'kind': request.resource}
    return model.forbidden(
        qualified, request.name,
        f'User "{user.name}" cannot {request.verb} resource "{resource}" '
        f'in API group "{request.group}" {scope}',
        {key: value for key, value in details.items() if value})
