"""`validate` of a request with storage classes: the csi-driver-nfs
manifests load from the package as the hooks load them, an export only a
class uses is no unused export, and each problem is named by its path."""

import yaml

from tests.unit.cli_support import cluster_params
from tests.unit.cli_support import STORAGE
from tests.unit import test_csi_driver

MANIFESTS = STORAGE + '.csi_driver_manifest_file_paths'
FILES = {'Files/csi-driver-nfs/driver.yaml': [test_csi_driver.DRIVER,
                                              test_csi_driver.ACCOUNT],
         'Files/csi-driver-nfs/controller.yaml': [test_csi_driver.CONTROLLER],
         'Files/csi-driver-nfs/node.yaml': [test_csi_driver.NODE]}


def with_classes(body, export_dir='/volume/nfs/dynamic'):
    storage = cluster_params(body)['storage_server']
    storage['nfs_server_setup_params'].append(
        {'export_dir': '/volume/nfs/dynamic', 'export_to': '10.10.0.0/24'})
    storage['storage_classes'] = [{'name': 'nfs-dynamic',
                                   'export_dir': export_dir,
                                   'default_class': True}]
    storage['csi_driver_manifest_file_paths'] = sorted(FILES)
    return body


def with_files(package, files=FILES):
    for relative, documents in files.items():
        path = package / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(yaml.safe_dump_all(documents))
    return package


def test_a_class_and_its_manifests_validate_clean(package, validate, body):
    assert validate.rebuilt(with_files(package), with_classes(body)) == (
        0, set())


def test_manifests_missing_from_the_package_are_named(built_zip, validate,
                                                      body):
    assert validate(built_zip, with_classes(body)) == (1, {
        ('csi-manifest-invalid', MANIFESTS + '[%d]' % index)
        for index in range(len(FILES))})


def test_manifests_without_the_node_plugin_are_named(package, validate,
                                                     body):
    files = dict(FILES)
    files['Files/csi-driver-nfs/node.yaml'] = [test_csi_driver.ACCOUNT]
    assert validate.rebuilt(with_files(package, files),
                            with_classes(body)) == (
        1, {('csi-manifest-invalid', MANIFESTS)})
    assert 'DaemonSet' in validate.findings[0]['message']


def test_a_class_outside_every_export_is_a_parameter_error(package,
                                                           validate, body):
    assert validate.rebuilt(with_files(package), with_classes(
        body, export_dir='/volume/nfs/other')) == (1, {
            ('param-invalid', STORAGE + '.storage_classes[0].export_dir'),
            # ... so no class uses the new export.
            ('export-unused', STORAGE + '.nfs_server_setup_params[3]'
             '.export_dir')})
