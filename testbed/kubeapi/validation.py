"""Server-side defaults and validation of the test API server: names,
owner references, PersistentVolumes and claims, Namespaces, Secrets,
ConfigMaps and RBAC objects (Pods and workloads: workloads.py)."""

import base64
import binascii
import copy
import json
import re
from typing import Optional

from testbed.kubeapi import model


_PV_SOURCES = (  # the fields of a PV spec that form its volume source
    'awsElasticBlockStore', 'azureDisk', 'azureFile', 'cephfs', 'cinder',
    'csi', 'fc', 'flexVolume', 'flocker', 'gcePersistentDisk', 'glusterfs',
    'hostPath', 'iscsi', 'local', 'nfs', 'photonPersistentDisk',
    'portworxVolume', 'quobyte', 'rbd', 'scaleIO', 'storageos',
    'vsphereVolume')
ACCESS_MODES = {'ReadWriteOnce': 'RWO', 'ReadOnlyMany': 'ROX',
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


def validate_object(res: model.Resource, obj: dict,
                    old: Optional[dict] = None) -> None:
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
        raise model.ApiError(
            422, 'Invalid', f'{res.group_kind} "{name}" is invalid: {summary}',
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


def required(field: str) -> tuple:
    return (field, 'FieldValueRequired', 'Required value')


def immutable(field: str, value) -> tuple:
    return (field, 'FieldValueInvalid',
            f'Invalid value: {json.dumps(value)}: field is immutable')


def prepare_pv(obj: dict, old: Optional[dict]) -> None:
    spec = obj.setdefault('spec', {})
    spec.setdefault('volumeMode', 'Filesystem')
    spec.setdefault('persistentVolumeReclaimPolicy', 'Retain')


def prepare_pvc(obj: dict, old: Optional[dict]) -> None:
    obj.setdefault('spec', {}).setdefault('volumeMode', 'Filesystem')


def _access_mode_errors(spec: dict) -> list:
    modes = spec.get('accessModes') or []
    errors = [] if modes else [required('spec.accessModes')]
    for mode in modes:
        if mode not in ACCESS_MODES:
            errors.append(('spec.accessModes', 'FieldValueNotSupported',
                           f'Unsupported value: "{mode}"'))
    return errors


def _quantity_errors(field: str, value) -> list:
    if value is None:
        return [required(field)]
    try:
        model.parse_quantity(value)
        return []
    except ValueError:
        return [(field, 'FieldValueInvalid',
                 f'Invalid value: "{value}": must be a quantity')]


def pv_errors(obj: dict, old: Optional[dict]) -> list:
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
            errors.append(required('spec.nfs.server'))
        if not nfs.get('path'):
            errors.append(required('spec.nfs.path'))
        elif not nfs['path'].startswith('/'):
            errors.append(('spec.nfs.path', 'FieldValueInvalid',
                           f'Invalid value: "{nfs["path"]}": '
                           'must be an absolute path'))
    csi = spec.get('csi')
    if isinstance(csi, dict):
        errors += [required(f'spec.csi.{key}')
                   for key in ('driver', 'volumeHandle') if not csi.get(key)]
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


def pvc_errors(obj: dict, old: Optional[dict]) -> list:
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


def prepare_namespace(obj: dict, old: Optional[dict]) -> None:
    # spec.finalizers changes only through the namespace controller.
    obj['spec'] = copy.deepcopy(old['spec']) if old else {
        'finalizers': ['kubernetes']}
    obj['metadata']['labels'] = {
        **model.labels(obj),
        'kubernetes.io/metadata.name': obj['metadata'].get('name') or ''}


def prepare_secret(obj: dict, old: Optional[dict]) -> None:
    """Default the type and fold stringData into data, as the API does."""
    obj.setdefault('type', 'Opaque')
    for key, value in (obj.get('data') or {}).items():
        try:
            base64.b64decode(value or '', validate=True)
        except (binascii.Error, TypeError, ValueError):
            raise model.ApiError(
                400, 'BadRequest', f'Secret in version "v1" cannot be '
                f'handled as a Secret: illegal base64 data in data[{key}]')
    string_data = obj.pop('stringData', None) or {}
    if string_data:
        obj['data'] = {**(obj.get('data') or {}),
                       **{key: model.b64(str(value))
                          for key, value in string_data.items()}}


def _key_errors(field: str, data) -> list:
    return [(f'{field}[{key}]', 'FieldValueInvalid',
             f'Invalid value: "{key}": a valid config key must consist of '
             "alphanumeric characters, '-', '_' or '.'")
            for key in data or {} if not _CONFIG_KEY.fullmatch(key)]


def secret_errors(obj: dict, old: Optional[dict]) -> list:
    errors = _key_errors('data', obj.get('data'))
    if old and obj.get('type') != old.get('type'):
        errors.append(immutable('type', obj.get('type')))
    annotations = obj['metadata'].get('annotations') or {}
    if (obj.get('type') == model.SERVICE_ACCOUNT_TOKEN
            and not annotations.get(model.SERVICE_ACCOUNT_NAME)):
        errors.append(required(
            f'metadata.annotations[{model.SERVICE_ACCOUNT_NAME}]'))
    return errors


def config_map_errors(obj: dict, old: Optional[dict]) -> list:
    return (_key_errors('data', obj.get('data'))
            + _key_errors('binaryData', obj.get('binaryData')))


def cluster_role_errors(obj: dict, old: Optional[dict]) -> list:
    return [required(f'rules[{index}].verbs')
            for index, rule in enumerate(obj.get('rules') or [])
            if not rule.get('verbs')]


def binding_errors(obj: dict, old: Optional[dict],
                   role_kinds: tuple = ('ClusterRole',)) -> list:
    """A ClusterRoleBinding's (a RoleBinding's: ``role_kinds`` Role and
    ClusterRole) roleRef and subjects."""
    ref = obj.get('roleRef') or {}
    errors = []
    if ref.get('kind') not in role_kinds:
        errors.append(('roleRef.kind', 'FieldValueNotSupported',
                       f'Unsupported value: "{ref.get("kind", "")}": '
                       'supported values: ' + ', '.join(
                           f'"{kind}"' for kind in role_kinds)))
    if ref.get('apiGroup') != model.RBAC_GROUP:
        errors.append(('roleRef.apiGroup', 'FieldValueNotSupported',
                       f'Unsupported value: "{ref.get("apiGroup", "")}": '
                       f'supported values: "{model.RBAC_GROUP}"'))
    if not ref.get('name'):
        errors.append(required('roleRef.name'))
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
            errors.append(required(f'{field}.name'))
        if (subject.get('kind') == 'ServiceAccount'
                and not subject.get('namespace')):
            errors.append(required(f'{field}.namespace'))
    return errors
