"""The operator CLI's `validate` on hostile input: every problem ends in a
finding naming its file or parameter, fast, never in a hang or a crash."""

import json
import os
import random
import shutil
import stat
import struct
import time
import warnings
import zipfile
import zlib

import pytest

from kubernetes_mgmt_pv.doors import cli
from kubernetes_mgmt_pv.request import param_model
from kubernetes_mgmt_pv import safe_yaml
from kubernetes_mgmt_pv.vnf_package import csar
from tests.unit import cli_support
from tests.unit.cli_support import cluster_params
from tests.unit.cli_support import DF_SIMPLE
from tests.unit.cli_support import META
from tests.unit.cli_support import REQUESTS
from tests.unit.cli_support import SAMPLE
from tests.unit.cli_support import sample_request
from tests.unit.cli_support import STORAGE
from tests.unit import test_hostile_params
from tests.unit import test_manifests
from tests.unit import test_params_cluster


# -- validate: hostile input ends in findings, fast ---------------------------

MANIFEST_WHERE = (param_model.ROOT +
                  '.pv_registration_params[0].pv_manifest_file_path')
MANIFEST_FILE = 'Files/kubernetes/nfs-pv1.yaml'


class timed(object):
    """Fails the test if the block uses more than `seconds` of CPU: a
    blow-up shows there, and a loaded machine does not."""

    def __init__(self, seconds=2):
        self.seconds = seconds

    def __enter__(self):
        self.started = time.process_time()

    def __exit__(self, *exc_info):
        elapsed = time.process_time() - self.started
        assert exc_info[0] or elapsed < self.seconds, elapsed


def message_of(validate, code, where):
    return [f['message'] for f in validate.findings
            if (f['code'], f['where']) == (code, where)][0]


@pytest.mark.parametrize('content, message', test_manifests.HOSTILE_MANIFESTS)
def test_hostile_manifest_is_a_finding(package, validate, body, content,
                                       message):
    path = package / MANIFEST_FILE
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
    with timed():
        code, found = validate(package, body)
    assert code == 1
    assert ('manifest-invalid', MANIFEST_WHERE) in found
    text = message_of(validate, 'manifest-invalid', MANIFEST_WHERE)
    assert MANIFEST_FILE in text and (message is None or message in text)


def test_manifest_fifo_does_not_block_validate(package, validate, body):
    os.unlink(package / MANIFEST_FILE)
    os.mkfifo(package / MANIFEST_FILE)
    with timed(1):
        code, found = validate(package, body)
    assert (code, found) == (1, {
        ('manifest-invalid', MANIFEST_WHERE),
        ('meta-source-missing', META + ': ' + MANIFEST_FILE)})
    assert 'is not a regular file but a FIFO' in message_of(
        validate, 'manifest-invalid', MANIFEST_WHERE)


@pytest.mark.parametrize('relative, content, code', [
    ('BaseHOT/simple/simple_hot_top.yaml', test_manifests.billion_laughs(),
     'yaml-invalid'),
    ('BaseHOT/simple/nested/simple_nested_worker.yaml', 'a: &a [*a]\n',
     'yaml-invalid'),
    (DF_SIMPLE, '[' * 20000 + ']' * 20000, 'yaml-invalid'),
    ('Definitions/etsi_nfv_sol001_vnfd_types.yaml', b'a: \xff\n',
     'yaml-invalid'),
    ('Definitions/etsi_nfv_sol001_common_types.yaml',
     '# %s\n' % ('x' * safe_yaml.DEFINITION_LIMITS.max_bytes),
     'yaml-invalid'),
    (META, 'TOSCA-Meta-File-Version: 1.0\nEntry-Definitions: Definitions/'
           'sample_kubernetes_top.vnfd.yaml\n\n' +
     test_manifests.billion_laughs(), 'meta-invalid'),
])
def test_hostile_package_yaml_is_a_finding_naming_the_file(
        package, validate, body, relative, content, code):
    path = package / relative
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
    with timed():
        exit_code, found = validate(package, body)
    assert exit_code == 1
    assert (code, relative) in found
    assert relative in message_of(validate, code, relative)


def test_tosca_meta_fifo_does_not_block_validate(package, validate, body):
    os.unlink(package / META)
    os.mkfifo(package / META)
    with timed(1):
        assert validate(package, body) == (1, {('meta-invalid', META)})


def request_file(tmp_path, content):
    request = tmp_path / 'hostile.json'
    if isinstance(content, bytes):
        request.write_bytes(content)
    else:
        request.write_text(content)
    return request


@pytest.mark.parametrize('content, message', [
    ('[' * 20000 + ']' * 20000, 'nests deeper than 100 levels'),
    ('{"flavourId": "%s"}' % ('x' * safe_yaml.REQUEST_MAX_BYTES),
     'larger than the limit of 1 MiB'),
    (b'{"flavourId": "simpl\xe9"}', 'not valid UTF-8'),
    ('{"flavourId": 1' + '0' * 5000 + '}', 'is not JSON'),
    ('["not", "an", "object"]', 'not a JSON object'),
])
def test_hostile_request_file_is_a_finding(built_zip, tmp_path, capsys,
                                           content, message):
    request = request_file(tmp_path, content)
    with timed(1):
        assert cli.main(['validate', '--package', str(built_zip),
                         '--request', str(request), '--format', 'json']) == 1
    findings = json.loads(capsys.readouterr().out)
    assert [(f['code'], f['where']) for f in findings] == [
        ('request-unreadable', str(request))]
    assert message in findings[0]['message']


def test_request_fifo_does_not_block_validate(built_zip, tmp_path, capsys):
    request = tmp_path / 'request.json'
    os.mkfifo(request)
    with timed(1):
        assert cli.main(['validate', '--package', str(built_zip),
                         '--request', str(request)]) == 1
    assert 'request-unreadable: %s: is not a regular file but a FIFO' % \
        request in capsys.readouterr().out


def test_hostile_parameter_values_are_findings_in_text_output(
        built_zip, tmp_path, capsys):
    body = cli_support.with_site_ids(sample_request())
    cluster = cluster_params(body)
    cluster['storage_server']['username'] = 'ubu\ud800ntu'
    del cluster['storage_server']['ssh_key']
    cluster['storage_server']['password'] = 'pass\x00word'
    cluster['storage_server']['ssh_cp_name'] = '../../../../v3/auth/tokens'
    cluster['master_node']['nic_cp_name'] = 'masterNode_CP1\udcff'
    cluster['proxy'] = {'http_proxy': 'http://[::1'}
    cluster['storage_server']['cinder_volume_setup_params'][0][
        'mount_to'] = '/var/lib'
    cluster['pv_registration_params'][1]['pv_manifest_file_path'] = \
        'Files/\udcff.yaml'
    cluster['worker_node']['pod_cidr'] = test_hostile_params.deeply_nested(
        60, 'x')
    # json.dumps escapes the lone surrogates as \udXXX, as a client would.
    request = request_file(tmp_path, json.dumps(body))
    with timed():
        assert cli.main(['validate', '--package', str(built_zip),
                         '--request', str(request)]) == 1
    lines = capsys.readouterr().out.splitlines()
    errors = {line.split(': ')[1] for line in lines
              if line.startswith('ERROR   param-invalid: ')}
    assert errors == {
        STORAGE + '.username', STORAGE + '.password',
        STORAGE + '.ssh_cp_name',
        param_model.ROOT + '.master_node.nic_cp_name',
        param_model.ROOT + '.proxy.http_proxy',
        STORAGE + '.cinder_volume_setup_params[0].mount_to',
        param_model.ROOT + '.pv_registration_params[1].pv_manifest_file_path',
        param_model.ROOT + '.worker_node.pod_cidr'}
    warnings = {tuple(line.split(': ')[:2]) for line in lines
                if line.startswith('WARNING ')}
    assert warnings == {
        ('WARNING param-warning', param_model.WORKER_PATH + '.pod_cidr'),
        ('WARNING export-unused',
         STORAGE + '.nfs_server_setup_params[1].export_dir')}
    assert lines[-1] == '8 error(s), 2 warning(s)'


def test_flavour_id_that_is_not_a_name(built_zip, validate, body):
    body['flavourId'] = '../../../etc'
    assert validate(built_zip, body) == (1, {('flavour-unknown',
                                              'flavourId')})


# -- validate: hostile zips ---------------------------------------------------

def deflate_bomb(path, size, name='Files/zeros.img'):
    """A genuine zip of about 1 KiB per MiB whose one entry expands to size
    bytes of zeros: a deflate block of 1 MiB of zeros, repeated."""
    zeros = bytes(safe_yaml.MiB)
    compressor = zlib.compressobj(9, zlib.DEFLATED, -15)
    block = compressor.compress(zeros) + compressor.flush(zlib.Z_FULL_FLUSH)
    data = block * (size // safe_yaml.MiB) + b'\x03\x00'  # final empty block
    crc = 0
    for _ in range(size // safe_yaml.MiB):
        crc = zlib.crc32(zeros, crc)
    with zipfile.ZipFile(path, 'w') as archive:
        archive.writestr(name, data)
    # Stored as it is, then declared as what it is: deflated data.
    raw = bytearray(path.read_bytes())
    for header, method_at in ((raw.find(b'PK\x03\x04'), 8),
                              (raw.rfind(b'PK\x01\x02'), 10)):
        struct.pack_into('<H', raw, header + method_at, zipfile.ZIP_DEFLATED)
        struct.pack_into('<III', raw, header + method_at + 6, crc, len(data),
                         size)
    path.write_bytes(bytes(raw))
    return path


def test_zip_bomb_is_refused_before_extracting(validate, body, tmp_path):
    bomb = deflate_bomb(tmp_path / 'bomb.zip', 1 << 30)
    assert bomb.stat().st_size < 2 * safe_yaml.MiB
    with timed(1):
        assert validate(bomb, body) == (1, {('package-unreadable',
                                             str(bomb))})
    assert 'more than the limit of %d' % csar.MAX_ZIP_BYTES in \
        validate.findings[0]['message']


def test_zip_of_zeros_over_a_lower_limit(validate, body, tmp_path,
                                         monkeypatch):
    monkeypatch.setattr(csar, 'MAX_ZIP_BYTES', 8 * safe_yaml.MiB)
    zeros = tmp_path / 'zeros.zip'
    with zipfile.ZipFile(zeros, 'w', zipfile.ZIP_DEFLATED) as archive:
        archive.writestr('a.img', bytes(6 * safe_yaml.MiB))
        archive.writestr('b.img', bytes(6 * safe_yaml.MiB))
    assert validate(zeros, body) == (1, {('package-unreadable', str(zeros))})
    assert 'expands to %d bytes' % (12 * safe_yaml.MiB) in \
        validate.findings[0]['message']


def test_entry_expanding_beyond_its_declared_size(validate, body, tmp_path):
    liar = deflate_bomb(tmp_path / 'liar.zip', 64 * safe_yaml.MiB)
    raw = bytearray(liar.read_bytes())
    central = raw.rfind(b'PK\x01\x02')
    struct.pack_into('<I', raw, central + 24, 1000)
    liar.write_bytes(bytes(raw))
    with timed(1):
        assert validate(liar, body) == (1, {('package-unreadable',
                                             str(liar))})


def test_zip_with_too_many_entries(validate, body, tmp_path, monkeypatch):
    monkeypatch.setattr(csar, 'MAX_ZIP_ENTRIES', 5)
    crowded = tmp_path / 'crowded.zip'
    with zipfile.ZipFile(crowded, 'w') as archive:
        for number in range(6):
            archive.writestr('Files/%d.txt' % number, 'x')
    assert validate(crowded, body) == (1, {('package-unreadable',
                                            str(crowded))})
    assert 'has 6 entries, more than the limit of 5' in \
        validate.findings[0]['message']


def symlink_entry(archive):
    info = zipfile.ZipInfo('Files/link')
    info.create_system = 3
    info.external_attr = (stat.S_IFLNK | 0o777) << 16
    archive.writestr(info, '/etc/passwd')


@pytest.mark.parametrize('write, reason', [
    (lambda a: a.writestr('/etc/cron.d/x', 'x'), 'unsafe path'),
    (lambda a: a.writestr('Files/../../x', 'x'), 'unsafe path'),
    (lambda a: a.writestr('Files\\..\\x', 'x'), 'unsafe path'),
    (symlink_entry, 'symbolic link'),
    (lambda a: [a.writestr('Files/x', str(n)) for n in (1, 2)], 'twice'),
])
def test_zip_entries_that_could_write_elsewhere(validate, body, tmp_path,
                                                write, reason):
    evil = tmp_path / 'evil.zip'
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')  # zipfile warns of the duplicate
        with zipfile.ZipFile(evil, 'w') as archive:
            write(archive)
    assert validate(evil, body) == (1, {('package-unreadable', str(evil))})
    assert reason in validate.findings[0]['message']


@pytest.mark.parametrize('make', [os.mkfifo, lambda path: os.symlink(
    '/dev/zero', path)])
def test_package_that_is_not_a_file_does_not_block(validate, body, tmp_path,
                                                   make):
    package_path = tmp_path / 'package.zip'
    make(package_path)
    with timed(1):
        assert validate(package_path, body) == (1, {('package-unreadable',
                                                     str(package_path))})


def test_package_refuses_a_fifo_in_the_source(tmp_path, capsys):
    source = tmp_path / 'source'
    shutil.copytree(SAMPLE, source)
    os.mkfifo(source / 'Files' / 'pipe')
    with timed(1):
        assert cli.main(['package', '--source', str(source),
                         '--output', str(tmp_path / 'out.zip')]) == 1
    assert 'Files/pipe of the source is not a regular file' in \
        capsys.readouterr().err


def test_undecodable_file_names_are_printed_escaped(package, capsys):
    directory = os.fsencode(package / 'BaseHOT' / 'simple')
    with open(os.path.join(directory, b'\xff.yaml'), 'w') as stream:
        stream.write('resources: {}\n')
    request = os.path.join(REQUESTS, 'instantiate_simple.json')
    assert cli.main(['validate', '--package', str(package),
                     '--request', request]) == 1
    out = capsys.readouterr().out
    assert 'ERROR   basehot-ambiguous: BaseHOT/simple: ' in out
    assert '\\udcff.yaml' in out


def test_corrupted_zips_end_in_a_package_error(built_zip, tmp_path):
    """Random bytes changed anywhere in a real package."""
    original = built_zip.read_bytes()
    randomness = random.Random(3)
    mangled = tmp_path / 'mangled.zip'
    with timed(5):
        for _ in range(200):
            data = bytearray(original)
            for _ in range(randomness.randint(1, 8)):
                data[randomness.randrange(len(data))] = \
                    randomness.randrange(256)
            mangled.write_bytes(bytes(data))
            try:
                with csar.opened(str(mangled)):
                    pass
            except csar.PackageError:
                pass


def test_terminal_escapes_in_the_package_are_printed_escaped(package,
                                                             capsys):
    meta = package / META
    with open(meta, 'a') as stream:
        # A YAML escape: TOSCA.meta itself may not hold the raw character.
        stream.write('\nSource: "Files/\\e[2Jx.txt"\nAlgorithm: SHA-256\n'
                     'Hash: 1234\n')
    request = os.path.join(REQUESTS, 'instantiate_simple.json')
    assert cli.main(['validate', '--package', str(package),
                     '--request', request]) == 1
    out = capsys.readouterr().out
    assert '\x1b' not in out
    assert 'Files/\\x1b[2Jx.txt, which is not a file of the package' in out


# -- validate: the cluster parameters -----------------------------------------

def test_the_user_guide_request_fails_on_its_placeholder_ports(
        built_zip, validate):
    request = json.loads(test_params_cluster.USER_GUIDE_REQUEST)
    assert validate(built_zip, request) == (1, {
        ('param-warning', param_model.MASTER_PATH + '.pod_cidr'),
        ('param-invalid', param_model.PROXY_PATH + '.http_proxy'),
        ('param-invalid', param_model.PROXY_PATH + '.https_proxy'),
        ('password-login', param_model.MASTER_PATH + '.password'),
        ('password-login', param_model.WORKER_PATH + '.password'),
        ('password-login', param_model.STORAGE_PATH + '.password')} | {
        ('resource-placeholder', 'extVirtualLinks[%d].resourceId' % n)
        for n in range(len(request['extVirtualLinks']))} | {
        ('vim-placeholder', 'vimConnectionInfo[0].vimId')})


@pytest.mark.parametrize('script_path, code', [
    ('Scripts/missing.sh', 'script-missing'),
    ('Scripts', 'script-missing'),
    ('Files/kubernetes/../../x.sh', 'param-invalid')])
def test_script_path_must_be_a_file_of_the_package(built_zip, validate, body,
                                                   script_path, code):
    cluster_params(body)['script_path'] = script_path
    assert validate(built_zip, body) == (1, {
        (code, param_model.ROOT + '.script_path')})


def test_script_path_leaving_the_package_by_a_link_is_missing(
        package, validate, body):
    os.symlink('/etc/passwd', package / 'Scripts' / 'link.sh')
    cluster_params(body)['script_path'] = 'Scripts/link.sh'
    assert ('script-missing', param_model.ROOT + '.script_path') in \
        validate(package, body)[1]


def test_cluster_keys_are_checked_by_validate(built_zip, validate, body):
    cluster = cluster_params(body)
    cluster['vim_name'] = 'my vim'
    cluster['master_node']['cluster_cidr'] = '192.168.1.0/24'
    assert validate(built_zip, body) == (1, {
        ('param-invalid', param_model.ROOT + '.vim_name'),
        ('param-invalid', param_model.MASTER_PATH + '.cluster_cidr')})


def test_an_invalid_aspect_id_does_not_move_the_cp_lookup(built_zip,
                                                          validate, body):
    cluster_params(body)['worker_node']['aspect_id'] = 'worker instance'
    assert validate(built_zip, body) == (1, {
        ('param-invalid', param_model.WORKER_PATH + '.aspect_id')})
