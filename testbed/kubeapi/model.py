"""The API model of the test Kubernetes API server: the constants, how a
kind is described (``Resource``), errors as Kubernetes Status objects,
what a request asks for (``Request``, parsed as the API server's
RequestInfo) and quantities."""

import base64
import copy
import dataclasses
import datetime
import decimal
import re
from typing import Callable, Optional


SERVER_VERSION = 'v1.32.0'
PV_PROTECTION = 'kubernetes.io/pv-protection'
PVC_PROTECTION = 'kubernetes.io/pvc-protection'
RBAC_GROUP = 'rbac.authorization.k8s.io'
APPS_GROUP = 'apps'
POLICY_GROUP = 'policy'
SERVICE_ACCOUNT_TOKEN = 'kubernetes.io/service-account-token'
SERVICE_ACCOUNT_NAME = 'kubernetes.io/service-account.name'
SERVICE_ACCOUNT_UID = 'kubernetes.io/service-account.uid'
# Namespaces and the ClusterRole a new server starts with, as kubeadm's.
INITIAL_NAMESPACES = ('default', 'kube-system', 'kube-public',
                      'kube-node-lease')
CLUSTER_ADMIN = 'cluster-admin'
# kubectl takes an empty protobuf document as "no schemas". It must not get
# the "...spec.v2@v1.0+protobuf" it asks for: Go's MIME parser rejects "@".
OPENAPI_V2_TYPE = ('application/com.github.proto-openapi.spec.v2.v1.0'
                   '+protobuf')
PROTOBUF = 'application/vnd.kubernetes.protobuf'
# A network in extra_sans may not add more addresses than this.
MAX_SAN_ADDRESSES = 1024


@dataclasses.dataclass(frozen=True, eq=False)
class Resource:
    """A kind of object the server stores, and how it treats it.

    The behaviour that differs between kinds is in the optional functions;
    the table of all kinds is ``kinds.RESOURCES``.
    """
    group: str  # the API group; '' for the core group
    plural: str
    kind: str
    namespaced: bool
    short_names: tuple = ()
    name_rule: str = 'subdomain'  # a key of _NAME_RULES
    # prepare(obj, old): server-side defaults, on create (old None) and on
    # update; may raise ApiError.
    prepare: Optional[Callable[[dict, Optional[dict]], None]] = None
    # check(obj, old): validation errors, [(field, cause reason, message)].
    check: Optional[Callable[[dict, Optional[dict]], list]] = None
    # new_status(obj): the status of a new object. None: the kind has no
    # status; otherwise clients change it through the "status" subresource.
    new_status: Optional[Callable[[dict], dict]] = None
    finalizer: Optional[str] = None  # added to every new object
    protected: frozenset = frozenset()  # names that may not be deleted
    # "kubectl get" table: the cells of a row, for columns and then the
    # wide_columns that only "-o wide" shows.
    columns: tuple = ('Name', 'Age')
    wide_columns: tuple = ()
    cells: Optional[Callable[[dict], list]] = None  # None: name and age
    version: str = 'v1'
    # Field selector labels besides metadata.name and metadata.namespace:
    # dotted paths into the object.
    fields: tuple = ()
    # metadata.generation: 1 on create, bumped when anything but metadata
    # and status changes.
    generation: bool = False
    # grace(obj, delete_options): seconds of graceful deletion. An object
    # deleted with a grace above 0 stays, Terminating, until the controller
    # (its kubelet) finishes the deletion.
    grace: Optional[Callable[[dict, dict], int]] = None
    # Serves the policy/v1 Eviction subresource (POST <object>/eviction).
    evictable: bool = False
    # owned_status(obj, pods): the status its controller gives a workload
    # from the active Pods it controls (by their controller ownerReference).
    owned_status: Optional[Callable[[dict, list], dict]] = None
    # Serves the autoscaling/v1 Scale subresource (<object>/scale).
    scalable: bool = False

    @property
    def singular(self) -> str:
        return self.kind.lower()

    @property
    def api_version(self) -> str:
        return f'{self.group}/{self.version}' if self.group else self.version

    @property
    def group_plural(self) -> str:
        """The resource as Kubernetes names it in messages."""
        return f'{self.plural}.{self.group}' if self.group else self.plural

    @property
    def group_kind(self) -> str:
        return f'{self.kind}.{self.group}' if self.group else self.kind

    def details(self, name: Optional[str], kind: Optional[str] = None,
                **more) -> dict:
        details = {'name': name, 'group': self.group,
                   'kind': kind or self.plural, **more}
        return {key: value for key, value in details.items() if value}


class ApiError(Exception):
    """An error answered to the client as a Kubernetes Status object."""

    def __init__(self, code: int, reason: str, message: str,
                 details: Optional[dict] = None):
        super().__init__(message)
        self.code, self.reason, self.details = code, reason, details
        self.message = message

    def status(self) -> dict:
        status = {'kind': 'Status', 'apiVersion': 'v1', 'metadata': {},
                  'status': 'Failure', 'message': self.message,
                  'reason': self.reason, 'code': self.code}
        if not self.reason:
            del status['reason']
        if self.details:
            status['details'] = self.details
        return status


def not_found(res: Resource, name: str) -> ApiError:
    return ApiError(404, 'NotFound', f'{res.group_plural} "{name}" not found',
                    res.details(name))


def too_many_requests(cause: str, retry_after: int = 0) -> ApiError:
    """An eviction the disruption budget refuses, in the API server's
    words; the cause names the budget."""
    details = {'causes': [{'reason': 'DisruptionBudget', 'message': cause}]}
    if retry_after:
        details['retryAfterSeconds'] = retry_after
    return ApiError(429, 'TooManyRequests', "Cannot evict pod as it would "
                    "violate the pod's disruption budget.", details)


# What a successful eviction answers (with HTTP status 201).
SUCCESS = {'kind': 'Status', 'apiVersion': 'v1', 'metadata': {},
           'status': 'Success', 'code': 201}


def no_such_path() -> ApiError:
    return ApiError(404, 'NotFound',
                    'the server could not find the requested resource')


def conflict(res: Resource, name: str, message: str) -> ApiError:
    return ApiError(409, 'Conflict', f'Operation cannot be fulfilled on '
                                     f'{res.group_plural} "{name}": '
                                     f'{message}', res.details(name))


def forbidden(res_name: str, name: Optional[str], message: str,
              details: dict) -> ApiError:
    subject = f'{res_name} "{name}"' if name else res_name
    return ApiError(403, 'Forbidden', f'{subject} is forbidden: {message}',
                    details)


def api_time(offset: float = 0) -> str:
    """The time, ``offset`` seconds from now, as the API writes times."""
    return (datetime.datetime.now(datetime.timezone.utc)
            + datetime.timedelta(seconds=offset)).strftime(
        '%Y-%m-%dT%H:%M:%SZ')


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def sort_key(key: tuple) -> tuple:
    namespace, name = key
    return (namespace or '', name)


def labels(obj: dict) -> dict:
    return obj['metadata'].get('labels') or {}


def as_object(res: Resource, body) -> dict:
    """Check that a request body is an object of the resource's kind."""
    if not isinstance(body, dict) or not isinstance(
            body.get('metadata', {}), dict):
        raise ApiError(400, 'BadRequest', f'the body is not a {res.kind}')
    if (body.get('kind', res.kind) != res.kind
            or body.get('apiVersion', res.api_version) != res.api_version):
        raise ApiError(400, 'BadRequest',
                       f'the API version in the data '
                       f'({body.get("apiVersion")}) and kind '
                       f'({body.get("kind")}) do not match '
                       f'{res.api_version} {res.kind}')
    obj = copy.deepcopy(body)
    obj.update(kind=res.kind, apiVersion=res.api_version)
    if not obj.get('metadata'):
        obj['metadata'] = {}
    return obj


@dataclasses.dataclass(frozen=True)
class Request:
    """What a request asks for, parsed as the API server's RequestInfo.

    Paths under /api/<version>/ and /apis/<group>/<version>/ are resource
    requests (``group`` is not None); all others, discovery among them,
    are non-resource requests of a ``path``.
    """
    verb: str  # get, list, watch, create, ...; for other paths: get, post...
    path: str  # without the query and without a trailing "/"
    group: Optional[str] = None
    version: str = ''
    namespace: Optional[str] = None
    resource: str = ''
    name: Optional[str] = None
    subresource: Optional[str] = None
    extra: tuple = ()  # path segments after the subresource

    @property
    def is_resource(self) -> bool:
        return self.group is not None


_VERBS = {'POST': 'create', 'PUT': 'update', 'PATCH': 'patch',
          'DELETE': 'delete'}
# A path /api/v1/namespaces/<name>/<one of these> names the namespace's
# subresource, not a resource in the namespace.
_NAMESPACE_SUBRESOURCES = ('status', 'finalize')


def parse_request(method: str, path: str, query: dict) -> Request:
    parts = [part for part in path.split('/') if part]
    path = '/' + '/'.join(parts)
    if parts[:1] == ['api'] and len(parts) > 2:
        group, version, rest = '', parts[1], parts[2:]
    elif parts[:1] == ['apis'] and len(parts) > 3:
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        return Request(method.lower(), path)
    namespace = None
    if rest[0] == 'namespaces' and len(rest) > 1:
        namespace = rest[1]
        if len(rest) > 2 and rest[2] not in _NAMESPACE_SUBRESOURCES:
            rest = rest[2:]
    resource, name, subresource = (rest + [None, None])[:3]
    if method == 'GET':
        verb = ('watch' if query.get('watch') in ('true', '1')
                else 'get' if name else 'list')
    elif method == 'DELETE' and name is None:
        verb = 'deletecollection'
    else:
        verb = _VERBS.get(method, method.lower())
    return Request(verb, path, group, version, namespace, resource, name,
                   subresource, tuple(rest[3:]))


_QUANTITY = re.compile(r'([+-]?[0-9.]+)([eE][+-]?[0-9]+|[KMGTPE]i|[mkMGTPE]?)')
_QUANTITY_SUFFIXES = {
    '': 1, 'm': decimal.Decimal('0.001'), 'k': 10**3, 'M': 10**6,
    'G': 10**9, 'T': 10**12, 'P': 10**15, 'E': 10**18, 'Ki': 2**10,
    'Mi': 2**20, 'Gi': 2**30, 'Ti': 2**40, 'Pi': 2**50, 'Ei': 2**60}


def parse_quantity(text) -> decimal.Decimal:
    """Parse a Kubernetes quantity such as "1Gi", "500M" or "1e3"."""
    match = _QUANTITY.fullmatch(str(text).strip())
    if not match:
        raise ValueError(f'invalid quantity {text!r}')
    number, suffix = match.groups()
    try:
        if len(suffix) > 1 and suffix[0] in 'eE':
            return decimal.Decimal(number + suffix)
        return decimal.Decimal(number) * _QUANTITY_SUFFIXES[suffix]
    except decimal.InvalidOperation:
        raise ValueError(f'invalid quantity {text!r}') from None
