import copy

import pytest

from kubernetes_mgmt_pv import exceptions
from kubernetes_mgmt_pv.request import param_model

ROOT = param_model.ROOT


def sample():
    """The user guide's instantiate parameters, with numeric proxy ports."""
    return {ROOT: {
        'script_path': 'Scripts/install_k8s_cluster.sh',
        'vim_name': 'kubernetes_vim',
        'master_node': {'aspect_id': 'master_instance',
                        'ssh_cp_name': 'masterNode_CP1',
                        'nic_cp_name': 'masterNode_CP1',
                        'username': 'ubuntu', 'password': 'ubuntu',
                        'pod_cidr': '192.168.3.0/16',
                        'cluster_cidr': '10.199.187.0/24',
                        'cluster_cp_name': 'masterNode_CP1'},
        'worker_node': {'aspect_id': 'worker_instance',
                        'ssh_cp_name': 'workerNode_CP2',
                        'nic_cp_name': 'workerNode_CP2',
                        'username': 'ubuntu', 'password': 'ubuntu'},
        'proxy': {'http_proxy': 'http://user1:password1@host1:3128',
                  'https_proxy': 'https://user2:password2@host2:3128',
                  'no_proxy': '192.168.246.0/24,10.0.0.1,.example.com',
                  'k8s_node_cidr': '10.10.0.0/24'},
        'storage_server': {
            'ssh_cp_name': 'storage_server_CP',
            'nic_cp_name': 'storage_server_CP',
            'username': 'ubuntu', 'password': 'ubuntu',
            'cinder_volume_setup_params': [
                {'volume_resource_id': 'storage_server_volume',
                 'mount_to': '/volume'}],
            'nfs_server_setup_params': [
                {'export_dir': '/volume/nfs/pv1', 'export_to': '10.10.0.0/24'},
                {'export_dir': '/volume/nfs/pv2', 'export_to': '10.10.0.0/24'},
            ]},
        'pv_registration_params': [
            {'pv_manifest_file_path': 'Files/kubernetes/nfs-pv1.yaml',
             'nfs_server_cp': 'storage_server_CP'},
            {'pv_manifest_file_path': 'Files/kubernetes/nfs-pv2.yaml',
             'nfs_server_cp': 'storage_server_CP'}],
    }}


def errors_of(value):
    with pytest.raises(exceptions.ParameterErrors) as caught:
        param_model.parse(value)
    return {error.path: error.reason for error in caught.value.errors}


def test_user_guide_parameters_parse():
    parsed = param_model.parse(sample())
    assert parsed.pv_enabled
    assert parsed.storage.volumes == (
        param_model.VolumeSetup('storage_server_volume', '/volume'),)
    assert [e.export_dir for e in parsed.storage.exports] == [
        '/volume/nfs/pv1', '/volume/nfs/pv2']
    assert parsed.master.aspect_id == 'master_instance'
    assert parsed.worker.ssh_cp_name == 'workerNode_CP2'
    assert [r.manifest_path for r in parsed.pv_registrations] == [
        'Files/kubernetes/nfs-pv1.yaml', 'Files/kubernetes/nfs-pv2.yaml']
    assert parsed.pv_registrations[1].json_path == \
        ROOT + '.pv_registration_params[1]'


def test_without_storage_server_the_feature_is_off():
    value = sample()
    del value[ROOT]['storage_server']
    del value[ROOT]['pv_registration_params']
    assert not param_model.parse(value).pv_enabled


def test_pv_registration_without_storage_server_is_an_error():
    value = sample()
    del value[ROOT]['storage_server']
    assert ROOT + '.pv_registration_params' in errors_of(value)


def test_nic_cp_name_defaults_to_ssh_cp_name():
    value = sample()
    del value[ROOT]['storage_server']['nic_cp_name']
    assert param_model.parse(value).storage.nic_cp_name == 'storage_server_CP'


@pytest.mark.parametrize('bad', [
    '/volume/nfs/pv1;rm -rf /', '/volume/$(reboot)', 'volume/rel',
    '/volume/../etc', '/volume//x', '/volume/', '/etc/nfs', '/', '/a b',
    '/volume/`id`',
])
def test_export_dir_must_be_a_safe_absolute_path(bad):
    value = sample()
    value[ROOT]['storage_server']['nfs_server_setup_params'][1][
        'export_dir'] = bad
    path = (ROOT + '.storage_server.nfs_server_setup_params[1].export_dir')
    assert path in errors_of(value)


@pytest.mark.parametrize('good', [
    '10.10.0.0/24', '10.10.0.5', 'fd00:1::/64', 'nfs-client.example.com',
    '10.10.0.0/255.255.255.0', '*', '*.example.org', 'node?', 'node[0-9]',
    '@nfs-clients',
])
def test_export_to_accepts_hosts_and_networks(good):
    value = sample()
    value[ROOT]['storage_server']['nfs_server_setup_params'][0][
        'export_to'] = good
    assert param_model.parse(value).storage.exports[0].export_to == good


@pytest.mark.parametrize('bad', [
    '10.10.0.0/24(rw,no_root_squash)', '10.0.0.0/33', '@', '*(rw)', 'a b', '',
    'host;reboot',
])
def test_export_to_rejects_anything_else(bad):
    value = sample()
    value[ROOT]['storage_server']['nfs_server_setup_params'][1][
        'export_to'] = bad
    path = ROOT + '.storage_server.nfs_server_setup_params[1].export_to'
    assert path in errors_of(value)


@pytest.mark.parametrize('bad', [
    '/etc/passwd', '../../etc/passwd', 'Files/../../x.yaml', 'Files\\x.yaml',
])
def test_manifest_path_must_stay_inside_the_package(bad):
    value = sample()
    value[ROOT]['pv_registration_params'][0]['pv_manifest_file_path'] = bad
    path = ROOT + '.pv_registration_params[0].pv_manifest_file_path'
    assert path in errors_of(value)


def test_all_problems_are_reported_at_once():
    value = sample()
    storage = value[ROOT]['storage_server']
    del storage['password']
    storage['cinder_volume_setup_params'] = []
    storage['nfs_server_setup_params'][0]['export_to'] = 'bad net'
    storage['nfs_server_setup_paramz'] = []
    found = errors_of(value)
    assert set(found) == {
        ROOT + '.storage_server.ssh_key',
        ROOT + '.storage_server.cinder_volume_setup_params',
        ROOT + '.storage_server.nfs_server_setup_params[0].export_to',
        ROOT + '.storage_server.nfs_server_setup_paramz',
    }


def test_wrong_types_are_named():
    value = sample()
    value[ROOT]['storage_server']['cinder_volume_setup_params'] = {
        'volume_resource_id': 'v'}
    value[ROOT]['pv_registration_params'][1] = 'Files/x.yaml'
    found = errors_of(value)
    assert found[ROOT + '.storage_server.cinder_volume_setup_params'] == \
        'must be a list'
    assert 'must be an object' in found[ROOT + '.pv_registration_params[1]']


def test_duplicate_volumes_and_mount_points_are_rejected():
    value = sample()
    volumes = value[ROOT]['storage_server']['cinder_volume_setup_params']
    volumes.append(copy.deepcopy(volumes[0]))
    found = errors_of(value)
    base = ROOT + '.storage_server.cinder_volume_setup_params[1]'
    assert base + '.volume_resource_id' in found
    assert base + '.mount_to' in found


def test_master_node_is_required_with_storage_server():
    value = sample()
    del value[ROOT]['master_node']
    assert errors_of(value) == {ROOT + '.master_node': 'is required'}


def test_proxy_errors_do_not_echo_credentials():
    value = sample()
    value[ROOT]['proxy']['http_proxy'] = 'ftp://user:s3cret@proxy:21'
    with pytest.raises(exceptions.ParameterErrors) as caught:
        param_model.parse(value)
    assert ROOT + '.proxy.http_proxy' in str(caught.value)
    assert 's3cret' not in str(caught.value)


def test_proxy_environment_and_secrets():
    proxy = param_model.parse(sample()).proxy
    assert proxy.environment() == {
        'http_proxy': 'http://user1:password1@host1:3128',
        'https_proxy': 'https://user2:password2@host2:3128',
        'no_proxy': '192.168.246.0/24,10.0.0.1,.example.com'}
    assert 'http://user1:password1@host1:3128' in proxy.secrets()


def test_passwords_are_not_in_the_model_repr():
    parsed = param_model.parse(sample())
    assert 'password' not in repr(parsed.storage)
    assert 'password' not in repr(parsed.master)


def test_missing_root_is_named():
    assert errors_of({}) == {ROOT: 'is required'}


MOUNT = ROOT + '.storage_server.cinder_volume_setup_params[0].mount_to'
EXPORT = ROOT + '.storage_server.nfs_server_setup_params[0].export_dir'
REFUSED_DIRECTORIES = [
    '/', '/var', '/var/lib', '/var/log', '/var/cache', '/var/spool',
    '/var/tmp', '/var/backups', '/var/mail', '/var/opt', '/var/local',
    '/root', '/root/data', '/home', '/home/ubuntu', '/home/admin', '/tmp',
    '/opt', '/srv', '/mnt', '/media', '/snap', '/boot', '/boot/efi',
    '/etc', '/etc/nfs', '/usr', '/usr/local/data', '/bin', '/sbin', '/lib',
    '/lib64', '/dev', '/dev/shm', '/proc', '/sys', '/run', '/run/nfs',
    '/var/run', '/var/lock/x', '/lost+found']


def with_volume_and_export(mount_to, export_dir):
    value = sample()
    storage = value[ROOT]['storage_server']
    storage['cinder_volume_setup_params'][0]['mount_to'] = mount_to
    storage['nfs_server_setup_params'] = [
        {'export_dir': export_dir, 'export_to': '10.10.0.0/24'}]
    return value


@pytest.mark.parametrize('directory', REFUSED_DIRECTORIES)
def test_system_and_home_directories_are_refused_as_mount_point(directory):
    found = errors_of(with_volume_and_export(directory, '/volume/nfs'))
    assert 'system or home directory' in found[MOUNT]
    assert repr(directory) in found[MOUNT]


@pytest.mark.parametrize('directory', REFUSED_DIRECTORIES)
def test_system_and_home_directories_are_refused_as_export(directory):
    found = errors_of(with_volume_and_export('/volume', directory))
    assert 'system or home directory' in found[EXPORT]


@pytest.mark.parametrize('mount_to, export_dir', [
    ('/mnt/data', '/mnt/data/nfs'), ('/srv/nfs', '/srv/nfs'),
    ('/home/ubuntu/data', '/home/ubuntu/data/pv1'), ('/data', '/data'),
    ('/var/lib/nfs-volume', '/var/lib/nfs-volume/pv'), ('/volume', '/volume'),
    ('/optional', '/optional/x'), ('/homes', '/homes/a'),
])
def test_directories_below_system_and_home_directories_are_allowed(
        mount_to, export_dir):
    parsed = param_model.parse(with_volume_and_export(mount_to, export_dir))
    assert parsed.storage.volumes[0].mount_to == mount_to
    assert parsed.storage.exports[0].export_dir == export_dir


@pytest.mark.parametrize('export_dir', ['/data', '/volumes', '/volume1/nfs',
                                        '/srv/nfs'])
def test_export_outside_every_mount_point_is_an_error(export_dir):
    found = errors_of(with_volume_and_export('/volume', export_dir))
    assert found == {EXPORT: '%r is not inside any mount_to (/volume): it '
                             'would export a directory of the root disk, '
                             'not of a Cinder volume' % export_dir}


def test_export_inside_the_second_volume_is_accepted():
    value = with_volume_and_export('/volume', '/volume2/nfs')
    value[ROOT]['storage_server']['cinder_volume_setup_params'].append(
        {'volume_resource_id': 'storage_server_volume2',
         'mount_to': '/volume2'})
    assert param_model.parse(
        value).storage.exports[0].export_dir == '/volume2/nfs'


def test_exports_are_not_judged_against_an_invalid_mount_point():
    found = errors_of(with_volume_and_export('/var', '/var/nfs'))
    assert set(found) == {MOUNT}


@pytest.mark.parametrize('name', [
    'masterNode_CP1', 'storage_server_volume1', 'worker_instance',
    'storage_server_CP', 'Node.CP-2', '0cp', 'x' * 255])
def test_heat_resource_names_of_the_samples_are_accepted(name):
    value = sample()
    storage = value[ROOT]['storage_server']
    storage['ssh_cp_name'] = storage['nic_cp_name'] = name
    storage['cinder_volume_setup_params'][0]['volume_resource_id'] = name
    value[ROOT]['worker_node']['aspect_id'] = name
    value[ROOT]['pv_registration_params'][0]['nfs_server_cp'] = name
    parsed = param_model.parse(value)
    assert parsed.storage.ssh_cp_name == name
    assert parsed.worker.aspect_id == name


def test_a_cp_name_that_leaves_the_heat_resource_path_is_refused():
    value = sample()
    value[ROOT]['storage_server']['ssh_cp_name'] = \
        '../../../../v3/auth/tokens'
    found = errors_of(value)
    assert found == {ROOT + '.storage_server.ssh_cp_name': (
        "must be a Heat resource name (a letter or digit, then up to 254 "
        "letters, digits and _ . -), got '../../../../v3/auth/tokens'")}


@pytest.mark.parametrize('url', [
    'http://proxy:3128', 'http://user:p%40ss@proxy.example.com:8080/',
    'https://[fd00::1]:3128', 'http://10.0.0.1'])
def test_proxy_urls_that_are_accepted(url):
    value = sample()
    value[ROOT]['proxy']['http_proxy'] = url
    assert param_model.parse(value).proxy.http_proxy == url


def test_text_errors_never_echo_the_value():
    value = sample()
    value[ROOT]['storage_server']['password'] = 's3cret\x00'
    found = errors_of(value)
    reason = found[ROOT + '.storage_server.password']
    assert reason == ('must not contain control characters or lone '
                      'surrogates, found U+0000 at offset 6')
