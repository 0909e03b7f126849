"""Stand-ins for the Kubernetes node software the test hosts cannot run.

kubeadm, kubelet, containerd and the kube-apiserver static pod need a real
kernel setup, systemd and images; the hosts have none. This package builds
Debian packages of small Python stand-ins (see the modules next to this
file) that ``hosts.Testbed`` installs with dpkg into its base image, so the
install script sees kubeadm/kubelet installed at exactly its pinned
K8S_PACKAGE_VERSION and skips node preparation, as on a prepared VM.

All API servers of a test cluster share one test API server
(testbed/kubeapi/), which holds the Kubernetes objects: connect_host()
tells a host where it is. Besides, kubeadm init/join --control-plane run a
real stacked etcd cluster (Debian's etcd-server) on the control-plane
hosts, with kubeadm's certificates, ports and membership changes, so the
driver can manage etcd members as on real Masters (kubeadm_etcd.py).
"""

import datetime
import json
import os
import re
import shlex
import socket
import ssl
import subprocess
import tempfile

from testbed import polling

HERE = os.path.dirname(os.path.abspath(__file__))
INSTALL_SCRIPT = os.path.join(
    os.path.dirname(os.path.dirname(HERE)), 'samples', 'kubernetes_pv_vnf',
    'Scripts', 'install_k8s_cluster.sh')
CONTAINERD_VERSION = '1.7.24-0testbed1'
# Where _build_base puts the .debs inside the image for dpkg -i.
STAGING_DIR = '/var/cache/testbed-standins'
UPSTREAM_CONFIG = '/etc/testbed/kube-upstream.json'
CALL_LOG = '/var/log/kubeadm-standin.log'
API_SERVER = '/usr/lib/testbed/kube-apiserver-standin'
API_SERVER_PID = '/run/kube-apiserver-standin.pid'
API_SERVER_LOG = '/var/log/kube-apiserver-standin.log'
API_PORT = 6443
# The etcd half of the kubeadm stand-in (a real etcd, see kubeadm_etcd.py).
KUBEADM_ETCD = '/usr/lib/testbed/kubeadm_etcd.py'
# Its reader of --config files (kubeadm_config.py).
KUBEADM_CONFIG = '/usr/lib/testbed/kubeadm_config.py'
# Its files, API server client and API server "static pod" (kubeadm_node.py).
KUBEADM_NODE = '/usr/lib/testbed/kubeadm_node.py'
# Its etcd certificates (kubeadm_pki.py).
KUBEADM_PKI = '/usr/lib/testbed/kubeadm_pki.py'
# Its `kubeadm upgrade` and the kubeadm-config ConfigMap.
KUBEADM_UPGRADE = '/usr/lib/testbed/kubeadm_upgrade.py'
# The kubelet "service" kubeadm starts and reset stops.
KUBELET_SERVICE = '/usr/lib/testbed/kubelet_service.py'
# The kubelet package's postinst: a member's kubelet "restarts" at the
# package's version (kubelet.py).
KUBELET_POSTINST = '''#!/bin/sh
if [ "$1" = configure ] && [ -f /etc/kubernetes/kubelet.conf ]; then
    /usr/bin/kubelet --testbed-restart || true
fi
'''
# While it exists on a host, a Master's join there leaves a started,
# unpromoted etcd learner (kubeadm_etcd.STOP_BEFORE_PROMOTION).
STOP_BEFORE_PROMOTION = '/etc/testbed/kubeadm-join-stops-before-promotion'
ETCD = '/usr/bin/etcd'
ETCD_LOG = '/var/log/etcd.log'
DEFAULT_TIMEOUT = 60.0  # kubeadm's waits for API servers, in seconds

_VERSION_LINE = re.compile(r"^PACKAGE_VERSION = '[^']*'", re.M)


def k8s_package_version(script=INSTALL_SCRIPT):
    """The `readonly K8S_PACKAGE_VERSION='...'` of the install script."""
    with open(script) as handle:
        match = re.search(r"^readonly K8S_PACKAGE_VERSION='([^']+)'$",
                          handle.read(), re.M)
    if not match:
        raise ValueError(f'no K8S_PACKAGE_VERSION line in {script}')
    return match[1]


def next_minor(package_version=None):
    """The package version of the next minor's first patch release the
    test apt repository serves: '1.37.1-1.1' after '1.36.4-1.1'."""
    major, minor = (package_version or k8s_package_version()).split('.')[:2]
    return f'{major}.{int(minor) + 1}.1-1.1'


def script_at(package_version, script=INSTALL_SCRIPT):
    """The install script (bytes) with its K8S_PACKAGE_VERSION set to
    ``package_version``: the script of a VNF package of that version."""
    with open(script, 'rb') as handle:
        text = handle.read()
    changed, count = re.subn(
        rb"^readonly K8S_PACKAGE_VERSION='[^']+'$",
        f"readonly K8S_PACKAGE_VERSION='{package_version}'".encode(), text,
        flags=re.M)
    if count != 1:
        raise ValueError(f'no K8S_PACKAGE_VERSION line in {script}')
    return changed


def kubernetes_version(package_version=None):
    """'v1.36.4' for package version '1.36.4-1.1' (default: the script's)."""
    return 'v' + (package_version or k8s_package_version()).split('-')[0]


def packages(k8s_version=None, containerd_version=CONTAINERD_VERSION):
    """(name, version, description, [(source module, installed path)])."""
    k8s_version = k8s_version or k8s_package_version()
    return [
        ('kubeadm', k8s_version, 'kubeadm stand-in for the testbed',
         [('kubeadm.py', '/usr/bin/kubeadm'),
          ('kubeadm_etcd.py', KUBEADM_ETCD),
          ('kubeadm_config.py', KUBEADM_CONFIG),
          ('kubeadm_node.py', KUBEADM_NODE),
          ('kubeadm_pki.py', KUBEADM_PKI),
          ('kubeadm_upgrade.py', KUBEADM_UPGRADE),
          ('kubelet_service.py', KUBELET_SERVICE),
          ('kube_apiserver_standin.py', API_SERVER),
          ('crictl.py', '/usr/bin/crictl')]),
        ('kubelet', k8s_version, 'kubelet stand-in for the testbed',
         [('kubelet.py', '/usr/bin/kubelet')]),
        ('containerd', containerd_version,
         'containerd stand-in for the testbed',
         [('containerd.py', '/usr/bin/containerd')]),
    ]


def build_packages(outdir, k8s_version=None,
                   containerd_version=CONTAINERD_VERSION):
    """Build the stand-in .debs into outdir and return their paths.

    Uncompressed (-Znone): they are a few KB and built once per testbed.
    ``containerd_version`` decides which default configuration the
    containerd stand-in prints (1.x's or 2.x's).
    """
    paths = []
    with tempfile.TemporaryDirectory(prefix='standins-') as workdir:
        for name, version, description, files in packages(
                k8s_version, containerd_version):
            root = os.path.join(workdir, name)
            for module, target in files:
                with open(os.path.join(HERE, module)) as handle:
                    source = handle.read()
                source = _VERSION_LINE.sub(
                    f'PACKAGE_VERSION = {version!r}', source)
                path = os.path.join(root, target.lstrip('/'))
                os.makedirs(os.path.dirname(path), exist_ok=True)
                with open(path, 'w') as handle:
                    handle.write(source)
                os.chmod(path, 0o755)
            _compile_modules(root)
            os.makedirs(os.path.join(root, 'DEBIAN'))
            with open(os.path.join(root, 'DEBIAN', 'control'), 'w') as f:
                f.write(f'Package: {name}\n'
                        f'Version: {version}\n'
                        'Architecture: all\n'
                        'Maintainer: testbed <testbed@localhost>\n'
                        'Section: admin\n'
                        'Priority: optional\n'
                        f'Description: {description}\n'
                        ' Python stand-in installed in the test hosts of\n'
                        ' kubernetes-mgmt-pv (testbed/standins).\n')
            if name == 'kubelet':
                postinst = os.path.join(root, 'DEBIAN', 'postinst')
                with open(postinst, 'w') as handle:
                    handle.write(KUBELET_POSTINST)
                os.chmod(postinst, 0o755)
            deb = os.path.join(outdir, f'{name}_{version}_all.deb')
            subprocess.run(['dpkg-deb', '--root-owner-group', '-Znone',
                            '--build', root, deb],
                           check=True, capture_output=True)
            paths.append(deb)
    return paths


def _compile_modules(root):
    """The package's imported modules (/usr/lib/testbed/*.py) compiled
    with the hosts' python3 into checked-hash .pyc files: every call of a
    stand-in imports them (it writes no bytecode itself), and a .pyc that
    checks the source's hash stays right however an upgrade sets the
    source's size and mtime."""
    modules = os.path.join(root, 'usr', 'lib', 'testbed')
    if os.path.isdir(modules):
        subprocess.run(['/usr/bin/python3', '-m', 'compileall', '-q', '-l',
                        '-d', '/usr/lib/testbed', '--invalidation-mode',
                        'checked-hash', modules],
                       check=True, capture_output=True)


def stage_packages(image_root, k8s_version=None):
    """Build the .debs into STAGING_DIR of an image layer (e.g. the base
    layer's upper dir before it is mounted), to be dpkg-installed there."""
    outdir = os.path.join(image_root, STAGING_DIR.lstrip('/'))
    os.makedirs(outdir, exist_ok=True)
    return build_packages(outdir, k8s_version)


def upstream_config(kube, server_host=None, timeout=DEFAULT_TIMEOUT):
    """What the stand-ins need to reach the test API server from a host."""
    host = server_host or kube.host
    if host in ('', '0.0.0.0', '::') or host.startswith('127.'):
        raise ValueError(f'test hosts cannot reach the API server at '
                         f'{host!r}: pass server_host (the bridge IP)')
    return {'server': f'https://{host}:{kube.port}', 'ca_pem': kube.ca_pem,
            'ca_key_pem': kube.ca_key_pem, 'token': kube.token,
            'timeout': timeout}


def connect_host(host, kube, server_host=None, timeout=DEFAULT_TIMEOUT):
    """Point a test host's kubeadm stand-in at a test API server.

    ``kube`` is a started testbed.kubeapi.KubeApiServer; ``server_host``
    the address hosts dial (default: the server's bind address, which in a
    testbed is the bridge IP). ``timeout`` bounds kubeadm's waits for API
    servers. Call it again after a host is replaced: the file lives in the
    host's root file system.
    """
    config = json.dumps(upstream_config(kube, server_host, timeout),
                        indent=2)
    path = shlex.quote(UPSTREAM_CONFIG)
    host.run(f'mkdir -p {shlex.quote(os.path.dirname(UPSTREAM_CONFIG))} && '
             f'umask 077 && cat > {path}', input=config + '\n')


def run_control_plane(host, kube, address):
    """Make ``host`` a Master of a cluster kubeadm built without the
    driver: the cluster admin's kubeconfig where kubeadm writes it, a copy
    for the login user as kubeadm tells operators to make, and the API
    server answering on port 6443 of every address (its default bind
    address), at once as on a running Master. ``address``: the one the
    kubeconfig names."""
    admin = kube.kubeconfig(server_host=address, port=API_PORT)
    host.run('install -d -m 755 /etc/kubernetes')
    host.run('umask 077 && cat > /etc/kubernetes/admin.conf', input=admin)
    host.run('install -d -o ubuntu -g ubuntu -m 700 /home/ubuntu/.kube && '
             'install -o ubuntu -g ubuntu -m 600 /etc/kubernetes/admin.conf '
             '/home/ubuntu/.kube/config')
    upstream = upstream_config(kube)['server'].split('//', 1)[1]
    host.run(f'setsid -f {API_SERVER} --listen 0.0.0.0:{API_PORT} '
             f'--upstream {shlex.quote(upstream)} --pid-file '
             f'{API_SERVER_PID} </dev/null >>{API_SERVER_LOG} 2>&1')
    polling.wait_until(
        lambda: host.run(f'test -s {API_SERVER_PID}',
                         check=False).returncode == 0,
        f'the API server stand-in on {host.name} to start',
        DEFAULT_TIMEOUT, first_delay=0.05, max_delay=0.05,
        log=API_SERVER_LOG)


def served_names(ip, port=API_PORT):
    """The subject alternative names of the certificate served at
    ip:port, as openssl prints them ("DNS:name", "IP Address:a.b.c.d")."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    with socket.create_connection((ip, port), timeout=5) as raw:
        with context.wrap_socket(raw) as tls:
            der = tls.getpeercert(binary_form=True)
    text = subprocess.run(['openssl', 'x509', '-inform', 'DER', '-noout',
                           '-ext', 'subjectAltName'], input=der, check=True,
                          capture_output=True).stdout.decode()
    return sorted(name.strip() for name in text.splitlines()[1].split(','))


def connect_testbed(testbed, kube, **kwargs):
    """connect_host() for every host of a hosts.Testbed."""
    for host in testbed.hosts.values():
        connect_host(host, kube, **kwargs)


def call_log(host):
    """The kubeadm calls made on a host: a list of {"argv", "time"}."""
    text = host.run(f'cat {CALL_LOG} 2>/dev/null || true').stdout
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def expire_certificates(host, days):
    """Sign the kubeadm stand-in's certificates on a control-plane host
    again, with their keys, to expire ``days`` days from now."""
    host.run(f'python3 {KUBEADM_PKI} reissue {int(days)}')


def certificate_expiry(host):
    """{kubeadm certificate name: notAfter} on a control-plane host."""
    text = host.run(
        "for c in apiserver-etcd-client.crt etcd/server.crt etcd/peer.crt "
        "etcd/healthcheck-client.crt; do printf '%s ' $c; openssl x509 "
        "-noout -enddate -in /etc/kubernetes/pki/$c; done").stdout
    return {name: datetime.datetime.strptime(
        value.partition('=')[2].strip(), '%b %d %H:%M:%S %Y %Z')
        for name, value in (line.split(' ', 1)
                            for line in text.splitlines())}
