"""The sample install script (Scripts/install_k8s_cluster.sh) keeps the
contract the driver and operators rely on: command line, kubeadm command
lines, the cluster info block, exit status and the FAILED line.

No root, no network: the script runs with PATH pointing at a directory of
fake commands (id, ip, dpkg-query, kubeadm, kubectl, curl, getent, ...)
written here, plus symlinks to a few harmless real tools (sed, openssl,
base64, ...). Argument checks run the script itself. Everything after them
runs through a harness that sources the script, points its five path
variables (/etc/kubernetes, /etc/default/kubelet, /etc/systemd/system,
/usr/local/lib/kubernetes-mgmt-pv, /run) into a temporary root, replaces
the two functions that would change the machine (prepare_node,
restart_kubelet) and calls main. The end-to-end run on real hosts is the
functional tests' job.
"""

import base64
import os
import re
import shutil
import stat
import subprocess
import textwrap

import pytest
from tests.unit.install_script_harness import BASH
from tests.unit.install_script_harness import BEGIN
from tests.unit.install_script_harness import CALICO_VERSION
from tests.unit.install_script_harness import CERT_KEY
from tests.unit.install_script_harness import cluster_info
from tests.unit.install_script_harness import END
from tests.unit.install_script_harness import INIT_KEY
from tests.unit.install_script_harness import INIT_TOKEN
from tests.unit.install_script_harness import JOIN_HASH
from tests.unit.install_script_harness import JOIN_KEY
from tests.unit.install_script_harness import JOIN_TOKEN
from tests.unit.install_script_harness import last_stderr_line
from tests.unit.install_script_harness import NAME
from tests.unit.install_script_harness import OTHER_IP
from tests.unit.install_script_harness import SCRIPT
from tests.unit.install_script_harness import SOURCE
from tests.unit.install_script_harness import THIS_IP
from tests.unit.install_script_harness import TOKEN
from tests.unit.install_script_harness import VERSION
from tests.unit.install_script_harness import VIP


# --- static checks -----------------------------------------------------------

def test_shellcheck_finds_nothing():
    shellcheck = shutil.which('shellcheck')
    if shellcheck is None:
        pytest.skip('shellcheck is not installed')
    result = subprocess.run([shellcheck, SCRIPT], capture_output=True,
                            text=True)
    assert (result.returncode, result.stdout, result.stderr) == (0, '', '')


def test_no_check_is_disabled_and_no_trace_is_on():
    assert 'shellcheck disable' not in SOURCE
    # xtrace only through -d: a trace would print the token.
    code = [line.strip() for line in SOURCE.splitlines()
            if not line.lstrip().startswith('#')]
    traces = [i for i, line in enumerate(code)
              if re.search(r'set -\w*x|-o xtrace|bash -x', line)]
    assert [code[i - 1:i + 1] for i in traces] == [
        ['if [ -n "$debug" ]; then', 'set -x']]


def test_bash_parses_it():
    result = subprocess.run([BASH, '-n', SCRIPT], capture_output=True,
                            text=True)
    assert (result.returncode, result.stderr) == (0, '')


def test_help_documents_the_contract(node):
    result = node.run_script('-h')
    assert result.returncode == 0
    for text in ('-m IP1', '-w IP', '-i HOST:PORT', '-s HASH', '-o FILE',
                 'standard input', 'token=<bootstrap token>',
                 'certificate_key=<certificate key>', 'http_proxy', BEGIN,
                 'certificate_key=', END, 'Exit status',
                 'FAILED: <command> (exit <n>)'):
        assert text in result.stdout
    assert '-t TOKEN' not in result.stdout
    assert node.calls() == []


# --- usage errors ------------------------------------------------------------

@pytest.mark.parametrize('args, message', [
    ([], '-i HOST:PORT is required'),
    (['-m', THIS_IP], '-i HOST:PORT is required'),
    (['-m', THIS_IP, '-w', THIS_IP, '-i', VIP], '-m and -w'),
    (['-i', VIP], '-m IPS (Master) or -w IP (Worker) is required'),
    (['-x', '-m', THIS_IP, '-i', VIP], 'unknown option -x'),
    (['-m', THIS_IP, '-i'], 'option -i needs an argument'),
    (['-m', THIS_IP, '-i', '10.0.0.100'], "-i: '10.0.0.100' is not HOST:PORT"),
    (['-m', THIS_IP + ',', '-i', VIP], '-m: empty address'),
    (['-m', 'master-1', '-i', VIP], "-m: 'master-1' is not an IP address"),
    (['-w', THIS_IP, '-i', VIP, '-p', 'ten/8'], "-p: 'ten/8' is not a CIDR"),
    (['-m', THIS_IP, '-i', VIP, '-e', 'a b'],
     "-e: 'a b' is not a list of addresses and names"),
    (['-w', THIS_IP, '-i', VIP, '-t', JOIN_TOKEN], 'unknown option -t'),
    (['-w', THIS_IP, '-i', VIP, '-s', 'md5:00'], '-s: not sha256'),
    (['-m', OTHER_IP + ',' + THIS_IP, '-i', VIP, '-k', JOIN_KEY],
     'unknown option -k'),
    (['-m', THIS_IP, '-i', VIP, 'extra'], "unexpected argument 'extra'"),
])
def test_usage_errors_exit_2_naming_the_option(node, args, message):
    result = node.run_script(*args)
    assert result.returncode == 2, result.stderr
    assert message in result.stderr
    assert result.stdout == ''
    assert node.calls() == []


@pytest.mark.parametrize('stdin', [
    'token=Not-A-Token-But-Secret\n',
    'Not-A-Token-But-Secret\n',
    'token=%s\ncertificate_key=Not-A-Token-But-Secret\n' % JOIN_TOKEN,
])
def test_bad_secrets_are_never_echoed(node, stdin):
    result = node.run_main('-m', OTHER_IP + ',' + THIS_IP, '-i', VIP,
                           '-s', JOIN_HASH, stdin=stdin)
    assert result.returncode == 2
    assert 'standard input' in result.stderr
    assert 'Not-A-Token-But-Secret' not in result.stderr + result.stdout
    assert node.argvs('kubeadm') == []


def test_not_root_is_a_usage_error(node):
    result = node.run_script('-m', THIS_IP, '-i', VIP, FAKE_UID='1000')
    assert result.returncode == 2
    assert 'must be run as root' in result.stderr
    assert [c['cmd'] for c in node.calls()] == ['id']


@pytest.mark.parametrize('args, message', [
    (['-m', '10.9.9.9,10.0.0.7'], '-m: none of'),
    (['-w', '10.9.9.9'], '-w: 10.9.9.9 is not an address of this host'),
])
def test_an_address_this_host_does_not_hold_is_a_usage_error(node, args,
                                                             message):
    result = node.run_main(*args, '-i', VIP)
    assert result.returncode == 2
    assert message in result.stderr
    assert not node.defaults.exists()


@pytest.mark.parametrize('args, stdin, message', [
    (['-w', THIS_IP, '-s', JOIN_HASH], '', 'token=TOKEN is required to join'),
    (['-w', THIS_IP], 'token=%s\n' % JOIN_TOKEN,
     '-s sha256:HASH is required to join'),
    (['-m', OTHER_IP + ',' + THIS_IP, '-s', JOIN_HASH],
     'token=%s\n' % JOIN_TOKEN,
     'certificate_key=KEY is required to join as a control-plane node'),
    (['-w', THIS_IP, '-s', JOIN_HASH],
     'token=%s\ncertificate_key=%s\n' % (JOIN_TOKEN, JOIN_KEY),
     'certificate_key is for Masters only'),
])
def test_join_arguments_are_required_to_join(node, args, stdin, message):
    result = node.run_main(*args, '-i', VIP, stdin=stdin)
    assert result.returncode == 2
    assert message in result.stderr
    assert node.argvs('kubeadm') == []
    assert 'PREPARE_NODE_CALLED' not in result.stdout
    assert not node.defaults.exists()   # nothing changed


# --- node preparation --------------------------------------------------------

def test_preparation_is_skipped_when_installed_at_the_pinned_version(node):
    node.become_member(control_plane=False)
    result = node.run_main('-w', THIS_IP, '-i', VIP)
    assert result.returncode == 0, result.stderr
    assert 'Node preparation skipped' in result.stdout
    assert VERSION in result.stdout
    assert 'PREPARE_NODE_CALLED' not in result.stdout


@pytest.mark.parametrize('change', [
    {'FAKE_DPKG_kubelet': 'installed 1.30.9-1.1'},
    {'FAKE_DPKG_kubeadm': 'installed %s+local' % VERSION},
    {'FAKE_DPKG_kubeadm': ''},                       # not installed
    {'FAKE_DPKG_kubelet': 'config-files ' + VERSION},  # removed
    {'remove': 'containerd'},
    {'remove': 'kubectl'},
])
def test_preparation_runs_otherwise(node, change):
    node.become_member(control_plane=False)
    if 'remove' in change:
        node.remove(change.pop('remove'))
    result = node.run_main('-w', THIS_IP, '-i', VIP, **change)
    assert result.returncode == 0, result.stderr
    assert 'PREPARE_NODE_CALLED' in result.stdout
    assert 'skipped' not in result.stdout


def test_kubelet_defaults_are_always_written(node):
    node.become_member(control_plane=False)
    node.defaults.write_text('KUBELET_EXTRA_ARGS=--node-ip=10.1.1.1\n')
    result = node.run_main('-w', THIS_IP, '-i', VIP)
    assert result.returncode == 0, result.stderr
    assert (node.defaults.read_text()
            == 'KUBELET_EXTRA_ARGS=--node-ip=%s\n' % THIS_IP)
    # A member's kubelet must pick its new address up.
    assert 'RESTART_KUBELET_CALLED' in result.stdout
    again = node.run_main('-w', THIS_IP, '-i', VIP)
    assert 'RESTART_KUBELET_CALLED' not in again.stdout


def test_preparation_writes_proxy_dropins_for_containerd_and_kubelet(node):
    # The script's own prepare_node, with its heavy steps stubbed.
    extra = textwrap.dedent('''
        prepare_kernel() { :; }
        apt-get() { :; }
        add_kubernetes_repository() { :; }
        install_packages() { :; }
        configure_containerd() { :; }
        prepare_node() { real_prepare_node; }
    ''')
    node.become_member(control_plane=False)
    result = node.run_main(
        '-w', THIS_IP, '-i', VIP, extra=extra,
        FAKE_DPKG_kubelet='', http_proxy='http://u:p%40ss@proxy:3128',
        no_proxy='.example.com')
    assert result.returncode == 0, result.stderr
    for unit in ('containerd', 'kubelet'):
        directory = node.systemd / (unit + '.service.d')
        env_file = directory / 'http-proxy.env'
        # The drop-in, which systemd shows to any user, names a file that
        # only root reads; the credentials are there alone.
        assert (directory / 'http-proxy.conf').read_text() == (
            '[Service]\nEnvironmentFile=%s\n' % env_file)
        lines = env_file.read_text().splitlines()
        assert lines[0] == 'HTTP_PROXY="http://u:p%40ss@proxy:3128"'
        assert lines[1].startswith('NO_PROXY=".example.com,')
        assert len(lines) == 2              # https_proxy is not set
        assert stat.S_IMODE(env_file.stat().st_mode) == 0o600
    assert node.argvs('systemctl') == [
        ['daemon-reload'], ['enable', 'containerd', 'kubelet'],
        ['restart', 'containerd']]


def test_no_proxy_dropins_without_proxy_or_without_preparation(node):
    node.become_member(control_plane=False)
    result = node.run_main('-w', THIS_IP, '-i', VIP,
                           http_proxy='http://proxy:3128')
    assert result.returncode == 0, result.stderr
    assert not node.systemd.exists()    # preparation was skipped
    source = 'source "$1"; SYSTEMD_DIR="$2"; write_proxy_dropins'
    written = subprocess.run(
        [BASH, '-c', source, 'harness', SCRIPT, str(node.systemd)],
        env={'PATH': str(node.bin)}, capture_output=True, text=True)
    assert written.returncode == 0, written.stderr
    assert not node.systemd.exists()    # no proxy set


# --- first Master ------------------------------------------------------------

def test_first_master_inits_and_prints_the_cluster_info(node, ca_cert):
    result = node.run_main('-m', '%s,%s' % (THIS_IP, OTHER_IP), '-i', VIP,
                           '-p', '192.168.0.0/16', '-a', '10.96.0.0/12')
    assert result.returncode == 0, result.stderr
    assert node.argvs('kubeadm') == [
        ['init', '--control-plane-endpoint', VIP,
         '--apiserver-advertise-address', THIS_IP,
         '--pod-network-cidr', '192.168.0.0/16',
         '--service-cidr', '10.96.0.0/12', '--upload-certs'],
        ['token', 'create', '--ttl', '2h'],
        ['init', 'phase', 'upload-certs', '--upload-certs']]
    assert node.argvs('kubectl') == [
        ['--kubeconfig', str(node.kube / 'admin.conf'), 'apply', '-f',
         str(node.manifest)]]
    assert node.argvs('curl') == []     # the manifest was already there
    assert not node.addon_pending.exists()

    info = cluster_info(result.stdout)
    with open(ca_cert[0], 'rb') as stream:
        pem = stream.read()
    assert info == {
        'server': 'https://' + VIP, 'token': TOKEN,
        'ca_cert_hash': 'sha256:' + ca_cert[1],
        'certificate_key': CERT_KEY,
        'ca_cert': base64.b64encode(pem).decode()}
    assert (node.defaults.read_text()
            == 'KUBELET_EXTRA_ARGS=--node-ip=%s\n' % THIS_IP)

    config = node.home / '.kube' / 'config'
    assert config.read_text() == (node.kube / 'admin.conf').read_text()
    assert stat.S_IMODE(config.stat().st_mode) == 0o600
    assert stat.S_IMODE(config.parent.stat().st_mode) == 0o700
    assert config.stat().st_uid == os.getuid()


def test_secrets_appear_only_in_the_block(node):
    result = node.run_main('-m', THIS_IP, '-i', VIP)
    assert result.returncode == 0, result.stderr
    # kubeadm init printed its own token and key on stdout and stderr.
    assert 'Using token: <token>' in result.stdout
    assert '--certificate-key <certificate-key>' in result.stdout
    assert 'token=<token>' in result.stderr
    for secret in (INIT_TOKEN, INIT_KEY):
        assert secret not in result.stdout + result.stderr
    for secret in (TOKEN, CERT_KEY):
        assert secret not in result.stderr
        assert result.stdout.count(secret) == 1
    assert not re.search(r'^\+', result.stderr, re.M)   # no trace


def test_init_passes_the_cidrs_only_when_given(node):
    result = node.run_main('-m', THIS_IP, '-i', THIS_IP + ':6443')
    assert result.returncode == 0, result.stderr
    assert node.argvs('kubeadm')[0] == [
        'init', '--control-plane-endpoint', THIS_IP + ':6443',
        '--apiserver-advertise-address', THIS_IP, '--upload-certs']
    assert cluster_info(result.stdout)['server'] == 'https://%s:6443' % THIS_IP


def test_extra_certificate_names_reach_init(node):
    result = node.run_main('-m', THIS_IP, '-i', THIS_IP + ':6443',
                           '-e', '192.0.2.7,api.example.com')
    assert result.returncode == 0, result.stderr
    assert node.argvs('kubeadm')[0] == [
        'init', '--control-plane-endpoint', THIS_IP + ':6443',
        '--apiserver-advertise-address', THIS_IP,
        '--apiserver-cert-extra-sans', '192.0.2.7,api.example.com',
        '--upload-certs']


def test_calico_manifest_is_fetched_before_init_when_missing(node):
    node.manifest.unlink()
    result = node.run_main('-m', THIS_IP, '-i', VIP)
    assert result.returncode == 0, result.stderr
    order = [c['cmd'] for c in node.calls() if c['cmd'] in (
        'curl', 'kubeadm', 'kubectl')]
    assert order[:3] == ['curl', 'kubeadm', 'kubectl']
    url = node.argvs('curl')[0][-1]
    assert url.endswith('/calico/%s/manifests/calico.yaml' % CALICO_VERSION)
    assert node.manifest.read_text() == '# downloaded %s\n' % url


def test_a_failed_download_stops_before_init(node):
    node.manifest.unlink()
    node.remove('curl')
    result = node.run_main('-m', THIS_IP, '-i', VIP)
    assert result.returncode == 127
    assert re.fullmatch(r'%s: FAILED: curl https://\S+calico\.yaml '
                        r'\(exit 127\)' % NAME, last_stderr_line(result))
    assert node.argvs('kubeadm') == []


def test_proxy_reaches_kubeadm_with_cluster_addresses_in_no_proxy(node):
    result = node.run_main('-m', '%s,%s' % (THIS_IP, OTHER_IP), '-i', VIP,
                           '-a', '10.96.0.0/12',
                           http_proxy='http://proxy:3128',
                           no_proxy='.example.com')
    assert result.returncode == 0, result.stderr
    init = node.calls('kubeadm')[0]
    assert init['http_proxy'] == 'http://proxy:3128'
    entries = init['no_proxy'].split(',')
    assert entries[0] == '.example.com'
    for entry in ('localhost', THIS_IP, OTHER_IP, '10.0.0.100',
                  '10.96.0.0/12'):
        assert entry in entries


@pytest.mark.parametrize('proxy, seen_by_kubeadm', [
    ('http://u:secret@proxy:3128', None),
    ('u:secret@proxy:3128', None),
    ('http://proxy:3128', 'http://proxy:3128'),
    ('http://proxy:3128/a@b', 'http://proxy:3128/a@b'),
])
def test_proxy_credentials_stay_out_of_kubeadm(node, proxy, seen_by_kubeadm):
    """kubeadm init and join copy *_proxy into the static Pod
    manifests: a proxy with credentials never reaches them."""
    result = node.run_main('-m', THIS_IP, '-i', VIP, http_proxy=proxy,
                           https_proxy=proxy)
    assert result.returncode == 0, result.stderr
    init = node.calls('kubeadm')[0]
    assert init['argv'][0] == 'init'
    assert (init['http_proxy'], init['https_proxy']) == (
        seen_by_kubeadm, seen_by_kubeadm)
    assert init['no_proxy']


def test_without_proxy_nothing_is_invented(node):
    result = node.run_main('-m', THIS_IP, '-i', VIP)
    assert result.returncode == 0, result.stderr
    init = node.calls('kubeadm')[0]
    assert (init['http_proxy'], init['no_proxy']) == (None, None)


# --- other Masters, Workers --------------------------------------------------

def join_config(node):
    """The --config file the one kubeadm join got, checked to be gone."""
    join, = [call for call in node.calls('kubeadm')
             if call['argv'][0] == 'join']
    config = join['config']
    assert join['argv'] == ['join', '--config', config['path']]
    assert os.path.dirname(config['path']) == str(node.run_dir)
    assert config['mode'] == 0o600
    assert not os.path.exists(config['path'])
    return config['text']


def test_other_master_joins_the_control_plane(node, ca_cert):
    result = node.run_main('-m', '%s,%s' % (OTHER_IP, THIS_IP), '-i', VIP,
                           '-s', JOIN_HASH, stdin='token=%s\ncertificate_key'
                           '=%s\n' % (JOIN_TOKEN, JOIN_KEY))
    assert result.returncode == 0, result.stderr
    assert [argv[0] for argv in node.argvs('kubeadm')] == [
        'join', 'token', 'init']
    assert node.argvs('kubeadm')[1:] == [
        ['token', 'create', '--ttl', '2h'],
        ['init', 'phase', 'upload-certs', '--upload-certs']]
    assert join_config(node) == textwrap.dedent('''\
        apiVersion: kubeadm.k8s.io/v1beta4
        kind: JoinConfiguration
        discovery:
          bootstrapToken:
            apiServerEndpoint: "%s"
            token: "%s"
            caCertHashes:
            - "%s"
        controlPlane:
          localAPIEndpoint:
            advertiseAddress: "%s"
          certificateKey: "%s"
        ''') % (VIP, JOIN_TOKEN, JOIN_HASH, THIS_IP, JOIN_KEY)
    assert node.argvs('kubectl') == []  # Calico: first Master only
    assert cluster_info(result.stdout)['ca_cert_hash'] == (
        'sha256:' + ca_cert[1])
    assert (node.home / '.kube' / 'config').exists()


def test_worker_joins_and_prints_no_block(node):
    result = node.run_main('-w', THIS_IP, '-i', VIP, '-s', JOIN_HASH,
                           stdin='token=%s\n' % JOIN_TOKEN)
    assert result.returncode == 0, result.stderr
    text = join_config(node)
    assert 'token: "%s"\n' % JOIN_TOKEN in text
    assert 'apiServerEndpoint: "%s"\n' % VIP in text
    assert 'controlPlane' not in text and 'certificateKey' not in text
    for secret in (JOIN_TOKEN, JOIN_KEY):
        assert secret not in result.stdout + result.stderr
    assert BEGIN not in result.stdout
    assert not (node.home / '.kube').exists()
    assert (node.defaults.read_text()
            == 'KUBELET_EXTRA_ARGS=--node-ip=%s\n' % THIS_IP)


@pytest.mark.parametrize('masters', [THIS_IP, OTHER_IP + ',' + THIS_IP])
def test_a_member_master_is_not_initialised_again(node, masters):
    node.become_member()
    result = node.run_main('-m', masters, '-i', VIP)   # no -t/-s/-k
    assert result.returncode == 0, result.stderr
    assert 'already belongs to a cluster' in result.stdout
    assert node.argvs('kubeadm') == [
        ['token', 'create', '--ttl', '2h'],
        ['init', 'phase', 'upload-certs', '--upload-certs']]
    assert node.argvs('kubectl') == []
    assert cluster_info(result.stdout)['token'] == TOKEN


def test_a_network_addon_cut_short_is_applied_by_the_next_run(node):
    apply = ['--kubeconfig', str(node.kube / 'admin.conf'), 'apply', '-f',
             str(node.manifest)]
    result = node.run_main('-m', THIS_IP, '-i', VIP, FAKE_KUBECTL_STATUS='1')
    assert result.returncode == 1
    assert last_stderr_line(result) == (
        '%s: FAILED: kubectl apply -f %s (exit 1)' % (NAME, node.manifest))
    assert node.addon_pending.exists()

    for run in range(2):  # the next run applies it, the one after does not
        again = node.run_main('-m', THIS_IP, '-i', VIP)
        assert again.returncode == 0, again.stderr
        assert ('the network add-on was not applied' in again.stdout) == \
            (run == 0)
        assert not node.addon_pending.exists()
        assert node.argvs('kubectl') == [apply, apply]
    assert [argv for argv in node.argvs('kubeadm')
            if argv[0] == 'init' and argv[1] != 'phase'] == [
        ['init', '--control-plane-endpoint', VIP,
         '--apiserver-advertise-address', THIS_IP, '--upload-certs']]


def test_a_joining_master_drops_a_pending_network_addon(node):
    node.addon_pending.write_text('')  # an init here, then kubeadm reset
    result = node.run_main('-m', '%s,%s' % (OTHER_IP, THIS_IP), '-i', VIP,
                           '-s', JOIN_HASH, stdin='token=%s\ncertificate_key'
                           '=%s\n' % (JOIN_TOKEN, JOIN_KEY))
    assert result.returncode == 0, result.stderr
    assert not node.addon_pending.exists()
    assert node.argvs('kubectl') == []
    assert node.run_main('-m', '%s,%s' % (OTHER_IP, THIS_IP),
                         '-i', VIP).returncode == 0
    assert node.argvs('kubectl') == []


def test_a_member_worker_is_not_joined_again(node):
    node.become_member(control_plane=False)
    result = node.run_main('-w', THIS_IP, '-i', VIP)
    assert result.returncode == 0, result.stderr
    assert node.argvs('kubeadm') == []


def test_a_worker_listed_as_master_fails_clearly(node):
    node.become_member(control_plane=False)
    result = node.run_main('-m', THIS_IP, '-i', VIP)
    assert result.returncode == 1
    assert last_stderr_line(result) == (
        '%s: FAILED: %s/admin.conf missing: this node is no control-plane '
        'node (exit 1)' % (NAME, node.kube))


# --- failures ----------------------------------------------------------------

@pytest.mark.parametrize('args, failing, what', [
    (['-m', THIS_IP], 'init:3', 'kubeadm init'),
    (['-w', THIS_IP, '-s', JOIN_HASH], 'join:7', 'kubeadm join'),
])
def test_a_failing_kubeadm_ends_with_the_failed_line(node, args, failing,
                                                     what):
    result = node.run_main(*args, '-i', VIP, FAKE_KUBEADM_FAIL=failing,
                           stdin='token=%s\n' % JOIN_TOKEN)
    status = int(failing.split(':')[1])
    assert result.returncode == status
    assert last_stderr_line(result) == '%s: FAILED: %s (exit %d)' % (
        NAME, what, status)
    assert 'error execution phase preflight: it broke' in result.stderr
    assert INIT_TOKEN not in result.stderr
    assert BEGIN not in result.stdout
    assert 'Install Success!' not in result.stdout
    assert os.listdir(node.run_dir) == []   # no join configuration left


def test_any_failing_command_ends_with_the_failed_line(node):
    node.defaults.parent.rmdir()        # /etc/default/kubelet not writable
    result = node.run_main('-m', THIS_IP, '-i', VIP)
    assert result.returncode == 1
    line = last_stderr_line(result)
    assert line.startswith(NAME + ': FAILED: printf ')
    assert line.endswith('KUBELET_DEFAULTS" (exit 1)')
    assert node.argvs('kubeadm') == []


def test_a_failing_ip_command_is_reported(node):
    result = node.run_script('-m', THIS_IP, '-i', VIP, FAKE_IP_STATUS='5')
    assert result.returncode == 5
    assert last_stderr_line(result) == (
        '%s: FAILED: ip -o addr show (exit 5)' % NAME)


# --- -o and -d ---------------------------------------------------------------

def test_log_file_gets_the_output_but_not_the_block(node, tmp_path):
    log = tmp_path / 'install.log'
    result = node.run_main('-m', THIS_IP, '-i', VIP, '-o', str(log))
    assert result.returncode == 0, result.stderr
    assert cluster_info(result.stdout)['token'] == TOKEN
    text = log.read_text()
    assert 'Install Success!' in text
    assert 'Using token: <token>' in text
    assert 'kubeadm init done, token=<token>' in text    # stderr too
    assert BEGIN not in text
    for secret in (TOKEN, CERT_KEY, INIT_TOKEN, INIT_KEY):
        assert secret not in text
    assert stat.S_IMODE(log.stat().st_mode) == 0o600


def test_log_file_that_cannot_be_written_is_a_usage_error(node, tmp_path):
    result = node.run_main('-m', THIS_IP, '-i', VIP,
                           '-o', str(tmp_path / 'missing' / 'install.log'))
    assert result.returncode == 2
    assert '-o: cannot write to' in result.stderr


def test_debug_traces_commands(node):
    result = node.run_main('-w', THIS_IP, '-i', VIP, '-s', JOIN_HASH, '-d',
                           stdin='token=%s\n' % JOIN_TOKEN)
    assert result.returncode == 0, result.stderr
    assert re.search(r'^\++ kubeadm join ', result.stderr, re.M)


# --- masking -----------------------------------------------------------------

def test_redact_masks_tokens_and_keys_only():
    text = ('token %s here\n--certificate-key %s\n  %s\n'
            'sha256:%s\nplain line\n' % (TOKEN, CERT_KEY, INIT_KEY, 'ab' * 32))
    result = subprocess.run([BASH, '-c', 'source "$1"; redact', 'harness',
                             SCRIPT], input=text, capture_output=True,
                            text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout == ('token <token> here\n'
                             '--certificate-key <certificate-key>\n'
                             '  <certificate-key>\n'
                             'sha256:%s\nplain line\n' % ('ab' * 32))
