"""k8s_cluster_installation_param.offline: the air-gapped site's package
sources, their validation by JSON path, and the script options and node
files the driver derives from them."""

import pytest

from kubernetes_mgmt_pv.cluster import cluster
from kubernetes_mgmt_pv import exceptions
from kubernetes_mgmt_pv.request import offline_params
from kubernetes_mgmt_pv.request import param_model
from tests.unit import cli_support
from tests.unit import test_cluster

PATH = offline_params.PATH
FULL = {
    'apt_repository_url': 'http://mirror.example:8080/k8s/v1.35/deb/',
    'apt_key_file': 'Files/keys/kubernetes-apt.asc',
    'cni_manifest_file': 'Files/cni/calico.yaml',
    'registry_mirror_url': 'https://registry.example:5000',
    'mirrored_registries': ['registry.k8s.io', 'docker.io'],
    'sandbox_image': 'registry.example:5000/pause:3.10',
}


def request(sources):
    return {param_model.ROOT: {
        'script_path': 'Scripts/install_k8s_cluster.sh',
        'master_node': {'ssh_cp_name': 'masterNode_CP1',
                        'username': 'ubuntu', 'password': 'ubuntu'},
        'offline': sources}}


def errors_of(sources):
    with pytest.raises(exceptions.ParameterErrors) as caught:
        param_model.parse(request(sources))
    return {error.path: error.reason for error in caught.value.errors}


def test_without_offline_everything_is_the_online_default():
    model = param_model.parse(request(None))
    assert model.offline == offline_params.OfflineSources()
    assert model.offline.script_options() == []
    assert model.offline.package_files() == []


def test_every_source_becomes_a_script_option_and_a_node_file():
    sources = param_model.parse(request(FULL)).offline
    assert sources.script_options() == [
        '-r', FULL['apt_repository_url'], '-g', offline_params.NODE_APT_KEY,
        '-n', offline_params.NODE_CNI_MANIFEST,
        '-M', FULL['registry_mirror_url'],
        '-R', 'registry.k8s.io,docker.io', '-P', FULL['sandbox_image']]
    assert sources.package_files() == [
        (PATH + '.apt_key_file', FULL['apt_key_file'],
         offline_params.NODE_APT_KEY),
        (PATH + '.cni_manifest_file', FULL['cni_manifest_file'],
         offline_params.NODE_CNI_MANIFEST)]


def test_a_mirror_without_registries_leaves_them_to_the_script():
    sources = param_model.parse(request({
        'registry_mirror_url': 'http://10.0.0.9:5000'})).offline
    assert sources.script_options() == ['-M', 'http://10.0.0.9:5000']


def test_a_repository_needs_the_key_from_the_package():
    errors = errors_of({'apt_repository_url': FULL['apt_repository_url']})
    assert list(errors) == [PATH + '.apt_key_file']
    assert 'apt_repository_url' in errors[PATH + '.apt_key_file']


def test_a_key_alone_pins_the_default_repository():
    sources = param_model.parse(request({'apt_key_file': 'k.asc'})).offline
    assert sources.script_options() == ['-g', offline_params.NODE_APT_KEY]


@pytest.mark.parametrize('key, value', [
    ('apt_repository_url', 'ftp://mirror/deb/'),
    ('apt_repository_url', 'http://mirror/deb with space/'),
    ('apt_repository_url', 'http://mirror:99999/'),
    ('apt_repository_url', 'http://mirror:port/'),
    ('apt_repository_url', 'http:///no-host'),
    ('registry_mirror_url', 'mirror.example:5000'),
    ('registry_mirror_url', 'http://mirror/"quoted"'),
    ('sandbox_image', 'pause 3.10'),
    ('sandbox_image', '"registry/pause:3.10"'),
    ('sandbox_image', 'registry/pause:3.10\n'),
    ('apt_repository_url', "http://mirror/it's/"),
    ('apt_repository_url', 'http://mirror/deb/\n'),
    ('registry_mirror_url', 'HTTPS://mirror:5000'),
    ('apt_key_file', '/etc/apt/key.asc'),
    ('apt_key_file', '../outside.asc'),
    ('cni_manifest_file', 'Files/../../calico.yaml'),
    ('cni_manifest_file', 42),
])
def test_a_bad_value_is_named_by_its_json_path(key, value):
    sources = dict(FULL, **{key: value})
    errors = errors_of(sources)
    assert list(errors) == ['%s.%s' % (PATH, key)]


def test_urls_are_not_echoed_in_errors():
    errors = errors_of({'registry_mirror_url': 'http://u:s3cret@m:x/'})
    assert 's3cret' not in errors[PATH + '.registry_mirror_url']


@pytest.mark.parametrize('key', ['apt_repository_url',
                                 'registry_mirror_url'])
def test_urls_may_not_carry_credentials(key):
    errors = errors_of(dict(FULL, **{key: 'http://user:s3cret@mirror/k8s/'}))
    assert list(errors) == ['%s.%s' % (PATH, key)]
    assert 'credentials' in errors['%s.%s' % (PATH, key)]
    assert 's3cret' not in errors['%s.%s' % (PATH, key)]


@pytest.mark.parametrize('registries, where', [
    ([], PATH + '.mirrored_registries'),
    ('docker.io', PATH + '.mirrored_registries'),
    (['docker.io', 'bad/name'], PATH + '.mirrored_registries[1]'),
    (['quay.io', 'quay.io'], PATH + '.mirrored_registries'),
    (['docker.io', 'quay.io\n'], PATH + '.mirrored_registries[1]'),
    (['docker.io', None], PATH + '.mirrored_registries[1]'),
])
def test_mirrored_registries_are_host_names(registries, where):
    errors = errors_of(dict(FULL, mirrored_registries=registries))
    assert where in errors


def test_a_registry_gets_the_text_check_of_every_value():
    errors = errors_of(dict(FULL, mirrored_registries=['quay.io\x00']))
    assert 'U+0000' in errors[PATH + '.mirrored_registries[0]']


def test_registries_need_a_mirror():
    errors = errors_of({'mirrored_registries': ['docker.io']})
    assert list(errors) == [PATH + '.mirrored_registries']


def test_unknown_keys_and_wrong_types_are_refused():
    assert list(errors_of({'apt_repo': 'http://x/'})) == [PATH + '.apt_repo']
    assert list(errors_of(['http://x/'])) == [PATH]


def test_good_image_references():
    for image in ('registry.k8s.io/pause:3.10', 'pause', 'mirror:5000/pause',
                  'mirror:5000/k8s/pause:3.10',
                  'registry.k8s.io/pause@sha256:' + 'a' * 64):
        assert param_model.parse(request({'sandbox_image': image})).offline \
            .sandbox_image == image


def test_proxy_urls_keep_their_rules():
    # The URL rules moved here from params: the proxy still follows them.
    assert offline_params.is_http_url('http://user:p%40ss@proxy:3128')
    assert not offline_params.is_http_url('socks5://proxy:1080')
    assert offline_params.url_port('http://[fd00::1]:3128/') == '3128'
    assert offline_params.url_port('http://proxy/') == ''


def test_every_node_gets_the_sources_after_its_endpoint():
    sources = param_model.parse(request(FULL)).offline
    for role, target in (('leader', test_cluster.M1),
                         ('worker', test_cluster.W1)):
        argv = cluster.script_argv(
            role, test_cluster.plan(), target, '10.0.0.5:16443',
            param_model.ClusterNetwork(), test_cluster.INFO, offline=sources)
        endpoint = argv.index('-i') + 2
        assert argv[endpoint:endpoint + 12] == sources.script_options()


def test_validate_reports_offline_files_missing_from_the_package(
        package, validate, body):  # noqa: F811 (the fixtures above)
    (package / 'Files' / 'keys').mkdir()
    (package / 'Files' / 'keys' / 'k8s.asc').write_text('key\n')
    cli_support.cluster_params(body)['offline'] = {
        'apt_repository_url': 'http://mirror.example/k8s/',
        'apt_key_file': 'Files/keys/k8s.asc',
        'cni_manifest_file': 'Files/cni/missing.yaml'}
    assert validate.rebuilt(package, body) == (1, {
        ('offline-file-missing', PATH + '.cni_manifest_file')})
