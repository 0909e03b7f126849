"""``storage_server.storage_classes`` and ``storage_server.
csi_driver_manifest_file_paths``: dynamic provisioning on the Storage
server's exports by csi-driver-nfs, parsed into the model.

Each class provisions a subdirectory per claim inside one export of the
request (its ``export_dir``); what happens to that subdirectory when the
claim goes is the class's ``on_delete`` (csi-driver-nfs's ``onDelete``),
``retain`` unless the operator asks otherwise: the driver never deletes
data nobody asked it to. The csi-driver-nfs manifests come from the VNF
package, so a site pins the release it tested and can mirror its images.
"""

import dataclasses
import re

from kubernetes_mgmt_pv.request import param_checks

ON_DELETE = ('retain', 'delete', 'archive')
DEFAULT_ON_DELETE = 'retain'
DEFAULT_MOUNT_OPTIONS = ('nfsvers=4.1',)
# A StorageClass name (a DNS-1123 subdomain); the CSI driver's own name.
_CLASS_NAME = re.compile(r'[a-z0-9](?:[-a-z0-9.]{0,251}[a-z0-9])?')
# An NFS mount option: a word, and a value without separators or spaces.
_MOUNT_OPTION = re.compile(r'[a-z][a-z0-9_]{0,31}(?:=[A-Za-z0-9._:/-]{1,64})?')
MAX_MOUNT_OPTIONS = 16
_CLASS_KEYS = ('name', 'export_dir', 'on_delete', 'mount_options',
               'default_class')


@dataclasses.dataclass(frozen=True)
class StorageClassSpec(object):
    """One StorageClass the driver creates: provisions from
    ``export_dir`` (one of the request's exports)."""
    name: str
    export_dir: str
    on_delete: str = DEFAULT_ON_DELETE
    mount_options: tuple = DEFAULT_MOUNT_OPTIONS
    default_class: bool = False
    json_path: str = dataclasses.field(default=None, compare=False)


@dataclasses.dataclass(frozen=True)
class ManifestFile(object):
    """A csi-driver-nfs manifest: its path in the package and the JSON
    path of the request item naming it."""
    path: str
    json_path: str = dataclasses.field(default=None, compare=False)


def parse(check, storage, path, exports):
    """(StorageClassSpecs, csi-driver-nfs ManifestFiles) of the
    ``storage`` mapping at ``path``; ``exports``: its NfsExports."""
    classes = []
    for item_path, item in check.items(storage, 'storage_classes', path,
                                       minimum=0):
        item = check.mapping(item, item_path)
        if item is not None:
            check.no_unknown_keys(item, item_path, _CLASS_KEYS)
            classes.append(_parse_class(check, item, item_path, exports))
    manifests = [ManifestFile(check.package_path_value(value, item_path),
                              item_path)
                 for item_path, value in check.items(
                     storage, 'csi_driver_manifest_file_paths', path,
                     minimum=1 if classes else 0)]
    if manifests and not classes:
        check.warn(path + '.csi_driver_manifest_file_paths',
                   'no storage_classes use csi-driver-nfs: its manifests '
                   'are not applied')
    _reject_repeats(check, classes)
    return tuple(classes), tuple(m for m in manifests if m.path)


def _parse_class(check, item, item_path, exports):
    name = check.text(item, 'name', item_path)
    if name is not None and not _CLASS_NAME.fullmatch(name):
        check.fail(item_path + '.name', 'must be a StorageClass name: lower '
                   'case letters, digits, - and ., starting and ending with '
                   'a letter or digit, at most 253, got %s'
                   % param_checks.shown(name))
    export_dir = check.absolute_path(item, 'export_dir', item_path)
    if export_dir and exports and not any(
            export.export_dir == export_dir for export in exports):
        check.fail(item_path + '.export_dir', '%s is not the export_dir of '
                   'any nfs_server_setup_params item: a class provisions '
                   'inside one export of the Storage server' % export_dir)
    return StorageClassSpec(
        name=name, export_dir=export_dir,
        on_delete=_on_delete(check, item, item_path),
        mount_options=_mount_options(check, item, item_path),
        default_class=_flag(check, item, 'default_class', item_path),
        json_path=item_path)


def _on_delete(check, item, item_path):
    value = item.get('on_delete', DEFAULT_ON_DELETE)
    if value in ON_DELETE:
        return value
    check.fail(item_path + '.on_delete', 'must be one of %s, got %s' % (
        ', '.join(ON_DELETE), param_checks.shown(value)))
    return DEFAULT_ON_DELETE


def _mount_options(check, item, item_path):
    if item.get('mount_options') is None:
        return DEFAULT_MOUNT_OPTIONS
    options = []
    entries = check.items(item, 'mount_options', item_path, minimum=1)
    if len(entries) > MAX_MOUNT_OPTIONS:
        check.fail(item_path + '.mount_options', 'must have at most %d '
                   'items' % MAX_MOUNT_OPTIONS)
    for where, value in entries[:MAX_MOUNT_OPTIONS]:
        if isinstance(value, str) and _MOUNT_OPTION.fullmatch(value):
            options.append(value)
        else:
            check.fail(where, 'must be an NFS mount option such as '
                       'nfsvers=4.1 or hard, got %s'
                       % param_checks.shown(value))
    return tuple(options)


def _flag(check, item, key, item_path):
    value = item.get(key, False)
    if isinstance(value, bool):
        return value
    check.fail('%s.%s' % (item_path, key), 'must be true or false, got %s'
               % param_checks.shown(value))
    return False


def _reject_repeats(check, classes):
    names, defaults = {}, []
    for spec in classes:
        if spec.name in names:
            check.fail(spec.json_path + '.name', '%s is already the name of '
                       '%s' % (spec.name, names[spec.name]))
        names.setdefault(spec.name, spec.json_path)
        if spec.default_class:
            defaults.append(spec.json_path)
    if len(defaults) > 1:
        check.fail(defaults[1] + '.default_class', 'only one class can be '
                   "the cluster's default; %s is already" % defaults[0])
