"""csi-driver-nfs manifests from the package (load, images moved to a
mirror) and the StorageClasses rendered from the request."""

import pytest
import yaml

from kubernetes_mgmt_pv import exceptions
from kubernetes_mgmt_pv.request import storage_class_params as scp
from kubernetes_mgmt_pv.storage import csi_driver

WHERE = 'k8s_cluster_installation_param.storage_server.' \
        'csi_driver_manifest_file_paths'


def workload(kind, name, *images, namespace='kube-system'):
    return {'apiVersion': 'apps/v1', 'kind': kind,
            'metadata': {'name': name, 'namespace': namespace},
            'spec': {'template': {'spec': {'containers': [
                {'name': 'c%d' % i, 'image': image}
                for i, image in enumerate(images)]}}}}


DRIVER = {'apiVersion': 'storage.k8s.io/v1', 'kind': 'CSIDriver',
          'metadata': {'name': csi_driver.PROVISIONER}}
ACCOUNT = {'apiVersion': 'v1', 'kind': 'ServiceAccount',
           'metadata': {'name': 'csi-nfs-controller-sa',
                        'namespace': 'kube-system'}}
CONTROLLER = workload('Deployment', 'csi-nfs-controller',
                      'registry.k8s.io/sig-storage/csi-provisioner:v5.3.0',
                      'registry.k8s.io/sig-storage/nfsplugin:v4.13.0')
NODE = workload('DaemonSet', 'csi-nfs-node',
                'registry.k8s.io/sig-storage/nfsplugin:v4.13.0')


def package(tmp_path, files):
    for name, documents in files.items():
        (tmp_path / name).write_text(yaml.safe_dump_all(documents))
    return str(tmp_path), named(*sorted(files))


def named(*paths):
    return [scp.ManifestFile(path, '%s[%d]' % (WHERE, index))
            for index, path in enumerate(paths)]


def test_a_release_loads_with_its_workloads(tmp_path):
    root, paths = package(tmp_path, {'a-rbac.yaml': [ACCOUNT],
                                     'b-driver.yaml': [DRIVER],
                                     'c-controller.yaml': [CONTROLLER],
                                     'd-node.yaml': [NODE]})
    loaded = csi_driver.load(root, paths, WHERE)
    assert [d['kind'] for d in loaded.documents] == [
        'ServiceAccount', 'CSIDriver', 'Deployment', 'DaemonSet']
    assert loaded.controllers == (('kube-system', 'csi-nfs-controller'),)
    assert loaded.node_daemonsets == (('kube-system', 'csi-nfs-node'),)


@pytest.mark.parametrize('files, path, reason', [
    ({'all.yaml': [DRIVER, CONTROLLER]}, WHERE, 'no DaemonSet'),
    ({'all.yaml': [DRIVER, NODE]}, WHERE, 'no Deployment'),
    ({'all.yaml': [CONTROLLER, NODE]}, WHERE, 'no CSIDriver'),
    ({'all.yaml': [dict(DRIVER, metadata={'name': 'other.csi'}),
                   CONTROLLER, NODE]}, WHERE, 'no CSIDriver'),
    ({'all.yaml': [DRIVER, CONTROLLER, NODE,
                   {'apiVersion': 'v1', 'kind': 'Secret',
                    'metadata': {'name': 's'}}]}, WHERE + '[0]', 'Secret'),
    ({'all.yaml': [DRIVER, CONTROLLER, NODE,
                   {'kind': 'ClusterRole'}]}, WHERE + '[0]',
     'without metadata.name'),
    ({'all.yaml': [DRIVER, CONTROLLER, NODE, ['a list']]}, WHERE + '[0]',
     'not one of what csi-driver-nfs deploys'),
])
def test_what_is_not_csi_driver_nfs_is_named(tmp_path, files, path, reason):
    root, paths = package(tmp_path, files)
    with pytest.raises(exceptions.ParameterErrors) as raised:
        csi_driver.load(root, paths, WHERE)
    errors = {error.path: error.reason for error in raised.value.errors}
    assert path in errors and reason in errors[path], errors


def test_a_missing_file_or_one_outside_the_package_is_named(tmp_path):
    root, _ = package(tmp_path, {'all.yaml': [DRIVER, CONTROLLER, NODE]})
    with pytest.raises(exceptions.ParameterErrors) as raised:
        csi_driver.load(root, named('all.yaml', 'gone.yaml', '../x.yaml'),
                        WHERE)
    assert [error.path for error in raised.value.errors] == [
        WHERE + '[1]', WHERE + '[2]']


@pytest.mark.parametrize('image, expected', [
    ('registry.k8s.io/sig-storage/nfsplugin:v4.13.0',
     'mirror.example:5000/k8s/sig-storage/nfsplugin:v4.13.0'),
    ('localhost:5000/nfsplugin@sha256:' + 'a' * 64,
     'mirror.example:5000/k8s/nfsplugin@sha256:' + 'a' * 64),
    ('busybox:1.36', 'mirror.example:5000/k8s/library/busybox:1.36'),
    ('kubernetes-csi/nfsplugin:v1',
     'mirror.example:5000/k8s/kubernetes-csi/nfsplugin:v1'),
])
def test_mirror_image(image, expected):
    assert csi_driver.mirror_image(image, 'mirror.example:5000/k8s') == \
        expected


def test_every_image_moves_to_the_mirror_and_nothing_else_changes():
    documents = (ACCOUNT, CONTROLLER, NODE)
    moved = csi_driver.mirrored(documents, 'https://mirror.example/')
    assert moved[0] == ACCOUNT
    assert [c['image'] for c in moved[1]['spec']['template']['spec'][
        'containers']] == [
        'mirror.example/sig-storage/csi-provisioner:v5.3.0',
        'mirror.example/sig-storage/nfsplugin:v4.13.0']
    assert CONTROLLER['spec']['template']['spec']['containers'][0][
        'image'].startswith('registry.k8s.io/')  # the input is not edited
    assert csi_driver.mirrored(documents, None) is documents


def test_a_storage_class_provisions_a_directory_per_claim():
    spec = scp.StorageClassSpec('nfs-dynamic', '/volume/nfs/dynamic',
                                'archive', ('nfsvers=4.2', 'hard'), True)
    document = csi_driver.storage_class(spec, '10.10.0.7')
    assert document['provisioner'] == 'nfs.csi.k8s.io'
    assert document['parameters'] == {
        'server': '10.10.0.7', 'share': '/volume/nfs/dynamic',
        'subDir': '${pvc.metadata.namespace}/${pvc.metadata.name}',
        'onDelete': 'archive'}
    assert document['mountOptions'] == ['nfsvers=4.2', 'hard']
    assert document['metadata']['annotations'] == {
        csi_driver.DEFAULT_CLASS_ANNOTATION: 'true'}
    assert 'annotations' not in csi_driver.storage_class(
        scp.StorageClassSpec('b', '/volume/b'), '10.10.0.7')['metadata']
