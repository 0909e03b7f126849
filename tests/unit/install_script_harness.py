"""The harness of the install script tests: fake commands on PATH, the
script sourced with its paths in a temporary root, and what it printed.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, 'samples', 'kubernetes_pv_vnf', 'Scripts',
                      'install_k8s_cluster.sh')
BASH = shutil.which('bash') or '/bin/bash'
NAME = 'install_k8s_cluster.sh'

with open(SCRIPT) as _stream:
    SOURCE = _stream.read()
VERSION = re.search(r"^readonly K8S_PACKAGE_VERSION='([^']+)'$", SOURCE,
                    re.M).group(1)
CALICO_VERSION = re.search(r"^readonly CALICO_VERSION='([^']+)'$", SOURCE,
                           re.M).group(1)

# Real tools the script may use that change nothing outside its arguments.
TOOLS = ('base64', 'cat', 'chmod', 'cut', 'grep', 'head', 'install', 'mkdir',
         'mktemp', 'mv', 'openssl', 'rm', 'sed', 'sha256sum', 'tail', 'tee',
         'tr')

THIS_IP = '10.0.0.5'
OTHER_IP = '10.0.0.6'
VIP = '10.0.0.100:16443'
TOKEN = 'abcdef.0123456789abcdef'          # what `kubeadm token create` gives
CERT_KEY = 'c0ffee' * 10 + 'c0de'         # what upload-certs gives (last line)
INIT_TOKEN = 'zyxwvu.9876543210zyxwvu'     # printed by `kubeadm init` only
INIT_KEY = 'feed' * 16                     # printed by `kubeadm init` only
JOIN_TOKEN = 'qwerty.asdfghjklzxcvbnm'
JOIN_HASH = 'sha256:' + 'ab' * 32
JOIN_KEY = '12' * 32
BEGIN = '----- BEGIN KUBERNETES CLUSTER INFO -----'
END = '----- END KUBERNETES CLUSTER INFO -----'

FAKE_HEAD = '#!%s\nimport json, os, shutil, sys\n' % sys.executable
FAKE_LOG = '''
def config_file():
    """The content and mode of the file of --config, if any."""
    if '--config' not in sys.argv:
        return None
    path = sys.argv[sys.argv.index('--config') + 1]
    with open(path) as stream:
        return {'path': path, 'text': stream.read(),
                'mode': os.stat(path).st_mode & 0o777}

def log():
    with open(os.environ['FAKE_LOG'], 'a') as stream:
        stream.write(json.dumps({
            'cmd': os.path.basename(sys.argv[0]), 'argv': sys.argv[1:],
            'http_proxy': os.environ.get('http_proxy'),
            'https_proxy': os.environ.get('https_proxy'),
            'no_proxy': os.environ.get('no_proxy'),
            'config': config_file()}) + '\\n')
log()
'''

FAKES = {
    'id': '''
if sys.argv[1:] == ['-u']:
    print(os.environ.get('FAKE_UID', '0'))
''',
    'ip': '''
if os.environ.get('FAKE_IP_STATUS'):
    sys.exit(int(os.environ['FAKE_IP_STATUS']))
print('1: lo    inet 127.0.0.1/8 scope host lo\\\\       valid_lft forever')
print('2: eth0    inet %s/24 brd 10.0.0.255 scope global eth0\\\\   valid_lft'
      % os.environ['FAKE_IP'])
''',
    'dpkg-query': '''
package = sys.argv[-1]
state = os.environ.get('FAKE_DPKG_' + package)
if not state:
    sys.stderr.write('dpkg-query: no packages found matching %s\\n' % package)
    sys.exit(1)
fmt = [a for a in sys.argv if a.startswith('-f')][0]
assert fmt == '-f=${db:Status-Status} ${Version}', fmt
sys.stdout.write(state)
''',
    'getent': '''
assert sys.argv[1] == 'passwd'
if sys.argv[2] != 'ubuntu':
    sys.exit(2)
print('ubuntu:x:%d:%d:Ubuntu:%s:/bin/bash'
      % (os.getuid(), os.getgid(), os.environ['FAKE_HOME']))
''',
    'kubectl': '''
if os.environ.get('FAKE_KUBECTL_STATUS'):
    sys.exit(int(os.environ['FAKE_KUBECTL_STATUS']))
''',
    'containerd': '',
    'systemctl': '',
    'curl': '''
out = sys.argv[sys.argv.index('-o') + 1]
with open(out, 'w') as stream:
    stream.write('# downloaded ' + sys.argv[-1] + '\\n')
''',
    'kubeadm': '''
argv = sys.argv[1:]
kube = os.environ['FAKE_KUBE_DIR']
failing = os.environ.get('FAKE_KUBEADM_FAIL', '')
if failing and argv[0] == failing.split(':')[0] and argv[1] != 'phase':
    sys.stderr.write('W1 some warning, token %s\\n' % os.environ['INIT_TOKEN'])
    sys.stderr.write('error execution phase preflight: it broke\\n')
    sys.exit(int(failing.split(':')[1]))

def control_plane_files():
    os.makedirs(os.path.join(kube, 'pki'), exist_ok=True)
    shutil.copy(os.environ['FAKE_CA'], os.path.join(kube, 'pki', 'ca.crt'))
    with open(os.path.join(kube, 'admin.conf'), 'w') as stream:
        stream.write('apiVersion: v1\\nkind: Config\\n# admin\\n')

def kubelet_conf():
    os.makedirs(kube, exist_ok=True)
    with open(os.path.join(kube, 'kubelet.conf'), 'w') as stream:
        stream.write('kind: Config\\n')

if argv[:2] == ['token', 'create']:
    print(os.environ['TOKEN'])
elif argv[:3] == ['init', 'phase', 'upload-certs']:
    print('[upload-certs] Storing the certificates in Secret "kubeadm-certs"')
    print('[upload-certs] Using certificate key:')
    print(os.environ['CERT_KEY'])
elif argv[0] == 'init':
    control_plane_files()
    kubelet_conf()
    token, key = os.environ['INIT_TOKEN'], os.environ['INIT_KEY']
    print('[upload-certs] Using certificate key:')
    print(key)
    print('[bootstrap-token] Using token: ' + token)
    print('  kubeadm join %s --token %s \\\\' % (argv[2], token))
    print('\\t--discovery-token-ca-cert-hash sha256:%s \\\\' % ('0' * 64))
    print('\\t--control-plane --certificate-key ' + key)
    sys.stderr.write('I1 kubeadm init done, token=%s\\n' % token)
elif argv[0] == 'join':
    kubelet_conf()
    if 'controlPlane:' in config_file()['text']:
        control_plane_files()
    print('This node has joined the cluster')
''',
}


def write_fake(directory, name, body):
    path = os.path.join(directory, name)
    with open(path, 'w') as stream:
        stream.write(FAKE_HEAD + FAKE_LOG + textwrap.dedent(body))
    os.chmod(path, 0o755)


class Node(object):
    """A temporary root and fake commands to run the script against."""

    def __init__(self, tmp_path, ca):
        self.root = tmp_path / 'root'
        self.bin = tmp_path / 'bin'
        self.bin.mkdir()
        self.kube = self.root / 'etc' / 'kubernetes'
        self.defaults = self.root / 'etc' / 'default' / 'kubelet'
        self.systemd = self.root / 'etc' / 'systemd' / 'system'
        self.lib = self.root / 'usr' / 'local' / 'lib' / 'kubernetes-mgmt-pv'
        self.run_dir = self.root / 'run'
        self.home = tmp_path / 'home' / 'ubuntu'
        self.log = tmp_path / 'fake.log'
        self.manifest = self.lib / ('calico-%s.yaml' % CALICO_VERSION)
        self.addon_pending = self.lib / 'network-add-on-pending'
        for directory in (self.defaults.parent, self.lib, self.home,
                          self.run_dir):
            directory.mkdir(parents=True)
        self.manifest.write_text('kind: List\n')
        for tool in TOOLS:
            real = shutil.which(tool)
            if real is None:
                pytest.skip('%s is not installed' % tool)
            os.symlink(real, self.bin / tool)
        for name, body in FAKES.items():
            write_fake(str(self.bin), name, body)
        self.env = {
            'PATH': str(self.bin), 'LC_ALL': 'C', 'SUDO_USER': 'ubuntu',
            'FAKE_LOG': str(self.log), 'FAKE_IP': THIS_IP,
            'FAKE_KUBE_DIR': str(self.kube), 'FAKE_HOME': str(self.home),
            'FAKE_CA': ca[0], 'TOKEN': TOKEN, 'CERT_KEY': CERT_KEY,
            'INIT_TOKEN': INIT_TOKEN, 'INIT_KEY': INIT_KEY,
            'FAKE_DPKG_kubelet': 'installed ' + VERSION,
            'FAKE_DPKG_kubeadm': 'installed ' + VERSION,
        }

    def remove(self, command):
        os.unlink(self.bin / command)

    def become_member(self, control_plane=True):
        (self.kube / 'pki').mkdir(parents=True)
        (self.kube / 'kubelet.conf').write_text('kind: Config\n')
        if control_plane:
            (self.kube / 'admin.conf').write_text('kind: Config\n# admin\n')
            shutil.copy(self.env['FAKE_CA'], self.kube / 'pki' / 'ca.crt')

    def run_script(self, *args, stdin='', **env):
        """Run the script itself, as the driver does."""
        return subprocess.run([BASH, SCRIPT] + list(args), input=stdin,
                              env=dict(self.env, **env), capture_output=True,
                              text=True, timeout=60)

    def run_main(self, *args, extra='', stdin='', **env):
        """Source the script, redirect its paths, call main."""
        harness = textwrap.dedent('''
            source "$1"; shift
            eval "real_$(declare -f prepare_node)"
            KUBE_DIR=%s
            KUBELET_DEFAULTS=%s
            SYSTEMD_DIR=%s
            LIB_DIR=%s
            RUN_DIR=%s
            prepare_node() { echo PREPARE_NODE_CALLED; }
            restart_kubelet() { echo RESTART_KUBELET_CALLED; }
            %s
            main "$@"
        ''') % (self.kube, self.defaults, self.systemd, self.lib,
                self.run_dir, extra)
        return subprocess.run([BASH, '-c', harness, 'harness', SCRIPT]
                              + list(args), input=stdin,
                              env=dict(self.env, **env), capture_output=True,
                              text=True, timeout=60)

    def calls(self, command=None):
        if not self.log.exists():
            return []
        entries = [json.loads(line) for line in self.log.read_text()
                   .splitlines()]
        return [e for e in entries if command in (None, e['cmd'])]

    def argvs(self, command):
        return [e['argv'] for e in self.calls(command)]


def cluster_info(stdout):
    """The block's key=value lines, checking its shape on the way."""
    lines = stdout.splitlines()
    assert lines.count(BEGIN) == 1 and lines.count(END) == 1, stdout
    start = lines.index(BEGIN)
    body = lines[start + 1:lines.index(END)]
    keys = [line.split('=', 1)[0] for line in body]
    assert keys == ['server', 'token', 'ca_cert_hash', 'certificate_key',
                    'ca_cert']
    return dict(line.split('=', 1) for line in body)


def last_stderr_line(result):
    return result.stderr.rstrip('\n').splitlines()[-1]
