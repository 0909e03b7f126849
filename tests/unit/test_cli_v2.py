"""`package --api v2` and `validate` of Tacker v2 packages and requests."""

import hashlib
import json
import os
import shutil
import zipfile

import pytest
import yaml

from kubernetes_mgmt_pv.doors import cli
from kubernetes_mgmt_pv.request import param_model
from kubernetes_mgmt_pv.vnf_package import csar
from tests.unit import cli_support

REQUESTS_V2 = os.path.join(cli_support.ROOT, 'samples', 'requests-v2')
ARTIFACT = cli_support.VNF_WHERE + '.artifacts.mgmt-drivers-kubernetes'


def v2_request(name='instantiate_simple.json'):
    with open(os.path.join(REQUESTS_V2, name)) as stream:
        return json.load(stream)


@pytest.fixture
def v2_package(v2_zip, tmp_path):
    directory = tmp_path / 'package'
    with zipfile.ZipFile(v2_zip) as archive:
        archive.extractall(directory)
    return directory


def names(zip_path):
    with zipfile.ZipFile(zip_path) as archive:
        return set(archive.namelist())


def test_the_v2_package_carries_the_script_not_the_driver(v2_zip):
    files = names(v2_zip)
    assert csar.V2_SCRIPT_PATH in files
    assert csar.DRIVER_PATH not in files
    assert not any(name.startswith(('UserData/', 'v2/')) for name in files)
    with zipfile.ZipFile(v2_zip) as archive:
        for flavour in ('simple', 'ha'):
            vnfd = yaml.safe_load(archive.read(
                'Definitions/sample_kubernetes_df_%s.yaml' % flavour))
            vnf = vnfd['topology_template']['node_templates']['VNF']
            assert vnf['artifacts']['mgmt-drivers-kubernetes']['file'] == \
                '../' + csar.V2_SCRIPT_PATH
            assert 'terminate_start' in vnf['interfaces']['Vnflcm']
            hot = yaml.safe_load(archive.read(
                'BaseHOT/%s/%s_hot_top.yaml' % (flavour, flavour)))
            assert hot['resources']['worker_instance']['properties'][
                'desired_capacity'] == {'get_param': [
                    'nfv', 'VDU', 'workerNode', 'desired_capacity']}


def test_a_v1_package_leaves_the_v2_files_out(tmp_path):
    output = tmp_path / 'v1.zip'
    assert cli.main(['package', '--source', cli_support.SAMPLE,
                     '--output', str(output)]) == 0
    files = names(output)
    assert csar.DRIVER_PATH in files
    assert not any(name.startswith('v2/') for name in files)
    assert csar.V2_SCRIPT_PATH not in files


def test_the_build_is_reproducible(v2_zip, tmp_path):
    again = tmp_path / 'again.zip'
    csar.build(cli_support.SAMPLE, str(again), api='v2')
    assert again.read_bytes() == v2_zip.read_bytes()


@pytest.mark.parametrize('request_file', ['instantiate_simple.json',
                                          'instantiate_ha.json'])
def test_v2_package_and_request_validate_clean(v2_zip, validate,
                                               request_file):
    code, findings = validate(v2_zip, v2_request(request_file))
    assert {code for code, _ in findings} <= {
        'param-warning'} | cli_support.PLACEHOLDER_CODES
    assert code == 0


def test_the_same_parameter_findings_as_v1(v2_zip, validate):
    v1 = cli_support.sample_request()
    v2 = v2_request()
    for body in (v1, v2):
        cli_support.cluster_params(body)['storage_server'][
            'ssh_cp_name'] = 'no_such_CP'
    v1_findings = validate(cli_support.SAMPLE, v1)[1]
    v2_findings = validate(v2_zip, v2)[1]
    where = cli_support.STORAGE + '.ssh_cp_name'
    assert {f for f in v2_findings if f[1] == where} == \
        {f for f in v1_findings if f[1] == where} != set()


def test_a_v1_request_for_a_v2_package_is_refused(v2_zip, validate):
    body = v2_request()
    body['vimConnectionInfo'] = [dict(id='x', **body[
        'vimConnectionInfo']['vim1'])]
    code, findings = validate(v2_zip, body)
    assert code == 1
    assert ('request-api-mismatch', 'vimConnectionInfo') in findings


def test_a_v2_request_for_a_v1_package_is_refused(validate):
    body = v2_request()
    code, findings = validate(cli_support.SAMPLE, body)
    assert ('request-api-mismatch', 'vimConnectionInfo') in findings


def test_a_user_data_script_the_package_lacks(v2_zip, validate):
    body = v2_request()
    body['additionalParams']['lcm-operation-user-data'] = \
        './UserData/k8s_cluster_user_data.py'
    assert ('userdata-missing', 'additionalParams.lcm-operation-user-data') \
        in validate(v2_zip, body)[1]


def test_the_v1_basehot_in_a_v2_package(v2_package, validate):
    """v2's default UserData fills no nfv.VDU.<vdu>.flavor."""
    top = v2_package / 'BaseHOT' / 'simple' / 'simple_hot_top.yaml'
    top.write_text(top.read_text().replace('computeFlavourId', 'flavor'))
    code, findings = validate.rebuilt(v2_package, v2_request())
    assert code == 1
    assert ('heat-nfv-unfilled', 'BaseHOT/simple/simple_hot_top.yaml') in \
        findings


def test_a_v2_request_naming_no_keypair(v2_zip, validate):
    """The BaseHOT reads nfv.VDU.<vdu>.key_name: from the request's
    additionalParams.nfv, which v2's default UserData merges in."""
    body = v2_request()
    assert validate(v2_zip, body)[0] == 0
    del body['additionalParams']['nfv']['VDU']['storage_server']
    code, findings = validate(v2_zip, body)
    assert code == 1
    assert ('heat-nfv-unfilled', 'BaseHOT/simple/simple_hot_top.yaml') in \
        findings


@pytest.mark.parametrize('cidr', [None, ''])
def test_a_request_without_the_management_cidr(v2_zip, validate, cidr):
    """The security groups' source is the request's: nothing fills it."""
    body = v2_request()
    body['additionalParams']['nfv']['management_cidr'] = cidr
    code, findings = validate(v2_zip, body)
    assert code == 1
    assert ('heat-nfv-unfilled', 'additionalParams.nfv.management_cidr') \
        in findings


def test_a_missing_script(v2_package, validate):
    os.unlink(v2_package / csar.V2_SCRIPT_PATH)
    code, findings = validate(v2_package, v2_request())
    assert ('artifact-file-missing', ARTIFACT) in findings


def test_a_script_that_is_not_the_door(v2_package, validate):
    (v2_package / csar.V2_SCRIPT_PATH).write_text('print("hello")\n')
    code, findings = validate(v2_package, v2_request())
    assert ('script-not-door', ARTIFACT) in findings


def test_a_source_without_the_v2_script_cannot_build_v2(tmp_path, capsys):
    source = tmp_path / 'source'
    shutil.copytree(cli_support.SAMPLE, source)
    os.unlink(source / 'v2' / csar.V2_SCRIPT_PATH)
    assert cli.main(['package', '--api', 'v2', '--source', str(source),
                     '--output', str(tmp_path / 'x.zip')]) == 1
    assert csar.V2_SCRIPT_PATH in capsys.readouterr().err


@pytest.mark.parametrize('hook', [
    # Tacker v2 rolls back without terminate or scale_start.
    'instantiate_rollback_start', 'scale_rollback_start',
    # The guards of the state and of the cluster's ports and VDUs.
    'change_external_connectivity_start', 'modify_information_start',
    'change_current_package_start'])
def test_hooks_a_v2_package_must_route(v2_package, validate, hook):
    cli_support.edit_yaml(
        v2_package / cli_support.DF_SIMPLE, lambda document:
        cli_support.vnf_node(document)['interfaces']['Vnflcm'].pop(hook))
    code, findings = validate.rebuilt(v2_package, v2_request())
    assert code == 1
    assert {finding for finding in findings
            if finding[0] == 'interface-missing'} == {
        ('interface-missing',
         cli_support.VNF_WHERE + '.interfaces.Vnflcm.' + hook)}


@pytest.mark.parametrize('vim, found', [
    ({'vimType': 'ETSINFV.OPENSTACK_KEYSTONE.V_3',
      'interfaceInfo': {'endpoint': 'http://keystone/v3'},
      'accessInfo': {'username': 'nfv_user', 'region': 'RegionOne'}}, True),
    ({'vimId': '8d8373fe-6977-49ff-83ac-7756572ed186',
      'vimType': 'ETSINFV.OPENSTACK_KEYSTONE.V_3'}, False),
])
def test_an_inline_openstack_vim_without_vim_id(v2_zip, validate, vim,
                                                found):
    """The cluster's Kubernetes VIM goes to the project of a registered
    OpenStack VIM: without a vimId, instantiate_end would fail after the
    whole install."""
    body = v2_request()
    body['vimConnectionInfo'] = {'vim1': vim}
    code, findings = validate(v2_zip, body)
    assert (('vim-unregistered', 'vimConnectionInfo.vim1') in findings) \
        is found
    assert code == (1 if found else 0)


def test_storage_only_needs_no_registered_vim(v2_zip, validate):
    body = v2_request()
    del body['additionalParams']['k8s_cluster_installation_param'][
        'script_path']
    body['vimConnectionInfo'] = {'vim1': {
        'vimType': 'ETSINFV.OPENSTACK_KEYSTONE.V_3'}}
    assert 'vim-unregistered' not in {
        code for code, _ in validate(v2_zip, body)[1]}


def test_an_unwritable_v2_log_is_said_plainly(v2_zip, validate, tmp_path):
    target = tmp_path / 'target'
    target.write_text('')
    link = tmp_path / 'linked.log'
    link.symlink_to(target)
    validate.tacker_conf.write_text(
        '[kubernetes_mgmt_pv]\nv2_log_file = %s\nssh_key_dir = %s\n'
        % (link, validate.key_dir))
    code, findings = validate(v2_zip, v2_request())
    assert ('v2-log-unwritable', str(link)) in findings
    message, = [f['message'] for f in validate.findings
                if f['code'] == 'v2-log-unwritable']
    assert message.startswith('the log file %s cannot be written: it is a '
                              'symbolic link' % link)
    assert code == 0  # a warning: validate may run on another host
    assert target.read_text() == ''


def test_the_v2_log_defaults_to_tackers_state_path(v2_zip, validate,
                                                   tmp_path):
    state = tmp_path / 'state'
    state.mkdir()
    (state / 'kubernetes-mgmt-pv-v2.log').mkdir()
    validate.tacker_conf.write_text('[DEFAULT]\nstate_path = %s\n' % state)
    findings = validate(v2_zip, v2_request())[1]
    assert ('v2-log-unwritable', str(state / 'kubernetes-mgmt-pv-v2.log')) \
        in findings


def test_kubernetes_version_sets_the_install_scripts_version(v2_zip,
                                                             tmp_path):
    """The next minor's package: only the script's version line differs,
    its TOSCA.meta hash follows it."""
    output = tmp_path / 'next.zip'
    assert cli.main(['package', '--api', 'v2', '--source', cli_support.SAMPLE,
                     '--output', str(output),
                     '--kubernetes-version', '1.36.1-1.1']) == 0
    script = 'Scripts/install_k8s_cluster.sh'
    with zipfile.ZipFile(v2_zip) as old, zipfile.ZipFile(output) as new:
        before, after = old.read(script), new.read(script)
        assert b"\nreadonly K8S_PACKAGE_VERSION='1.36.1-1.1'\n" in after
        assert [line for line in after.splitlines()
                if line not in before.splitlines()] == \
            [b"readonly K8S_PACKAGE_VERSION='1.36.1-1.1'"]
        assert new.getinfo(script).external_attr == \
            old.getinfo(script).external_attr
        blocks = csar.parse_meta(new.read(csar.META_PATH).decode()).artifacts
        assert [block['Hash'] for block in blocks
                if block.get('Source') == script] == \
            [hashlib.sha256(after).hexdigest()]


@pytest.mark.parametrize('version, said', [
    ('1.36', ['1.36']),
    ('v1.36.1', ['v1.36.1']),
    ("1.36.1-1'", ["1.36.1-1'"]),
    # Minors outside csar.SUPPORTED_MINORS: the error names the minor and
    # the supported ones.
    ('1.34.8-1.1', ['1.34', '1.35, 1.36, 1.37']),
    ('1.38.0-1.1', ['1.38', '1.35, 1.36, 1.37']),
    ('2.35.1-1.1', ['2.35', '1.35, 1.36, 1.37']),
])
def test_kubernetes_version_refuses_what_is_no_supported_package_version(
        tmp_path, capsys, version, said):
    assert cli.main(['package', '--api', 'v2', '--source', cli_support.SAMPLE,
                     '--output', str(tmp_path / 'x.zip'),
                     '--kubernetes-version', version]) == 1
    error = capsys.readouterr().err
    assert '--kubernetes-version' in error
    assert all(text in error for text in said), error
    assert not (tmp_path / 'x.zip').exists()


@pytest.mark.parametrize('version', ['1.35.9-1.1', '1.36.1-1.1',
                                     '1.37.1-1.1'])
def test_kubernetes_version_of_a_supported_minor_is_built(tmp_path,
                                                          version):
    assert cli.main(['package', '--api', 'v2', '--source', cli_support.SAMPLE,
                     '--output', str(tmp_path / 'x.zip'),
                     '--kubernetes-version', version]) == 0


@pytest.mark.parametrize('flavour', ['simple', 'ha'])
def test_v2_group_members_pass_their_image_as_tacker_v2_keeps_it(
        v2_zip, flavour):
    """Tacker v2 records a scaling-group member's ``image-<VDU>``
    property in the VNFC's metadata and sets vcImageId from it when it
    rolls back a change_vnfpkg: a member without it would lose its
    image."""
    with zipfile.ZipFile(v2_zip) as archive:
        top = yaml.safe_load(archive.read(
            'BaseHOT/%s/%s_hot_top.yaml' % (flavour, flavour)))
        for group, vdu in (('master_instance', 'masterNode'),
                           ('worker_instance', 'workerNode')):
            member = top['resources'][group]['properties']['resource']
            assert member['properties']['image-' + vdu] == {
                'get_param': ['nfv', 'VDU', vdu, 'vcImageId']}
            assert 'image' not in member['properties']
            nested = yaml.safe_load(archive.read(
                'BaseHOT/%s/nested/%s' % (flavour, member['type'])))
            assert 'image-' + vdu in nested['parameters']


def test_logins_that_rule_out_auto_heal_are_warned_of(v2_zip, validate):
    """Tacker v2's automatic heal gives no additionalParams: a password
    login or a proxy with user info is warned of at validate time; a
    v1 request, which Tacker never heals by itself, is not."""
    body = v2_request()
    params = cli_support.cluster_params(body)
    params['worker_node'].pop('ssh_key', None)
    params['worker_node']['password'] = 'secret'
    params['proxy'] = {'http_proxy': 'http://user:pw@192.0.2.1:3128',
                       'https_proxy': 'http://192.0.2.1:3128'}
    findings = validate(v2_zip, body)[1]
    assert {path for code, path in findings
            if code == 'auto-heal-impossible'} == {
        param_model.WORKER_PATH + '.password',
        param_model.PROXY_PATH + '.http_proxy'}
    v1 = cli_support.sample_request()
    assert 'auto-heal-impossible' not in {
        code for code, _ in validate(cli_support.SAMPLE, v1)[1]}
