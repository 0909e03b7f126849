import os
import time

import pytest

from kubernetes_mgmt_pv import exceptions
from kubernetes_mgmt_pv.request import param_model
from kubernetes_mgmt_pv.storage import manifests
from testbed import pv_manifest


def pv(name, server):
    return pv_manifest.TEMPLATE.format(name=name, server=server,
                                       path='"/volume/nfs/%s"' % name)


def registration(path, index=0):
    return param_model.PvRegistration(
        manifest_path=path, nfs_server_cp='storage_server_CP',
        json_path='%s.pv_registration_params[%d]' % (param_model.ROOT, index))


@pytest.fixture
def package(tmp_path):
    files = tmp_path / 'Files' / 'kubernetes'
    files.mkdir(parents=True)
    (files / 'nfs-pv1.yaml').write_text(pv('nfs-pv1', '0.0.0.0'))
    (files / 'nfs-pv2.yaml').write_text(pv('nfs-pv2', 'nfs.example.com'))
    (files / 'nfs-pv3.yaml').write_text(pv('nfs-pv3', '"fd00::5"'))
    return tmp_path


def load_errors(package, *paths):
    with pytest.raises(exceptions.ParameterErrors) as caught:
        manifests.load(str(package), [registration(p, i)
                                      for i, p in enumerate(paths)])
    return {e.path: e.reason for e in caught.value.errors}


@pytest.mark.parametrize('server', ['10.0.0.7', 'fd00::7'])
def test_render_replaces_any_previous_server(package, server):
    loaded = manifests.load(str(package), [
        registration('Files/kubernetes/nfs-pv%d.yaml' % n, n)
        for n in (1, 2, 3)])
    assert [m.name for m in loaded] == ['nfs-pv1', 'nfs-pv2', 'nfs-pv3']
    for manifest in loaded:
        rendered = manifest.rendered(server)
        assert rendered['spec']['nfs'] == {
            'server': server, 'path': '/volume/nfs/%s' % manifest.name}
        assert rendered['spec']['capacity'] == {'storage': '1Gi'}
    # rendering does not modify the loaded document
    assert loaded[0].document['spec']['nfs']['server'] == '0.0.0.0'


def test_missing_manifest_is_named_by_json_path(package):
    found = load_errors(package, 'Files/kubernetes/nope.yaml')
    path = param_model.ROOT + \
        '.pv_registration_params[0].pv_manifest_file_path'
    assert 'does not exist' in found[path]


def test_symlink_out_of_the_package_is_refused(package, tmp_path_factory):
    outside = tmp_path_factory.mktemp('outside') / 'secret.yaml'
    outside.write_text(pv('x', '1.1.1.1'))
    os.symlink(str(outside), str(package / 'Files' / 'link.yaml'))
    found = load_errors(package, 'Files/link.yaml')
    assert 'outside the VNF package' in list(found.values())[0]


@pytest.mark.parametrize('content, message', [
    ('kind: Pod\napiVersion: v1\nmetadata: {name: p}\n',
     'v1 PersistentVolume'),
    (pv('Bad_Name', 'x'), 'DNS subdomain'),
    (pv('a', 'x').replace('  nfs:', '  hostPath:'),
     'no spec.nfs'),
    (pv('a', 'x').replace('"/volume/nfs/a"', 'rel'),
     'absolute path'),
    (pv('a', 'x') + '---\n' + pv('b', 'x'),
     'exactly one YAML document'),
    ('a: [unclosed\n', 'not valid YAML'),
])
def test_invalid_manifests_are_refused(package, content, message):
    (package / 'bad.yaml').write_text(content)
    assert message in list(load_errors(package, 'bad.yaml').values())[0]


def test_duplicate_pv_names_are_refused(package):
    (package / 'copy.yaml').write_text(pv('nfs-pv1', 'x'))
    found = load_errors(package, 'Files/kubernetes/nfs-pv1.yaml', 'copy.yaml')
    path = param_model.ROOT + \
        '.pv_registration_params[1].pv_manifest_file_path'
    assert 'already defined' in found[path]


def billion_laughs():
    lines = ['l0: &l0 "lol"']
    lines += ['l%d: &l%d [%s]' % (n, n, ', '.join(['*l%d' % (n - 1)] * 10))
              for n in range(1, 10)]
    return '\n'.join(lines) + '\n'


HOSTILE_MANIFESTS = [
    (billion_laughs(), 'expands to more than'),
    (pv('a', 'x').replace('  capacity:', '  capacity: &c [*c]\n  x:'),
     'recursive alias'),
    # Refused by our depth limit or libyaml's (PyYAML >= 6.0.4), whichever
    # trips first: any reason will do (None).
    ('[' * 20000 + ']' * 20000, None),
    ('a: ' + 'x' * (2 << 20), 'larger than the limit of 1 MiB'),
    (b'apiVersion: v1\nkind: Persistent\xffVolume\n',
     'not valid UTF-8 (byte 0xff at offset 31)'),
    (pv('a', 'x').replace('name: a', 'name: "\\ud800"'),
     'invalid Unicode character escape'),
    ('kind: PersistentVolume\napiVersion: v1\nmetadata: [name, x]\n',
     'metadata.name must be a DNS subdomain name, got None'),
    ('- kind: PersistentVolume\n', 'is not a Kubernetes object'),
]


@pytest.mark.parametrize('content, message', HOSTILE_MANIFESTS)
def test_hostile_manifest_is_named_fast(package, content, message):
    path = package / 'Files' / 'kubernetes' / 'nfs-pv1.yaml'
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
    started = time.process_time()
    found = load_errors(package, 'Files/kubernetes/nfs-pv1.yaml')
    assert time.process_time() - started < 1
    reason = found[param_model.ROOT +
                   '.pv_registration_params[0].pv_manifest_file_path']
    assert reason.startswith("'Files/kubernetes/nfs-pv1.yaml'")
    assert message is None or message in reason


@pytest.mark.parametrize('make, kind', [
    (os.mkfifo, 'a FIFO'), (os.mkdir, 'a directory')])
def test_manifest_that_is_not_a_regular_file_is_refused_fast(package, make,
                                                             kind):
    path = package / 'Files' / 'kubernetes' / 'nfs-pv1.yaml'
    path.unlink()
    make(path)
    started = time.process_time()
    found = load_errors(package, 'Files/kubernetes/nfs-pv1.yaml')
    assert time.process_time() - started < 1
    assert list(found.values()) == [
        "'Files/kubernetes/nfs-pv1.yaml' is not a regular file but %s" % kind]


def test_symlink_to_a_fifo_inside_the_package_is_refused(package):
    fifo = package / 'Files' / 'fifo'
    os.mkfifo(fifo)
    os.symlink('../fifo', package / 'Files' / 'kubernetes' / 'link.yaml')
    found = load_errors(package, 'Files/kubernetes/link.yaml')
    assert 'not a regular file but a FIFO' in list(found.values())[0]


def test_rendering_a_deeply_nested_but_allowed_manifest(package):
    deep = pv('deep', 'x').replace(
        '  capacity:', '  deep: %s1%s\n  capacity:' % ('[' * 95, ']' * 95))
    (package / 'deep.yaml').write_text(deep)
    loaded = manifests.load(str(package), [registration('deep.yaml')])
    assert loaded[0].rendered('10.0.0.1')['spec']['nfs']['server'] == \
        '10.0.0.1'
