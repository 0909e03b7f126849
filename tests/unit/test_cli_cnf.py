"""`package --api cnf` and `validate` of the sample CNF (samples/
cnf_with_pv) and its v2 and v1 requests on the cluster's Kubernetes
VIM."""

import copy
import json
import os
import shutil
import zipfile

import pytest
import yaml

from kubernetes_mgmt_pv.doors import cli
from kubernetes_mgmt_pv.vnf_package import cnf_check
from tests.unit import cli_support

CNF = os.path.join(cli_support.ROOT, 'samples', 'cnf_with_pv')
REQUESTS = os.path.join(cli_support.ROOT, 'samples', 'requests-cnf-v2')
REQUESTS_V1 = os.path.join(cli_support.ROOT, 'samples', 'requests-cnf-v1')
DEF_FILES = 'additionalParams.' + cnf_check.DEF_FILES
PVC = 'Files/kubernetes/pvc.yaml'
DEPLOYMENT = 'Files/kubernetes/deployment.yaml'


def request(vim_id='4a1d0a2e-7c55-4f0e-b1a3-3b6f0f1c2d3e'):
    with open(os.path.join(REQUESTS, 'instantiate.json')) as stream:
        body = json.load(stream)
    body['vimConnectionInfo']['vim1']['vimId'] = vim_id
    return body


def request_v1(vim_id='4a1d0a2e-7c55-4f0e-b1a3-3b6f0f1c2d3e'):
    with open(os.path.join(REQUESTS_V1, 'instantiate.json')) as stream:
        body = json.load(stream)
    body['vimConnectionInfo'][0]['vimId'] = vim_id
    return body


def build(source, output, api='cnf'):
    assert cli.main(['package', '--api', api, '--source', str(source),
                     '--output', str(output)]) == 0
    return output


@pytest.fixture(scope='module')
def cnf_zip(tmp_path_factory):
    return build(CNF, tmp_path_factory.mktemp('csar') / 'cnf.zip')


@pytest.fixture
def cnf_source(tmp_path):
    directory = tmp_path / 'source'
    shutil.copytree(CNF, directory)
    return directory


def test_the_cnf_package_names_its_manifests_and_carries_no_driver(cnf_zip):
    with zipfile.ZipFile(cnf_zip) as archive:
        files = set(archive.namelist())
        meta = archive.read(cli_support.META).decode()
    assert {PVC, DEPLOYMENT} <= files
    assert not any(name.startswith('Scripts/') for name in files)
    assert f'Name: {PVC}\n' in meta and f'Name: {DEPLOYMENT}\n' in meta
    assert 'Source: ' not in meta


def test_the_sample_validates_clean(cnf_zip, validate):
    assert validate(cnf_zip, request()) == (0, set())


def test_the_sample_request_placeholder_is_pointed_out(cnf_zip, validate):
    code, found = validate(cnf_zip, request(cnf_check.PLACEHOLDER_VIM_ID))
    assert (code, found) == (0, {('vim-placeholder',
                                  'vimConnectionInfo.vim1.vimId')})


def test_the_v1_sample_request_validates_clean(cnf_zip, validate):
    assert validate(cnf_zip, request_v1()) == (0, set())


@pytest.mark.parametrize('change, finding', [
    (lambda entry: entry.update(vimId=cnf_check.PLACEHOLDER_VIM_ID),
     ('vim-placeholder', 'vimConnectionInfo[0].vimId')),
    (lambda entry: entry.update(vimType='openstack'),
     ('vim-not-kubernetes', 'vimConnectionInfo[0].vimType')),
])
def test_v1_request_findings_name_the_list_entry(
        cnf_zip, validate, change, finding):
    body = request_v1()
    change(body['vimConnectionInfo'][0])
    code, found = validate(cnf_zip, body)
    assert found == {finding}
    assert code == (0 if finding[0] == 'vim-placeholder' else 1)


def test_the_v1_and_v2_samples_differ_only_in_vim_connection_info():
    """Same flavour, definition files and namespace: only the shape of
    vimConnectionInfo is v1's (a list of entries with an id)."""
    names = sorted(os.listdir(REQUESTS))
    assert sorted(os.listdir(REQUESTS_V1)) == names
    for name in names:
        with open(os.path.join(REQUESTS, name)) as stream:
            v2 = json.load(stream)
        with open(os.path.join(REQUESTS_V1, name)) as stream:
            v1 = json.load(stream)
        v2_vims, v1_vims = (v2.pop('vimConnectionInfo', None),
                            v1.pop('vimConnectionInfo', None))
        assert v1 == v2, name
        if v2_vims is not None:
            entry, = v1_vims
            assert entry.pop('id') and [entry] == list(v2_vims.values())


def test_the_sample_claim_binds_a_driver_pv_its_pod_mounts():
    """The claim pins the cluster sample's nfs-pv1 and matches it, and the
    Deployment (the VDU "web") mounts that claim."""
    with open(os.path.join(CNF, PVC)) as stream:
        claim = yaml.safe_load(stream)
    with open(os.path.join(cli_support.SAMPLE, 'Files', 'kubernetes',
                           'nfs-pv1.yaml')) as stream:
        volume = yaml.safe_load(stream)
    with open(os.path.join(CNF, DEPLOYMENT)) as stream:
        deployment = yaml.safe_load(stream)
    assert claim['spec']['volumeName'] == volume['metadata']['name']
    assert set(claim['spec']['accessModes']) <= set(
        volume['spec']['accessModes'])
    assert claim['spec']['storageClassName'] == volume['spec'].get(
        'storageClassName', '')
    assert claim['spec']['resources']['requests']['storage'] == \
        volume['spec']['capacity']['storage']
    assert deployment['metadata']['name'] == 'web'
    assert {'name': 'data', 'persistentVolumeClaim': {
        'claimName': claim['metadata']['name']}} in \
        deployment['spec']['template']['spec']['volumes']


def test_a_package_naming_its_manifests_source_hides_them_from_v2(
        cnf_zip, validate, tmp_path):
    """A CNF package whose TOSCA.meta says "Source:" (as a v1 package
    does) instead of "Name:"."""
    zipped = cli_support.rezipped(
        cnf_zip, tmp_path / 'source-keys.zip', cli_support.META,
        lambda data: data.replace(b'\nName: ', b'\nSource: '))
    code, found = validate(zipped, request())
    assert code == 1
    assert found == {('def-file-not-named', f'{DEF_FILES}[0]'),
                     ('def-file-not-named', f'{DEF_FILES}[1]')}


@pytest.mark.parametrize('change, finding', [
    (lambda body: body.pop('vimConnectionInfo'),
     ('vim-missing', 'vimConnectionInfo')),
    (lambda body: body['vimConnectionInfo']['vim1'].update(
        vimType='ETSINFV.OPENSTACK_KEYSTONE.V_3'),
     ('vim-not-kubernetes', 'vimConnectionInfo.vim1.vimType')),
    (lambda body: body['additionalParams'].update(
        {cnf_check.DEF_FILES: []}), ('def-files-invalid', DEF_FILES)),
    (lambda body: body['additionalParams'][cnf_check.DEF_FILES].append(
        'Files/kubernetes/absent.yaml'),
     ('def-file-missing', f'{DEF_FILES}[2]')),
    (lambda body: body['additionalParams'][cnf_check.DEF_FILES].append(
        '../../etc/passwd'), ('def-file-missing', f'{DEF_FILES}[2]')),
    # Without the claim's manifest the Deployment mounts an unknown claim.
    (lambda body: body['additionalParams'][cnf_check.DEF_FILES].remove(PVC),
     ('claim-not-defined', f'{DEF_FILES}[0]')),
])
def test_request_findings(cnf_zip, validate, change, finding):
    body = copy.deepcopy(request())
    change(body)
    code, found = validate(cnf_zip, body)
    assert found == {finding}
    assert code == (0 if finding[0] == 'claim-not-defined' else 1)


def test_a_claim_that_pins_no_volume(cnf_source, validate, tmp_path):
    path = cnf_source / PVC
    path.write_text(path.read_text().replace('  volumeName: nfs-pv1\n', ''))
    code, found = validate(build(cnf_source, tmp_path / 'c.zip'), request())
    assert (code, found) == (0, {('claim-unpinned', f'{DEF_FILES}[0]')})


@pytest.mark.parametrize('class_line', [
    '  storageClassName: nfs-dynamic\n',  # a class named
    '',  # the cluster's default class
])
def test_a_claim_of_a_storage_class_is_provisioned_not_pinned(
        cnf_source, validate, tmp_path, class_line):
    path = cnf_source / PVC
    path.write_text(path.read_text().replace(
        '  volumeName: nfs-pv1\n', '').replace(
        '  storageClassName: ""\n', class_line))
    code, found = validate(build(cnf_source, tmp_path / 'c.zip'), request())
    assert (code, found) == (0, set())


def test_a_manifest_without_a_name(cnf_source, validate, tmp_path):
    path = cnf_source / DEPLOYMENT
    path.write_text(path.read_text().replace('  name: web\n', '', 1))
    code, found = validate(build(cnf_source, tmp_path / 'd.zip'), request())
    assert (code, found) == (1, {('def-file-invalid', f'{DEF_FILES}[1]')})


def test_the_dynamic_flavour_scales_a_statefulset_of_the_default_class():
    """Flavour "dynamic": its VDU is the StatefulSet (by name), whose
    claim template names no class (the cluster's default one), and its
    aspect takes it from the initial pod to the VDU's maximum."""
    with open(os.path.join(CNF, 'Definitions', 'cnf_df_dynamic.yaml')) as \
            stream:
        flavour = yaml.safe_load(stream)['topology_template']
    with open(os.path.join(CNF, 'Files', 'kubernetes',
                           'statefulset.yaml')) as stream:
        stateful_set = yaml.safe_load(stream)
    vdu = flavour['node_templates']['db']['properties']
    policies = {name: policy for entry in flavour['policies']
                for name, policy in entry.items()}
    aspect = policies['scaling_aspects']['properties']['aspects']['db_aspect']
    step = policies['db_scaling_aspect_deltas']['properties']['deltas'][
        'delta_1']['number_of_instances']
    assert flavour['substitution_mappings']['properties'] == {
        'flavour_id': 'dynamic'}
    assert vdu['name'] == stateful_set['metadata']['name']
    assert stateful_set['spec']['replicas'] == vdu['vdu_profile'][
        'min_number_of_instances']
    assert stateful_set['spec']['replicas'] + \
        aspect['max_scale_level'] * step == \
        vdu['vdu_profile']['max_number_of_instances']
    template, = stateful_set['spec']['volumeClaimTemplates']
    assert 'storageClassName' not in template['spec']
    assert [mount['name'] for mount in stateful_set['spec']['template'][
        'spec']['containers'][0]['volumeMounts']] == [
        template['metadata']['name']]
