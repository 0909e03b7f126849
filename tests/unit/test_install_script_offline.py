"""The install script's package sources for air-gapped sites (-r -g -n -M
-R -P): their checks, the Kubernetes repository checked alone before
anything is installed, containerd's configuration and the CNI manifest
from a file. Same harness as test_install_script (fake commands, paths
redirected into a temporary root); the real thing runs in the functional
tests (test_node_preparation)."""

import re
import subprocess

import pytest

from kubernetes_mgmt_pv import exceptions
from kubernetes_mgmt_pv.request import offline_params
from kubernetes_mgmt_pv.request import param_model
from tests.unit import install_script_harness as base

VIP = base.VIP
THIS_IP = base.THIS_IP
REPO = 'http://10.9.9.1:8080/k8s/'

FAKES = {
    'apt-get': '''
if sys.argv[1] == 'update' and os.environ.get('FAKE_APT_UPDATE_FAIL') and \\
        any(a.startswith('Dir::Etc::SourceList=') for a in sys.argv):
    sys.stderr.write('E: The repository is not signed.\\n')
    sys.exit(100)
''',
    'apt-mark': '',
    # The shape of `containerd config default`: containerd 1.6/1.7's
    # (version 2), or 2.x's (version 3, FAKE_CONTAINERD_CONFIG=3).
    'containerd': '''
if sys.argv[1:] == ['config', 'default']:
    sys.stdout.write(os.environ.get('FAKE_CONTAINERD_CONFIG') == '3' and %r
                     or %r)
''' % ('''version = 3
[plugins.'io.containerd.cri.v1.images'.pinned_images]
  sandbox = 'registry.k8s.io/pause:3.10'
[plugins.'io.containerd.cri.v1.images'.registry]
  config_path = ''
[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
  sandboxer = 'podsandbox'
[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
  ShimCgroup = ''
[plugins.'io.containerd.cri.v1.runtime'.cni]
  bin_dir = ''
''', '''version = 2
[plugins."io.containerd.grpc.v1.cri"]
    sandbox_image = "registry.k8s.io/pause:3.6"
  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
    ShimCgroup = ""
    SystemdCgroup = false
      [plugins."io.containerd.grpc.v1.cri".registry]
        config_path = ""
'''),
}

# prepare_node as it is, but for the kernel settings, with the apt and
# containerd directories in the temporary root.
PREPARE = '''
APT_DIR=%s
CONTAINERD_DIR=%s
prepare_kernel() { :; }
prepare_node() { real_prepare_node; }
'''


@pytest.fixture
def node(tmp_path, ca_cert):  # noqa: F811 (the fixture imported above)
    prepared = base.Node(tmp_path, ca_cert)
    for name, body in FAKES.items():
        base.write_fake(str(prepared.bin), name, body)
    prepared.apt = tmp_path / 'root' / 'etc' / 'apt'
    prepared.containerd = tmp_path / 'root' / 'etc' / 'containerd'
    prepared.key = tmp_path / 'key.asc'
    prepared.key.write_text('-----BEGIN PGP PUBLIC KEY BLOCK-----\n')
    prepared.become_member(control_plane=False)
    return prepared


def prepare(node, *options, **env):
    """The script on a member Worker whose packages are missing."""
    extra = PREPARE % (node.apt, node.containerd)
    return node.run_main('-w', THIS_IP, '-i', VIP, *options, extra=extra,
                         FAKE_DPKG_kubelet='', **env)


def test_help_documents_the_sources(node):
    result = node.run_script('-h')
    for text in ('-r URL', '-g FILE', '-n FILE', '-M URL', '-R NAMES',
                 '-P IMAGE', 'hosts.toml'):
        assert text in result.stdout


@pytest.mark.parametrize('options, option', [
    (['-r', 'ftp://mirror/'], '-r'),
    (['-r', 'http://mirror/"x"'], '-r'),
    (['-g', '/nonexistent/key.asc'], '-g'),
    (['-n', '/nonexistent/calico.yaml'], '-n'),
    (['-M', 'mirror:5000'], '-M'),
    (['-R', 'docker.io'], '-R'),
    (['-M', 'http://m:5000', '-R', 'docker.io,bad/name'], '-R'),
    (['-P', 'pause 3.10'], '-P'),
])
def test_bad_sources_are_usage_errors_before_anything_runs(node, options,
                                                           option):
    result = node.run_script('-w', THIS_IP, '-i', VIP, *options)
    assert result.returncode == 2
    assert result.stderr.startswith('%s: %s' % (base.NAME, option))
    assert node.calls() == []


def test_preparation_from_a_mirror_with_the_packages_key(node):
    result = prepare(node, '-r', REPO.rstrip('/'), '-g', str(node.key))
    assert result.returncode == 0, result.stderr
    keyring = node.apt / 'keyrings' / 'kubernetes-apt-keyring.asc'
    assert keyring.read_text() == node.key.read_text()
    assert oct(keyring.stat().st_mode & 0o777) == '0o644'
    listing = node.apt / 'sources.list.d' / 'kubernetes.list'
    assert listing.read_text() == 'deb [signed-by=%s] %s /\n' % (keyring,
                                                                 REPO)
    assert node.argvs('curl') == []  # the key came from the package
    apt = node.argvs('apt-get')
    assert [argv[0] for argv in apt] == ['update', 'install', 'update',
                                         'install']
    # The Kubernetes repository alone, where any error is an error.
    assert ('Dir::Etc::SourceList=%s' % listing) in apt[2]
    assert 'APT::Update::Error-Mode=any' in apt[2]
    assert apt[3][-4:] == ['containerd'] + [
        '%s=%s' % (name, base.VERSION)
        for name in ('kubelet', 'kubeadm', 'kubectl')]
    assert node.argvs('apt-mark') == [['hold', 'kubelet', 'kubeadm',
                                       'kubectl']]


def test_an_unusable_repository_fails_before_anything_is_installed(node):
    result = prepare(node, '-r', REPO, '-g', str(node.key),
                     FAKE_APT_UPDATE_FAIL='1')
    assert result.returncode == 100
    assert base.last_stderr_line(result) == (
        '%s: FAILED: apt-get update of the Kubernetes apt repository %s '
        '(exit 100)' % (base.NAME, REPO))
    assert [argv[0] for argv in node.argvs('apt-get')] == [
        'update', 'install', 'update']
    assert node.argvs('apt-mark') == []
    # Later apt-get updates must not trip over it.
    assert not (node.apt / 'sources.list.d' / 'kubernetes.list').exists()


def test_without_a_key_file_it_is_downloaded_from_the_repository(node):
    result = prepare(node, '-r', REPO)
    assert result.returncode == 0, result.stderr
    assert node.argvs('curl')[0][-1] == REPO + 'Release.key'


def test_containerd_gets_the_mirror_and_the_pause_image(node):
    result = prepare(node, '-M', 'http://10.9.9.1:5000', '-R',
                     'registry.k8s.io,docker.io', '-P',
                     '10.9.9.1:5000/pause:3.10')
    assert result.returncode == 0, result.stderr
    config = (node.containerd / 'config.toml').read_text()
    assert 'SystemdCgroup = true' in config
    assert '    sandbox_image = "10.9.9.1:5000/pause:3.10"' in config
    assert '        config_path = "%s/certs.d"' % node.containerd in config
    hosts = {path.parent.name: path.read_text() for path in
             (node.containerd / 'certs.d').glob('*/hosts.toml')}
    assert hosts == {
        'registry.k8s.io': 'server = "https://registry.k8s.io"\n\n'
                           '[host."http://10.9.9.1:5000"]\n'
                           '  capabilities = ["pull", "resolve"]\n',
        'docker.io': 'server = "https://registry-1.docker.io"\n\n'
                     '[host."http://10.9.9.1:5000"]\n'
                     '  capabilities = ["pull", "resolve"]\n'}


def toml_tables(text):
    """{table header: [its key lines, stripped]} of a TOML file."""
    tables, current = {}, None
    for line in text.splitlines():
        line = line.strip()
        if line.startswith('['):
            current = tables.setdefault(line, [])
        elif line and current is not None:
            current.append(line)
    return tables


RUNC_OPTIONS = {
    '2': '[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.'
         'options]',
    '3': "[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc."
         "options]"}
PAUSE_TABLE = {
    '2': '[plugins."io.containerd.grpc.v1.cri"]',
    '3': "[plugins.'io.containerd.cri.v1.images'.pinned_images]"}
PAUSE_KEY = {'2': 'sandbox_image', '3': 'sandbox'}
REGISTRY_TABLE = {
    '2': '[plugins."io.containerd.grpc.v1.cri".registry]',
    '3': "[plugins.'io.containerd.cri.v1.images'.registry]"}


@pytest.mark.parametrize('version', ['2', '3'])
def test_both_containerd_config_formats_get_systemd_cgroups_pause_mirror(
        node, version):
    """containerd 1.x (Debian 12/13, Ubuntu 22.04/24.04) prints a version 2
    default; 2.x (Ubuntu 26.04) a version 3 one, with the pause image in
    pinned_images and no SystemdCgroup key at all."""
    result = prepare(node, '-M', 'http://10.9.9.1:5000', '-P',
                     '10.9.9.1:5000/pause:3.10',
                     FAKE_CONTAINERD_CONFIG=version)
    assert result.returncode == 0, result.stderr
    tables = toml_tables((node.containerd / 'config.toml').read_text())
    runc = tables[RUNC_OPTIONS[version]]
    assert [line for line in runc if 'SystemdCgroup' in line] == [
        'SystemdCgroup = true']
    assert '%s = "10.9.9.1:5000/pause:3.10"' % PAUSE_KEY[version] in \
        tables[PAUSE_TABLE[version]]
    assert 'config_path = "%s/certs.d"' % node.containerd in \
        tables[REGISTRY_TABLE[version]]
    assert (node.containerd / 'certs.d' / 'registry.k8s.io' /
            'hosts.toml').exists()


def test_a_containerd_config_without_runc_options_fails_clearly(node):
    base.write_fake(str(node.bin), 'containerd', """
if sys.argv[1:] == ['config', 'default']:
    print('version = 3')
""")
    result = prepare(node)
    assert result.returncode == 1
    assert 'SystemdCgroup' in base.last_stderr_line(result)
    assert not (node.containerd / 'config.toml').exists()


def test_a_mirror_covers_the_default_registries(node):
    result = prepare(node, '-M', 'http://10.9.9.1:5000')
    assert result.returncode == 0, result.stderr
    assert sorted(path.parent.name for path in (
        node.containerd / 'certs.d').glob('*/hosts.toml')) == [
        'docker.io', 'quay.io', 'registry.k8s.io']


def test_online_defaults_write_no_mirror(node):
    result = prepare(node)
    assert result.returncode == 0, result.stderr
    config = (node.containerd / 'config.toml').read_text()
    assert 'config_path = ""' in config
    assert 'sandbox_image = "registry.k8s.io/pause:' in config
    assert not (node.containerd / 'certs.d').exists()
    assert node.argvs('curl')[0][-1].startswith('https://pkgs.k8s.io/')


def test_a_prepared_node_is_left_alone(node):
    extra = PREPARE % (node.apt, node.containerd)
    result = node.run_main('-w', THIS_IP, '-i', VIP, '-r', REPO, '-g',
                           str(node.key), extra=extra)
    assert result.returncode == 0, result.stderr
    assert node.argvs('apt-get') == []
    assert not node.apt.exists()


def test_the_cni_manifest_comes_from_the_given_file(tmp_path, ca_cert):  # noqa: F811,E501
    manifest = tmp_path / 'cni.yaml'
    manifest.write_text('kind: List\n')
    (tmp_path / 'leader').mkdir()
    leader = base.Node(tmp_path / 'leader', ca_cert)
    result = leader.run_main('-m', THIS_IP, '-i', '%s:6443' % THIS_IP,
                             '-n', str(manifest))
    assert result.returncode == 0, result.stderr
    assert leader.argvs('curl') == []
    assert leader.argvs('kubectl')[-1][-2:] == ['-f', str(manifest)]


def _script_accepts(node, option, value):
    result = node.run_script('-w', THIS_IP, '-i', VIP, '-M', 'http://m:5000',
                             option, value)
    return not result.stderr.startswith('%s: %s' % (base.NAME, option))


def test_the_script_and_the_driver_share_the_url_characters():
    pattern = re.search(r"^readonly URL_RE='([^']+)'$", base.SOURCE,
                        re.M).group(1)
    characters = ''.join(chr(code) for code in range(0x20, 0x7f))
    accepted = subprocess.run(
        [base.BASH, '-c', 'for c in $(seq 0 $((${#1} - 1))); do '
         '[[ "http://m/${1:c:1}" =~ $2 ]] && printf %s "${1:c:1}"; done',
         'bash', characters, pattern],
        capture_output=True, text=True, check=True).stdout
    assert accepted == ''.join(
        c for c in characters
        if re.fullmatch('[%s]' % offline_params.URL_CHARACTERS, c))


@pytest.mark.parametrize('option, value', [
    ('-r', 'http://mirror.example:8080/k8s/deb/'),
    ('-r', 'https://m/a?b=c&d=e;f#g'),
    ('-r', 'http://[fd00::1]:80/x'),
    ('-r', "http://mirror/it's/"),
    ('-r', 'http://mirror/deb/\n'),
    ('-r', 'HTTP://mirror/deb/'),
    ('-r', 'http://mirror/caf\u00e9/'),
    ('-M', 'http://mirror:5000\n'),
    ('-M', 'https://mirror:5000'),
    ('-R', 'docker.io,quay.io:443'),
    ('-R', 'docker.io\n'),
    ('-R', 'docker.io,-bad'),
    ('-P', 'registry.example:5000/pause:3.10'),
    ('-P', 'registry.example/pause:3.10\n'),
])
def test_the_script_accepts_what_the_driver_accepts(node, option, value):
    """The driver checks the script's options before it changes the
    nodes: the script must not refuse what the driver let through."""
    key = {'-r': 'apt_repository_url', '-M': 'registry_mirror_url',
           '-R': 'mirrored_registries', '-P': 'sandbox_image'}[option]
    sources = {'registry_mirror_url': 'http://m:5000',
               key: value.split(',') if option == '-R' else value}
    if option == '-r':
        sources['apt_key_file'] = 'Files/key.asc'
    try:
        param_model.parse({param_model.ROOT: {
            'script_path': 'Scripts/install_k8s_cluster.sh',
            'master_node': {'ssh_cp_name': 'cp', 'username': 'ubuntu',
                            'password': 'ubuntu'},
            'offline': sources}})
        driver_accepts = True
    except exceptions.ParameterErrors:
        driver_accepts = False
    if driver_accepts:
        assert _script_accepts(node, option, value)
