"""storage_server.storage_classes and csi_driver_manifest_file_paths:
what parses, and each refusal named by its JSON path."""

import pytest

from kubernetes_mgmt_pv.request import param_model
from kubernetes_mgmt_pv.request import storage_class_params as scp
from tests.unit import test_params

STORAGE = param_model.STORAGE_PATH
CLASSES = STORAGE + '.storage_classes'
MANIFESTS = STORAGE + '.csi_driver_manifest_file_paths'
CSI = ['Files/csi-driver-nfs/rbac-csi-nfs.yaml',
       'Files/csi-driver-nfs/csi-nfs-driverinfo.yaml',
       'Files/csi-driver-nfs/csi-nfs-controller.yaml',
       'Files/csi-driver-nfs/csi-nfs-node.yaml']


def request(classes, manifests=CSI):
    value = test_params.sample()
    storage = value[param_model.ROOT]['storage_server']
    if classes is not None:
        storage['storage_classes'] = classes
    if manifests is not None:
        storage['csi_driver_manifest_file_paths'] = manifests
    return value


def parsed_storage(classes, manifests=CSI):
    return param_model.parse(request(classes, manifests)).storage


def test_a_class_takes_the_defaults():
    storage = parsed_storage([{'name': 'nfs-dynamic',
                               'export_dir': '/volume/nfs/pv1'}])
    assert storage.storage_classes == (scp.StorageClassSpec(
        'nfs-dynamic', '/volume/nfs/pv1', 'retain', ('nfsvers=4.1',),
        False),)
    assert storage.csi_manifests == tuple(scp.ManifestFile(path)
                                          for path in CSI)
    assert storage.csi_manifests[3].json_path == MANIFESTS + '[3]'


def test_every_key_given():
    storage = parsed_storage([
        {'name': 'fast', 'export_dir': '/volume/nfs/pv1',
         'on_delete': 'archive', 'default_class': True,
         'mount_options': ['nfsvers=4.2', 'hard', 'timeo=600']},
        {'name': 'scratch', 'export_dir': '/volume/nfs/pv2',
         'on_delete': 'delete'}])
    assert [(c.name, c.on_delete, c.mount_options, c.default_class)
            for c in storage.storage_classes] == [
        ('fast', 'archive', ('nfsvers=4.2', 'hard', 'timeo=600'), True),
        ('scratch', 'delete', ('nfsvers=4.1',), False)]
    assert storage.storage_classes[1].json_path == CLASSES + '[1]'


def test_without_classes_there_is_nothing_to_provision():
    storage = parsed_storage(None, manifests=None)
    assert storage.storage_classes == () and storage.csi_manifests == ()


GOOD = {'name': 'nfs', 'export_dir': '/volume/nfs/pv1'}


@pytest.mark.parametrize('classes, manifests, path, reason', [
    ([dict(GOOD, name='NFS')], CSI, CLASSES + '[0].name',
     'StorageClass name'),
    ([dict(GOOD, name='-nfs')], CSI, CLASSES + '[0].name',
     'StorageClass name'),
    ([dict(GOOD, name=None)], CSI, CLASSES + '[0].name', 'required'),
    ([dict(GOOD, export_dir='/volume/nfs/pv9')], CSI,
     CLASSES + '[0].export_dir', 'not the export_dir of any'),
    ([dict(GOOD, export_dir='volume')], CSI, CLASSES + '[0].export_dir',
     'absolute path'),
    ([dict(GOOD, on_delete='Delete')], CSI, CLASSES + '[0].on_delete',
     'retain, delete, archive'),
    ([dict(GOOD, mount_options=[])], CSI, CLASSES + '[0].mount_options',
     'at least 1'),
    ([dict(GOOD, mount_options='nfsvers=4.1')], CSI,
     CLASSES + '[0].mount_options', 'must be a list'),
    ([dict(GOOD, mount_options=['nfsvers=4.1', 'ro,exec'])], CSI,
     CLASSES + '[0].mount_options[1]', 'NFS mount option'),
    ([dict(GOOD, mount_options=['a b'])], CSI,
     CLASSES + '[0].mount_options[0]', 'NFS mount option'),
    ([dict(GOOD, mount_options=['hard'] * 17)], CSI,
     CLASSES + '[0].mount_options', 'at most 16'),
    ([dict(GOOD, default_class='yes')], CSI, CLASSES + '[0].default_class',
     'true or false'),
    ([dict(GOOD, onDelete='retain')], CSI, CLASSES + '[0].onDelete',
     'unknown key'),
    ([GOOD, dict(GOOD, export_dir='/volume/nfs/pv2')], CSI,
     CLASSES + '[1].name', 'already the name of ' + CLASSES + '[0]'),
    ([dict(GOOD, default_class=True),
      dict(GOOD, name='other', default_class=True)], CSI,
     CLASSES + '[1].default_class', "only one class can be the cluster's"),
    ([GOOD], None, MANIFESTS, 'required'),
    ([GOOD], [], MANIFESTS, 'at least 1'),
    ([GOOD], ['/etc/csi.yaml'], MANIFESTS + '[0]', 'relative path'),
    ([GOOD], ['Files/../../x.yaml'], MANIFESTS + '[0]', 'normalised'),
    ([GOOD], [7], MANIFESTS + '[0]', 'must be a string'),
    ('nfs', CSI, CLASSES, 'must be a list'),
    (['nfs'], CSI, CLASSES + '[0]', 'must be an object'),
])
def test_refusals_name_the_json_path(classes, manifests, path, reason):
    errors = test_params.errors_of(request(classes, manifests))
    assert path in errors, errors
    assert reason in errors[path]


def test_manifests_without_classes_warn():
    result = param_model.parse_partially(request(None))
    assert result.errors == ()
    assert MANIFESTS in [w.path for w in result.params.warnings]
    result = param_model.parse_partially(request(None, manifests=None))
    assert MANIFESTS not in [w.path for w in result.params.warnings]
