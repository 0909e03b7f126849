"""`package`'s VNFD ids and the refusals of the CLI: which API a source
can be built for, the Kubernetes versions it may carry, the files that do
not exist, and what --version and --help say."""

from importlib import metadata
import json
import os
import re
import shutil
import time
import uuid
import zipfile

import pytest
import yaml

from kubernetes_mgmt_pv.doors import cli
from kubernetes_mgmt_pv import feature_hooks
from kubernetes_mgmt_pv.vnf_package import csar
from kubernetes_mgmt_pv.vnf_package import driver_artifact
from kubernetes_mgmt_pv.vnf_package import vnfd
from kubernetes_mgmt_pv.vnf_package import vnfd_id
from tests.unit import cli_support

CNF = os.path.join(cli_support.ROOT, 'samples', 'cnf_with_pv')
SAMPLE_ID = '32ab1f35-a1f4-4798-9433-2bab9c77e6e8'
CNF_ID = '6d7c8f38-3a4e-4b0c-9f55-0c6f4c1e2a01'
TOP = 'Definitions/sample_kubernetes_top.vnfd.yaml'
TYPES = 'Definitions/sample_kubernetes_types.yaml'
NEXT = '1.37.1-1.1'
PRINTED = re.compile(r'^VNFD id: (\S+)$', re.M)


def package(capsys, output, *options, source=cli_support.SAMPLE):
    """`package` of ``source`` into ``output``: (exit status, the VNFD id
    it printed or None, stderr)."""
    capsys.readouterr()
    status = cli.main(['package', '--source', str(source),
                       '--output', str(output)] + list(options))
    out, err = capsys.readouterr()
    printed = PRINTED.findall(out)
    return status, printed[0] if printed else None, err


def ids_in(zip_path):
    """{file: the descriptor ids it states}: the VNF node of the top
    VNFD and the types' constraint and default."""
    with zipfile.ZipFile(zip_path) as archive:
        top = yaml.safe_load(archive.read(TOP))
        types = yaml.safe_load(archive.read(TYPES))
    node = top['topology_template']['node_templates']['VNF']
    declared = types['node_types']['company.provider.VNF']['properties'][
        'descriptor_id']
    return {TOP: [node['properties']['descriptor_id']],
            TYPES: declared['constraints'][0]['valid_values'] +
            [declared['default']]}


def mentions(zip_path, text):
    """The files of the zip that contain ``text``."""
    with zipfile.ZipFile(zip_path) as archive:
        return sorted(name for name in archive.namelist()
                      if text.encode() in archive.read(name))


# -- VNFD ids -----------------------------------------------------------------

BUILDS = {
    'v1': [],
    'v2': ['--api', 'v2'],
    'v1 next minor': ['--kubernetes-version', NEXT],
    'v2 next minor': ['--api', 'v2', '--kubernetes-version', NEXT],
}


@pytest.fixture(scope='module')
def built(tmp_path_factory):
    """{build: (VNFD id printed, zip)} of every entry of BUILDS."""
    directory = tmp_path_factory.mktemp('ids')
    result = {}
    for name, options in BUILDS.items():
        output = directory / (name.replace(' ', '-') + '.zip')
        status = cli.main(['package', '--source', cli_support.SAMPLE,
                           '--output', str(output)] + options)
        assert status == 0
        result[name] = output
    return result


def test_builds_for_other_apis_and_versions_get_distinct_ids(built):
    """Each build states one id, in every file that states the source's;
    the v1 build of the source's version keeps the source's id."""
    stated = {}
    for name, path in built.items():
        values = {value for values in ids_in(path).values()
                  for value in values}
        assert len(values) == 1, (name, values)
        stated[name], = values
        assert str(uuid.UUID(stated[name])) == stated[name]
        if stated[name] != SAMPLE_ID:
            assert mentions(path, SAMPLE_ID) == []
            assert mentions(path, stated[name]) == [TOP, TYPES]
    assert stated['v1'] == SAMPLE_ID
    assert len(set(stated.values())) == len(BUILDS), stated


@pytest.mark.parametrize('name', sorted(BUILDS))
def test_a_rebuild_prints_and_writes_the_same_id(built, name, capsys,
                                                 tmp_path):
    status, printed, _ = package(capsys, tmp_path / 'again.zip',
                                 *BUILDS[name])
    assert status == 0
    assert printed == ids_in(built[name])[TOP][0]
    assert ids_in(tmp_path / 'again.zip') == ids_in(built[name])


def test_the_source_version_given_is_the_source_build(built, capsys,
                                                      tmp_path):
    """--kubernetes-version naming the script's own version builds the
    same package, under the same id."""
    with open(os.path.join(cli_support.SAMPLE, 'Scripts',
                           'install_k8s_cluster.sh')) as stream:
        own = re.search(r"K8S_PACKAGE_VERSION='([^']+)'",
                        stream.read())[1]
    status, printed, _ = package(capsys, tmp_path / 'own.zip', '--api', 'v2',
                                 '--kubernetes-version', own)
    assert status == 0
    assert printed == ids_in(built['v2'])[TOP][0]


@pytest.mark.parametrize('given, written', [
    ('5e0b4ac2-2222-4333-8444-555566667777',
     '5e0b4ac2-2222-4333-8444-555566667777'),
    ('5E0B4AC2-2222-4333-8444-555566667777',
     '5e0b4ac2-2222-4333-8444-555566667777'),
])
@pytest.mark.parametrize('api', ['v1', 'v2'])
def test_vnfd_id_sets_the_id(capsys, tmp_path, given, written, api):
    output = tmp_path / 'given.zip'
    status, printed, _ = package(capsys, output, '--api', api,
                                 '--vnfd-id', given)
    assert status == 0
    assert printed == written
    assert ids_in(output) == {TOP: [written], TYPES: [written, written]}


def test_vnfd_id_of_a_cnf_package(capsys, tmp_path):
    output = tmp_path / 'cnf.zip'
    given = '0f0e0d0c-0b0a-4908-8706-050403020100'
    status, printed, _ = package(capsys, output, '--api', 'cnf',
                                 '--vnfd-id', given, source=CNF)
    assert status == 0
    assert printed == given
    assert mentions(output, CNF_ID) == []
    assert mentions(output, given) == ['Definitions/cnf_top.vnfd.yaml',
                                       'Definitions/cnf_types.yaml']


@pytest.mark.parametrize('given', [
    'xyz', '', '32ab1f35a1f4479894332bab9c77e6e8',
    '{32ab1f35-a1f4-4798-9433-2bab9c77e6e8}',
    'urn:uuid:32ab1f35-a1f4-4798-9433-2bab9c77e6e8',
    '32ab1f35-a1f4-4798-9433-2bab9c77e6e8\n',
    '32ab1f35-a1f4-4798-9433-2bab9c77e6eg',
])
def test_vnfd_id_that_is_no_uuid_is_refused(capsys, tmp_path, given):
    output = tmp_path / 'given.zip'
    status, printed, err = package(capsys, output, '--vnfd-id', given)
    assert (status, printed) == (1, None)
    assert '--vnfd-id' in err
    assert not output.exists()


def test_a_file_mentioning_the_id_follows_it(capsys, tmp_path):
    """Any other file of the package that names the source's id (a
    script, a sample request shipped with it, TOSCA.meta's header) gets
    the package's."""
    source = tmp_path / 'source'
    shutil.copytree(cli_support.SAMPLE, source)
    (source / 'Files' / 'create.json').write_text(
        json.dumps({'vnfdId': SAMPLE_ID}))
    meta = source / csar.META_PATH
    meta.write_text(meta.read_text() + 'Vnfd-Id: %s\n' % SAMPLE_ID)
    output = tmp_path / 'out.zip'
    status, printed, _ = package(capsys, output, '--api', 'v2',
                                 source=source)
    assert status == 0
    with zipfile.ZipFile(output) as archive:
        assert json.loads(archive.read('Files/create.json')) == {
            'vnfdId': printed}
        blocks = csar.parse_meta(archive.read(csar.META_PATH).decode())
    assert blocks.header['Vnfd-Id'] == printed
    assert {block['Source']: block['Hash'] for block in blocks.artifacts}[
        'Files/create.json'] == csar.HASH_FUNCTIONS['sha-256'](
            json.dumps({'vnfdId': printed}).encode()).hexdigest()


@pytest.mark.parametrize('change, said', [
    (lambda text: text.replace('descriptor_id: ' + SAMPLE_ID, ''),
     'no node template gives a descriptor_id'),
    (lambda text: text + '    Other:\n      type: x\n      properties:\n'
     '        descriptor_id: 7b3d7bd3-bb39-4d4b-b2a4-0de0ec4b8d8c\n',
     '2 descriptor_ids'),
])
def test_a_source_without_one_vnfd_id_is_refused(capsys, tmp_path, change,
                                                 said):
    source = tmp_path / 'source'
    shutil.copytree(cli_support.SAMPLE, source)
    top = source / TOP
    top.write_text(change(top.read_text()))
    status, _, err = package(capsys, tmp_path / 'out.zip', source=source)
    assert status == 1
    assert TOP in err and said in err


def test_derived_ids_are_name_based_on_source_api_and_version():
    # A literal: the namespace or the name's format changing would give
    # every package built since a new VNFD id.
    derived = vnfd_id.chosen(SAMPLE_ID, 'v2', None, '1.35.4-1.1')
    assert derived == '0130e9a2-80e5-5643-8878-5ce4dd7fb172'
    assert vnfd_id.chosen(SAMPLE_ID, 'v2', '1.35.4-1.1', '1.35.4-1.1') == \
        derived
    assert vnfd_id.chosen(SAMPLE_ID, 'v1', None, '1.35.4-1.1') == SAMPLE_ID


# -- the source's kind --------------------------------------------------------

@pytest.mark.parametrize('source, api, said', [
    (cli_support.SAMPLE, 'cnf', '--api v1 or --api v2'),
    (CNF, 'v1', '--api cnf'),
    (CNF, 'v2', '--api cnf'),
])
def test_a_source_built_for_the_wrong_kind_is_refused(capsys, tmp_path,
                                                      source, api, said):
    output = tmp_path / 'out.zip'
    status, _, err = package(capsys, output, '--api', api, source=source)
    assert status == 1
    assert said in err and csar.DRIVER_PATH in err
    assert os.listdir(tmp_path) == []


# -- files that do not exist --------------------------------------------------

def test_package_names_a_source_that_does_not_exist(capsys, tmp_path):
    missing = tmp_path / 'missing'
    status, _, err = package(capsys, tmp_path / 'out.zip', source=missing)
    assert status == 1
    assert str(missing) in err and 'does not exist' in err


def test_package_names_an_output_directory_that_does_not_exist(capsys,
                                                               tmp_path):
    output = tmp_path / 'missing' / 'out.zip'
    status, _, err = package(capsys, output)
    assert status == 1
    assert str(output) in err and 'does not exist' in err


def test_validate_names_a_package_that_does_not_exist(validate, tmp_path):
    missing = tmp_path / 'missing.zip'
    code, found = validate(missing, cli_support.sample_request())
    assert code == 1
    problem, = [f for f in validate.findings
                if f['code'] == 'package-unreadable']
    assert str(missing) in problem['message']
    assert 'does not exist' in problem['message']


@pytest.fixture
def plan_files(tmp_path):
    """{option: file} of a plan that gets past its files (the VIM has no
    auth_url, so it stops before Keystone)."""
    request = tmp_path / 'request.json'
    request.write_text(json.dumps(cli_support.sample_request()))
    vim = tmp_path / 'vim.json'
    vim.write_text('{}')
    return {'--package': cli_support.SAMPLE, '--request': str(request),
            '--vim': str(vim)}


def plan(capsys, files):
    capsys.readouterr()
    argv = ['plan', '--stack-id', 'stack']
    for option, path in files.items():
        argv += [option, str(path)]
    status = cli.main(argv)
    return status, capsys.readouterr().err


@pytest.mark.parametrize('option', ['--package', '--request', '--vim'])
def test_plan_names_each_file_that_does_not_exist(capsys, tmp_path,
                                                  plan_files, option):
    missing = tmp_path / 'missing'
    status, err = plan(capsys, dict(plan_files, **{option: missing}))
    assert status == 1
    assert str(missing) in err and 'does not exist' in err


def test_plan_takes_the_built_zip_as_the_source(capsys, built_zip,
                                                plan_files):
    from_source = plan(capsys, plan_files)
    from_zip = plan(capsys, dict(plan_files, **{'--package': built_zip}))
    assert from_zip == from_source
    assert 'auth_url' in from_zip[1]


# -- --version and --help -----------------------------------------------------

def test_version_prints_the_installed_version(capsys):
    with pytest.raises(SystemExit) as exited:
        cli.main(['--version'])
    assert exited.value.code == 0
    out = capsys.readouterr().out
    assert out.split()[:2] == ['kubernetes-mgmt-pv',
                               metadata.version('kubernetes-mgmt-pv')]


def test_package_help_says_which_api_embeds_the_driver(capsys):
    with pytest.raises(SystemExit):
        cli.main(['package', '--help'])
    text = ' '.join(capsys.readouterr().out.split())
    assert 'Only --api v1 embeds the installed driver file, as %s' % (
        csar.DRIVER_PATH) in text
    assert '--vnfd-id' in text
    assert 'supported minors: 1.35, 1.36, 1.37' in text


def test_the_driver_artifact_lines_are_found_in_linear_time():
    """The VNFD lines naming the driver are found in one pass: blank lines
    by the thousand cost no more than reading them."""
    text = ' \n' * 40000 + '\t\n' * 40000
    started = time.process_time()
    assert csar._DRIVER_ARTIFACT_LINE.search(text) is None
    assert csar._ARTIFACT_LINE.search(text) is None
    assert time.process_time() - started < 1.0


@pytest.mark.parametrize('artifact, api', [
    ({'file': csar.DRIVER_PATH}, 'v1'),
    ({'description': 'no file'}, 'v1'),
    ({'file': 'Scripts/kubernetes_mgmt_v2.py'}, 'v2'),
])
def test_the_vnfd_and_the_artifact_check_name_one_api(artifact, api):
    loaded = [('Definitions/top.yaml', {'topology_template': {
        'node_templates': {'VNF': {'artifacts': {
            feature_hooks.DRIVER_NAME: artifact}}}}})]
    assert vnfd.api(loaded) == driver_artifact.api_of(artifact) == api
