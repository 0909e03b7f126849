"""A small in-memory Kubernetes API server that the real kubectl can talk to.

Tests of the management driver need kubectl to behave as it does against a
cluster: discovery, client-side ``apply`` (strategic merge patches), ``wait``
(list + watch), ``delete`` waiting for finalizers. This server implements
that much of core/v1 for PersistentVolumes and PersistentVolumeClaims, plus
a tiny controller imitating the PV binder and the pv-/pvc-protection
finalizers. It follows the requests kubectl was seen to send.

Standard library only; the TLS certificate is made with the ``openssl`` CLI.
"""

import base64
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

GCLOUD_KUBECTL_DIR = '/usr/lib/google-cloud-sdk/bin'
SERVER_VERSION = 'v1.32.0'
PV_PROTECTION = 'kubernetes.io/pv-protection'
PVC_PROTECTION = 'kubernetes.io/pvc-protection'
# kubectl takes an empty protobuf document as "no schemas". It must not get
# the "...spec.v2@v1.0+protobuf" it asks for: Go's MIME parser rejects "@".
OPENAPI_V2_TYPE = ('application/com.github.proto-openapi.spec.v2.v1.0'
                   '+protobuf')


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

@dataclasses.dataclass(frozen=True)
class _Resource:
    plural: str
    singular: str
    kind: str
    short_name: str
    namespaced: bool
    finalizer: str


PV = _Resource('persistentvolumes', 'persistentvolume', 'PersistentVolume',
               'pv', False, PV_PROTECTION)
PVC = _Resource('persistentvolumeclaims', 'persistentvolumeclaim',
                'PersistentVolumeClaim', 'pvc', True, PVC_PROTECTION)
_RESOURCES = {res.plural: res for res in (PV, PVC)}

# The fields of a PV spec that form its (immutable) PersistentVolumeSource.
_PV_SOURCES = (
    'awsElasticBlockStore', 'azureDisk', 'azureFile', 'cephfs', 'cinder',
    'csi', 'fc', 'flexVolume', 'flocker', 'gcePersistentDisk', 'glusterfs',
    'hostPath', 'iscsi', 'local', 'nfs', 'photonPersistentDisk',
    'portworxVolume', 'quobyte', 'rbd', 'scaleIO', 'storageos',
    'vsphereVolume')
_ACCESS_MODES = {'ReadWriteOnce': 'RWO', 'ReadOnlyMany': 'ROX',
                 'ReadWriteMany': 'RWX', 'ReadWriteOncePod': 'RWOP'}
_RECLAIM_POLICIES = ('Delete', 'Recycle', 'Retain')
_DNS_SUBDOMAIN = re.compile(
    r'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')
_API_PATH = re.compile(r'/api/v1(?:/namespaces/(?P<namespace>[^/]+))?'
                       r'/(?P<plural>[^/]+)(?:/(?P<name>[^/]+))?/?')


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
        if self.details:
            status['details'] = self.details
        return status


def _not_found(res: _Resource, name: str) -> ApiError:
    return ApiError(404, 'NotFound', f'{res.plural} "{name}" not found',
                    {'name': name, 'kind': res.plural})


def _conflict(res: _Resource, name: str, message: str) -> ApiError:
    return ApiError(409, 'Conflict', f'Operation cannot be fulfilled on '
                                     f'{res.plural} "{name}": {message}',
                    {'name': name, 'kind': res.plural})


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime(
        '%Y-%m-%dT%H:%M:%SZ')


def _resource_for(kind: str) -> _Resource:
    for res in _RESOURCES.values():
        if kind.lower() in (res.plural, res.singular, res.kind.lower(),
                            res.short_name):
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
            or body.get('apiVersion', 'v1') != 'v1'):
        raise ApiError(400, 'BadRequest',
                       f'the API version in the data '
                       f'({body.get("apiVersion")}) and kind '
                       f'({body.get("kind")}) do not match v1 {res.kind}')
    obj = copy.deepcopy(body)
    obj.update(kind=res.kind, apiVersion='v1')
    obj.setdefault('metadata', {})
    return obj


def _decode(body: bytes):
    try:
        return json.loads(body or b'{}')
    except ValueError as error:
        raise ApiError(400, 'BadRequest',
                       f'the request body is not valid JSON: {error}')


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

def _default_spec(res: _Resource, obj: dict) -> None:
    spec = obj.setdefault('spec', {})
    spec.setdefault('volumeMode', 'Filesystem')
    if res is PV:
        spec.setdefault('persistentVolumeReclaimPolicy', 'Retain')


def _validate(res: _Resource, obj: dict, old: Optional[dict] = None) -> None:
    """Reject, in Kubernetes' words, invalid objects a driver could send."""
    errors = []  # (field, cause reason, message body)
    name = obj['metadata'].get('name') or ''
    if not name:
        errors.append(('metadata.name', 'FieldValueRequired',
                       'Required value: name or generateName is required'))
    elif len(name) > 253 or not _DNS_SUBDOMAIN.fullmatch(name):
        errors.append((
            'metadata.name', 'FieldValueInvalid',
            f'Invalid value: "{name}": a lowercase RFC 1123 subdomain must '
            "consist of lower case alphanumeric characters, '-' or '.', and "
            'must start and end with an alphanumeric character'))
    spec = obj.get('spec') or {}
    modes = spec.get('accessModes') or []
    if not modes:
        errors.append(('spec.accessModes', 'FieldValueRequired',
                       'Required value'))
    for mode in modes:
        if mode not in _ACCESS_MODES:
            errors.append(('spec.accessModes', 'FieldValueNotSupported',
                           f'Unsupported value: "{mode}"'))
    errors += (_pv_errors if res is PV else _pvc_errors)(spec, old)
    if errors:
        causes = [{'reason': reason, 'message': body, 'field': field}
                  for field, reason, body in errors]
        texts = [f'{field}: {body}' for field, _, body in errors]
        summary = texts[0] if len(texts) == 1 else f'[{", ".join(texts)}]'
        raise ApiError(422, 'Invalid',
                       f'{res.kind} "{name}" is invalid: {summary}',
                       {'name': name, 'kind': res.kind, 'causes': causes})


def _quantity_errors(field: str, value) -> list:
    if value is None:
        return [(field, 'FieldValueRequired', 'Required value')]
    try:
        parse_quantity(value)
        return []
    except ValueError:
        return [(field, 'FieldValueInvalid',
                 f'Invalid value: "{value}": must be a quantity')]


def _pv_errors(spec: dict, old: Optional[dict]) -> list:
    errors = _quantity_errors('spec.capacity',
                              (spec.get('capacity') or {}).get('storage'))
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
            errors.append(('spec.nfs.server', 'FieldValueRequired',
                           'Required value'))
        if not nfs.get('path'):
            errors.append(('spec.nfs.path', 'FieldValueRequired',
                           'Required value'))
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


def _pvc_errors(spec: dict, old: Optional[dict]) -> list:
    requests = (spec.get('resources') or {}).get('requests') or {}
    errors = _quantity_errors('spec.resources[storage]',
                              requests.get('storage'))
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


# --- patches and selectors -------------------------------------------------

def _merge(target, patch, strategic: bool):
    """JSON merge patch (RFC 7386), or with ``strategic`` a strategic one.

    The strategic variant honours the map directives kubectl may send but
    replaces lists whole, which for PV/PVC objects differs from Kubernetes
    only for lists with a merge key (finalizers, ownerReferences).
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


def _selector(query: dict) -> Callable[[dict], bool]:
    """Build a predicate from fieldSelector and an equality labelSelector."""
    tests = []
    for term in filter(None, query.get('fieldSelector', '').split(',')):
        match = re.fullmatch(r'([^!=]+)(==|=|!=)(.*)', term)
        if not match or match[1] not in ('metadata.name',
                                         'metadata.namespace'):
            raise ApiError(400, 'BadRequest', 'field label not supported: '
                                              + term.split('=')[0])
        field = match[1].split('.', 1)[1]  # name or namespace
        negate, value = match[2] == '!=', match[3]
        tests.append(lambda obj, f=field, n=negate, v=value:
                     (obj['metadata'].get(f) == v) != n)
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


_COLUMNS = {
    PV: (['Name', 'Capacity', 'Access Modes', 'Reclaim Policy', 'Status',
          'Claim', 'StorageClass', 'VolumeAttributesClass', 'Reason', 'Age',
          'VolumeMode'], _pv_cells),
    PVC: (['Name', 'Status', 'Volume', 'Capacity', 'Access Modes',
           'StorageClass', 'VolumeAttributesClass', 'Age', 'VolumeMode'],
          _pvc_cells),
}


def _table(res: _Resource, objects: list, metadata: dict) -> dict:
    """Render objects as the meta.k8s.io Table that "kubectl get" prints."""
    names, cells = _COLUMNS[res]
    return {
        'kind': 'Table', 'apiVersion': 'meta.k8s.io/v1',
        'metadata': metadata,
        'columnDefinitions': [
            {'name': name, 'type': 'string',
             'format': 'name' if name == 'Name' else '', 'description': '',
             'priority': 1 if name == 'VolumeMode' else 0}  # 1: -o wide
            for name in names],
        'rows': [{'cells': cells(obj),
                  'object': {'kind': 'PartialObjectMetadata',
                             'apiVersion': 'meta.k8s.io/v1',
                             'metadata': obj['metadata']}}
                 for obj in objects],
    }


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


# --- the server ------------------------------------------------------------

class KubeApiServer:
    """In-memory API server for PVs and PVCs over HTTPS, with a controller.

    Use it as a context manager, or call start() and stop(). Each instance
    has its own self-signed certificate and random bearer token, and
    kubeconfig() gives kubectl what it needs to connect.

    Stored objects are never mutated in place: every change stores a new
    dict, so snapshots and watch events can be shared without copying.
    """

    def __init__(self, host: str = '127.0.0.1', port: int = 0, *,
                 available_delay: float = 0.3,
                 version: str = SERVER_VERSION, extra_sans: tuple = ()):
        """Bind to host:port (0: any free port) once started.

        ``available_delay``: seconds a new PV stays Pending before it becomes
        Available. ``version``: the gitVersion of /version, from which the
        Cloud SDK dispatcher picks its kubectl. ``extra_sans``: more names
        and IPs for the certificate.
        """
        self.host = host
        self.port = port
        self.available_delay = available_delay
        self.version = version
        self.token = secrets.token_urlsafe(24)
        self.ca_pem = ''
        self._client_host = host if host not in ('', '0.0.0.0') \
            else '127.0.0.1'
        self._sans = ['localhost', '127.0.0.1', self._client_host,
                      *extra_sans]
        self._cond = threading.Condition(threading.RLock())
        self._objects = {plural: {} for plural in _RESOURCES}
        # self._events[i] is (type, resource, object) of resourceVersion i+1.
        self._events = []
        self._changes = 0  # bumped on every change the controller must see
        self._stuck_pending = set()
        self._failures = []  # InjectedFailure, see fail_requests()
        self._available_at = {}  # PV name -> monotonic time to leave Pending
        self._requests = []
        self._watchers = 0
        self._stopping = False
        self._httpd = None
        self._threads = []

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

    def kubeconfig(self, server_host: Optional[str] = None,
                   token: Optional[str] = None) -> str:
        """Return kubeconfig YAML for this server.

        ``server_host`` is the address kubectl dials (e.g. the bridge IP as
        seen from a test host); if the certificate does not name it, the
        kubeconfig sets tls-server-name to "localhost", which it does name.
        ``token`` replaces the valid one (to test authentication failures).
        """
        host = server_host or self._client_host
        tls_name = ('' if host in self._sans
                    else '    tls-server-name: localhost\n')
        ca_data = base64.b64encode(self.ca_pem.encode()).decode()
        return ('apiVersion: v1\n'
                'kind: Config\n'
                'clusters:\n'
                '- name: kubeapi-test\n'
                '  cluster:\n'
                f'    server: https://{host}:{self.port}\n'
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
        """Snapshot of the stored objects of a kind ("pv", "PVC", ...)."""
        res = _resource_for(kind)
        with self._cond:
            items = sorted(self._objects[res.plural].items(),
                           key=lambda item: _sort_key(item[0]))
        return [copy.deepcopy(obj) for (ns, _), obj in items
                if namespace is None or ns == namespace]

    def get(self, kind: str, name: str,
            namespace: str = 'default') -> Optional[dict]:
        """A copy of one stored object, or None."""
        res = _resource_for(kind)
        key = (namespace if res.namespaced else None, name)
        with self._cond:
            return copy.deepcopy(self._objects[res.plural].get(key))

    def create(self, obj: dict) -> dict:
        """Create an object as a client would (e.g. a PVC for a scenario)."""
        res = _resource_for(obj.get('kind', ''))
        namespace = (obj.get('metadata') or {}).get('namespace') or 'default'
        created = self._create(res, namespace if res.namespaced else None,
                               obj)
        return copy.deepcopy(created)

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

    def _discovery(self, path: str) -> Optional[dict]:
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
            return {'kind': 'APIGroupList', 'apiVersion': 'v1', 'groups': []}
        if path == '/api/v1':
            return {'kind': 'APIResourceList', 'apiVersion': 'v1',
                    'groupVersion': 'v1', 'resources': [
                        {'name': res.plural, 'singularName': res.singular,
                         'namespaced': res.namespaced, 'kind': res.kind,
                         'verbs': ['create', 'delete', 'get', 'list',
                                   'patch', 'update', 'watch'],
                         'shortNames': [res.short_name]}
                        for res in _RESOURCES.values()]}
        return None

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
        meta['finalizers'] = list(dict.fromkeys(
            [*(meta.get('finalizers') or []), res.finalizer]))
        _default_spec(res, obj)
        obj['status'] = {'phase': 'Pending'}
        _validate(res, obj)
        with self._cond:
            if (namespace, meta['name']) in self._objects[res.plural]:
                raise ApiError(409, 'AlreadyExists',
                               f'{res.plural} "{meta["name"]}" already '
                               'exists',
                               {'name': meta['name'], 'kind': res.plural})
            if res is PV:
                self._available_at[meta['name']] = (time.monotonic()
                                                    + self.available_delay)
            return self._commit(res, obj, 'ADDED')

    def _read(self, res: _Resource, namespace: Optional[str],
              name: str) -> dict:
        with self._cond:
            return self._get(res, namespace, name)

    def _list(self, res: _Resource, namespace: Optional[str],
              query: dict) -> dict:
        matches = _selector(query)
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
                for key, obj in self._objects[res.plural].items()
                if (namespace is None or key[0] == namespace) and matches(obj))
        items = [item for item in items if item[0] > after]
        if limit and len(items) > limit:
            items = items[:limit]
            metadata['continue'] = base64.urlsafe_b64encode(
                json.dumps(items[-1][0]).encode()).decode()
        return {'kind': f'{res.kind}List', 'apiVersion': 'v1',
                'metadata': metadata, 'items': [obj for _, obj in items]}

    def _replace(self, res: _Resource, namespace: Optional[str], name: str,
                 body) -> dict:
        with self._cond:
            old = self._get(res, namespace, name)
            return self._update(res, old, _as_object(res, body))

    def _patch(self, res: _Resource, namespace: Optional[str], name: str,
               content_type: str, body: bytes) -> dict:
        with self._cond:
            old = self._get(res, namespace, name)
            patched = _apply_patch(old, content_type, body)
            return self._update(res, old, _as_object(res, patched))

    def _delete(self, res: _Resource, namespace: Optional[str], name: str,
                options: dict) -> dict:
        """Delete now, or with finalizers mark Terminating until they go."""
        preconditions = options.get('preconditions') or {}
        with self._cond:
            old = self._get(res, namespace, name)
            for field in ('uid', 'resourceVersion'):
                wanted, actual = preconditions.get(field), \
                    old['metadata'][field]
                if wanted and wanted != actual:
                    raise _conflict(res, name, f'Precondition failed: '
                                    f'{field} in precondition: {wanted}, '
                                    f'{field} in object meta: {actual}')
            if old['metadata'].get('deletionTimestamp'):
                return old
            obj = copy.deepcopy(old)
            obj['metadata'].update(deletionTimestamp=_now(),
                                   deletionGracePeriodSeconds=0)
            return self._commit(res, obj)

    @contextlib.contextmanager
    def _watching(self):
        """Count an open watch stream, so stop() can let it end cleanly."""
        with self._cond:
            self._watchers += 1
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
                obj for _, obj in sorted(self._objects[res.plural].items(),
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
        obj = self._objects[res.plural].get(key)
        if obj is None:
            raise _not_found(res, name)
        return obj

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
        if meta.get('deletionTimestamp') and not meta.get('finalizers'):
            del self._objects[res.plural][key]
            self._available_at.pop(meta['name'], None)
            event_type = 'DELETED'
        else:
            self._objects[res.plural][key] = obj
        self._events.append((event_type, res, obj))
        self._wake()
        return obj

    def _update(self, res: _Resource, old: dict, new: dict) -> dict:
        """Store a client's new version of old (PUT or PATCH) by the API
        server's rules: optimistic concurrency, system metadata kept, status
        left to the controller."""
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
        for key in ('name', 'namespace', 'uid', 'creationTimestamp',
                    'resourceVersion', 'deletionTimestamp',
                    'deletionGracePeriodSeconds'):
            if key in old_meta:
                meta[key] = old_meta[key]
            else:
                meta.pop(key, None)
        new['status'] = copy.deepcopy(old.get('status') or {})
        _default_spec(res, new)
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

    # -- controller

    def _control(self) -> None:
        """Controller thread: reconcile after every change, or when a PV is
        due to leave Pending. Its own changes cause another pass, until a
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
        """One pass over claims and volumes.

        Returns the monotonic time at which the next Pending PV is due.
        """
        volumes = self._objects[PV.plural]
        for pvc in list(self._objects[PVC.plural].values()):
            meta, phase = pvc['metadata'], pvc['status'].get('phase')
            if meta.get('deletionTimestamp'):
                if PVC_PROTECTION in meta.get('finalizers', []):
                    # No pods exist here that could still use the claim.
                    self._drop_finalizer(PVC, pvc)
            elif phase == 'Pending':
                volume = self._find_volume(pvc)
                if volume is not None:
                    self._bind(volume, pvc)
            elif phase == 'Bound' and (
                    None, pvc['spec'].get('volumeName')) not in volumes:
                self._set_status(PVC, pvc, phase='Lost')

        now, next_due = time.monotonic(), None
        for pv in list(volumes.values()):
            meta, phase = pv['metadata'], pv['status'].get('phase')
            ref = pv['spec'].get('claimRef')
            if (meta.get('deletionTimestamp') and phase != 'Bound'
                    and PV_PROTECTION in meta.get('finalizers', [])):
                self._drop_finalizer(PV, pv)
            elif phase == 'Pending':
                if meta['name'] in self._stuck_pending:
                    continue
                due = self._available_at.get(meta['name'], now)
                if due > now:
                    next_due = min(due, next_due or due)
                    continue
                self._available_at.pop(meta['name'], None)
                self._set_status(PV, pv, phase='Available')
            elif phase == 'Bound' and not self._claim_exists(ref):
                self._reclaim(pv)
            elif ref is None and phase != 'Available':
                self._set_status(PV, pv, phase='Available')
        return next_due

    def _claim_exists(self, ref: Optional[dict]) -> bool:
        if not ref:
            return False
        claim = self._objects[PVC.plural].get(
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
        for pv in self._objects[PV.plural].values():
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


def _make_certificate(workdir: str, sans: list) -> tuple:
    """Make a self-signed CA certificate that is the server's own too."""
    entries = []
    for name in dict.fromkeys(sans):
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
        try:
            self._authenticate(url.path)
            if method == 'GET' and url.path == '/openapi/v2':
                self._send(200, b'', OPENAPI_V2_TYPE)
                return
            discovery = api._discovery(url.path) if method == 'GET' else None
            if discovery is not None:
                code, payload = 200, discovery
            else:
                code, payload = self._call(method, url.path, query, body)
        except ApiError as error:
            code, payload = error.code, error.status()
        if payload is not None:
            self._send(code, json.dumps(payload).encode(), 'application/json')

    def _authenticate(self, path: str) -> None:
        header = self.headers.get('Authorization')
        if header is None and path == '/version':
            return  # public, as for anonymous users of a real cluster
        if not secrets.compare_digest(header or '',
                                      f'Bearer {self.server.api.token}'):
            raise ApiError(401, 'Unauthorized', 'Unauthorized')

    def _call(self, method: str, path: str, query: dict,
              body: bytes) -> tuple:
        """Serve a resource request: (code, payload), or (200, None) if the
        response was streamed."""
        api = self.server.api
        match = _API_PATH.fullmatch(path)
        res = _RESOURCES.get(match['plural']) if match else None
        if res is None or (match['namespace'] and not res.namespaced):
            raise ApiError(404, 'NotFound',
                           'the server could not find the requested resource')
        namespace, name = match['namespace'], match['name']
        if method != 'GET' and 'dryRun' in query:
            raise ApiError(400, 'BadRequest',
                           'dryRun is not supported by this test server')
        table = 'as=Table' in self.headers.get('Accept', '')
        if name is None:
            if method == 'GET' and query.get('watch') in ('true', '1'):
                self._stream_watch(res, namespace, query, table)
                return 200, None
            if method == 'GET':
                listing = api._list(res, namespace, query)
                if table:
                    return 200, _table(res, listing['items'],
                                       listing['metadata'])
                return 200, listing
            if method == 'POST' and (namespace or not res.namespaced):
                return 201, api._create(res, namespace, _decode(body))
        elif namespace or not res.namespaced:
            if method == 'GET':
                obj = api._read(res, namespace, name)
                if table:
                    return 200, _table(res, [obj], {
                        'resourceVersion': obj['metadata']['resourceVersion']})
                return 200, obj
            if method == 'PUT':
                return 200, api._replace(res, namespace, name, _decode(body))
            if method == 'PATCH':
                return 200, api._patch(res, namespace, name,
                                       self.headers.get('Content-Type', ''),
                                       body)
            if method == 'DELETE':
                return 200, api._delete(res, namespace, name, _decode(body))
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
        events = self.server.api._watch(res, namespace, _selector(query),
                                        since, deadline)
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

    def _send(self, code: int, data: bytes, content_type: str) -> None:
        self.send_response(code)
        self.send_header('Content-Type', content_type)
        self.send_header('Content-Length', str(len(data)))
        self.end_headers()
        self.wfile.write(data)
