"""Fixtures of the CLI tests: the sample package built once per module,
an extracted copy to break, the sample request, the `validate` runner."""

import zipfile

import pytest

from kubernetes_mgmt_pv.doors import cli
from tests.unit.cli_support import cluster_params
from tests.unit.cli_support import SAMPLE
from tests.unit.cli_support import sample_request
from tests.unit.cli_support import Validator


@pytest.fixture(scope='module')
def built_zip(tmp_path_factory):
    path = tmp_path_factory.mktemp('csar') / 'package.zip'
    assert cli.main(['package', '--source', SAMPLE,
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
    """The simple sample request without its one warning (pod_cidr has host
    bits set), so that a test sees only the findings of its own change."""
    request = sample_request()
    cluster_params(request)['master_node']['pod_cidr'] = '192.168.0.0/16'
    return request


@pytest.fixture
def validate(capsys, tmp_path):
    return Validator(capsys, tmp_path)
