"""Fixtures shared by unit test modules: the CLI tests' sample package
(built once per module, an extracted copy to break), request and
`validate` runner; the install script tests' CA and fake node."""

import hashlib
import io
import subprocess
import zipfile

import paramiko
import pytest

from kubernetes_mgmt_pv.doors import cli
from kubernetes_mgmt_pv.doors import tacker_v2
from tests.unit.cli_support import SAMPLE
from tests.unit.cli_support import sample_request
from tests.unit.cli_support import Validator
from tests.unit.cli_support import with_site_ids
from tests.unit.install_script_harness import Node

# The key files the sample requests name.
SAMPLE_KEYS = ('cluster-nodes', 'storage-server')


@pytest.fixture(scope='module')
def built_zip(tmp_path_factory):
    path = tmp_path_factory.mktemp('csar') / 'package.zip'
    assert cli.main(['package', '--source', SAMPLE,
                     '--output', str(path)]) == 0
    return path


@pytest.fixture(scope='module')
def v2_zip(tmp_path_factory):
    path = tmp_path_factory.mktemp('csar') / 'package-v2.zip'
    assert cli.main(['package', '--api', 'v2', '--source', SAMPLE,
                     '--output', str(path)]) == 0
    return path


@pytest.fixture
def package(built_zip, tmp_path):
    """The built package, extracted for a test to break."""
    directory = tmp_path / 'package'
    with zipfile.ZipFile(built_zip) as archive:
        archive.extractall(directory)
    return directory


@pytest.fixture
def body():
    """The simple sample request with site ids for its placeholders, which
    validates clean: a test sees only the findings of its own change."""
    return with_site_ids(sample_request())


@pytest.fixture(scope='session')
def key_text():
    out = io.StringIO()
    paramiko.ECDSAKey.generate().write_private_key(out)
    return out.getvalue()


@pytest.fixture
def validate(capsys, tmp_path, monkeypatch, key_text):
    """`validate`, with a Tacker configuration whose v2 hook log is
    writable here and whose ssh_key_dir holds the samples' keys (a test
    may write its own to ``validate.tacker_conf``)."""
    keys = tmp_path / 'keys'
    keys.mkdir()
    for name in SAMPLE_KEYS:
        (keys / name).write_text(key_text)
        (keys / name).chmod(0o600)
    conf = tmp_path / 'tacker.conf'
    conf.write_text('[kubernetes_mgmt_pv]\nv2_log_file = %s\n'
                    'ssh_key_dir = %s\n' % (tmp_path / 'log' / 'v2.log', keys))
    monkeypatch.setenv(tacker_v2.CONFIG_ENV, str(conf))
    validator = Validator(capsys, tmp_path)
    validator.tacker_conf = conf
    validator.key_dir = keys
    return validator


@pytest.fixture(scope='module')
def ca_cert(tmp_path_factory):
    """A real CA certificate and the sha256 of its DER public key."""
    serialization = pytest.importorskip(
        'cryptography.hazmat.primitives.serialization')
    x509 = pytest.importorskip('cryptography.x509')
    directory = tmp_path_factory.mktemp('ca')
    cert, key = directory / 'ca.crt', directory / 'ca.key'
    subprocess.run(
        ['openssl', 'req', '-x509', '-newkey', 'ec', '-pkeyopt',
         'ec_paramgen_curve:prime256v1', '-nodes', '-subj', '/CN=kubernetes',
         '-days', '1', '-keyout', str(key), '-out', str(cert)],
        check=True, capture_output=True)
    public = x509.load_pem_x509_certificate(cert.read_bytes()).public_key()
    der = public.public_bytes(serialization.Encoding.DER,
                              serialization.PublicFormat.SubjectPublicKeyInfo)
    return str(cert), hashlib.sha256(der).hexdigest()


@pytest.fixture
def node(tmp_path, ca_cert):
    return Node(tmp_path, ca_cert)
