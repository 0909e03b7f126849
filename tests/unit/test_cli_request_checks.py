"""`validate` of an Instantiate request where the package says little:
a request for the other kind of package, the samples' placeholder ids,
exports that leave the nodes' network out, and the key files the logins
name, checked on the conductor host."""

import json
import os

import pytest

from kubernetes_mgmt_pv.doors import tacker_v2
from kubernetes_mgmt_pv.request import param_model
from kubernetes_mgmt_pv.vnf_package import cnf_check
from kubernetes_mgmt_pv.vnf_package import request_checks
from tests.unit import cli_support
from tests.unit.cli_support import cluster_params

CNF_SOURCE = os.path.join(cli_support.ROOT, 'samples', 'cnf_with_pv')
PLACEHOLDER = '00000000-0000-0000-0000-000000000000'
ROOT_PATH = 'additionalParams.' + param_model.ROOT
EXPORTS = param_model.STORAGE_PATH + '.nfs_server_setup_params[%d].export_to'


def cnf_request(api):
    with open(os.path.join(cli_support.ROOT, 'samples', 'requests-cnf-' + api,
                           'instantiate.json')) as stream:
        return json.load(stream)


# -- the kind of package ------------------------------------------------------

@pytest.mark.parametrize('api', ['v1', 'v2'])
def test_a_cnf_request_on_the_vnf_package_is_one_error(
        built_zip, validate, api):
    assert validate(built_zip, cnf_request(api)) == (1, {(
        'request-package-kind', 'additionalParams.' + cnf_check.DEF_FILES)})
    assert 'package --api cnf' in validate.findings[0]['message']


def test_a_vnf_request_on_the_cnf_package_is_one_error(validate, body):
    assert validate(CNF_SOURCE, body) == (1, {(
        'request-package-kind', ROOT_PATH)})
    assert 'BaseHOT' in validate.findings[0]['message']


# -- placeholders -------------------------------------------------------------

@pytest.mark.parametrize('placeholder', sorted(request_checks.PLACEHOLDER_IDS))
def test_placeholder_ids_of_a_v1_request(built_zip, validate, body,
                                         placeholder):
    body['vimConnectionInfo'][0]['vimId'] = placeholder
    body['extVirtualLinks'][1]['resourceId'] = placeholder
    body['extManagedVirtualLinks'] = [{'id': 'mgmt', 'vnfVirtualLinkDescId':
                                       'internalVL1',
                                       'resourceId': placeholder}]
    assert validate(built_zip, body) == (0, {
        ('vim-placeholder', 'vimConnectionInfo[0].vimId'),
        ('resource-placeholder', 'extVirtualLinks[1].resourceId'),
        ('resource-placeholder', 'extManagedVirtualLinks[0].resourceId')})


def test_placeholder_ids_of_a_v2_request(v2_zip, validate):
    with open(os.path.join(cli_support.ROOT, 'samples', 'requests-v2',
                           'instantiate_simple.json')) as stream:
        body = cli_support.with_site_ids(json.load(stream))
    cluster_params(body)['master_node']['pod_cidr'] = '192.168.0.0/16'
    body['vimConnectionInfo']['vim1']['vimId'] = PLACEHOLDER
    body['extVirtualLinks'][2]['resourceId'] = PLACEHOLDER
    assert validate(v2_zip, body) == (0, {
        ('vim-placeholder', 'vimConnectionInfo.vim1.vimId'),
        ('resource-placeholder', 'extVirtualLinks[2].resourceId')})


# -- exports and the nodes' network -------------------------------------------

@pytest.mark.parametrize('node_cidr, export_to, expected', [
    ('10.10.0.0/24', '10.10.0.0/24', None),
    ('10.10.0.0/24', '10.10.0.0/16', None),
    ('10.10.0.0/24', '10.10.0.0/255.255.0.0', None),
    ('10.10.0.0/24', '10.20.0.0/24', 'error'),
    ('10.10.0.0/24', '10.10.0.0/25', 'warning'),
    ('10.10.0.0/24', '10.10.0.7', 'warning'),
    ('10.10.0.0/24', '10.20.0.7', 'error'),
    ('10.10.0.0/24,fd00::/64', '10.10.0.0/24', None),
    ('10.10.0.0/24,fd00::/64', 'fd00::/48', None),
    ('fd00::/64', '10.10.0.0/24', 'error'),
    ('10.10.0.0/24', '*', None),
    ('10.10.0.0/24', 'nodes.example.org', None),
    ('10.10.0.0/24', '*.example.org', None),
    ('10.10.0.0/24', '@k8s-nodes', None),
    (None, '10.20.0.0/24', None),
])
def test_exports_are_checked_against_k8s_node_cidr(
        built_zip, validate, body, node_cidr, export_to, expected):
    cluster = cluster_params(body)
    if node_cidr:
        cluster['proxy'] = {'k8s_node_cidr': node_cidr}
    for export in cluster['storage_server']['nfs_server_setup_params']:
        export['export_to'] = export_to
    code, found = validate(built_zip, body)
    findings = {(f['severity'], f['code'], f['where'])
                for f in validate.findings}
    assert findings == ({(expected, 'export-misses-nodes', EXPORTS % n)
                         for n in range(3)} if expected else set())
    assert code == (1 if expected == 'error' else 0)


def test_an_export_to_several_clients_grants_their_union(built_zip, validate,
                                                         body):
    cluster = cluster_params(body)
    cluster['proxy'] = {'k8s_node_cidr': '10.10.0.0/24'}
    exports = cluster['storage_server']['nfs_server_setup_params']
    exports[0]['export_to'] = '10.30.0.0/24'
    exports.append({'export_dir': exports[0]['export_dir'],
                    'export_to': '10.10.0.0/16'})
    exports[1]['export_to'] = '10.30.0.0/24'
    assert validate(built_zip, body) == (1, {
        ('export-misses-nodes', EXPORTS % 1)})
    message = validate.findings[0]['message']
    assert 'leaves out k8s_node_cidr 10.10.0.0/24' in message


# -- key files on the conductor host ------------------------------------------

@pytest.mark.parametrize('change, reason', [
    (lambda keys: os.unlink(keys / 'storage-server'), 'no such key'),
    (lambda keys: os.chmod(keys / 'storage-server', 0o640), 'unsafe key file'),
    (lambda keys: os.chown(keys / 'storage-server', 65534, -1),
     'unsafe key file'),
    (lambda keys: (keys / 'storage-server').write_text('not a key\n'),
     'unusable key'),
    (lambda keys: (os.unlink(keys / 'storage-server'), os.symlink(
        keys / 'cluster-nodes', keys / 'storage-server')), 'unsafe key file'),
])
def test_an_unusable_key_file_is_named_by_its_reason(
        built_zip, validate, body, change, reason):
    change(validate.key_dir)
    assert validate(built_zip, body) == (1, {
        ('ssh-key-unusable', ROOT_PATH + '.storage_server.ssh_key')})
    message = validate.findings[0]['message']
    assert reason in message
    assert 'checked as uid %d' % os.geteuid() in message


@pytest.fixture
def per_project(validate):
    """ssh_key_per_project on: the samples' keys move into the
    subdirectory of project "demo"."""
    project = validate.key_dir / 'demo'
    project.mkdir(mode=0o700)
    for key in list(validate.key_dir.iterdir()):
        if key.is_file():
            key.rename(project / key.name)
    with open(validate.tacker_conf, 'a') as conf:
        conf.write('ssh_key_per_project = true\n')
    return validate


def test_per_project_keys_are_checked_in_the_projects_directory(
        built_zip, per_project, body):
    assert per_project(built_zip, body, '--project', 'demo') == (0, set())
    assert per_project(built_zip, body, '--project', 'other') == (1, {
        ('ssh-key-unusable', ROOT_PATH + '.%s.ssh_key' % role)
        for role in ('master_node', 'worker_node', 'storage_server')})
    assert all('no such key' in finding['message']
               for finding in per_project.findings)


def test_per_project_keys_without_a_project_are_not_checked(
        built_zip, per_project, body):
    assert per_project(built_zip, body) == (0, {
        ('unchecked-offline', 'ssh_key_per_project')})
    assert '--project' in per_project.findings[0]['message']


def test_key_files_are_not_checked_off_the_conductor_host(
        built_zip, validate, body, monkeypatch, tmp_path):
    os.unlink(validate.key_dir / 'storage-server')
    assert validate(built_zip, body)[0] == 1  # on the conductor host
    monkeypatch.delenv(tacker_v2.CONFIG_ENV)
    monkeypatch.setattr(tacker_v2, 'DEFAULT_CONFIG',
                        str(tmp_path / 'no-tacker.conf'))
    assert validate(built_zip, body) == (0, set())


def test_the_key_files_of_a_heal_body(v2_zip, validate):
    body = {'vnfcInstanceId': ['workerNode-' + PLACEHOLDER.replace('0', '1')],
            'additionalParams': {
                param_model.ROOT: {'master_node': {'ssh_key': 'masters'}},
                'worker_node_ssh_key': 'cluster-nodes',
                'storage_server_ssh_key': 'missing'}}
    unusable = {ROOT_PATH + '.master_node.ssh_key',
                'additionalParams.storage_server_ssh_key'}
    found = validate(v2_zip, body)[1]
    assert {where for code, where in found
            if code == 'ssh-key-unusable'} == unusable
    body['additionalParams']['worker_node_ssh_key'] = 'workers'
    found = validate(v2_zip, body)[1]
    assert {where for code, where in found if code == 'ssh-key-unusable'} \
        == unusable | {'additionalParams.worker_node_ssh_key'}
