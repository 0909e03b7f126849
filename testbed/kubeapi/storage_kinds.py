"""The kinds a CSI driver's installation brings to the test API server:
storage.k8s.io's StorageClass and CSIDriver, and the namespaced RBAC
kinds (Role, RoleBinding) its manifests hold; defaults, validation and
``kubectl get`` rows as the API server has them."""

import json
from typing import Optional

from testbed.kubeapi import model
from testbed.kubeapi import printing
from testbed.kubeapi import validation

STORAGE_GROUP = 'storage.k8s.io'
DEFAULT_CLASS = 'storageclass.kubernetes.io/is-default-class'
_RECLAIM_POLICIES = ('Delete', 'Retain')
_BINDING_MODES = ('Immediate', 'WaitForFirstConsumer')


def prepare_storage_class(obj: dict, old: Optional[dict]) -> None:
    obj.setdefault('reclaimPolicy', 'Delete')
    obj.setdefault('volumeBindingMode', 'Immediate')


def storage_class_errors(obj: dict, old: Optional[dict]) -> list:
    errors = []
    if not obj.get('provisioner'):
        errors.append(validation.required('provisioner'))
    for field, allowed in (('reclaimPolicy', _RECLAIM_POLICIES),
                           ('volumeBindingMode', _BINDING_MODES)):
        if obj.get(field) not in allowed:
            errors.append((field, 'FieldValueNotSupported',
                           f'Unsupported value: {json.dumps(obj.get(field))}'
                           ': supported values: ' + ', '.join(
                               f'"{value}"' for value in allowed)))
    if old is not None:
        for field in ('parameters', 'provisioner', 'reclaimPolicy',
                      'volumeBindingMode'):
            if obj.get(field) != old.get(field):
                errors.append((field, 'FieldValueForbidden',
                               f'Forbidden: updates to {field} are '
                               'forbidden.'))
    return errors


def is_default(storage_class: dict) -> bool:
    return (storage_class['metadata'].get('annotations') or {}).get(
        DEFAULT_CLASS) == 'true'


def admit_claim(claim: dict, classes: list) -> None:
    """The DefaultStorageClass admission plugin: a new claim that names no
    class (no storageClassName at all; "" asks for none) gets the default
    one, the newest if there are several."""
    spec = claim.setdefault('spec', {})
    defaults = sorted((c for c in classes if is_default(c)
                       and not c['metadata'].get('deletionTimestamp')),
                      key=lambda c: c['metadata']['creationTimestamp'])
    if 'storageClassName' not in spec and defaults:
        spec['storageClassName'] = defaults[-1]['metadata']['name']


def storage_class_cells(obj: dict) -> list:
    return [obj['metadata']['name'] + (' (default)' if is_default(obj)
                                       else ''),
            obj.get('provisioner', ''), obj.get('reclaimPolicy', ''),
            obj.get('volumeBindingMode', ''),
            str(bool(obj.get('allowVolumeExpansion'))).lower(),
            printing.age(obj)]


def csi_driver_cells(obj: dict) -> list:
    spec = obj.get('spec') or {}
    return [obj['metadata']['name'],
            str(spec.get('attachRequired', True)).lower(),
            str(spec.get('podInfoOnMount', False)).lower(),
            ','.join(spec.get('volumeLifecycleModes') or ['Persistent']),
            printing.age(obj)]


def role_binding_errors(obj: dict, old: Optional[dict]) -> list:
    """A RoleBinding's roleRef: a Role of its namespace or a ClusterRole."""
    return validation.binding_errors(obj, old, ('Role', 'ClusterRole'))


STORAGE_CLASS = model.Resource(
    STORAGE_GROUP, 'storageclasses', 'StorageClass', False, ('sc',),
    prepare=prepare_storage_class, check=storage_class_errors,
    columns=('Name', 'Provisioner', 'ReclaimPolicy', 'VolumeBindingMode',
             'AllowVolumeExpansion', 'Age'), cells=storage_class_cells)
CSI_DRIVER = model.Resource(
    STORAGE_GROUP, 'csidrivers', 'CSIDriver', False,
    columns=('Name', 'AttachRequired', 'PodInfoOnMount', 'Modes', 'Age'),
    cells=csi_driver_cells)
ROLE = model.Resource(
    model.RBAC_GROUP, 'roles', 'Role', True, name_rule='path segment',
    check=validation.cluster_role_errors,
    columns=('Name', 'Created At'), cells=printing.cluster_role_cells)
ROLE_BINDING = model.Resource(
    model.RBAC_GROUP, 'rolebindings', 'RoleBinding', True,
    name_rule='path segment', check=role_binding_errors,
    columns=('Name', 'Role', 'Age'),
    wide_columns=('Users', 'Groups', 'ServiceAccounts'),
    cells=printing.binding_cells)
