"""The operator CLI: `package` builds the CSAR, `validate` finds each
problem (and only that one)."""

import hashlib
import json
import os
import shutil
import zipfile

import pytest

from kubernetes_mgmt_pv.doors import cli
from kubernetes_mgmt_pv.request import param_model
from kubernetes_mgmt_pv.vnf_package import csar
from tests.unit.cli_support import cluster_params
from tests.unit.cli_support import DF_SIMPLE
from tests.unit.cli_support import edit_yaml
from tests.unit.cli_support import META
from tests.unit.cli_support import rezipped
from tests.unit.cli_support import SAMPLE
from tests.unit.cli_support import sample_request
from tests.unit.cli_support import STORAGE
from tests.unit.cli_support import vnf_node
from tests.unit.cli_support import VNF_WHERE
from tests.unit.cli_support import with_site_ids


# -- package ------------------------------------------------------------------

@pytest.mark.parametrize('request_file', ['instantiate_simple.json',
                                          'instantiate_ha.json'])
def test_built_package_validates_clean(built_zip, validate, request_file):
    # The samples keep placeholders for the site's VIM and network ids.
    assert validate(built_zip, sample_request(request_file)) == (0, {
        ('vim-placeholder', 'vimConnectionInfo[0].vimId')} | {
        ('resource-placeholder', 'extVirtualLinks[%d].resourceId' % n)
        for n in range(3)})


def test_built_package_carries_the_installed_driver_and_every_hash(built_zip):
    with zipfile.ZipFile(built_zip) as archive:
        names = archive.namelist()
        contents = {name: archive.read(name) for name in names}
        modes = {i.filename: i.external_attr >> 16 for i in archive.infolist()}
    with open(csar.installed_driver_file(), 'rb') as stream:
        assert contents['Scripts/mgmt_driver.py'] == stream.read()
    meta = contents[META].decode()
    assert meta.startswith('TOSCA-Meta-File-Version: 1.0\n')
    assert 'Entry-Definitions: Definitions/sample_kubernetes_top.vnfd.yaml' \
        in meta
    blocks = [dict(line.split(': ', 1) for line in block.splitlines())
              for block in meta.strip().split('\n\n')[1:]]
    artifacts = [n for n in names if not n.startswith(
        ('Definitions/', 'TOSCA-Metadata/'))]
    assert [b['Source'] for b in blocks] == sorted(artifacts)
    for block in blocks:
        assert block['Algorithm'] == 'SHA-256'
        assert block['Hash'] == hashlib.sha256(
            contents[block['Source']]).hexdigest()
    assert names == sorted(names)
    assert modes['Scripts/install_k8s_cluster.sh'] & 0o777 == 0o755
    assert modes['Scripts/mgmt_driver.py'] & 0o777 == 0o644


def test_package_is_deterministic(built_zip, tmp_path):
    again = tmp_path / 'again.zip'
    assert cli.main(['package', '--source', SAMPLE,
                     '--output', str(again)]) == 0
    assert again.read_bytes() == built_zip.read_bytes()


def test_package_replaces_a_different_driver_copy(tmp_path, capsys):
    source = tmp_path / 'source'
    shutil.copytree(SAMPLE, source)
    (source / 'Scripts' / 'mgmt_driver.py').write_text('# stale copy\n')
    output = tmp_path / 'out.zip'
    assert cli.main(['package', '--source', str(source),
                     '--output', str(output)]) == 0
    assert 'replaced' in capsys.readouterr().err
    with zipfile.ZipFile(output) as archive, \
            open(csar.installed_driver_file(), 'rb') as stream:
        assert archive.read('Scripts/mgmt_driver.py') == stream.read()


def test_package_refuses_a_source_without_tosca_meta(tmp_path, capsys):
    source = tmp_path / 'source'
    shutil.copytree(SAMPLE, source)
    os.unlink(source / META)
    output = tmp_path / 'out.zip'
    assert cli.main(['package', '--source', str(source),
                     '--output', str(output)]) == 1
    assert META in capsys.readouterr().err
    assert not output.exists()


def test_package_refuses_a_missing_entry_definitions(tmp_path, capsys):
    source = tmp_path / 'source'
    shutil.copytree(SAMPLE, source)
    os.unlink(source / 'Definitions' / 'sample_kubernetes_top.vnfd.yaml')
    assert cli.main(['package', '--source', str(source),
                     '--output', str(tmp_path / 'out.zip')]) == 1
    assert 'sample_kubernetes_top.vnfd.yaml' in capsys.readouterr().err
    assert os.listdir(tmp_path) == ['source']  # no temporary file left


# -- validate: TOSCA.meta and the driver file ---------------------------------

def test_source_directory_lacks_the_driver_file(validate, body):
    assert validate(SAMPLE, body) == (1, {
        ('artifact-file-missing',
         VNF_WHERE + '.artifacts.mgmt-drivers-kubernetes')})


def test_altering_a_file_of_the_zip_breaks_its_hash(built_zip, validate,
                                                    body, tmp_path):
    altered = rezipped(built_zip, tmp_path / 'altered.zip',
                       'Scripts/install_k8s_cluster.sh',
                       lambda data: data + b'\n# changed after packaging\n')
    code, found = validate(altered, body)
    assert (code, found) == (1, {
        ('hash-mismatch', META + ': Scripts/install_k8s_cluster.sh')})
    assert 'Tacker refuses the upload' in validate.findings[0]['message']


def test_altered_driver_copy_fails_the_hash_and_the_driver_check(
        package, validate, body):
    with open(package / 'Scripts' / 'mgmt_driver.py', 'a') as stream:
        stream.write('# patched in place\n')
    assert validate(package, body) == (1, {
        ('hash-mismatch', META + ': Scripts/mgmt_driver.py'),
        ('driver-mismatch',
         VNF_WHERE + '.artifacts.mgmt-drivers-kubernetes')})
    assert 'MgmtDriverHashMatchFailure' in ' '.join(
        f['message'] for f in validate.findings)


def test_unsupported_hash_algorithm(package, validate, body):
    meta = (package / META).read_text()
    (package / META).write_text(meta.replace(
        'Source: UserData/__init__.py\nAlgorithm: SHA-256',
        'Source: UserData/__init__.py\nAlgorithm: MD5'))
    assert validate(package, body) == (1, {
        ('meta-invalid', META + ': UserData/__init__.py')})


def test_incomplete_artifact_entry(package, validate, body):
    with open(package / META, 'a') as stream:
        stream.write('\nSource: Files/extra.txt\nHash: 1234\n')
    assert validate(package, body) == (1, {
        ('meta-invalid', META + ': Files/extra.txt')})


def test_listed_file_missing_from_the_package(package, validate, body):
    os.unlink(package / 'UserData' / '__init__.py')
    assert validate(package, body) == (1, {
        ('meta-source-missing', META + ': UserData/__init__.py')})


def test_remote_source_is_only_a_warning(package, validate, body):
    with open(package / META, 'a') as stream:
        stream.write('\nSource: https://example.com/image.img\n'
                     'Algorithm: SHA-256\nHash: 1234\n')
    assert validate(package, body) == (0, {
        ('meta-source-remote', META + ': https://example.com/image.img')})


def test_missing_tosca_meta(package, validate, body):
    os.unlink(package / META)
    assert validate(package, body) == (1, {('meta-missing', META)})


def test_entry_definitions_not_in_the_package(package, validate, body):
    meta = (package / META).read_text()
    (package / META).write_text(meta.replace(
        'sample_kubernetes_top.vnfd.yaml', 'missing.yaml'))
    assert validate(package, body) == (1, {
        ('meta-missing', META + ': Entry-Definitions')})


# -- validate: the VNFD -------------------------------------------------------

@pytest.mark.parametrize('hook', ['heal_start', 'terminate_start'])
def test_hook_not_routed_to_the_driver_is_missing(package, validate, body,
                                                  hook):
    edit_yaml(package / DF_SIMPLE, lambda document: vnf_node(document)[
        'interfaces']['Vnflcm'].pop(hook))
    assert validate.rebuilt(package, body) == (1, {
        ('interface-missing',
         VNF_WHERE + '.interfaces.Vnflcm.' + hook)})


@pytest.mark.parametrize('hook, missing', [
    ('change_external_connectivity_start', True),
    # Tacker v1 gives it no request, and has no package change.
    ('modify_information_start', False),
    ('change_current_package_start', False),
])
def test_guard_hooks_a_v1_package_must_route(package, validate, body, hook,
                                             missing):
    edit_yaml(package / DF_SIMPLE, lambda document: vnf_node(document)[
        'interfaces']['Vnflcm'].pop(hook))
    assert validate.rebuilt(package, body) == (1, {
        ('interface-missing', VNF_WHERE + '.interfaces.Vnflcm.' + hook)}) \
        if missing else (0, set())


def test_hook_implemented_by_another_driver(package, validate, body):
    def change(document):
        vnf_node(document)['interfaces']['Vnflcm']['terminate_end'] = {
            'implementation': 'other-driver'}
    edit_yaml(package / DF_SIMPLE, change)
    assert validate.rebuilt(package, body) == (1, {
        ('interface-not-driver',
         VNF_WHERE + '.interfaces.Vnflcm.terminate_end')})


def test_primary_and_dependencies_implementation_is_accepted(
        package, validate, body):
    def change(document):
        vnf_node(document)['interfaces']['Vnflcm']['scale_start'] = {
            'implementation': {'primary': 'mgmt-drivers-kubernetes',
                               'dependencies': []}}
    edit_yaml(package / DF_SIMPLE, change)
    assert validate.rebuilt(package, body) == (0, set())


def test_driver_artifact_not_defined(package, validate, body):
    def change(document):
        artifacts = vnf_node(document)['artifacts']
        artifacts['renamed'] = artifacts.pop('mgmt-drivers-kubernetes')
    edit_yaml(package / DF_SIMPLE, change)
    assert validate.rebuilt(package, body) == (1, {
        ('artifact-missing',
         VNF_WHERE + '.artifacts.mgmt-drivers-kubernetes')})


def scaling_aspects(document):
    return next(entry['scaling_aspects']['properties']['aspects']
                for entry in document['topology_template']['policies']
                if 'scaling_aspects' in entry)


@pytest.mark.parametrize('level, findings', [
    (2, {('master-aspect-scalable', DF_SIMPLE + ': policies.scaling_aspects'
          '.properties.aspects.master_instance')}),
    (0, set()),
])
def test_a_scalable_master_aspect_is_a_warning(package, validate, body,
                                               level, findings):
    """The driver refuses to scale the Masters; the sample VNFD gives them
    no aspect (test_built_package_validates_clean)."""
    edit_yaml(package / DF_SIMPLE, lambda document: scaling_aspects(
        document).update(master_instance={
            'name': 'master_instance', 'max_scale_level': level,
            'step_deltas': ['delta_1']}))
    assert validate.rebuilt(package, body) == (0, findings)
    assert all(f['severity'] == 'warning' for f in validate.findings)


def test_unknown_flavour(built_zip, validate, body):
    body['flavourId'] = 'large'
    assert validate(built_zip, body) == (1, {
        ('flavour-unknown', 'flavourId'),
        ('basehot-missing', 'BaseHOT/large')})


def test_invalid_yaml_where_tacker_looks_for_flavours(package, validate,
                                                      body):
    (package / 'Definitions' / 'broken.yaml').write_text('key: [unclosed\n')
    assert validate(package, body) == (1, {
        ('yaml-invalid', 'Definitions/broken.yaml')})


# -- validate: the BaseHOT ----------------------------------------------------

@pytest.mark.parametrize('change, where', [
    (lambda p: p['storage_server'].update(ssh_cp_name='storage_CP'),
     STORAGE + '.ssh_cp_name'),
    (lambda p: p['storage_server'].update(nic_cp_name='storage_CP'),
     STORAGE + '.nic_cp_name'),
    (lambda p: p['storage_server']['cinder_volume_setup_params'][0].update(
        volume_resource_id='data_volume'),
     STORAGE + '.cinder_volume_setup_params[0].volume_resource_id'),
    (lambda p: p['pv_registration_params'][2].update(nfs_server_cp='nfs_CP'),
     param_model.ROOT + '.pv_registration_params[2].nfs_server_cp'),
    (lambda p: p['master_node'].update(aspect_id='masters'),
     param_model.ROOT + '.master_node.aspect_id'),
    (lambda p: p['worker_node'].update(ssh_cp_name='workerNode_CP9'),
     param_model.ROOT + '.worker_node.ssh_cp_name'),
    (lambda p: p['master_node'].update(nic_cp_name='workerNode_CP2'),
     param_model.ROOT + '.master_node.nic_cp_name'),
])
def test_name_the_basehot_does_not_define(built_zip, validate, body, change,
                                          where):
    change(cluster_params(body))
    assert validate(built_zip, body) == (1, {('hot-resource-missing', where)})


def test_cp_only_in_a_nested_template_is_named(built_zip, validate, body):
    cluster_params(body)['storage_server']['ssh_cp_name'] = 'masterNode_CP1'
    assert validate(built_zip, body) == (1, {
        ('hot-resource-missing', STORAGE + '.ssh_cp_name')})
    assert 'only nested/simple_nested_master.yaml' in \
        validate.findings[0]['message']


def test_node_without_aspect_is_looked_up_on_the_top_stack(built_zip,
                                                           validate, body):
    del cluster_params(body)['worker_node']['aspect_id']
    # nic_cp_name names the same CP as ssh_cp_name: one finding for both.
    assert validate(built_zip, body) == (1, {
        ('hot-resource-missing',
         param_model.ROOT + '.worker_node.ssh_cp_name')})


@pytest.mark.parametrize('change, where', [
    (lambda p: p['storage_server']['cinder_volume_setup_params'][0].update(
        volume_resource_id='storage_server_CP'),
     STORAGE + '.cinder_volume_setup_params[0].volume_resource_id'),
    (lambda p: p['storage_server'].update(ssh_cp_name='storage_server'),
     STORAGE + '.ssh_cp_name'),
    (lambda p: p['worker_node'].update(aspect_id='worker_instance_scale_out'),
     param_model.ROOT + '.worker_node.aspect_id'),
    (lambda p: p['worker_node'].update(ssh_cp_name='workerNode'),
     param_model.ROOT + '.worker_node.ssh_cp_name'),
])
def test_resource_of_the_wrong_type(built_zip, validate, body, change, where):
    change(cluster_params(body))
    assert validate(built_zip, body) == (1, {('hot-resource-type', where)})


def ha_body():
    request = with_site_ids(sample_request('instantiate_ha.json'))
    cluster_params(request)['master_node']['pod_cidr'] = '192.168.0.0/16'
    return request


def test_several_masters_need_the_vip_port(built_zip, validate):
    request = ha_body()
    del cluster_params(request)['master_node']['cluster_cp_name']
    assert validate(built_zip, request) == (1, {
        ('vip-missing', param_model.ROOT + '.master_node.cluster_cp_name')})
    assert 'starts with 3 Masters' in validate.findings[0]['message']


@pytest.mark.parametrize('key, value, code', [
    ('cluster_cp_name', 'vip_CP9', 'hot-resource-missing'),
    ('cluster_cp_name', 'master_instance', 'hot-resource-type'),
    ('cluster_fip_name', 'vip_CP', 'hot-resource-type'),
])
def test_the_vip_and_its_floating_ip_are_top_level_resources(
        built_zip, validate, key, value, code):
    request = ha_body()
    cluster_params(request)['master_node'][key] = value
    assert validate(built_zip, request) == (1, {
        (code, param_model.ROOT + '.master_node.' + key)})


@pytest.mark.parametrize('key, value, finding', [
    # The simple request's value: the Master's CP in its member template.
    ('cluster_cp_name', 'masterNode_CP1', None),
    ('cluster_cp_name', 'masterNode_CP9', 'hot-resource-missing'),
    ('cluster_cp_name', 'masterNode', 'hot-resource-type'),
    ('cluster_cp_name', 'storage_server_volume', 'hot-resource-type'),
    ('cluster_fip_name', 'masterNode_FIP9', 'hot-resource-missing'),
])
def test_cluster_addresses_are_checked_with_one_master_too(
        built_zip, validate, body, key, value, finding):
    cluster_params(body)['master_node'][key] = value
    expected = ((1, {(finding, param_model.ROOT + '.master_node.' + key)})
                if finding else (0, set()))
    assert validate(built_zip, body) == expected


@pytest.mark.parametrize('script', [True, False])
def test_a_request_without_script_path_is_warned(built_zip, validate, body,
                                                 script):
    """Without it the driver installs no Kubernetes: the Masters must
    already run it. A cluster_cp_name that names nothing is still found."""
    if not script:
        del cluster_params(body)['script_path']
    cluster_params(body)['master_node']['cluster_cp_name'] = 'vip_CP9'
    code, findings = validate(built_zip, body)
    where = param_model.ROOT + '.script_path'
    assert code == 1
    assert (('script-absent', where) in findings) is not script
    assert ('hot-resource-missing',
            param_model.ROOT + '.master_node.cluster_cp_name') in findings
    warnings = [f for f in validate.findings if f['code'] == 'script-absent']
    assert all(f['severity'] == 'warning' for f in warnings)


def test_member_template_of_a_group_is_missing(package, validate, body):
    os.unlink(package / 'BaseHOT' / 'simple' / 'nested' /
              'simple_nested_worker.yaml')
    assert validate.rebuilt(package, body) == (1, {
        ('hot-resource-missing', param_model.ROOT + '.worker_node.aspect_id')})


def test_flavour_without_basehot(package, validate):
    shutil.rmtree(package / 'BaseHOT' / 'ha')
    assert validate.rebuilt(package, with_site_ids(sample_request(
        'instantiate_ha.json'))) == (1, {('basehot-missing', 'BaseHOT/ha')})


def test_two_top_level_templates_are_ambiguous(package, validate, body):
    shutil.copy(package / 'BaseHOT' / 'simple' / 'simple_hot_top.yaml',
                package / 'BaseHOT' / 'simple' / 'copy.yaml')
    assert validate.rebuilt(package, body) == (1, {
        ('basehot-ambiguous', 'BaseHOT/simple')})


# -- validate: parameters, manifests and exports ------------------------------

def test_parameter_errors_carry_their_json_path(built_zip, validate, body):
    cluster_params(body)['storage_server']['nfs_server_setup_params'][1][
        'export_to'] = '10.0.0.0/24(rw)'
    assert validate(built_zip, body) == (1, {
        ('param-invalid',
         STORAGE + '.nfs_server_setup_params[1].export_to')})


def test_manifest_that_is_not_an_nfs_pv(package, validate, body):
    (package / 'Files' / 'kubernetes' / 'nfs-pv2.yaml').write_text(
        'apiVersion: v1\nkind: PersistentVolume\nmetadata:\n  name: local\n'
        'spec:\n  hostPath:\n    path: /data\n')
    assert validate.rebuilt(package, body) == (1, {
        ('manifest-invalid', param_model.ROOT +
         '.pv_registration_params[1].pv_manifest_file_path')})
    assert 'no spec.nfs' in validate.findings[0]['message']


def test_manifest_missing_from_the_package(built_zip, validate, body):
    cluster_params(body)['pv_registration_params'][0][
        'pv_manifest_file_path'] = 'Files/kubernetes/nfs-pv9.yaml'
    assert validate(built_zip, body) == (1, {
        ('manifest-invalid', param_model.ROOT +
         '.pv_registration_params[0].pv_manifest_file_path')})


def test_export_no_pv_uses_is_a_warning(built_zip, validate, body, capsys):
    cluster_params(body)['storage_server']['nfs_server_setup_params'].append(
        {'export_dir': '/volume/nfs/spare', 'export_to': '10.10.0.0/24'})
    assert validate(built_zip, body) == (0, {
        ('export-unused', STORAGE + '.nfs_server_setup_params[3].export_dir')})
    assert validate.findings[0]['severity'] == 'warning'


def test_pv_whose_path_is_not_exported_is_a_warning(built_zip, validate,
                                                    body):
    cluster_params(body)['storage_server']['nfs_server_setup_params'].pop()
    assert validate(built_zip, body) == (0, {
        ('pv-not-exported', param_model.ROOT +
         '.pv_registration_params[2].pv_manifest_file_path')})


def test_pv_below_an_export_counts_as_exported(built_zip, validate, body):
    cluster_params(body)['storage_server']['nfs_server_setup_params'] = [
        {'export_dir': '/volume/nfs', 'export_to': '10.10.0.0/24'}]
    assert validate(built_zip, body) == (0, set())


def test_export_outside_every_volume_is_an_error(built_zip, validate, body):
    cluster_params(body)['storage_server']['cinder_volume_setup_params'][0][
        'mount_to'] = '/data'
    assert validate(built_zip, body) == (1, {
        ('param-invalid',
         STORAGE + '.nfs_server_setup_params[%d].export_dir' % n)
        for n in range(3)})
    assert 'not inside any mount_to' in validate.findings[0]['message']


# -- validate: the request and the package path -------------------------------

def test_request_that_is_not_json(built_zip, tmp_path, capsys):
    request = tmp_path / 'request.json'
    request.write_text('{"flavourId": ')
    assert cli.main(['validate', '--package', str(built_zip),
                     '--request', str(request), '--format', 'json']) == 1
    findings = json.loads(capsys.readouterr().out)
    assert [(f['code'], f['where']) for f in findings] == [
        ('request-unreadable', str(request))]


def test_package_that_does_not_exist(validate, body, tmp_path):
    missing = str(tmp_path / 'missing.zip')
    assert validate(missing, body) == (1, {('package-unreadable', missing)})


def test_zip_with_an_escaping_path_is_refused(validate, body, tmp_path):
    evil = tmp_path / 'evil.zip'
    with zipfile.ZipFile(evil, 'w') as archive:
        archive.writestr('../outside.txt', 'x')
    assert validate(evil, body) == (1, {('package-unreadable', str(evil))})
    assert not (tmp_path.parent / 'outside.txt').exists()


def test_text_output_and_exit_status(package, tmp_path, capsys):
    os.unlink(package / 'UserData' / '__init__.py')
    request = tmp_path / 'request.json'
    body = sample_request()
    cluster_params(body)['master_node']['pod_cidr'] = '192.168.3.0/16'
    request.write_text(json.dumps(body))
    assert cli.main(['validate', '--package', str(package),
                     '--request', str(request)]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines == [
        'ERROR   meta-source-missing: %s: UserData/__init__.py: TOSCA.meta '
        'lists UserData/__init__.py, which is not a file of the package'
        % META,
        'WARNING vim-placeholder: vimConnectionInfo[0].vimId: still the '
        "sample's placeholder: put the id of the OpenStack VIM the VNF is "
        'deployed on'] + [
        'WARNING resource-placeholder: extVirtualLinks[%d].resourceId: still '
        "the sample's placeholder: put the id of the Neutron network of "
        'this link' % n for n in range(3)] + [
        "WARNING param-warning: %s.pod_cidr: '192.168.3.0/16' has host bits "
        'set; kubeadm uses 192.168.0.0/16' % param_model.MASTER_PATH,
        '1 error(s), 5 warning(s)']


def test_a_v1_package_need_not_route_the_v2_rollback_hooks(
        package, validate, body):
    def change(document):
        hooks = vnf_node(document)['interfaces']['Vnflcm']
        for hook in ('instantiate_rollback_start', 'scale_rollback_start'):
            hooks.pop(hook)
    edit_yaml(package / DF_SIMPLE, change)
    assert validate.rebuilt(package, body) == (0, set())
