"""A small in-memory Kubernetes API server that the real kubectl can talk to.

Tests of the management driver need kubectl to behave as it does against a
cluster: discovery, client-side ``apply`` (strategic merge patches), ``wait``
(list + watch), ``delete`` waiting for finalizers, ``cordon``, ``drain``
(evictions) and ``uncordon``. This server implements that much for the kinds
in ``_RESOURCES``: PersistentVolumes and PersistentVolumeClaims, Nodes,
Namespaces, ServiceAccounts, Secrets, ConfigMaps and Pods of core/v1,
DaemonSets and ReplicaSets of apps/v1, PodDisruptionBudgets of policy/v1
(with the Eviction subresource of Pods), and ClusterRoles and
ClusterRoleBindings of rbac.authorization.k8s.io/v1. A tiny controller
imitates the PV binder, the pv-/pvc-protection finalizers, the namespace
controller, the legacy service-account token controller, the kubelets
(pods bound to an existing Node run and are Ready; deleted ones terminate
after a short grace, except on a Node lost with lose_node()), the pod
garbage collector (pods of a deleted Node
go), the status of ReplicaSets and DaemonSets, and the disruption
controller; nothing schedules pods or creates them for their owners.
Bearer tokens are checked and service accounts authorized by their
ClusterRoleBindings, as RBAC does. It follows the requests kubectl was seen
to send.

Standard library only; the TLS certificate is made with the ``openssl`` CLI.
"""

import base64
import binascii
import contextlib
import copy
import dataclasses
import datetime
import decimal
import functools
import glob
import http.server
import ipaddress
import json
import os
import re
import secrets
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
from typing import Callable, Iterator, Optional
import urllib.parse
import uuid

from testbed import node_lifecycle

GCLOUD_KUBECTL_DIR = '/usr/lib/google-cloud-sdk/bin'
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


# --- which kubectl ---------------------------------------------------------

def kubectl_binary() -> Optional[str]:
    """Return the kubectl to test with, or None if this machine has none.

    $KUBECTL wins. Otherwise /usr/bin/kubectl (here the Google Cloud SDK
    dispatcher, which picks a kubectl matching the server's /version), then
    kubectl on PATH, then the newest versioned Cloud SDK binary.
    """
    override = os.environ.get('KUBECTL')
    if override:
        return override
    versioned = [path for path in
                 glob.glob(os.path.join(GCLOUD_KUBECTL_DIR, 'kubectl.1.*'))
                 if re.search(r'\.1\.\d+$', path)]
    versioned.sort(key=lambda path: int(path.rsplit('.', 1)[1]),
                   reverse=True)
    for candidate in ['/usr/bin/kubectl', shutil.which('kubectl'),
                      *versioned]:
        if candidate and _client_version(candidate):
            return candidate
    return None


def kubectl_version(binary: Optional[str] = None) -> Optional[str]:
    """Return the gitVersion of ``kubectl version --client`` (for reports).

    For the Cloud SDK dispatcher this is the dispatcher's own version; for a
    v1.32 server it runs its built-in kubectl of that same version.
    """
    binary = binary or kubectl_binary()
    return _client_version(binary) if binary else None


@functools.lru_cache(maxsize=None)
def _client_version(binary: str) -> Optional[str]:
    try:
        result = subprocess.run(
            [binary, 'version', '--client', '-o', 'json'],
            capture_output=True, text=True, timeout=30, check=True)
        return json.loads(result.stdout)['clientVersion']['gitVersion']
    except (OSError, subprocess.SubprocessError, ValueError, KeyError):
        return None


# --- API model -------------------------------------------------------------

@dataclasses.dataclass(frozen=True, eq=False)
class _Resource:
    """A kind of object the server stores, and how it treats it.

    The behaviour that differs between kinds is in the optional functions;
    the table of all kinds is ``_RESOURCES``, further down.
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


def _not_found(res: _Resource, name: str) -> ApiError:
    return ApiError(404, 'NotFound', f'{res.group_plural} "{name}" not found',
                    res.details(name))


def _too_many_requests(cause: str, retry_after: int = 0) -> ApiError:
    """An eviction the disruption budget refuses, in the API server's
    words; the cause names the budget."""
    details = {'causes': [{'reason': 'DisruptionBudget', 'message': cause}]}
    if retry_after:
        details['retryAfterSeconds'] = retry_after
    return ApiError(429, 'TooManyRequests', "Cannot evict pod as it would "
                    "violate the pod's disruption budget.", details)


# What a successful eviction answers (with HTTP status 201).
_SUCCESS = {'kind': 'Status', 'apiVersion': 'v1', 'metadata': {},
            'status': 'Success', 'code': 201}


def _no_such_path() -> ApiError:
    return ApiError(404, 'NotFound',
                    'the server could not find the requested resource')


def _conflict(res: _Resource, name: str, message: str) -> ApiError:
    return ApiError(409, 'Conflict', f'Operation cannot be fulfilled on '
                                     f'{res.group_plural} "{name}": '
                                     f'{message}', res.details(name))


def _forbidden(res_name: str, name: Optional[str], message: str,
               details: dict) -> ApiError:
    subject = f'{res_name} "{name}"' if name else res_name
    return ApiError(403, 'Forbidden', f'{subject} is forbidden: {message}',
                    details)


def _now(offset: float = 0) -> str:
    """The time, ``offset`` seconds from now, as the API writes times."""
    return (datetime.datetime.now(datetime.timezone.utc)
            + datetime.timedelta(seconds=offset)).strftime(
        '%Y-%m-%dT%H:%M:%SZ')


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def _resource_for(kind: str) -> _Resource:
    for res in _RESOURCES:
        if kind.lower() in (res.plural, res.singular, res.group_plural,
                            *res.short_names):
            return res
    raise ValueError(f'unknown kind {kind!r}')


def _sort_key(key: tuple) -> tuple:
    namespace, name = key
    return (namespace or '', name)


def _labels(obj: dict) -> dict:
    return obj['metadata'].get('labels') or {}


def _as_object(res: _Resource, body) -> dict:
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


def _decode(body: bytes, content_type: str = 'application/json'):
    """A request body as JSON data, from JSON or from Kubernetes'
    protobuf encoding."""
    if content_type.split(';')[0].strip() == PROTOBUF:
        return _decode_protobuf(body)
    try:
        return json.loads(body or b'{}')
    except ValueError as error:
        raise ApiError(400, 'BadRequest',
                       f'the request body is not valid JSON: {error}')


@dataclasses.dataclass(frozen=True)
class _Request:
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


def _parse_request(method: str, path: str, query: dict) -> _Request:
    parts = [part for part in path.split('/') if part]
    path = '/' + '/'.join(parts)
    if parts[:1] == ['api'] and len(parts) > 2:
        group, version, rest = '', parts[1], parts[2:]
    elif parts[:1] == ['apis'] and len(parts) > 3:
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        return _Request(method.lower(), path)
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
    return _Request(verb, path, group, version, namespace, resource, name,
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


# --- defaults and validation -----------------------------------------------

_PV_SOURCES = (  # the fields of a PV spec that form its volume source
    'awsElasticBlockStore', 'azureDisk', 'azureFile', 'cephfs', 'cinder',
    'csi', 'fc', 'flexVolume', 'flocker', 'gcePersistentDisk', 'glusterfs',
    'hostPath', 'iscsi', 'local', 'nfs', 'photonPersistentDisk',
    'portworxVolume', 'quobyte', 'rbd', 'scaleIO', 'storageos',
    'vsphereVolume')
_ACCESS_MODES = {'ReadWriteOnce': 'RWO', 'ReadOnlyMany': 'ROX',
                 'ReadWriteMany': 'RWX', 'ReadWriteOncePod': 'RWOP'}
_RECLAIM_POLICIES = ('Delete', 'Recycle', 'Retain')
_DNS_LABEL = r'[a-z0-9]([-a-z0-9]*[a-z0-9])?'
_DNS_SUBDOMAIN = re.compile(rf'{_DNS_LABEL}(\.{_DNS_LABEL})*')
_CONFIG_KEY = re.compile(r'[-._a-zA-Z0-9]+')


def _subdomain_problem(name: str) -> Optional[str]:
    if len(name) > 253 or not _DNS_SUBDOMAIN.fullmatch(name):
        return ("a lowercase RFC 1123 subdomain must consist of lower case "
                "alphanumeric characters, '-' or '.', and must start and "
                "end with an alphanumeric character")
    return None


def _label_problem(name: str) -> Optional[str]:
    if len(name) > 63 or not re.fullmatch(_DNS_LABEL, name):
        return ("a lowercase RFC 1123 label must consist of lower case "
                "alphanumeric characters or '-', and must start and end "
                "with an alphanumeric character")
    return None


def _path_segment_problem(name: str) -> Optional[str]:
    if name in ('.', '..'):
        return f"may not be '{name}'"
    for char in '/%':
        if char in name:
            return f"may not contain '{char}'"
    return None


_NAME_RULES = {'subdomain': _subdomain_problem, 'label': _label_problem,
               'path segment': _path_segment_problem}


def _validate(res: _Resource, obj: dict, old: Optional[dict] = None) -> None:
    """Reject, in Kubernetes' words, invalid objects a driver could send."""
    errors = []  # (field, cause reason, message body)
    name = obj['metadata'].get('name') or ''
    if not name:
        errors.append(('metadata.name', 'FieldValueRequired',
                       'Required value: name or generateName is required'))
    else:
        problem = _NAME_RULES[res.name_rule](name)
        if problem:
            errors.append(('metadata.name', 'FieldValueInvalid',
                           f'Invalid value: "{name}": {problem}'))
    errors += _owner_reference_errors(obj['metadata'].get('ownerReferences'))
    if res.check:
        errors += res.check(obj, old)
    if errors:
        causes = [{'reason': reason, 'message': body, 'field': field}
                  for field, reason, body in errors]
        texts = [f'{field}: {body}' for field, _, body in errors]
        summary = texts[0] if len(texts) == 1 else f'[{", ".join(texts)}]'
        raise ApiError(422, 'Invalid',
                       f'{res.group_kind} "{name}" is invalid: {summary}',
                       res.details(name, res.kind, causes=causes))


def _owner_reference_errors(refs) -> list:
    """Kubernetes' checks of metadata.ownerReferences."""
    if refs is None:
        return []
    if not isinstance(refs, list) or not all(isinstance(ref, dict)
                                             for ref in refs):
        return [('metadata.ownerReferences', 'FieldValueInvalid',
                 'Invalid value: must be a list of owner references')]
    errors = []
    for ref in refs:
        for key, what in (('apiVersion', 'version'), ('kind', 'kind'),
                          ('name', 'name'), ('uid', 'uid')):
            if not ref.get(key):
                errors.append((f'metadata.ownerReferences.{key}',
                               'FieldValueInvalid',
                               f'Invalid value: "": {what} must not be '
                               'empty'))
    controllers = [ref for ref in refs if ref.get('controller')]
    if len(controllers) > 1:
        errors.append((
            'metadata.ownerReferences', 'FieldValueInvalid',
            f'Invalid value: {json.dumps(controllers)}: Only one reference '
            'can have Controller set to true. Found "true" in references '
            'for ' + ' and '.join(f'{ref.get("kind")}/{ref.get("name")}'
                                  for ref in controllers)))
    return errors


def _required(field: str) -> tuple:
    return (field, 'FieldValueRequired', 'Required value')


def _immutable(field: str, value) -> tuple:
    return (field, 'FieldValueInvalid',
            f'Invalid value: {json.dumps(value)}: field is immutable')


def _prepare_pv(obj: dict, old: Optional[dict]) -> None:
    spec = obj.setdefault('spec', {})
    spec.setdefault('volumeMode', 'Filesystem')
    spec.setdefault('persistentVolumeReclaimPolicy', 'Retain')


def _prepare_pvc(obj: dict, old: Optional[dict]) -> None:
    obj.setdefault('spec', {}).setdefault('volumeMode', 'Filesystem')


def _access_mode_errors(spec: dict) -> list:
    modes = spec.get('accessModes') or []
    errors = [] if modes else [_required('spec.accessModes')]
    for mode in modes:
        if mode not in _ACCESS_MODES:
            errors.append(('spec.accessModes', 'FieldValueNotSupported',
                           f'Unsupported value: "{mode}"'))
    return errors


def _quantity_errors(field: str, value) -> list:
    if value is None:
        return [_required(field)]
    try:
        parse_quantity(value)
        return []
    except ValueError:
        return [(field, 'FieldValueInvalid',
                 f'Invalid value: "{value}": must be a quantity')]


def _pv_errors(obj: dict, old: Optional[dict]) -> list:
    spec = obj.get('spec') or {}
    errors = _access_mode_errors(spec) + _quantity_errors(
        'spec.capacity', (spec.get('capacity') or {}).get('storage'))
    sources = [key for key in _PV_SOURCES if spec.get(key) is not None]
    if not sources:
        errors.append(('spec', 'FieldValueRequired',
                       'Required value: must specify a volume type'))
    elif len(sources) > 1:
        errors.append(('spec', 'FieldValueForbidden',
                       'Forbidden: may not specify more than 1 volume type'))
    nfs = spec.get('nfs')
    if nfs is not None:
        if not nfs.get('server'):
            errors.append(_required('spec.nfs.server'))
        if not nfs.get('path'):
            errors.append(_required('spec.nfs.path'))
        elif not nfs['path'].startswith('/'):
            errors.append(('spec.nfs.path', 'FieldValueInvalid',
                           f'Invalid value: "{nfs["path"]}": '
                           'must be an absolute path'))
    policy = spec.get('persistentVolumeReclaimPolicy')
    if policy not in _RECLAIM_POLICIES:
        errors.append(('spec.persistentVolumeReclaimPolicy',
                       'FieldValueNotSupported',
                       f'Unsupported value: "{policy}": supported values: '
                       '"Delete", "Recycle", "Retain"'))
    old_spec = (old or {}).get('spec') or {}
    if old and any(spec.get(k) != old_spec.get(k) for k in _PV_SOURCES):
        errors.append(('spec.persistentvolumesource', 'FieldValueForbidden',
                       'Forbidden: spec.persistentvolumesource is immutable '
                       'after creation'))
    return errors


def _pvc_errors(obj: dict, old: Optional[dict]) -> list:
    spec = obj.get('spec') or {}
    requests = (spec.get('resources') or {}).get('requests') or {}
    errors = _access_mode_errors(spec) + _quantity_errors(
        'spec.resources[storage]', requests.get('storage'))
    if old and _pvc_fixed_spec(spec) != _pvc_fixed_spec(old['spec']):
        errors.append(('spec', 'FieldValueForbidden',
                       'Forbidden: spec is immutable after creation except '
                       'resources.requests and volumeAttributesClassName '
                       'for bound claims'))
    return errors


def _pvc_fixed_spec(spec: dict) -> dict:
    """The part of a PVC spec that may not change after creation."""
    fixed = {key: value for key, value in spec.items()
             if key != 'volumeAttributesClassName'}
    fixed['resources'] = {key: value for key, value
                          in (spec.get('resources') or {}).items()
                          if key != 'requests'}
    return fixed


def _prepare_namespace(obj: dict, old: Optional[dict]) -> None:
    # spec.finalizers changes only through the namespace controller.
    obj['spec'] = copy.deepcopy(old['spec']) if old else {
        'finalizers': ['kubernetes']}
    obj['metadata']['labels'] = {
        **_labels(obj), 'kubernetes.io/metadata.name': obj['metadata'].get(
            'name') or ''}


def _prepare_secret(obj: dict, old: Optional[dict]) -> None:
    """Default the type and fold stringData into data, as the API does."""
    obj.setdefault('type', 'Opaque')
    for key, value in (obj.get('data') or {}).items():
        try:
            base64.b64decode(value or '', validate=True)
        except (binascii.Error, TypeError, ValueError):
            raise ApiError(400, 'BadRequest', f'Secret in version "v1" '
                           f'cannot be handled as a Secret: illegal base64 '
                           f'data in data[{key}]')
    string_data = obj.pop('stringData', None) or {}
    if string_data:
        obj['data'] = {**(obj.get('data') or {}),
                       **{key: _b64(str(value))
                          for key, value in string_data.items()}}


def _key_errors(field: str, data) -> list:
    return [(f'{field}[{key}]', 'FieldValueInvalid',
             f'Invalid value: "{key}": a valid config key must consist of '
             "alphanumeric characters, '-', '_' or '.'")
            for key in data or {} if not _CONFIG_KEY.fullmatch(key)]


def _secret_errors(obj: dict, old: Optional[dict]) -> list:
    errors = _key_errors('data', obj.get('data'))
    if old and obj.get('type') != old.get('type'):
        errors.append(_immutable('type', obj.get('type')))
    annotations = obj['metadata'].get('annotations') or {}
    if (obj.get('type') == SERVICE_ACCOUNT_TOKEN
            and not annotations.get(SERVICE_ACCOUNT_NAME)):
        errors.append(_required(
            f'metadata.annotations[{SERVICE_ACCOUNT_NAME}]'))
    return errors


def _config_map_errors(obj: dict, old: Optional[dict]) -> list:
    return (_key_errors('data', obj.get('data'))
            + _key_errors('binaryData', obj.get('binaryData')))


def _cluster_role_errors(obj: dict, old: Optional[dict]) -> list:
    return [_required(f'rules[{index}].verbs')
            for index, rule in enumerate(obj.get('rules') or [])
            if not rule.get('verbs')]


def _binding_errors(obj: dict, old: Optional[dict]) -> list:
    ref = obj.get('roleRef') or {}
    errors = []
    if ref.get('kind') != 'ClusterRole':
        errors.append(('roleRef.kind', 'FieldValueNotSupported',
                       f'Unsupported value: "{ref.get("kind", "")}": '
                       'supported values: "ClusterRole"'))
    if ref.get('apiGroup') != RBAC_GROUP:
        errors.append(('roleRef.apiGroup', 'FieldValueNotSupported',
                       f'Unsupported value: "{ref.get("apiGroup", "")}": '
                       f'supported values: "{RBAC_GROUP}"'))
    if not ref.get('name'):
        errors.append(_required('roleRef.name'))
    if old and ref != old.get('roleRef'):
        errors.append(('roleRef', 'FieldValueInvalid',
                       f'Invalid value: {json.dumps(ref)}: cannot change '
                       'roleRef'))
    for index, subject in enumerate(obj.get('subjects') or []):
        field = f'subjects[{index}]'
        if subject.get('kind') not in ('ServiceAccount', 'User', 'Group'):
            errors.append((f'{field}.kind', 'FieldValueNotSupported',
                           f'Unsupported value: "{subject.get("kind", "")}"'
                           ': supported values: "ServiceAccount", "User", '
                           '"Group"'))
        if not subject.get('name'):
            errors.append(_required(f'{field}.name'))
        if (subject.get('kind') == 'ServiceAccount'
                and not subject.get('namespace')):
            errors.append(_required(f'{field}.namespace'))
    return errors


# Pods: what the API server defaults and checks, and when they may go.
_POD_SPEC_DEFAULTS = {
    'restartPolicy': 'Always', 'terminationGracePeriodSeconds': 30,
    'dnsPolicy': 'ClusterFirst', 'serviceAccountName': 'default',
    'securityContext': {}, 'schedulerName': 'default-scheduler',
    'enableServiceLinks': True, 'priority': 0,
    'preemptionPolicy': 'PreemptLowerPriority'}
_RESTART_POLICIES = ('Always', 'OnFailure', 'Never')
_POD_UPDATE_FORBIDDEN = (
    'Forbidden: pod updates may not change fields other than '
    '`spec.containers[*].image`,`spec.initContainers[*].image`,'
    '`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to '
    'existing tolerations),`spec.terminationGracePeriodSeconds` (allow it '
    'to be set to 1 if it was previously negative)')
_TERMINAL_PHASES = ('Succeeded', 'Failed')


def _containers(spec) -> list:
    if not isinstance(spec, dict):
        return []
    return [container for key in ('initContainers', 'containers')
            for container in spec.get(key) or []
            if isinstance(container, dict)]


def _prepare_pod(obj: dict, old: Optional[dict]) -> None:
    """Default a Pod's spec (or a workload's pod template) as the API
    does."""
    spec = obj.setdefault('spec', {})
    if not isinstance(spec, dict):
        return
    for key, value in _POD_SPEC_DEFAULTS.items():
        spec.setdefault(key, copy.deepcopy(value))
    for container in _containers(spec):
        image = str(container.get('image') or '')
        tagged = ':' in image.rsplit('/', 1)[-1] or '@' in image
        container.setdefault('imagePullPolicy', 'IfNotPresent'
                             if tagged and not image.endswith(':latest')
                             else 'Always')
        container.setdefault('terminationMessagePath',
                             '/dev/termination-log')
        container.setdefault('terminationMessagePolicy', 'File')
        container.setdefault('resources', {})
    for volume in spec.get('volumes') or []:
        if isinstance(volume, dict) and 'emptyDir' in volume \
                and volume['emptyDir'] is None:
            volume['emptyDir'] = {}


def _pod_spec_errors(spec, prefix: str = 'spec') -> list:
    if not isinstance(spec, dict):
        return [_required(prefix)]
    containers = spec.get('containers') or []
    errors = [] if containers else [_required(f'{prefix}.containers')]
    names = set()
    for index, container in enumerate(containers):
        field = f'{prefix}.containers[{index}]'
        if not isinstance(container, dict):
            errors.append(_required(field))
            continue
        name = container.get('name')
        if not name:
            errors.append(_required(f'{field}.name'))
        elif name in names:
            errors.append((f'{field}.name', 'FieldValueDuplicate',
                           f'Duplicate value: "{name}"'))
        names.add(name)
        if not container.get('image'):
            errors.append(_required(f'{field}.image'))
    volumes = set()
    for index, volume in enumerate(spec.get('volumes') or []):
        name = volume.get('name') if isinstance(volume, dict) else None
        if not name:
            errors.append(_required(f'{prefix}.volumes[{index}].name'))
        elif name in volumes:
            errors.append((f'{prefix}.volumes[{index}].name',
                           'FieldValueDuplicate',
                           f'Duplicate value: "{name}"'))
        volumes.add(name)
    policy = spec.get('restartPolicy')
    if policy not in _RESTART_POLICIES:
        errors.append((f'{prefix}.restartPolicy', 'FieldValueNotSupported',
                       f'Unsupported value: "{policy}": supported values: '
                       '"Always", "OnFailure", "Never"'))
    return errors


def _pod_fixed_spec(spec: dict) -> dict:
    """The part of a Pod's spec that may not change after creation."""
    fixed = {key: value for key, value in spec.items()
             if key not in ('activeDeadlineSeconds', 'tolerations')}
    for key in ('initContainers', 'containers'):
        if key in fixed:
            fixed[key] = [{k: v for k, v in container.items()
                           if k != 'image'} if isinstance(container, dict)
                          else container for container in fixed[key]]
    return fixed


def _pod_errors(obj: dict, old: Optional[dict]) -> list:
    spec = obj.get('spec') or {}
    errors = _pod_spec_errors(spec)
    if old and isinstance(spec, dict) and _pod_fixed_spec(spec) != \
            _pod_fixed_spec(old.get('spec') or {}):
        errors.append(('spec', 'FieldValueForbidden', _POD_UPDATE_FORBIDDEN))
    return errors


def _qos_class(spec: dict) -> str:
    resources = [container.get('resources') or {}
                 for container in _containers(spec)]
    if not any(res.get('requests') or res.get('limits')
               for res in resources):
        return 'BestEffort'
    if all(all((res.get('limits') or {}).get(kind) is not None
               and (res.get('requests') or {}).get(
                   kind, res['limits'][kind]) == res['limits'][kind]
               for kind in ('cpu', 'memory')) for res in resources):
        return 'Guaranteed'
    return 'Burstable'


def _pod_status(obj: dict) -> dict:
    """A new Pod waits (Pending) until the controller, as its node's
    kubelet, runs it."""
    return {'phase': 'Pending', 'qosClass': _qos_class(obj['spec'])}


def _pod_grace(pod: dict, options: dict) -> int:
    """Seconds of a Pod's graceful deletion: none for a pod that no
    kubelet runs (unbound, or finished), else the DeleteOptions' or the
    pod's terminationGracePeriodSeconds."""
    spec = pod.get('spec') or {}
    if (not spec.get('nodeName')
            or (pod.get('status') or {}).get('phase') in _TERMINAL_PHASES):
        return 0
    grace = options.get('gracePeriodSeconds')
    if grace is None or int(grace) < 0:
        grace = spec.get('terminationGracePeriodSeconds', 30)
    return max(0, int(grace))


def _pod_ready(pod: dict) -> bool:
    return any(condition.get('type') == 'Ready'
               and condition.get('status') == 'True'
               for condition in (pod.get('status') or {}).get('conditions')
               or [])


def _controller_uid(obj: dict) -> Optional[str]:
    """The uid of the object's controller (its ownerReference with
    controller: true)."""
    return next((ref.get('uid') for ref
                 in obj['metadata'].get('ownerReferences') or []
                 if ref.get('controller')), None)


# Workloads (ReplicaSets and DaemonSets): a selector and a pod template.

def _prepare_template(obj: dict) -> dict:
    spec = obj.setdefault('spec', {})
    template = spec.get('template')
    if isinstance(template, dict):
        _prepare_pod(template, None)
    return spec


def _prepare_replica_set(obj: dict, old: Optional[dict]) -> None:
    _prepare_template(obj).setdefault('replicas', 1)


def _prepare_daemon_set(obj: dict, old: Optional[dict]) -> None:
    spec = _prepare_template(obj)
    spec.setdefault('updateStrategy', {
        'type': 'RollingUpdate',
        'rollingUpdate': {'maxUnavailable': 1, 'maxSurge': 0}})
    spec.setdefault('revisionHistoryLimit', 10)


def _selector_errors(field: str, selector) -> list:
    if not isinstance(selector, dict):
        return []
    errors = []
    for index, expression in enumerate(
            selector.get('matchExpressions') or []):
        operator = (expression or {}).get('operator')
        values = (expression or {}).get('values') or []
        where = f'{field}.matchExpressions[{index}]'
        if operator not in ('In', 'NotIn', 'Exists', 'DoesNotExist'):
            errors.append((f'{where}.operator', 'FieldValueInvalid',
                           f'Invalid value: "{operator}": not a valid '
                           'selector operator'))
        elif (operator in ('In', 'NotIn')) != bool(values):
            errors.append((f'{where}.values', 'FieldValueForbidden'
                           if values else 'FieldValueRequired',
                           'Forbidden: may not be specified when `operator`'
                           ' is \'Exists\' or \'DoesNotExist\'' if values
                           else 'Required value: must be specified when '
                           '`operator` is \'In\' or \'NotIn\''))
    return errors


def _workload_errors(obj: dict, old: Optional[dict]) -> list:
    spec = obj.get('spec') or {}
    selector = spec.get('selector')
    template = spec.get('template') or {}
    errors = []
    if not isinstance(selector, dict) or not (
            selector.get('matchLabels') or selector.get('matchExpressions')):
        errors.append(_required('spec.selector'))
    else:
        errors += _selector_errors('spec.selector', selector)
        labels = (template.get('metadata') or {}).get('labels') or {}
        if not errors and not _selects(selector, labels):
            errors.append(('spec.template.metadata.labels',
                           'FieldValueInvalid',
                           f'Invalid value: {json.dumps(labels)}: '
                           '`selector` does not match template `labels`'))
    errors += _pod_spec_errors(template.get('spec'), 'spec.template.spec')
    replicas = spec.get('replicas', 0)
    if not isinstance(replicas, int) or replicas < 0:
        errors.append(('spec.replicas', 'FieldValueInvalid',
                       f'Invalid value: {json.dumps(replicas)}: must be '
                       'greater than or equal to 0'))
    if old and selector != (old.get('spec') or {}).get('selector'):
        errors.append(_immutable('spec.selector', selector))
    return errors


def _replica_set_status(replica_set: dict, pods: list) -> dict:
    selector = replica_set['spec'].get('selector')
    ready = sum(map(_pod_ready, pods))
    return {'replicas': len(pods),
            'fullyLabeledReplicas': sum(_selects(selector, _labels(pod))
                                        for pod in pods),
            'readyReplicas': ready, 'availableReplicas': ready,
            'observedGeneration': replica_set['metadata']['generation']}


def _daemon_set_status(daemon_set: dict, pods: list) -> dict:
    """As the DaemonSet controller would report its pods; with no
    controller creating them, the desired pods are the ones there."""
    ready = sum(map(_pod_ready, pods))
    return {'currentNumberScheduled': len(pods),
            'desiredNumberScheduled': len(pods), 'numberMisscheduled': 0,
            'numberReady': ready, 'numberAvailable': ready,
            'updatedNumberScheduled': len(pods),
            'observedGeneration': daemon_set['metadata']['generation']}


def _zero_status(obj: dict) -> dict:
    return dict.fromkeys(
        ('replicas',) if obj['kind'] == 'ReplicaSet' else
        ('currentNumberScheduled', 'desiredNumberScheduled',
         'numberMisscheduled', 'numberReady'), 0)


# PodDisruptionBudgets.

_PERCENT = re.compile(r'[0-9]+%')
_UNHEALTHY_POD_EVICTION_POLICIES = ('IfHealthyBudget', 'AlwaysAllow')


def _int_or_percent_problem(value) -> Optional[str]:
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        return 'must be an integer or a percentage'
    if isinstance(value, int):
        return 'must be greater than or equal to 0' if value < 0 else None
    if not _PERCENT.fullmatch(value):
        return ("a valid percent string must be a numeric string followed "
                "by an ending '%' (e.g. '1%',  or '93%', regex used for "
                "validation is '[0-9]+%')")
    return 'must not be greater than 100%' if int(value[:-1]) > 100 else None


def _budget_errors(obj: dict, old: Optional[dict]) -> list:
    spec = obj.get('spec') or {}
    errors = []
    if spec.get('minAvailable') is not None and \
            spec.get('maxUnavailable') is not None:
        errors.append(('spec', 'FieldValueInvalid',
                       f'Invalid value: {json.dumps(spec)}: minAvailable '
                       'and maxUnavailable cannot be both set'))
    for key in ('minAvailable', 'maxUnavailable'):
        value = spec.get(key)
        problem = None if value is None else _int_or_percent_problem(value)
        if problem:
            errors.append((f'spec.{key}', 'FieldValueInvalid',
                           f'Invalid value: {json.dumps(value)}: {problem}'))
    errors += _selector_errors('spec.selector', spec.get('selector'))
    policy = spec.get('unhealthyPodEvictionPolicy')
    if policy is not None and policy not in _UNHEALTHY_POD_EVICTION_POLICIES:
        errors.append(('spec.unhealthyPodEvictionPolicy',
                       'FieldValueNotSupported',
                       f'Unsupported value: "{policy}": supported values: '
                       '"AlwaysAllow", "IfHealthyBudget"'))
    return errors


def _budget_status(obj: dict) -> dict:
    return dict.fromkeys(('disruptionsAllowed', 'currentHealthy',
                          'desiredHealthy', 'expectedPods'), 0)


def _scaled(value, total: int) -> int:
    """An int-or-percent of ``total``, a percentage rounded up."""
    if isinstance(value, str):
        return -(-int(value[:-1]) * total // 100)
    return int(value)


def _budget_pods(budget: dict, pods) -> list:
    """The pods a budget's selector picks, as the disruption controller
    lists them: a missing selector picks none, an empty one all."""
    selector = (budget.get('spec') or {}).get('selector')
    if not isinstance(selector, dict):
        return []
    return [pod for pod in pods
            if pod['metadata']['namespace'] == budget['metadata']['namespace']
            and _selects(selector, _labels(pod))]


def _budget_covers(budget: dict, pod: dict) -> bool:
    """Whether an eviction of the pod must ask this budget: its selector,
    if not empty, matches the pod."""
    selector = (budget.get('spec') or {}).get('selector') or {}
    return bool(selector.get('matchLabels') or selector.get(
        'matchExpressions')) and bool(_budget_pods(budget, [pod]))


def _expected_pods(spec: dict, pods: list, replicas: dict) -> int:
    """How many pods a budget expects: with an integer minAvailable, the
    pods it selects; otherwise the scale of their controllers (a
    ReplicaSet's replicas; for another controller, its pods here). Pods
    without a controller do not count, as in the disruption controller."""
    if isinstance(spec.get('minAvailable'), int) and \
            spec.get('maxUnavailable') is None:
        return len(pods)
    scale = {}
    for pod in pods:
        uid = _controller_uid(pod)
        if uid is not None:
            scale[uid] = replicas.get(uid, scale.get(uid, 0) + 1)
    return sum(scale.values())


def _desired_healthy(spec: dict, expected: int) -> int:
    if spec.get('maxUnavailable') is not None:
        return max(0, expected - _scaled(spec['maxUnavailable'], expected))
    if spec.get('minAvailable') is not None:
        return _scaled(spec['minAvailable'], expected)
    return 0


def _allowed_condition(allowed: int, generation: int,
                       old: Optional[dict]) -> dict:
    status = 'True' if allowed > 0 else 'False'
    changed = not old or old.get('status') != status
    return {'type': 'DisruptionAllowed', 'status': status,
            'reason': 'SufficientPods' if allowed > 0 else 'InsufficientPods',
            'message': '', 'observedGeneration': generation,
            'lastTransitionTime': _now() if changed
            else old.get('lastTransitionTime')}


def _pending_status(obj: dict) -> dict:
    return {'phase': 'Pending'}


def _active_status(obj: dict) -> dict:
    return {'phase': 'Active'}


def _client_status(obj: dict) -> dict:
    """Keep the status a client created the object with (as kubelet
    registers its Node with its conditions)."""
    return copy.deepcopy(obj.get('status') or {})


# --- patches and selectors -------------------------------------------------

def _merge(target, patch, strategic: bool):
    """JSON merge patch (RFC 7386), or with ``strategic`` a strategic one.

    The strategic variant honours the map directives kubectl may send but
    replaces lists whole, which for the kinds here differs from Kubernetes
    only for lists with a merge key (finalizers, ownerReferences, a Node's
    conditions and addresses).
    """
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    if strategic and patch.get('$patch') == 'replace':
        return _merge({}, {k: v for k, v in patch.items() if k != '$patch'},
                      strategic)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    if strategic and '$retainKeys' in patch:
        result = {k: v for k, v in result.items()
                  if k in patch['$retainKeys']}
    for key, value in patch.items():
        if strategic and key.startswith('$deleteFromPrimitiveList/'):
            name = key.split('/', 1)[1]
            result[name] = [item for item in result.get(name, [])
                            if item not in value]
        elif strategic and key.startswith('$'):
            continue  # $setElementOrder/..., or a directive handled above
        elif value is None or (strategic and isinstance(value, dict)
                               and value.get('$patch') == 'delete'):
            result.pop(key, None)
        else:
            result[key] = _merge(result.get(key), value, strategic)
    return result


def _json_patch(doc: dict, operations) -> dict:
    """Apply an RFC 6902 JSON patch."""
    def pointer(path):
        if path and not path.startswith('/'):
            raise ValueError(f'invalid JSON pointer {path!r}')
        return [token.replace('~1', '/').replace('~0', '~')
                for token in path.split('/')[1:]]

    def get(root, tokens):
        for token in tokens:
            root = root[int(token)] if isinstance(root, list) else root[token]
        return root

    def remove(root, tokens):
        parent = get(root, tokens[:-1])
        return parent.pop(int(tokens[-1]) if isinstance(parent, list)
                          else tokens[-1])

    def add(root, tokens, value):
        if not tokens:
            return value
        parent = get(root, tokens[:-1])
        if isinstance(parent, list):
            parent.insert(len(parent) if tokens[-1] == '-'
                          else int(tokens[-1]), value)
        else:
            parent[tokens[-1]] = value
        return root

    if not isinstance(operations, list):
        raise ApiError(400, 'BadRequest',
                       'a JSON patch must be a list of operations')
    doc = copy.deepcopy(doc)
    for operation in operations:
        op = operation.get('op')
        try:
            path = pointer(operation.get('path', ''))
            if op == 'test':
                if get(doc, path) != operation.get('value'):
                    raise ValueError(f'{operation["path"]} differs')
            elif op == 'remove':
                remove(doc, path)
            elif op in ('add', 'replace'):
                if op == 'replace':
                    get(doc, path)  # it must exist
                    if path:
                        remove(doc, path)
                doc = add(doc, path, copy.deepcopy(operation['value']))
            elif op in ('move', 'copy'):
                source = pointer(operation['from'])
                value = (remove(doc, source) if op == 'move'
                         else copy.deepcopy(get(doc, source)))
                doc = add(doc, path, value)
            else:
                raise ApiError(400, 'BadRequest',
                               f'unsupported JSON patch operation {op!r}')
        except (KeyError, IndexError, ValueError, TypeError) as error:
            raise ApiError(422, 'Invalid',
                           f'the JSON patch operation {op} failed: {error}')
    return doc


def _apply_patch(obj: dict, content_type: str, body: bytes) -> dict:
    media = content_type.split(';')[0].strip()
    if media == 'application/apply-patch+yaml':
        raise ApiError(415, 'UnsupportedMediaType', 'server-side apply is '
                                                    'not supported here')
    if media == 'application/json-patch+json':
        return _json_patch(obj, _decode(body))
    if media in ('application/merge-patch+json',
                 'application/strategic-merge-patch+json'):
        patch = _decode(body)
        if not isinstance(patch, dict):
            raise ApiError(400, 'BadRequest',
                           'a merge patch must be a JSON object')
        return _merge(obj, patch, strategic='strategic' in media)
    raise ApiError(415, 'UnsupportedMediaType',
                   f'the body of the request was in an unknown format '
                   f'("{media}")')


def _field_value(obj: dict, path: str) -> str:
    """A field as field selectors see it: booleans as "true"/"false",
    a missing field as ""."""
    value = obj
    for part in path.split('.'):
        value = value.get(part) if isinstance(value, dict) else None
    if isinstance(value, bool):
        return 'true' if value else 'false'
    return '' if value is None else str(value)


def _selector(query: dict,
              res: Optional[_Resource] = None) -> Callable[[dict], bool]:
    """Build a predicate from fieldSelector (the resource's field labels)
    and an equality labelSelector."""
    tests = []
    labels = ('metadata.name', 'metadata.namespace',
              *(res.fields if res else ()))
    for term in filter(None, query.get('fieldSelector', '').split(',')):
        match = re.fullmatch(r'([^!=]+)(==|=|!=)(.*)', term)
        if not match or match[1] not in labels:
            raise ApiError(400, 'BadRequest', 'field label not supported: '
                                              + term.split('=')[0])
        negate, value = match[2] == '!=', match[3]
        tests.append(lambda obj, f=match[1], n=negate, v=value:
                     (_field_value(obj, f) == v) != n)
    for term in filter(None, query.get('labelSelector', '').split(',')):
        match = re.fullmatch(r'(!?)([\w./-]+)(?:(==|=|!=)([\w.-]*))?',
                             term.strip())
        if not match:
            raise ApiError(400, 'BadRequest',
                           f'unsupported label selector {term!r} '
                           '(only =, ==, != and existence)')
        absent, key, operator, value = match.groups()
        if operator:
            tests.append(lambda obj, k=key, n=operator == '!=', v=value:
                         (_labels(obj).get(k) == v) != n)
        else:
            tests.append(lambda obj, k=key, n=bool(absent):
                         (k in _labels(obj)) != n)
    return lambda obj: all(test(obj) for test in tests)


def _selects(selector: Optional[dict], labels: dict) -> bool:
    """Evaluate a PVC's spec.selector (a LabelSelector) on a PV's labels."""
    selector = selector or {}
    for key, value in (selector.get('matchLabels') or {}).items():
        if labels.get(key) != value:
            return False
    for expression in selector.get('matchExpressions') or []:
        key, values = expression['key'], expression.get('values') or []
        present = key in labels
        holds = {'In': present and labels[key] in values,
                 'NotIn': not present or labels[key] not in values,
                 'Exists': present, 'DoesNotExist': not present}
        if not holds.get(expression['operator'], False):
            return False
    return True


# --- protobuf request bodies -----------------------------------------------
# kubectl's typed clients ("kubectl create namespace|secret|pdb|...", and
# the DeleteOptions of "kubectl drain --disable-eviction"; kubectl 1.32 was
# seen to send its Evictions as JSON) send application/vnd.kubernetes.protobuf:
# b"k8s\0" and a runtime.Unknown whose raw field is the object's message.
# Responses are JSON, which the clients accept too. A schema maps field
# numbers (from the API's generated.proto files) to a JSON name and a type:
# "string", "bytes", "bool", "int", "intstr" (an IntOrString), a nested
# schema, ("repeated", type) or ("map", value type). Fields not in a schema
# (such as the server-set timestamps and status) are ignored.

_PB_MAGIC = b'k8s\x00'
_PB_UNKNOWN = {1: ('typeMeta', {1: ('apiVersion', 'string'),
                                2: ('kind', 'string')}),
               2: ('raw', 'raw'), 3: ('contentEncoding', 'string')}
_PB_STRINGS = ('repeated', 'string')
_PB_OBJECT_META = {
    1: ('name', 'string'), 2: ('generateName', 'string'),
    3: ('namespace', 'string'), 5: ('uid', 'string'),
    6: ('resourceVersion', 'string'),
    11: ('labels', ('map', 'string')),
    12: ('annotations', ('map', 'string')),
    13: ('ownerReferences', ('repeated', {
        5: ('apiVersion', 'string'), 1: ('kind', 'string'),
        3: ('name', 'string'), 4: ('uid', 'string'),
        6: ('controller', 'bool'), 7: ('blockOwnerDeletion', 'bool')})),
    14: ('finalizers', _PB_STRINGS)}
_PB_OBJECT_REFERENCE = {
    1: ('kind', 'string'), 2: ('namespace', 'string'), 3: ('name', 'string'),
    4: ('uid', 'string'), 5: ('apiVersion', 'string'),
    6: ('resourceVersion', 'string'), 7: ('fieldPath', 'string')}
_PB_DELETE_OPTIONS = {
    1: ('gracePeriodSeconds', 'int'),
    2: ('preconditions', {1: ('uid', 'string'),
                          2: ('resourceVersion', 'string')}),
    3: ('orphanDependents', 'bool'), 4: ('propagationPolicy', 'string'),
    5: ('dryRun', _PB_STRINGS)}
_PB_INT_OR_STRING = {1: ('type', 'int'), 2: ('intVal', 'int'),
                     3: ('strVal', 'string')}
_PB_LABEL_SELECTOR = {
    1: ('matchLabels', ('map', 'string')),
    2: ('matchExpressions', ('repeated', {
        1: ('key', 'string'), 2: ('operator', 'string'),
        3: ('values', _PB_STRINGS)}))}
_PB_SCHEMAS = {  # kind -> schema of its message
    'Namespace': {1: ('metadata', _PB_OBJECT_META),
                  2: ('spec', {1: ('finalizers', _PB_STRINGS)})},
    'ServiceAccount': {
        1: ('metadata', _PB_OBJECT_META),
        2: ('secrets', ('repeated', _PB_OBJECT_REFERENCE)),
        3: ('imagePullSecrets', ('repeated', {1: ('name', 'string')})),
        4: ('automountServiceAccountToken', 'bool')},
    'Secret': {1: ('metadata', _PB_OBJECT_META),
               2: ('data', ('map', 'bytes')), 3: ('type', 'string'),
               4: ('stringData', ('map', 'string')),
               5: ('immutable', 'bool')},
    'ConfigMap': {1: ('metadata', _PB_OBJECT_META),
                  2: ('data', ('map', 'string')),
                  3: ('binaryData', ('map', 'bytes')),
                  4: ('immutable', 'bool')},
    'ClusterRole': {1: ('metadata', _PB_OBJECT_META),
                    2: ('rules', ('repeated', {
                        1: ('verbs', _PB_STRINGS),
                        2: ('apiGroups', _PB_STRINGS),
                        3: ('resources', _PB_STRINGS),
                        4: ('resourceNames', _PB_STRINGS),
                        5: ('nonResourceURLs', _PB_STRINGS)}))},
    'ClusterRoleBinding': {
        1: ('metadata', _PB_OBJECT_META),
        2: ('subjects', ('repeated', {
            1: ('kind', 'string'), 2: ('apiGroup', 'string'),
            3: ('name', 'string'), 4: ('namespace', 'string')})),
        3: ('roleRef', {1: ('apiGroup', 'string'), 2: ('kind', 'string'),
                        3: ('name', 'string')})},
    'DeleteOptions': _PB_DELETE_OPTIONS,
    # policy/v1
    'Eviction': {1: ('metadata', _PB_OBJECT_META),
                 2: ('deleteOptions', _PB_DELETE_OPTIONS)},
    'PodDisruptionBudget': {
        1: ('metadata', _PB_OBJECT_META),
        2: ('spec', {1: ('minAvailable', 'intstr'),
                     2: ('selector', _PB_LABEL_SELECTOR),
                     3: ('maxUnavailable', 'intstr'),
                     4: ('unhealthyPodEvictionPolicy', 'string')})},
}


def _decode_protobuf(body: bytes) -> dict:
    try:
        if not body.startswith(_PB_MAGIC):
            raise ValueError('no "k8s" envelope')
        unknown = _pb_message(body[len(_PB_MAGIC):], _PB_UNKNOWN)
        type_meta = unknown.get('typeMeta') or {}
        schema = _PB_SCHEMAS.get(type_meta.get('kind'))
        if schema is None or unknown.get('contentEncoding'):
            raise ApiError(415, 'UnsupportedMediaType', (
                f'this test server cannot read {type_meta.get("kind")} '
                'objects in protobuf; send JSON'))
        return {**type_meta, **_pb_message(unknown.get('raw', b''), schema)}
    except (ValueError, IndexError, TypeError, AttributeError) as error:
        raise ApiError(400, 'BadRequest',
                       f'the request body is not valid protobuf: {error}')


def _pb_varint(data: bytes, pos: int) -> tuple:
    result = shift = 0
    while True:
        byte = data[pos]
        result |= (byte & 0x7f) << shift
        pos, shift = pos + 1, shift + 7
        if byte < 0x80:
            return result, pos


def _pb_fields(data: bytes) -> Iterator[tuple]:
    """(field number, value) of a message: ints for varints, bytes for
    everything else."""
    pos = 0
    while pos < len(data):
        key, pos = _pb_varint(data, pos)
        wire_type = key & 7
        if wire_type == 0:
            value, pos = _pb_varint(data, pos)
        else:
            if wire_type == 2:
                size, pos = _pb_varint(data, pos)
            elif wire_type in (1, 5):
                size = 8 if wire_type == 1 else 4
            else:
                raise ValueError(f'unsupported wire type {wire_type}')
            if pos + size > len(data):
                raise ValueError('truncated message')
            value, pos = data[pos:pos + size], pos + size
        yield key >> 3, value


def _pb_message(data: bytes, schema: dict) -> dict:
    obj = {}
    for number, value in _pb_fields(data):
        if number not in schema:
            continue
        name, kind = schema[number]
        if isinstance(kind, tuple) and kind[0] == 'map':
            entry = _pb_message(value, {1: ('key', 'string'),
                                        2: ('value', kind[1])})
            obj.setdefault(name, {})[entry.get('key', '')] = entry.get(
                'value', '')
        elif isinstance(kind, tuple):
            obj.setdefault(name, []).append(_pb_value(value, kind[1]))
        elif value != b'' or kind != 'string':
            # Go's encoder writes empty strings, which JSON would omit.
            obj[name] = _pb_value(value, kind)
    return obj


def _pb_value(value, kind):
    if kind == 'raw':
        return bytes(value)
    if kind == 'string':
        return value.decode()
    if kind == 'bytes':
        return base64.b64encode(value).decode()
    if kind == 'bool':
        return bool(value)
    if kind == 'int':  # int64 in two's complement
        return value - (1 << 64) if value >= 1 << 63 else value
    if kind == 'intstr':
        both = _pb_message(value, _PB_INT_OR_STRING)
        return (both.get('strVal', '') if both.get('type') == 1
                else both.get('intVal', 0))
    return _pb_message(value, kind)


# --- server-side printing ("kubectl get" tables) ---------------------------

def _age(obj: dict) -> str:
    created = datetime.datetime.strptime(
        obj['metadata']['creationTimestamp'], '%Y-%m-%dT%H:%M:%SZ'
    ).replace(tzinfo=datetime.timezone.utc)
    seconds = max(0, int((datetime.datetime.now(datetime.timezone.utc)
                          - created).total_seconds()))
    for limit, unit, size in ((120, 's', 1), (10800, 'm', 60),
                              (172800, 'h', 3600)):
        if seconds < limit:
            return f'{seconds // size}{unit}'
    return f'{seconds // 86400}d'


def _status_column(obj: dict) -> str:
    if obj['metadata'].get('deletionTimestamp'):
        return 'Terminating'
    return (obj.get('status') or {}).get('phase', '')


def _modes(modes) -> str:
    return ','.join(_ACCESS_MODES.get(mode, mode) for mode in modes or [])


def _pv_cells(pv: dict) -> list:
    spec = pv.get('spec') or {}
    ref = spec.get('claimRef')
    return [pv['metadata']['name'],
            (spec.get('capacity') or {}).get('storage', ''),
            _modes(spec.get('accessModes')),
            spec.get('persistentVolumeReclaimPolicy', ''),
            _status_column(pv),
            f'{ref.get("namespace")}/{ref.get("name")}' if ref else '',
            spec.get('storageClassName', ''),
            spec.get('volumeAttributesClassName') or '<unset>',
            (pv.get('status') or {}).get('reason', ''),
            _age(pv),
            spec.get('volumeMode', '')]


def _pvc_cells(pvc: dict) -> list:
    spec, status = pvc.get('spec') or {}, pvc.get('status') or {}
    return [pvc['metadata']['name'],
            _status_column(pvc),
            spec.get('volumeName', ''),
            (status.get('capacity') or {}).get('storage', ''),
            _modes(status.get('accessModes')),
            spec.get('storageClassName', ''),
            spec.get('volumeAttributesClassName') or '<unset>',
            _age(pvc),
            spec.get('volumeMode', '')]


def _node_cells(node: dict) -> list:
    """As kubectl's node printer: status from the Ready condition, roles
    from the node-role.kubernetes.io/<role> labels."""
    status, labels = node.get('status') or {}, _labels(node)
    ready = [condition.get('status') for condition
             in status.get('conditions') or []
             if condition.get('type') == 'Ready']
    state = (['Ready' if ready[-1] == 'True' else 'NotReady'] if ready
             else ['Unknown'])
    if (node.get('spec') or {}).get('unschedulable'):
        state.append('SchedulingDisabled')
    roles = {key.split('/', 1)[1] for key in labels
             if key.startswith('node-role.kubernetes.io/')
             and key.split('/', 1)[1]}
    if labels.get('kubernetes.io/role'):
        roles.add(labels['kubernetes.io/role'])
    info = status.get('nodeInfo') or {}

    def address(kind):
        return next((entry.get('address') for entry
                     in status.get('addresses') or []
                     if entry.get('type') == kind), '<none>')

    return [node['metadata']['name'], ','.join(state),
            ','.join(sorted(roles)) or '<none>', _age(node),
            info.get('kubeletVersion', ''),
            address('InternalIP'), address('ExternalIP'),
            info.get('osImage') or '<unknown>',
            info.get('kernelVersion') or '<unknown>',
            info.get('containerRuntimeVersion') or '<unknown>']


def _namespace_cells(namespace: dict) -> list:
    return [namespace['metadata']['name'], _status_column(namespace),
            _age(namespace)]


def _service_account_cells(account: dict) -> list:
    return [account['metadata']['name'],
            str(len(account.get('secrets') or [])), _age(account)]


def _secret_cells(secret: dict) -> list:
    return [secret['metadata']['name'], secret.get('type', ''),
            str(len(secret.get('data') or {})), _age(secret)]


def _config_map_cells(config_map: dict) -> list:
    return [config_map['metadata']['name'],
            str(len(config_map.get('data') or {})
                + len(config_map.get('binaryData') or {})),
            _age(config_map)]


def _cluster_role_cells(role: dict) -> list:
    return [role['metadata']['name'], role['metadata']['creationTimestamp']]


def _binding_cells(binding: dict) -> list:
    ref, subjects = binding.get('roleRef') or {}, binding.get('subjects') or []

    def names(kind):
        return ','.join(
            f'{subject.get("namespace")}/{subject.get("name")}'
            if kind == 'ServiceAccount' else subject.get('name', '')
            for subject in subjects if subject.get('kind') == kind)

    return [binding['metadata']['name'],
            f'{ref.get("kind", "")}/{ref.get("name", "")}', _age(binding),
            names('User'), names('Group'), names('ServiceAccount')]


def _pod_cells(pod: dict) -> list:
    """As kubectl's pod printer: ready containers, the phase (or
    Terminating), restarts; wide: IP and node."""
    spec, status = pod.get('spec') or {}, pod.get('status') or {}
    containers = status.get('containerStatuses') or []
    state = status.get('reason') or status.get('phase', '')
    if pod['metadata'].get('deletionTimestamp'):
        state = 'Terminating'
    return [pod['metadata']['name'],
            f'{sum(bool(c.get("ready")) for c in containers)}/'
            f'{len(spec.get("containers") or [])}',
            state, str(sum(c.get('restartCount', 0) for c in containers)),
            _age(pod), status.get('podIP') or '<none>',
            spec.get('nodeName') or '<none>',
            status.get('nominatedNodeName') or '<none>', '<none>']


def _selector_text(selector: Optional[dict]) -> str:
    """A LabelSelector as kubectl writes it (metav1.FormatLabelSelector)."""
    selector = selector or {}
    terms = [f'{key}={value}' for key, value
             in sorted((selector.get('matchLabels') or {}).items())]
    for expression in selector.get('matchExpressions') or []:
        key, operator = expression.get('key'), expression.get('operator')
        values = ','.join(expression.get('values') or [])
        terms.append({'In': f'{key} in ({values})',
                      'NotIn': f'{key} notin ({values})', 'Exists': key,
                      'DoesNotExist': f'!{key}'}.get(operator, key))
    return ','.join(terms) or '<none>'


def _template_cells(workload: dict) -> list:
    """The wide columns of a workload: containers, images, selector."""
    spec = workload.get('spec') or {}
    containers = ((spec.get('template') or {}).get('spec') or {}).get(
        'containers') or []
    return [','.join(c.get('name', '') for c in containers),
            ','.join(c.get('image', '') for c in containers),
            _selector_text(spec.get('selector'))]


def _replica_set_cells(replica_set: dict) -> list:
    spec, status = replica_set.get('spec') or {}, \
        replica_set.get('status') or {}
    return [replica_set['metadata']['name'], str(spec.get('replicas', 0)),
            str(status.get('replicas', 0)),
            str(status.get('readyReplicas', 0)), _age(replica_set),
            *_template_cells(replica_set)]


def _daemon_set_cells(daemon_set: dict) -> list:
    status = daemon_set.get('status') or {}
    node_selector = (((daemon_set.get('spec') or {}).get('template') or {})
                     .get('spec') or {}).get('nodeSelector') or {}
    return [daemon_set['metadata']['name'],
            *(str(status.get(key, 0)) for key in (
                'desiredNumberScheduled', 'currentNumberScheduled',
                'numberReady', 'updatedNumberScheduled', 'numberAvailable')),
            ','.join(f'{key}={value}' for key, value
                     in sorted(node_selector.items())) or '<none>',
            _age(daemon_set), *_template_cells(daemon_set)]


def _budget_cells(budget: dict) -> list:
    spec = budget.get('spec') or {}
    return [budget['metadata']['name'],
            *(str(spec[key]) if spec.get(key) is not None else 'N/A'
              for key in ('minAvailable', 'maxUnavailable')),
            str((budget.get('status') or {}).get('disruptionsAllowed', 0)),
            _age(budget)]


def _table(res: _Resource, objects: list, metadata: dict) -> dict:
    """Render objects as the meta.k8s.io Table that "kubectl get" prints."""
    columns = ([(name, 0) for name in res.columns]
               + [(name, 1) for name in res.wide_columns])  # 1: -o wide
    cells = res.cells or (lambda obj: [obj['metadata']['name'], _age(obj)])
    return {
        'kind': 'Table', 'apiVersion': 'meta.k8s.io/v1',
        'metadata': metadata,
        'columnDefinitions': [
            {'name': name, 'type': 'string',
             'format': 'name' if name == 'Name' else '', 'description': '',
             'priority': priority}
            for name, priority in columns],
        'rows': [{'cells': cells(obj),
                  'object': {'kind': 'PartialObjectMetadata',
                             'apiVersion': 'meta.k8s.io/v1',
                             'metadata': obj['metadata']}}
                 for obj in objects],
    }


# --- the kinds served ------------------------------------------------------

PV = _Resource(
    '', 'persistentvolumes', 'PersistentVolume', False, ('pv',),
    prepare=_prepare_pv, check=_pv_errors, new_status=_pending_status,
    finalizer=PV_PROTECTION,
    columns=('Name', 'Capacity', 'Access Modes', 'Reclaim Policy', 'Status',
             'Claim', 'StorageClass', 'VolumeAttributesClass', 'Reason',
             'Age'),
    wide_columns=('VolumeMode',), cells=_pv_cells)
PVC = _Resource(
    '', 'persistentvolumeclaims', 'PersistentVolumeClaim', True, ('pvc',),
    prepare=_prepare_pvc, check=_pvc_errors, new_status=_pending_status,
    finalizer=PVC_PROTECTION,
    columns=('Name', 'Status', 'Volume', 'Capacity', 'Access Modes',
             'StorageClass', 'VolumeAttributesClass', 'Age'),
    wide_columns=('VolumeMode',), cells=_pvc_cells)
NODE = _Resource(
    '', 'nodes', 'Node', False, ('no',), new_status=_client_status,
    fields=('spec.unschedulable',),
    columns=('Name', 'Status', 'Roles', 'Age', 'Version'),
    wide_columns=('Internal-IP', 'External-IP', 'OS-Image', 'Kernel-Version',
                  'Container-Runtime'),
    cells=_node_cells)
NAMESPACE = _Resource(
    '', 'namespaces', 'Namespace', False, ('ns',), name_rule='label',
    prepare=_prepare_namespace, new_status=_active_status,
    protected=frozenset({'default', 'kube-system', 'kube-public'}),
    columns=('Name', 'Status', 'Age'), cells=_namespace_cells)
SERVICE_ACCOUNT = _Resource(
    '', 'serviceaccounts', 'ServiceAccount', True, ('sa',),
    columns=('Name', 'Secrets', 'Age'), cells=_service_account_cells)
SECRET = _Resource(
    '', 'secrets', 'Secret', True, prepare=_prepare_secret,
    check=_secret_errors, columns=('Name', 'Type', 'Data', 'Age'),
    cells=_secret_cells)
CONFIG_MAP = _Resource(
    '', 'configmaps', 'ConfigMap', True, ('cm',), check=_config_map_errors,
    columns=('Name', 'Data', 'Age'), cells=_config_map_cells)
POD = _Resource(
    '', 'pods', 'Pod', True, ('po',), prepare=_prepare_pod,
    check=_pod_errors, new_status=_pod_status, grace=_pod_grace,
    evictable=True,
    fields=('spec.nodeName', 'spec.restartPolicy', 'spec.schedulerName',
            'spec.serviceAccountName', 'status.phase', 'status.podIP',
            'status.nominatedNodeName'),
    columns=('Name', 'Ready', 'Status', 'Restarts', 'Age'),
    wide_columns=('IP', 'Node', 'Nominated Node', 'Readiness Gates'),
    cells=_pod_cells)
_WORKLOAD_WIDE_COLUMNS = ('Containers', 'Images', 'Selector')
DAEMON_SET = _Resource(
    APPS_GROUP, 'daemonsets', 'DaemonSet', True, ('ds',),
    prepare=_prepare_daemon_set, check=_workload_errors,
    new_status=_zero_status, generation=True,
    owned_status=_daemon_set_status,
    columns=('Name', 'Desired', 'Current', 'Ready', 'Up-to-date',
             'Available', 'Node Selector', 'Age'),
    wide_columns=_WORKLOAD_WIDE_COLUMNS, cells=_daemon_set_cells)
REPLICA_SET = _Resource(
    APPS_GROUP, 'replicasets', 'ReplicaSet', True, ('rs',),
    prepare=_prepare_replica_set, check=_workload_errors,
    new_status=_zero_status, generation=True,
    owned_status=_replica_set_status,
    columns=('Name', 'Desired', 'Current', 'Ready', 'Age'),
    wide_columns=_WORKLOAD_WIDE_COLUMNS, cells=_replica_set_cells)
POD_DISRUPTION_BUDGET = _Resource(
    POLICY_GROUP, 'poddisruptionbudgets', 'PodDisruptionBudget', True,
    ('pdb',), check=_budget_errors, new_status=_budget_status,
    generation=True,
    columns=('Name', 'Min Available', 'Max Unavailable',
             'Allowed Disruptions', 'Age'),
    cells=_budget_cells)
CLUSTER_ROLE = _Resource(
    RBAC_GROUP, 'clusterroles', 'ClusterRole', False,
    name_rule='path segment', check=_cluster_role_errors,
    columns=('Name', 'Created At'), cells=_cluster_role_cells)
CLUSTER_ROLE_BINDING = _Resource(
    RBAC_GROUP, 'clusterrolebindings', 'ClusterRoleBinding', False,
    name_rule='path segment', check=_binding_errors,
    columns=('Name', 'Role', 'Age'),
    wide_columns=('Users', 'Groups', 'ServiceAccounts'),
    cells=_binding_cells)

_RESOURCES = (PV, PVC, NODE, NAMESPACE, SERVICE_ACCOUNT, SECRET, CONFIG_MAP,
              POD, DAEMON_SET, REPLICA_SET, POD_DISRUPTION_BUDGET,
              CLUSTER_ROLE, CLUSTER_ROLE_BINDING)
# (group, version, plural) -> resource, to route resource requests.
_ROUTES = {(res.group, res.version, res.plural): res for res in _RESOURCES}


def _initial_objects() -> list:
    """(resource, body) of the objects a new server starts with."""
    return [
        *[(NAMESPACE, {'metadata': {'name': name}})
          for name in INITIAL_NAMESPACES],
        (CLUSTER_ROLE, {
            'metadata': {
                'name': CLUSTER_ADMIN,
                'labels': {'kubernetes.io/bootstrapping': 'rbac-defaults'},
                'annotations': {
                    'rbac.authorization.kubernetes.io/autoupdate': 'true'}},
            'rules': [{'apiGroups': ['*'], 'resources': ['*'],
                       'verbs': ['*']},
                      {'nonResourceURLs': ['*'], 'verbs': ['*']}]})]


def _discovery_entries(res: _Resource) -> list:
    """The entries of a resource (and its subresources) in discovery."""
    entry = {'name': res.plural, 'singularName': res.singular,
             'namespaced': res.namespaced, 'kind': res.kind,
             'verbs': ['create', 'delete', 'get', 'list', 'patch', 'update',
                       'watch']}
    if res.short_names:
        entry['shortNames'] = list(res.short_names)
    entries = [entry]
    if res.evictable:
        # drain finds the Eviction API (and its version) here.
        entries.append({'name': f'{res.plural}/eviction',
                        'singularName': '', 'namespaced': res.namespaced,
                        'group': POLICY_GROUP, 'version': 'v1',
                        'kind': 'Eviction', 'verbs': ['create']})
    if res.new_status is not None:
        entries.append({'name': f'{res.plural}/status', 'singularName': '',
                        'namespaced': res.namespaced, 'kind': res.kind,
                        'verbs': ['get', 'patch', 'update']})
    return entries


def _api_group(group: str) -> dict:
    versions = [{'groupVersion': f'{group}/{version}', 'version': version}
                for version in dict.fromkeys(
                    res.version for res in _RESOURCES if res.group == group)]
    return {'name': group, 'versions': versions,
            'preferredVersion': versions[0]}


# --- authentication and authorization --------------------------------------

@dataclasses.dataclass(frozen=True)
class _User:
    name: str
    groups: tuple


# The admin token's user: in system:masters, which RBAC does not restrict.
_ADMIN = _User('kubernetes-admin', ('system:masters',
                                    'system:authenticated'))
_HEALTH_PATHS = ('/healthz', '/livez', '/readyz')


def _is_public(path: str) -> bool:
    """Paths anyone may read, even without credentials."""
    return path == '/version' or any(
        path == health or path.startswith(health + '/')
        for health in _HEALTH_PATHS)


def _is_discovery(path: str) -> bool:
    """Non-resource paths every authenticated user may read (the
    system:discovery ClusterRole)."""
    return any(path == root or path.startswith(root + '/')
               for root in ('/api', '/apis', '/openapi'))


def _service_account_user(namespace: str, name: str) -> _User:
    return _User(f'system:serviceaccount:{namespace}:{name}',
                 ('system:serviceaccounts',
                  f'system:serviceaccounts:{namespace}',
                  'system:authenticated'))


def _names_user(subject: dict, user: _User) -> bool:
    kind = subject.get('kind')
    if kind == 'ServiceAccount':
        return user.name == _service_account_user(
            subject.get('namespace'), subject.get('name')).name
    if kind == 'User':
        return subject.get('name') == user.name
    return kind == 'Group' and subject.get('name') in user.groups


def _rule_allows(rule: dict, request: _Request) -> bool:
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


def _access_denied(user: _User, request: _Request) -> ApiError:
    """A 403 in the API server's words."""
    if not request.is_resource:
        return ApiError(403, 'Forbidden', f'forbidden: User "{user.name}" '
                        f'cannot {request.verb} path "{request.path}"')
    resource = request.resource + (
        f'/{request.subresource}' if request.subresource else '')
    scope = (f'in the namespace "{request.namespace}"' if request.namespace
             else 'at the cluster scope')
    qualified = request.resource + (
        f'.{request.group}' if request.group else '')
    details = {'name': request.name, 'group': request.group,
               'kind': request.resource}
    return _forbidden(
        qualified, request.name,
        f'User "{user.name}" cannot {request.verb} resource "{resource}" '
        f'in API group "{request.group}" {scope}',
        {key: value for key, value in details.items() if value})


@dataclasses.dataclass
class InjectedFailure:
    """Requests KubeApiServer.fail_requests() answers with an error."""
    method: str
    path: 're.Pattern'
    remaining: Optional[int]  # None: unlimited
    code: int
    message: str
    skip: int = 0  # matching requests still to let through
    hits: list = dataclasses.field(default_factory=list)


def _check_delete(res: _Resource, old: dict, options) -> None:
    """Refuse a delete of ``old`` as the API server would: a protected
    name, a failed precondition; or dryRun, which this server lacks."""
    if not isinstance(options, dict):
        raise ApiError(400, 'BadRequest', 'the body is not DeleteOptions')
    if options.get('dryRun'):
        raise ApiError(400, 'BadRequest',
                       'dryRun is not supported by this test server')
    name = old['metadata']['name']
    if name in res.protected:
        raise _forbidden(res.group_plural, name,
                         f'this {res.singular} may not be deleted',
                         res.details(name))
    preconditions = options.get('preconditions') or {}
    for field in ('uid', 'resourceVersion'):
        wanted, actual = preconditions.get(field), old['metadata'][field]
        if wanted and wanted != actual:
            raise _conflict(res, name, f'Precondition failed: {field} in '
                            f'precondition: {wanted}, {field} in object '
                            f'meta: {actual}')


def _spec_part(obj: dict) -> dict:
    """What a change of bumps metadata.generation: all but the metadata
    and the status."""
    return {key: value for key, value in obj.items()
            if key not in ('metadata', 'status', 'kind', 'apiVersion')}


def _finalizers(obj: dict) -> list:
    """What keeps a deleted object stored: its metadata.finalizers, and a
    Namespace's spec.finalizers (only the namespace controller removes
    those)."""
    return [*(obj['metadata'].get('finalizers') or []),
            *((obj.get('spec') or {}).get('finalizers') or [])]


# --- manifests for tests ---------------------------------------------------

def owner_reference(owner: dict, controller: bool = True) -> dict:
    """An ownerReference to a stored object (as create() returns it), for
    a Pod's metadata.ownerReferences; ``controller`` makes the owner its
    controller, which is what drain and the workload status go by."""
    meta = owner['metadata']
    return {'apiVersion': owner['apiVersion'], 'kind': owner['kind'],
            'name': meta['name'], 'uid': meta['uid'],
            'controller': controller, 'blockOwnerDeletion': True}


def pod_manifest(name: str, node_name: Optional[str] = None, *,
                 namespace: str = 'default', labels: Optional[dict] = None,
                 owner: Optional[dict] = None, empty_dir: bool = False,
                 image: str = 'registry.k8s.io/pause:3.10') -> dict:
    """A Pod for create(): bound to ``node_name`` (it runs once that Node
    exists), controlled by ``owner`` (a stored ReplicaSet or DaemonSet,
    as create() returned it), with an emptyDir volume if ``empty_dir``."""
    container = {'name': 'main', 'image': image}
    spec = {'containers': [container]}
    if node_name:
        spec['nodeName'] = node_name
    if empty_dir:
        spec['volumes'] = [{'name': 'scratch', 'emptyDir': {}}]
        container['volumeMounts'] = [{'name': 'scratch',
                                      'mountPath': '/scratch'}]
    meta = {'name': name, 'namespace': namespace}
    if labels:
        meta['labels'] = dict(labels)
    if owner:
        meta['ownerReferences'] = [owner_reference(owner)]
    return {'apiVersion': 'v1', 'kind': 'Pod', 'metadata': meta,
            'spec': spec}


# --- the server ------------------------------------------------------------

class KubeApiServer:
    """In-memory Kubernetes API server over HTTPS, with a controller.

    Use it as a context manager, or call start() and stop(). Each instance
    has its own self-signed certificate and random admin bearer token
    (``token``), and kubeconfig() gives kubectl what it needs to connect.
    It starts with the namespaces of INITIAL_NAMESPACES and the ClusterRole
    cluster-admin.

    Stored objects are never mutated in place: every change stores a new
    dict, so snapshots and watch events can be shared without copying.
    """

    def __init__(self, host: str = '127.0.0.1', port: int = 0, *,
                 available_delay: float = 0.3, token_delay: float = 0.2,
                 pod_grace: float = 0.2, version: str = SERVER_VERSION,
                 extra_sans=()):
        """Bind to host:port (0: any free port) once started.

        ``available_delay``: seconds a new PV stays Pending before it becomes
        Available. ``token_delay``: seconds before the token controller
        fills a new service-account token Secret. ``pod_grace``: seconds a
        gracefully deleted Pod stays Terminating before its kubelet (the
        controller) removes it, whatever its grace period. ``version``: the
        gitVersion of /version, from which the Cloud SDK dispatcher picks
        its kubectl. ``extra_sans``: more names and IP addresses for the
        certificate; a network (an ``ipaddress`` network or a string such
        as "10.0.0.0/24") stands for all its host addresses (at most
        MAX_SAN_ADDRESSES).
        """
        self.host = host
        self.port = port
        self.available_delay = available_delay
        self.token_delay = token_delay
        self.pod_grace = pod_grace
        self.version = version
        self.token = secrets.token_urlsafe(24)
        self.ca_pem = ''
        self._client_host = host if host not in ('', '0.0.0.0') \
            else '127.0.0.1'
        self._sans = _certificate_names(
            ['localhost', '127.0.0.1', self._client_host, *extra_sans])
        self._cond = threading.Condition(threading.RLock())
        self._objects = {res: {} for res in _RESOURCES}  # res -> key -> obj
        # self._events[i] is (type, resource, object) of resourceVersion i+1.
        self._events = []
        self._changes = 0  # bumped on every change the controller must see
        self._stuck_pending = set()
        self._failures = []  # InjectedFailure, see fail_requests()
        # (resource, namespace, name) -> time.monotonic() of its creation
        self._created_at = {}
        # (resource, namespace, name) -> time.monotonic() when its graceful
        # deletion began
        self._deleting_at = {}
        self._pod_addresses = 0  # pod IPs handed out
        self._tokens = {}  # minted service-account token -> its Secret's key
        self._requests = []
        self._watchers = 0
        self._stopping = False
        self._httpd = None
        self._threads = []
        for res, body in _initial_objects():
            self._create(res, None, body)

    # -- lifecycle

    def start(self) -> 'KubeApiServer':
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        with tempfile.TemporaryDirectory(prefix='kubeapi-') as workdir:
            cert, key = _make_certificate(workdir, self._sans)
            context.load_cert_chain(cert, key)
            with open(cert) as handle:
                self.ca_pem = handle.read()
        self._httpd = _HttpServer((self.host, self.port), self, context)
        self.port = self._httpd.server_address[1]
        self._threads = [
            threading.Thread(target=self._httpd.serve_forever,
                             kwargs={'poll_interval': 0.05},  # quick stop()
                             daemon=True, name='kubeapi-http'),
            threading.Thread(target=self._control, daemon=True,
                             name='kubeapi-controller')]
        for thread in self._threads:
            thread.start()
        return self

    def stop(self) -> None:
        """Stop serving: end watches cleanly, then close all connections."""
        if self._httpd is None:
            return
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
            self._cond.wait_for(lambda: self._watchers == 0, timeout=5)
        self._httpd.shutdown()
        self._httpd.close_connections()
        self._httpd.server_close()
        for thread in self._threads:
            thread.join()
        self._httpd = None

    def __enter__(self) -> 'KubeApiServer':
        return self.start()

    def __exit__(self, *exc_info) -> None:
        self.stop()

    # -- connection details

    @property
    def url(self) -> str:
        return f'https://{self._client_host}:{self.port}'

    @property
    def certificate_names(self) -> list:
        """The DNS names and IP addresses the certificate is valid for."""
        return list(self._sans)

    def kubeconfig(self, server_host: Optional[str] = None,
                   token: Optional[str] = None,
                   port: Optional[int] = None) -> str:
        """Return kubeconfig YAML for this server.

        ``server_host`` is the address kubectl dials (e.g. the bridge IP as
        seen from a test host); if the certificate does not name it, the
        kubeconfig sets tls-server-name to "localhost", which it does name.
        ``token`` replaces the admin one (a service account's, or a wrong
        one to test authentication failures). ``port``: a forwarder's to
        this server (a Master's 6443) instead of the server's own.
        """
        host = server_host or self._client_host
        tls_name = ('' if _certificate_names([host])[0] in self._sans
                    else '    tls-server-name: localhost\n')
        ca_data = base64.b64encode(self.ca_pem.encode()).decode()
        return ('apiVersion: v1\n'
                'kind: Config\n'
                'clusters:\n'
                '- name: kubeapi-test\n'
                '  cluster:\n'
                f'    server: https://{host}:{port or self.port}\n'
                f'    certificate-authority-data: {ca_data}\n'
                f'{tls_name}'
                'users:\n'
                '- name: kubeapi-test\n'
                '  user:\n'
                f'    token: {token or self.token}\n'
                'contexts:\n'
                '- name: kubeapi-test\n'
                '  context:\n'
                '    cluster: kubeapi-test\n'
                '    user: kubeapi-test\n'
                '    namespace: default\n'
                'current-context: kubeapi-test\n')

    # -- test helpers

    @property
    def request_log(self) -> list:
        """(method, path without query) of every request, in order."""
        with self._cond:
            return list(self._requests)

    def objects(self, kind: str, namespace: Optional[str] = None) -> list:
        """Snapshot of the stored objects of a kind ("pv", "Node",
        "secrets", "clusterrolebinding", ...), optionally of one
        namespace."""
        res = _resource_for(kind)
        with self._cond:
            items = sorted(self._objects[res].items(),
                           key=lambda item: _sort_key(item[0]))
        return [copy.deepcopy(obj) for (ns, _), obj in items
                if namespace is None or ns == namespace]

    def nodes(self) -> list:
        """Snapshot of the stored Nodes."""
        return self.objects('node')

    def get(self, kind: str, name: str,
            namespace: str = 'default') -> Optional[dict]:
        """A copy of one stored object, or None. ``namespace`` is ignored
        for cluster-scoped kinds."""
        res = _resource_for(kind)
        key = (namespace if res.namespaced else None, name)
        with self._cond:
            return copy.deepcopy(self._objects[res].get(key))

    def create(self, obj: dict) -> dict:
        """Create an object as a client would (e.g. a PVC for a scenario,
        a Pod on a node from pod_manifest(), its ReplicaSet or DaemonSet,
        a PodDisruptionBudget); a namespaced one in metadata.namespace, by
        default "default"."""
        res = _resource_for(obj.get('kind', ''))
        namespace = (obj.get('metadata') or {}).get('namespace') or 'default'
        created = self._create(res, namespace if res.namespaced else None,
                               obj)
        return copy.deepcopy(created)

    def delete(self, kind: str, name: str, namespace: str = 'default',
               grace_period: Optional[int] = None) -> None:
        """Delete an object as a client would: finalizers still hold it,
        and a Pod on a node terminates for pod_grace seconds unless
        ``grace_period`` is 0."""
        res = _resource_for(kind)
        options = ({} if grace_period is None
                   else {'gracePeriodSeconds': grace_period})
        self._delete(res, namespace if res.namespaced else None, name,
                     options)

    def update_status(self, kind: str, name: str, status: dict,
                      namespace: str = 'default') -> dict:
        """Merge ``status`` into an object's status (a JSON merge patch:
        lists are replaced, None removes a key), as its controller or
        kubelet would; e.g. {"conditions": [...]} for a Node."""
        res = _resource_for(kind)
        with self._cond:
            old = self._get(res, namespace if res.namespaced else None, name)
            new = _merge(old, {'status': status}, strategic=False)
            return copy.deepcopy(self._update(res, old, new, 'status'))

    def lose_node(self, name: str) -> None:
        """The Node's VM is off: the node lifecycle controller marks it
        unreachable (testbed.node_lifecycle) and its pods stay, an evicted
        or deleted one Terminating, until the Node is deleted."""
        with self._cond:
            self._commit(NODE, node_lifecycle.unreachable(
                self._get(NODE, None, name)))

    def set_pv_phase(self, name: str, phase: str) -> None:
        """Set a PV's status.phase directly, as a controller would.

        The controller keeps applying its rules afterwards: a PV set back to
        Pending becomes Available again unless it is kept pending.
        """
        with self._cond:
            self._set_status(PV, self._get(PV, None, name), phase=phase)

    def fail_requests(self, method: str, path: str,
                      count: Optional[int] = 1, code: int = 500,
                      message: str = 'injected fault',
                      skip: int = 0) -> 'InjectedFailure':
        """Answer matching requests with an error Status instead of
        serving them: after letting ``skip`` of them through, the next
        ``count`` (None: every one until clear_failures()) whose method is
        ``method`` and whose path, with ``?query`` when there is one, fully
        matches the regular expression ``path``. The returned record lists
        the requests it answered."""
        failure = InjectedFailure(method.upper(), re.compile(path), count,
                                  code, message, skip)
        with self._cond:
            self._failures.append(failure)
        return failure

    def clear_failures(self) -> None:
        with self._cond:
            self._failures.clear()

    def _injected_failure(self, method: str,
                          target: str) -> Optional[ApiError]:
        with self._cond:
            for failure in self._failures:
                if failure.remaining != 0 and failure.method == method and \
                        failure.path.fullmatch(target):
                    if failure.skip > 0:
                        failure.skip -= 1
                        continue
                    if failure.remaining is not None:
                        failure.remaining -= 1
                    failure.hits.append(target)
                    return ApiError(failure.code, 'InternalError'
                                    if failure.code >= 500 else 'BadRequest',
                                    failure.message)
        return None

    def keep_pending(self, *names: str) -> None:
        """Make the named PVs (existing or future ones) stay Pending."""
        with self._cond:
            self._stuck_pending.update(names)

    def release_pending(self, *names: str) -> None:
        """Let the named PVs become Available again."""
        with self._cond:
            self._stuck_pending.difference_update(names)
            self._wake()

    @property
    def watchers(self) -> int:
        """How many watch streams are open (wait_for() sees changes)."""
        with self._cond:
            return self._watchers

    @property
    def stuck_pending(self) -> frozenset:
        with self._cond:
            return frozenset(self._stuck_pending)

    def wait_for(self, predicate: Callable[[], bool],
                 timeout: float = 10.0) -> bool:
        """Wait until predicate() holds, re-checking on every change.

        Returns False on timeout.
        """
        with self._cond:
            return self._cond.wait_for(predicate, timeout)

    # -- operations for the HTTP handler (they take the lock)

    def _log_request(self, method: str, path: str) -> None:
        with self._cond:
            self._requests.append((method, path))

    def _authenticate(self, header: Optional[str]) -> Optional[_User]:
        """The user of a request's Authorization header, None without
        one; a 401 for credentials that are not valid."""
        if header is None:
            return None
        scheme, _, token = header.partition(' ')
        token = token.strip()
        if scheme.lower() == 'bearer' and token:
            if secrets.compare_digest(token.encode(), self.token.encode()):
                return _ADMIN
            with self._cond:
                user = self._token_user(token)
            if user is not None:
                return user
        raise ApiError(401, 'Unauthorized', 'Unauthorized')

    def _authorize(self, user: Optional[_User], request: _Request) -> None:
        """Let the request through, or raise a 401 (no credentials) or a
        403 (not allowed)."""
        everyone = not request.is_resource and request.verb == 'get' and (
            _is_public(request.path)
            or (user is not None and _is_discovery(request.path)))
        if everyone:
            return
        if user is None:
            raise ApiError(401, 'Unauthorized', 'Unauthorized')
        if 'system:masters' in user.groups:
            return
        with self._cond:
            if self._rbac_allows(user, request):
                return
        raise _access_denied(user, request)

    def _discovery(self, path: str) -> Optional[dict]:
        groups = list(dict.fromkeys(res.group for res in _RESOURCES
                                    if res.group))
        if path == '/version':
            major, minor = self.version.lstrip('v').split('.')[:2]
            return {'major': major, 'minor': minor,
                    'gitVersion': self.version, 'gitCommit': '0' * 40,
                    'gitTreeState': 'clean',
                    'buildDate': '2024-12-11T00:00:00Z',
                    'goVersion': 'go1.23.3', 'compiler': 'gc',
                    'platform': 'linux/amd64'}
        if path == '/api':
            return {'kind': 'APIVersions', 'versions': ['v1'],
                    'serverAddressByClientCIDRs': [{
                        'clientCIDR': '0.0.0.0/0',
                        'serverAddress': f'{self._client_host}:{self.port}'}]}
        if path == '/apis':
            return {'kind': 'APIGroupList', 'apiVersion': 'v1',
                    'groups': [_api_group(group) for group in groups]}
        parts = path.split('/')[1:]
        if parts[0] == 'apis' and len(parts) == 2 and parts[1] in groups:
            return {'kind': 'APIGroup', 'apiVersion': 'v1',
                    **_api_group(parts[1])}
        if parts[0] == 'api' and len(parts) == 2:
            group_version = ('', parts[1])
        elif parts[0] == 'apis' and len(parts) == 3:
            group_version = (parts[1], parts[2])
        else:
            return None
        resources = [res for res in _RESOURCES
                     if (res.group, res.version) == group_version]
        if not resources:
            return None
        return {'kind': 'APIResourceList', 'apiVersion': 'v1',
                'groupVersion': resources[0].api_version,
                'resources': [entry for res in resources
                              for entry in _discovery_entries(res)]}

    def _create(self, res: _Resource, namespace: Optional[str],
                body) -> dict:
        obj = _as_object(res, body)
        meta = obj['metadata']
        if not meta.get('name') and meta.get('generateName'):
            meta['name'] = meta['generateName'] + secrets.token_hex(3)[:5]
        if not res.namespaced:
            meta.pop('namespace', None)
        elif meta.setdefault('namespace', namespace) != namespace:
            raise ApiError(400, 'BadRequest',
                           'the namespace of the provided object does not '
                           'match the namespace sent on the request')
        for key in ('resourceVersion', 'deletionTimestamp',
                    'deletionGracePeriodSeconds'):
            meta.pop(key, None)
        meta.update(uid=str(uuid.uuid4()), creationTimestamp=_now())
        if res.generation:
            meta['generation'] = 1
        if res.finalizer:
            meta['finalizers'] = list(dict.fromkeys(
                [*(meta.get('finalizers') or []), res.finalizer]))
        if res.prepare:
            res.prepare(obj, None)
        if res.new_status:
            obj['status'] = res.new_status(obj)
        else:
            obj.pop('status', None)
        _validate(res, obj)
        name = meta['name']
        with self._cond:
            if res.namespaced:
                self._check_namespace_open(res, namespace, name)
            if (namespace, name) in self._objects[res]:
                raise ApiError(409, 'AlreadyExists',
                               f'{res.group_plural} "{name}" already exists',
                               res.details(name))
            self._created_at[(res, namespace, name)] = time.monotonic()
            return self._commit(res, obj, 'ADDED')

    def _read(self, res: _Resource, namespace: Optional[str],
              name: str) -> dict:
        with self._cond:
            return self._get(res, namespace, name)

    def _list(self, res: _Resource, namespace: Optional[str],
              query: dict) -> dict:
        matches = _selector(query, res)
        try:
            limit = int(query.get('limit') or 0)
            after = json.loads(base64.urlsafe_b64decode(query['continue'])) \
                if query.get('continue') else []
            if not isinstance(after, list):
                raise ValueError(after)
        except ValueError:
            raise ApiError(400, 'BadRequest',
                           'invalid limit or continue parameter')
        with self._cond:
            metadata = {'resourceVersion': str(len(self._events))}
            items = sorted(
                (list(_sort_key(key)), obj)
                for key, obj in self._objects[res].items()
                if (namespace is None or key[0] == namespace) and matches(obj))
        items = [item for item in items if item[0] > after]
        if limit and len(items) > limit:
            items = items[:limit]
            metadata['continue'] = base64.urlsafe_b64encode(
                json.dumps(items[-1][0]).encode()).decode()
        return {'kind': f'{res.kind}List', 'apiVersion': res.api_version,
                'metadata': metadata, 'items': [obj for _, obj in items]}

    def _replace(self, res: _Resource, namespace: Optional[str], name: str,
                 body, subresource: Optional[str] = None) -> dict:
        with self._cond:
            old = self._get(res, namespace, name)
            return self._update(res, old, _as_object(res, body), subresource)

    def _patch(self, res: _Resource, namespace: Optional[str], name: str,
               content_type: str, body: bytes,
               subresource: Optional[str] = None) -> dict:
        with self._cond:
            old = self._get(res, namespace, name)
            patched = _apply_patch(old, content_type, body)
            return self._update(res, old, _as_object(res, patched),
                                subresource)

    def _delete(self, res: _Resource, namespace: Optional[str], name: str,
                options: dict) -> dict:
        """Delete now, or mark Terminating until finalizers go and a
        graceful deletion (of a Pod on a node) ends. Deleting a
        Terminating object again can only shorten its grace."""
        with self._cond:
            old = self._get(res, namespace, name)
            _check_delete(res, old, options)
            grace = res.grace(old, options) if res.grace else 0
            if old['metadata'].get('deletionTimestamp'):
                if grace < (old['metadata'].get(
                        'deletionGracePeriodSeconds') or 0):
                    return self._mark_deleted(res, old, grace)
                return old
            return self._mark_deleted(res, old, grace)

    def _evict(self, namespace: str, name: str, body) -> dict:
        """The Eviction subresource of a Pod: delete it as DELETE would,
        unless the PodDisruptionBudget that covers it allows no
        disruption (429, as the API server answers)."""
        if (not isinstance(body, dict)
                or body.get('kind', 'Eviction') != 'Eviction'
                or body.get('apiVersion', 'policy/v1') not in (
                    'policy/v1', 'policy/v1beta1')):
            raise ApiError(400, 'BadRequest', 'not a Eviction object: the '
                           'body is not a policy/v1 Eviction')
        if (body.get('metadata') or {}).get('name') != name:
            raise ApiError(400, 'BadRequest',
                           'name in URL does not match name in Eviction '
                           'object')
        options = body.get('deleteOptions') or {}
        with self._cond:
            pod = self._get(POD, namespace, name)
            # A pod not running (or already going) disrupts nothing.
            if ((pod.get('status') or {}).get('phase') in (
                    'Pending', *_TERMINAL_PHASES)
                    or pod['metadata'].get('deletionTimestamp')):
                self._delete(POD, namespace, name, options)
                return _SUCCESS
            budgets = [budget for budget
                       in self._objects[POD_DISRUPTION_BUDGET].values()
                       if _budget_covers(budget, pod)]
            if len(budgets) > 1:
                raise ApiError(500, '', 'This pod has more than one '
                               'PodDisruptionBudget, which the eviction '
                               'subresource does not support.')
            _check_delete(POD, pod, options)  # before counting a disruption
            if budgets:
                budget, = budgets
                status = budget['status']
                # An unready pod may go while the budget is met.
                if (_pod_ready(pod) or status.get('currentHealthy', 0)
                        < status.get('desiredHealthy', 0)
                        or status.get('desiredHealthy', 0) <= 0):
                    self._take_disruption(budget, name)
            self._delete(POD, namespace, name, options)
        return _SUCCESS

    def _take_disruption(self, budget: dict, pod_name: str) -> None:
        """Check that the budget allows a disruption and count this one,
        or raise the API server's error."""
        meta, status = budget['metadata'], budget['status']
        name, allowed = meta['name'], status.get('disruptionsAllowed', 0)
        if status.get('observedGeneration', 0) < meta.get('generation', 0):
            raise _too_many_requests(
                f'The disruption budget {name} is still being processed by '
                'the server.', retry_after=10)
        if allowed < 0:
            raise _forbidden('poddisruptionbudget.policy', name,
                             'pdb disruptions allowed is negative',
                             POD_DISRUPTION_BUDGET.details(name))
        if allowed == 0:
            raise _too_many_requests(
                f'The disruption budget {name} needs '
                f'{status.get("desiredHealthy", 0)} healthy pods and has '
                f'{status.get("currentHealthy", 0)} currently')
        taken = copy.deepcopy(budget)
        status = taken['status']
        status['disruptionsAllowed'] = allowed - 1
        if allowed == 1:
            status['conditions'] = [
                _allowed_condition(0, meta.get('generation', 0), condition)
                if condition.get('type') == 'DisruptionAllowed'
                else condition for condition in status.get('conditions', [])]
        status['disruptedPods'] = {**(status.get('disruptedPods') or {}),
                                   pod_name: _now()}
        self._commit(POD_DISRUPTION_BUDGET, taken)

    @contextlib.contextmanager
    def _watching(self):
        """Count an open watch stream, so stop() can let it end cleanly."""
        with self._cond:
            self._watchers += 1
            self._cond.notify_all()
        try:
            yield
        finally:
            with self._cond:
                self._watchers -= 1
                self._cond.notify_all()

    def _watch(self, res: _Resource, namespace: Optional[str],
               matches: Callable[[dict], bool], since: int,
               deadline: float) -> Iterator[tuple]:
        """Yield (type, object) events until the deadline or stop().

        Without a resourceVersion (or "0") it starts with ADDED events for
        the current objects, as the API server does.
        """
        def wanted(event_res, obj):
            return (event_res is res and matches(obj)
                    and namespace in (None, obj['metadata'].get('namespace')))

        with self._cond:
            position = min(since, len(self._events))
            current = [] if since else [
                obj for _, obj in sorted(self._objects[res].items(),
                                         key=lambda item: _sort_key(item[0]))]
        for obj in current:
            if wanted(res, obj):
                yield 'ADDED', obj
        while True:
            with self._cond:
                self._cond.wait_for(
                    lambda: self._stopping or len(self._events) > position,
                    timeout=max(0.0, deadline - time.monotonic()))
                batch, position = self._events[position:], len(self._events)
                stopping = self._stopping
            for event_type, event_res, obj in batch:
                if wanted(event_res, obj):
                    yield event_type, obj
            if stopping or time.monotonic() >= deadline:
                return

    # -- store internals (the caller holds self._cond)

    def _get(self, res: _Resource, namespace: Optional[str],
             name: str) -> dict:
        key = (namespace if res.namespaced else None, name)
        obj = self._objects[res].get(key)
        if obj is None:
            raise _not_found(res, name)
        return obj

    def _check_namespace_open(self, res: _Resource, namespace: str,
                              name: str) -> None:
        """Refuse new objects in a missing or terminating namespace."""
        owner = self._objects[NAMESPACE].get((None, namespace))
        if owner is None:
            raise _not_found(NAMESPACE, namespace)
        if owner['metadata'].get('deletionTimestamp'):
            raise _forbidden(res.group_plural, name,
                             f'unable to create new content in namespace '
                             f'{namespace} because it is being terminated',
                             res.details(name))

    def _token_user(self, token: str) -> Optional[_User]:
        """The service account of a token the token controller minted,
        while its Secret and its service account still exist."""
        key = self._tokens.get(token)
        secret = self._objects[SECRET].get(key) if key else None
        if (secret is None or secret['metadata'].get('deletionTimestamp')
                or (secret.get('data') or {}).get('token') != _b64(token)):
            return None
        annotations = secret['metadata'].get('annotations') or {}
        account = self._objects[SERVICE_ACCOUNT].get(
            (key[0], annotations.get(SERVICE_ACCOUNT_NAME)))
        if account is None or account['metadata']['uid'] != annotations.get(
                SERVICE_ACCOUNT_UID):
            return None
        return _service_account_user(key[0], account['metadata']['name'])

    def _rbac_allows(self, user: _User, request: _Request) -> bool:
        """Whether a ClusterRoleBinding of the user grants the request."""
        for binding in self._objects[CLUSTER_ROLE_BINDING].values():
            role = self._objects[CLUSTER_ROLE].get(
                (None, (binding.get('roleRef') or {}).get('name')))
            if role is None or not any(
                    _names_user(subject, user)
                    for subject in binding.get('subjects') or []):
                continue
            if any(_rule_allows(rule, request)
                   for rule in role.get('rules') or []):
                return True
        return False

    def _wake(self) -> None:
        self._changes += 1
        self._cond.notify_all()

    def _commit(self, res: _Resource, obj: dict,
                event_type: str = 'MODIFIED') -> dict:
        """Store a new version of obj, or drop it if deleted and without
        finalizers; record the watch event; wake watchers and controller."""
        meta = obj['metadata']
        meta['resourceVersion'] = str(len(self._events) + 1)
        key = (meta.get('namespace'), meta['name'])
        if (meta.get('deletionTimestamp') and not _finalizers(obj)
                and not meta.get('deletionGracePeriodSeconds')):
            del self._objects[res][key]
            self._created_at.pop((res, *key), None)
            self._deleting_at.pop((res, *key), None)
            event_type = 'DELETED'
        else:
            self._objects[res][key] = obj
        self._events.append((event_type, res, obj))
        self._wake()
        return obj

    def _update(self, res: _Resource, old: dict, new: dict,
                subresource: Optional[str] = None) -> dict:
        """Store a client's new version of old (PUT or PATCH) by the API
        server's rules: optimistic concurrency, system metadata kept, and
        the status changed only through the "status" subresource, which
        changes nothing else."""
        meta, old_meta = new['metadata'], old['metadata']
        name = old_meta['name']
        if meta.get('name', name) != name:
            raise ApiError(400, 'BadRequest',
                           f'the name of the object ({meta["name"]}) does '
                           f'not match the name on the URL ({name})')
        if meta.get('resourceVersion') not in (
                None, '', old_meta['resourceVersion']):
            raise _conflict(res, name, 'the object has been modified; please '
                            'apply your changes to the latest version and '
                            'try again')
        if subresource == 'status':
            new = {**copy.deepcopy(old), 'status': new.get('status') or {}}
            return old if new == old else self._commit(res, new)
        for key in ('name', 'namespace', 'uid', 'creationTimestamp',
                    'resourceVersion', 'deletionTimestamp',
                    'deletionGracePeriodSeconds',
                    *(('generation',) if res.generation else ())):
            if key in old_meta:
                meta[key] = old_meta[key]
            else:
                meta.pop(key, None)
        if res.new_status:
            new['status'] = copy.deepcopy(old.get('status') or {})
        else:
            new.pop('status', None)
        if res.prepare:
            res.prepare(new, old)
        if res.generation and _spec_part(new) != _spec_part(old):
            meta['generation'] = old_meta.get('generation', 0) + 1
        if new == old:
            return old
        _validate(res, new, old)
        return self._commit(res, new)

    def _set_status(self, res: _Resource, obj: dict, **status) -> None:
        updated = copy.deepcopy(obj)
        updated.setdefault('status', {}).update(status)
        self._commit(res, updated)

    def _drop_finalizer(self, res: _Resource, obj: dict) -> None:
        updated = copy.deepcopy(obj)
        updated['metadata']['finalizers'].remove(res.finalizer)
        self._commit(res, updated)

    def _mark_deleted(self, res: _Resource, obj: dict,
                      grace: Optional[int] = None) -> dict:
        """Set deletionTimestamp (now plus the grace period, by default the
        kind's for a delete without options)."""
        if grace is None:
            grace = res.grace(obj, {}) if res.grace else 0
        deleted = copy.deepcopy(obj)
        meta = deleted['metadata']
        meta.update(deletionTimestamp=_now(grace),
                    deletionGracePeriodSeconds=grace)
        if grace:
            self._deleting_at.setdefault(
                (res, meta.get('namespace'), meta['name']),
                time.monotonic())
        return self._commit(res, deleted)

    # -- controller

    def _control(self) -> None:
        """Controller thread: reconcile after every change, or when a
        delayed action is due. Its own changes cause another pass, until a
        pass changes nothing."""
        with self._cond:
            while not self._stopping:
                seen = self._changes
                due = self._reconcile()
                timeout = None if due is None else max(
                    0.0, due - time.monotonic())
                self._cond.wait_for(
                    lambda: self._stopping or self._changes != seen, timeout)

    def _reconcile(self) -> Optional[float]:
        """One pass of every controller.

        Returns the monotonic time at which the next delayed action is due.
        """
        now = time.monotonic()
        self._reconcile_pods()
        dues = [self._reconcile_volumes(now), self._reconcile_tokens(now),
                self._reconcile_terminating(now)]
        self._reconcile_owners()
        self._reconcile_budgets()
        self._reconcile_namespaces()
        return min((due for due in dues if due is not None), default=None)

    def _reconcile_pods(self) -> None:
        """The kubelets and the pod garbage collector: a Pending pod bound
        to an existing Node runs (Ready); a pod that ran on a Node that is
        gone is deleted at once."""
        for pod in list(self._objects[POD].values()):
            node_name = (pod.get('spec') or {}).get('nodeName')
            if not node_name or pod['metadata'].get('deletionTimestamp'):
                continue
            node = self._objects[NODE].get((None, node_name))
            if node is None:
                if pod['status'].get('startTime'):
                    self._mark_deleted(POD, pod, 0)
            elif pod['status'].get('phase') == 'Pending' and \
                    not node_lifecycle.kubelet_gone(node):
                self._start(pod, node)

    def _start(self, pod: dict, node: dict) -> None:
        host_ip = next((entry.get('address') for entry
                        in (node.get('status') or {}).get('addresses') or []
                        if entry.get('type') == 'InternalIP'), '')
        if pod['spec'].get('hostNetwork') and host_ip:
            pod_ip = host_ip
        else:
            self._pod_addresses += 1
            pod_ip = (f'10.244.{self._pod_addresses // 250}.'
                      f'{self._pod_addresses % 250 + 2}')
        now = _now()
        running = copy.deepcopy(pod)
        running['status'].update(
            phase='Running', startTime=now, podIP=pod_ip,
            podIPs=[{'ip': pod_ip}],
            conditions=[{'type': kind, 'status': 'True',
                         'lastTransitionTime': now}
                        for kind in ('PodReadyToStartContainers',
                                     'Initialized', 'Ready',
                                     'ContainersReady', 'PodScheduled')],
            containerStatuses=[{
                'name': container['name'], 'image': container['image'],
                'imageID': '', 'ready': True, 'started': True,
                'restartCount': 0,
                'containerID': f'containerd://{secrets.token_hex(32)}',
                'state': {'running': {'startedAt': now}}, 'lastState': {}}
                for container in pod['spec']['containers']])
        if host_ip:
            running['status'].update(hostIP=host_ip,
                                     hostIPs=[{'ip': host_ip}])
        self._commit(POD, running)

    def _reconcile_terminating(self, now: float) -> Optional[float]:
        """The kubelets again: a gracefully deleted object goes pod_grace
        after its deletion began (or stays while finalizers hold it).

        Returns the monotonic time at which the next one is due.
        """
        next_due = None
        for res in _RESOURCES:
            if res.grace is None:
                continue
            for key, obj in list(self._objects[res].items()):
                meta = obj['metadata']
                if not (meta.get('deletionTimestamp')
                        and meta.get('deletionGracePeriodSeconds')) or \
                        self._kubelet_gone(res, obj):
                    continue
                due = self._deleting_at.get((res, *key), now) \
                    + self.pod_grace
                if due > now:
                    next_due = min(due, next_due or due)
                    continue
                finished = copy.deepcopy(obj)
                finished['metadata']['deletionGracePeriodSeconds'] = 0
                self._commit(res, finished)
        return next_due

    def _kubelet_gone(self, res: _Resource, obj: dict) -> bool:
        """A pod whose Node is lost: nothing confirms its end."""
        node = self._objects[NODE].get(
            (None, (obj.get('spec') or {}).get('nodeName')))
        return res is POD and node is not None and \
            node_lifecycle.kubelet_gone(node)

    def _active_pods(self) -> list:
        return [pod for pod in self._objects[POD].values()
                if not pod['metadata'].get('deletionTimestamp')
                and pod['status'].get('phase') not in _TERMINAL_PHASES]

    def _reconcile_owners(self) -> None:
        """The ReplicaSet and DaemonSet controllers' status of the active
        pods each controls (they create no pods)."""
        owned = {}
        for pod in self._active_pods():
            owned.setdefault(_controller_uid(pod), []).append(pod)
        for res in _RESOURCES:
            if res.owned_status is None:
                continue
            for obj in list(self._objects[res].values()):
                if obj['metadata'].get('deletionTimestamp'):
                    continue
                status = res.owned_status(
                    obj, owned.get(obj['metadata']['uid'], []))
                if status != obj.get('status'):
                    self._commit(res, {**copy.deepcopy(obj),
                                       'status': status})

    def _reconcile_budgets(self) -> None:
        """The disruption controller: each PodDisruptionBudget's healthy,
        desired and expected pods and the disruptions it allows."""
        pods = list(self._objects[POD].values())
        replicas = {replica_set['metadata']['uid']:
                    replica_set['spec'].get('replicas', 1)
                    for replica_set in self._objects[REPLICA_SET].values()}
        for budget in list(self._objects[POD_DISRUPTION_BUDGET].values()):
            meta, spec = budget['metadata'], budget.get('spec') or {}
            if meta.get('deletionTimestamp'):
                continue
            selected = _budget_pods(budget, pods)
            going = {pod['metadata']['name'] for pod in selected
                     if pod['metadata'].get('deletionTimestamp')}
            # Evicted pods not yet marked deleted (the eviction here marks
            # them at once, so this only forgets the ones that went).
            disrupted = {
                name: when for name, when
                in (budget['status'].get('disruptedPods') or {}).items()
                if name not in going and any(
                    pod['metadata']['name'] == name for pod in selected)}
            healthy = sum(
                1 for pod in selected
                if pod['metadata']['name'] not in going | set(disrupted)
                and _pod_ready(pod))
            expected = _expected_pods(spec, selected, replicas)
            desired = _desired_healthy(spec, expected)
            allowed = healthy - desired if expected > 0 else 0
            allowed = max(allowed, 0)
            old_conditions = budget['status'].get('conditions') or []
            old = next((condition for condition in old_conditions
                        if condition.get('type') == 'DisruptionAllowed'),
                       None)
            status = {'observedGeneration': meta.get('generation', 1),
                      'disruptionsAllowed': allowed,
                      'currentHealthy': healthy, 'desiredHealthy': desired,
                      'expectedPods': expected,
                      'conditions': [_allowed_condition(
                          allowed, meta.get('generation', 1), old)]}
            if disrupted:
                status['disruptedPods'] = disrupted
            if status != budget['status']:
                self._commit(POD_DISRUPTION_BUDGET,
                             {**copy.deepcopy(budget), 'status': status})

    def _reconcile_volumes(self, now: float) -> Optional[float]:
        """The PV binder and the pv-/pvc-protection controllers.

        Returns the monotonic time at which the next Pending PV is due.
        """
        volumes = self._objects[PV]
        for pvc in list(self._objects[PVC].values()):
            meta, phase = pvc['metadata'], pvc['status'].get('phase')
            if meta.get('deletionTimestamp'):
                if PVC_PROTECTION in meta.get('finalizers', []) and \
                        not self._claim_in_use(pvc):
                    self._drop_finalizer(PVC, pvc)
            elif phase == 'Pending':
                volume = self._find_volume(pvc)
                if volume is not None:
                    self._bind(volume, pvc)
            elif phase == 'Bound' and (
                    None, pvc['spec'].get('volumeName')) not in volumes:
                self._set_status(PVC, pvc, phase='Lost')

        next_due = None
        for pv in list(volumes.values()):
            meta, phase = pv['metadata'], pv['status'].get('phase')
            ref = pv['spec'].get('claimRef')
            if (meta.get('deletionTimestamp') and phase != 'Bound'
                    and PV_PROTECTION in meta.get('finalizers', [])):
                self._drop_finalizer(PV, pv)
            elif phase == 'Pending':
                if meta['name'] in self._stuck_pending:
                    continue
                due = self._created_at.get((PV, None, meta['name']), now) \
                    + self.available_delay
                if due > now:
                    next_due = min(due, next_due or due)
                    continue
                self._set_status(PV, pv, phase='Available')
            elif phase == 'Bound' and not self._claim_exists(ref):
                self._reclaim(pv)
            elif ref is None and phase != 'Available':
                self._set_status(PV, pv, phase='Available')
        return next_due

    def _claim_in_use(self, pvc: dict) -> bool:
        """Whether a pod that has not finished mounts the claim (which
        pvc-protection waits for)."""
        meta = pvc['metadata']
        return any(
            pod['metadata']['namespace'] == meta['namespace']
            and pod['status'].get('phase') not in _TERMINAL_PHASES
            and any(((volume or {}).get('persistentVolumeClaim') or {}).get(
                'claimName') == meta['name']
                for volume in pod['spec'].get('volumes') or [])
            for pod in self._objects[POD].values())

    def _claim_exists(self, ref: Optional[dict]) -> bool:
        if not ref:
            return False
        claim = self._objects[PVC].get(
            (ref.get('namespace'), ref.get('name')))
        return claim is not None and ref.get('uid') in (
            None, claim['metadata']['uid'])

    def _reclaim(self, pv: dict) -> None:
        """Apply the reclaim policy of a Bound PV whose claim is gone."""
        policy = pv['spec'].get('persistentVolumeReclaimPolicy')
        if policy == 'Retain':
            self._set_status(PV, pv, phase='Released')
        elif policy == 'Recycle':
            recycled = copy.deepcopy(pv)
            del recycled['spec']['claimRef']
            recycled['status']['phase'] = 'Available'
            self._commit(PV, recycled)
        else:  # Delete: a static NFS volume has no deleter plugin
            self._set_status(PV, pv, phase='Failed', message=(
                'error getting deleter volume plugin for volume '
                f'"{pv["metadata"]["name"]}": no deletable volume plugin '
                'matched'))

    def _find_volume(self, pvc: dict) -> Optional[dict]:
        """The smallest Available PV that satisfies the claim, as the
        binder chooses it."""
        spec, meta = pvc['spec'], pvc['metadata']
        wanted = parse_quantity(spec['resources']['requests']['storage'])
        candidates = []
        for pv in self._objects[PV].values():
            pv_spec, ref = pv['spec'], pv['spec'].get('claimRef')
            if (pv['status'].get('phase') != 'Available'
                    or pv['metadata'].get('deletionTimestamp')):
                continue
            if ref and (ref.get('namespace') != meta['namespace']
                        or ref.get('name') != meta['name']
                        or ref.get('uid') not in (None, meta['uid'])):
                continue  # reserved for another claim
            capacity = parse_quantity(pv_spec['capacity']['storage'])
            if (spec.get('volumeName') in (None, '', pv['metadata']['name'])
                    and (pv_spec.get('storageClassName') or '')
                    == (spec.get('storageClassName') or '')
                    and pv_spec.get('volumeMode') == spec.get('volumeMode')
                    and set(spec['accessModes']) <= set(
                        pv_spec['accessModes'])
                    and _selects(spec.get('selector'), _labels(pv))
                    and capacity >= wanted):
                candidates.append((capacity, pv['metadata']['name'], pv))
        if not candidates:
            return None
        return min(candidates, key=lambda candidate: candidate[:2])[2]

    def _bind(self, pv: dict, pvc: dict) -> None:
        meta = pvc['metadata']
        volume = copy.deepcopy(pv)
        volume['spec']['claimRef'] = {
            'kind': 'PersistentVolumeClaim', 'namespace': meta['namespace'],
            'name': meta['name'], 'uid': meta['uid'], 'apiVersion': 'v1',
            'resourceVersion': meta['resourceVersion']}
        volume['status']['phase'] = 'Bound'
        self._commit(PV, volume)
        claim = copy.deepcopy(pvc)
        claim['spec']['volumeName'] = pv['metadata']['name']
        claim['status'] = {'phase': 'Bound',
                           'accessModes': pv['spec']['accessModes'],
                           'capacity': pv['spec']['capacity']}
        self._commit(PVC, claim)

    def _reconcile_tokens(self, now: float) -> Optional[float]:
        """The legacy token controller: give each service-account token
        Secret whose ServiceAccount exists a new token, token_delay after
        the Secret's creation.

        Returns the monotonic time at which the next Secret is due.
        """
        next_due = None
        for key, secret in list(self._objects[SECRET].items()):
            meta = secret['metadata']
            annotations = meta.get('annotations') or {}
            account = self._objects[SERVICE_ACCOUNT].get(
                (key[0], annotations.get(SERVICE_ACCOUNT_NAME)))
            if (secret.get('type') != SERVICE_ACCOUNT_TOKEN
                    or account is None or meta.get('deletionTimestamp')
                    or (secret.get('data') or {}).get('token')):
                continue
            due = self._created_at.get((SECRET, *key), now) + self.token_delay
            if due > now:
                next_due = min(due, next_due or due)
                continue
            token = secrets.token_urlsafe(32)
            self._tokens[token] = key
            filled = copy.deepcopy(secret)
            filled['data'] = {**(secret.get('data') or {}),
                              'token': _b64(token),
                              'ca.crt': _b64(self.ca_pem),
                              'namespace': _b64(key[0])}
            filled['metadata']['annotations'] = {
                **annotations,
                SERVICE_ACCOUNT_UID: account['metadata']['uid']}
            self._commit(SECRET, filled)
        return next_due

    def _reconcile_namespaces(self) -> None:
        """The namespace controller: a deleted namespace turns
        Terminating, its objects are deleted, and once they are gone, so
        is the namespace."""
        for namespace in list(self._objects[NAMESPACE].values()):
            meta = namespace['metadata']
            if not meta.get('deletionTimestamp'):
                continue
            if namespace['status'].get('phase') != 'Terminating':
                self._set_status(NAMESPACE, namespace, phase='Terminating')
                continue  # the next pass sees the new version
            contents = [(res, obj) for res in _RESOURCES if res.namespaced
                        for (owner, _), obj in list(self._objects[res].items())
                        if owner == meta['name']]
            for res, obj in contents:
                if not obj['metadata'].get('deletionTimestamp'):
                    self._mark_deleted(res, obj)
            if not contents:
                finished = copy.deepcopy(namespace)
                finished['spec']['finalizers'] = []
                self._commit(NAMESPACE, finished)


def _certificate_names(names) -> list:
    """Names for the certificate, as strings without repeats: IP addresses
    normalised, networks (``ipaddress`` networks, or strings with a "/")
    replaced by their host addresses."""
    result = []
    for name in names:
        if isinstance(name, (ipaddress.IPv4Network, ipaddress.IPv6Network)) \
                or '/' in str(name):
            network = ipaddress.ip_network(name, strict=False)
            if network.num_addresses > MAX_SAN_ADDRESSES + 2:
                raise ValueError(f'{network} has too many addresses for the '
                                 f'certificate (at most '
                                 f'{MAX_SAN_ADDRESSES})')
            result += [str(address) for address in network.hosts()]
        else:
            try:
                result.append(str(ipaddress.ip_address(name)))
            except ValueError:
                result.append(str(name))
    return list(dict.fromkeys(result))


def _make_certificate(workdir: str, sans: list) -> tuple:
    """Make a self-signed CA certificate that is the server's own too."""
    entries = []
    for name in sans:
        try:
            entries.append(f'IP:{ipaddress.ip_address(name)}')
        except ValueError:
            entries.append(f'DNS:{name}')
    config = os.path.join(workdir, 'openssl.cnf')
    with open(config, 'w') as handle:
        handle.write('[req]\n'
                     'distinguished_name = dn\n'
                     'x509_extensions = ext\n'
                     'prompt = no\n'
                     '[dn]\n'
                     'CN = kubeapi-test\n'
                     '[ext]\n'
                     'basicConstraints = critical,CA:TRUE\n'
                     'keyUsage = critical,digitalSignature,keyCertSign\n'
                     'extendedKeyUsage = serverAuth\n'
                     f'subjectAltName = {",".join(entries)}\n')
    cert = os.path.join(workdir, 'cert.pem')
    key = os.path.join(workdir, 'key.pem')
    subprocess.run(['openssl', 'req', '-x509', '-config', config,
                    '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256',
                    '-nodes', '-days', '7', '-keyout', key, '-out', cert],
                   check=True, capture_output=True)
    return cert, key


# --- HTTP ------------------------------------------------------------------

class _HttpServer(http.server.ThreadingHTTPServer):
    """HTTPS server doing each TLS handshake in the connection's thread.

    Handler threads are daemons (a forgotten stop() cannot block interpreter
    exit), so the server tracks them itself to cut and join them on stop().
    """

    def __init__(self, address, api: KubeApiServer,
                 ssl_context: ssl.SSLContext):
        self.api = api
        self.ssl_context = ssl_context
        self._connections = {}  # handler thread -> its TLS socket
        self._connections_lock = threading.Lock()
        super().__init__(address, _Handler)

    def track(self, connection: Optional[ssl.SSLSocket]) -> None:
        """Register (with None: forget) the current thread's connection."""
        with self._connections_lock:
            if connection is None:
                self._connections.pop(threading.current_thread(), None)
            else:
                self._connections[threading.current_thread()] = connection

    def close_connections(self) -> None:
        with self._connections_lock:
            connections = list(self._connections.items())
        for _, connection in connections:
            # Shut down a duplicate: that ends blocked reads without touching
            # the SSL object which the connection's thread is using.
            with contextlib.suppress(OSError), socket.fromfd(
                    connection.fileno(), socket.AF_INET,
                    socket.SOCK_STREAM) as duplicate:
                duplicate.shutdown(socket.SHUT_RDWR)
        for thread, _ in connections:
            thread.join(timeout=5)

    def handle_error(self, request, client_address) -> None:
        # Clients hanging up or failing the TLS handshake are routine here.
        if not isinstance(sys.exc_info()[1], OSError):
            super().handle_error(request, client_address)


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = 'HTTP/1.1'  # keep-alive and chunked watch streams
    server_version = 'kubeapi-test'
    timeout = 30  # seconds before an idle keep-alive connection is closed

    def setup(self) -> None:
        self.request.settimeout(self.timeout)
        self.request = self.server.ssl_context.wrap_socket(
            self.request, server_side=True)
        self.server.track(self.request)
        super().setup()

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.server.track(None)
            self.request.close()

    def log_message(self, format, *args) -> None:
        pass  # KubeApiServer.request_log is the record tests use

    def do_GET(self):
        self._serve('GET')

    def do_POST(self):
        self._serve('POST')

    def do_PUT(self):
        self._serve('PUT')

    def do_PATCH(self):
        self._serve('PATCH')

    def do_DELETE(self):
        self._serve('DELETE')

    def _serve(self, method: str) -> None:
        api = self.server.api
        url = urllib.parse.urlsplit(self.path)
        query = {key: values[-1] for key, values in urllib.parse.parse_qs(
            url.query, keep_blank_values=True).items()}
        api._log_request(method, url.path)
        body = self.rfile.read(int(self.headers.get('Content-Length') or 0))
        injected = api._injected_failure(
            method, url.path + ('?' + url.query if url.query else ''))
        if injected is not None:
            self._send(injected.code, json.dumps(injected.status()).encode(),
                       'application/json')
            return
        headers = {}
        try:
            request = _parse_request(method, url.path, query)
            api._authorize(api._authenticate(
                self.headers.get('Authorization')), request)
            if request.is_resource:
                code, payload = self._call(request, query, body)
            else:
                code, payload = self._serve_path(request)
        except ApiError as error:
            code, payload = error.code, error.status()
            retry_after = (error.details or {}).get('retryAfterSeconds')
            if retry_after:  # as the API server does: clients wait
                headers['Retry-After'] = str(retry_after)
        if payload is not None:
            self._send(code, json.dumps(payload).encode(), 'application/json',
                       headers)

    def _serve_path(self, request: _Request) -> tuple:
        """Serve a non-resource request: (code, payload), or (200, None) if
        the response was sent."""
        if request.verb == 'get':
            if request.path == '/openapi/v2':
                self._send(200, b'', OPENAPI_V2_TYPE)
                return 200, None
            if _is_public(request.path) and request.path != '/version':
                self._send(200, b'ok', 'text/plain; charset=utf-8')
                return 200, None
            discovery = self.server.api._discovery(request.path)
            if discovery is not None:
                return 200, discovery
        raise _no_such_path()

    def _call(self, request: _Request, query: dict, body: bytes) -> tuple:
        """Serve a resource request: (code, payload), or (200, None) if the
        response was streamed."""
        api = self.server.api
        res = _ROUTES.get((request.group, request.version, request.resource))
        namespace, name = request.namespace, request.name
        subresource = request.subresource
        if res is not None and not res.namespaced:
            # /api/v1/namespaces/<name> is a Namespace, which RequestInfo
            # puts in itself; no other cluster-scoped path has a namespace.
            if namespace not in (None, name if res is NAMESPACE else None):
                res = None
            namespace = None
        if res is None or request.extra or subresource not in (
                None, 'status' if res.new_status else None,
                'eviction' if res.evictable else None):
            raise _no_such_path()
        if request.verb not in ('get', 'list', 'watch') and 'dryRun' in query:
            raise ApiError(400, 'BadRequest',
                           'dryRun is not supported by this test server')
        table = 'as=Table' in self.headers.get('Accept', '')
        content_type = self.headers.get('Content-Type', '')
        if name is None:
            if request.verb == 'watch':
                self._stream_watch(res, namespace, query, table)
                return 200, None
            if request.verb == 'list':
                listing = api._list(res, namespace, query)
                if table:
                    return 200, _table(res, listing['items'],
                                       listing['metadata'])
                return 200, listing
            if request.verb == 'create' and (namespace or not res.namespaced):
                return 201, api._create(res, namespace,
                                        _decode(body, content_type))
        elif subresource == 'eviction':  # only ever POSTed
            if request.verb == 'create' and namespace:
                return 201, api._evict(namespace, name,
                                       _decode(body, content_type))
        elif namespace or not res.namespaced:
            if request.verb in ('get', 'watch'):
                obj = api._read(res, namespace, name)
                if table and not subresource:
                    return 200, _table(res, [obj], {
                        'resourceVersion': obj['metadata']['resourceVersion']})
                return 200, obj
            if request.verb == 'update':
                return 200, api._replace(res, namespace, name,
                                         _decode(body, content_type),
                                         subresource)
            if request.verb == 'patch':
                return 200, api._patch(res, namespace, name, content_type,
                                       body, subresource)
            if request.verb == 'delete' and not subresource:
                return 200, api._delete(res, namespace, name,
                                        _decode(body, content_type))
        raise ApiError(405, 'MethodNotAllowed', 'the server does not allow '
                       'this method on the requested resource')

    def _stream_watch(self, res: _Resource, namespace: Optional[str],
                      query: dict, table: bool) -> None:
        """Send watch events as chunked JSON lines, then a last chunk."""
        try:
            since = int(query.get('resourceVersion') or 0)
            deadline = time.monotonic() + float(
                query.get('timeoutSeconds') or 1800)
        except ValueError:
            raise ApiError(400, 'BadRequest',
                           'invalid resourceVersion or timeoutSeconds')
        events = self.server.api._watch(
            res, namespace, _selector(query, res), since, deadline)
        with self.server.api._watching():
            self.send_response(200)
            self.send_header('Content-Type', 'application/json')
            self.send_header('Transfer-Encoding', 'chunked')
            self.end_headers()
            for event_type, obj in events:
                if table:
                    obj = _table(res, [obj], {
                        'resourceVersion': obj['metadata']['resourceVersion']})
                self._chunk(json.dumps({'type': event_type, 'object': obj})
                            .encode() + b'\n')
            self._chunk(b'')

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(b'%x\r\n%s\r\n' % (len(data), data))
        self.wfile.flush()

    def _send(self, code: int, data: bytes, content_type: str,
              headers: Optional[dict] = None) -> None:
        self.send_response(code)
        self.send_header('Content-Type', content_type)
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.send_header('Content-Length', str(len(data)))
        self.end_headers()
        self.wfile.write(data)
