"""Self-tests of the Kubernetes stand-ins (testbed/standins) in test hosts.

Four hosts (master1, master2, master3, worker1) share one test API server,
which holds the Kubernetes objects, while the Masters run a real stacked
etcd cluster, as kubeadm sets it up. The tests run in file order and build
on each other like an install and its heals do: init on master1, worker
join, control-plane joins of master2 and master3 (three etcd members), the
loss of a member and its removal, a failed join and its retries on fresh
VMs, reset. They need root, `ip netns` and sshd and are skipped otherwise.
"""

import base64
import datetime
import json
import os
import re
import signal
import subprocess
import time

import pytest

from testbed import hosts
from testbed import polling
from testbed import standins
from testbed.tests.standins_support import api_get
from testbed.tests.standins_support import apiserver_names
from testbed.tests.standins_support import ca_hash_of
from testbed.tests.standins_support import Cluster
from testbed.tests.standins_support import cluster_health
from testbed.tests.standins_support import etcd_members
from testbed.tests.standins_support import ETCD_PKI
from testbed.tests.standins_support import etcd_processes
from testbed.tests.standins_support import ETCDCTL
from testbed.tests.standins_support import etcdctl
from testbed.tests.standins_support import EXTRA_SANS
from testbed.tests.standins_support import forwarder_processes
from testbed.tests.standins_support import health_of
from testbed.tests.standins_support import https
from testbed.tests.standins_support import JOIN_CONFIG
from testbed.tests.standins_support import join_configuration
from testbed.tests.standins_support import load_kubeadm_module
from testbed.tests.standins_support import member_summary
from testbed.tests.standins_support import node_summary
from testbed.tests.standins_support import POD_CIDR
from testbed.tests.standins_support import port_open
from testbed.tests.standins_support import prepare
from testbed.tests.standins_support import SERVICE_CIDR
from testbed.tests.standins_support import started
from testbed.tests.standins_support import testbed_and_api_server
from testbed.tests.standins_support import verifies_as
from testbed.tests.standins_support import wait_for_health

SKIP_REASON = hosts.require_testbed()
pytestmark = pytest.mark.skipif(SKIP_REASON is not None,
                                reason=SKIP_REASON or '')


@pytest.fixture(scope='module')
def cluster():
    with testbed_and_api_server() as (testbed, kube):
        started = time.monotonic()
        members = {name: testbed.add_host(name, role) for name, role in
                   (('master1', 'master'), ('master2', 'master'),
                    ('master3', 'master'), ('worker1', 'worker'))}
        boot = time.monotonic() - started
        for host in members.values():
            prepare(host, kube)
        yield Cluster(testbed=testbed, kube=kube, boot_seconds=boot,
                      calls={}, facts={}, **members)


# --- tests -----------------------------------------------------------------

def test_packages_are_installed_at_the_scripts_version(cluster):
    version = standins.k8s_package_version()
    assert re.fullmatch(r'\d+\.\d+\.\d+-[\w.]+', version)
    host = cluster.worker1
    listed = host.run("dpkg-query -W -f='${Package} ${Version} ${Status}\\n'"
                      ' kubeadm kubelet containerd').stdout.splitlines()
    assert sorted(listed) == [
        f'containerd {standins.CONTAINERD_VERSION} install ok installed',
        f'kubeadm {version} install ok installed',
        f'kubelet {version} install ok installed']
    k8s = standins.kubernetes_version(version)
    assert host.run('kubelet --version').stdout == f'Kubernetes {k8s}\n'
    assert cluster.kubeadm(host, 'version', '-o', 'short').stdout \
        == k8s + '\n'
    assert 'containerd github.com/containerd/containerd v1.7.24' in \
        host.run('containerd --version').stdout
    assert 'SystemdCgroup = false' in \
        host.run('containerd config default').stdout
    assert host.run('command -v kubectl').stdout.strip()
    # The real etcd and etcdctl of the runner, and kubeadm's etcd half.
    assert 'etcd Version: 3.' in host.run('etcd --version').stdout
    assert 'etcdctl version: 3.' in host.run('etcdctl version').stdout
    assert standins.KUBEADM_ETCD in host.run('dpkg -L kubeadm').stdout
    # The runner's own /usr and dpkg database were not touched.
    assert not os.path.exists('/usr/bin/kubeadm')
    assert subprocess.run(['dpkg-query', '-W', 'kubeadm'],
                          capture_output=True).returncode != 0
    assert cluster.boot_seconds < 5


def test_init_starts_an_api_server_and_registers_a_ready_node(cluster):
    master, kube = cluster.master1, cluster.kube
    started = time.monotonic()
    out = cluster.kubeadm(
        master, 'init', '--control-plane-endpoint', f'{master.ip}:6443',
        '--apiserver-advertise-address', master.ip,
        '--pod-network-cidr', POD_CIDR, '--service-cidr', SERVICE_CIDR,
        '--apiserver-cert-extra-sans', EXTRA_SANS, '--upload-certs').stdout
    took = time.monotonic() - started
    assert took < 10, took

    assert master.read_file('/etc/kubernetes/pki/ca.crt') == kube.ca_pem
    for conf in ('admin.conf', 'kubelet.conf'):
        text = master.read_file(f'/etc/kubernetes/{conf}')
        assert f'server: https://{master.ip}:6443\n' in text
        assert f'token: {kube.token}\n' in text
        assert master.run(f'stat -c %a /etc/kubernetes/{conf}').stdout \
            == '600\n'

    # The "static pod" answers on <ip>:6443 with kubeadm's apiserver.crt,
    # signed by the cluster CA for exactly kubeadm's names; it lives in
    # the host's PID namespace.
    assert https(f'https://{master.ip}:6443/healthz', kube.ca_pem) \
        == (200, 'ok')
    assert standins.served_names(master.ip) == apiserver_names(
        'master1', master.ip, master.ip)
    assert not verifies_as(master.ip, kube.ca_pem, cluster.master2.ip)
    assert verifies_as(master.ip, kube.ca_pem, 'api.example.test')
    assert len(forwarder_processes(master)) == 1

    node = api_get(kube, '/api/v1/nodes/master1')
    assert node_summary(node) == {
        'ip': [master.ip], 'ready': ['True'], 'control_plane': True,
        'kubelet': standins.kubernetes_version()}

    token = re.search(r'\[bootstrap-token\] Using token: (\S+)', out)[1]
    token_id, token_secret = token.split('.')
    secret = api_get(kube, '/api/v1/namespaces/kube-system/secrets/'
                           f'bootstrap-token-{token_id}')
    assert secret['type'] == 'bootstrap.kubernetes.io/token'
    data = {k: base64.b64decode(v).decode()
            for k, v in secret['data'].items()}
    assert data['token-id'] == token_id
    assert data['token-secret'] == token_secret
    assert data['usage-bootstrap-authentication'] == 'true'

    key = re.search(r'Using certificate key:\n([0-9a-f]{64})\n', out)[1]
    cluster.facts.update(init_token=token, init_key=key, init_output=out)


def test_init_creates_kubeadms_etcd_certificates(cluster):
    master = cluster.master1
    files = ['ca', 'server', 'peer', 'healthcheck-client']
    modes = master.run(
        'stat -c "%n %a" ' + ' '.join(f'{ETCD_PKI}/{f}.crt {ETCD_PKI}/{f}.key'
                                      for f in files) +
        ' /etc/kubernetes/pki/apiserver-etcd-client.crt'
        ' /etc/kubernetes/pki/apiserver-etcd-client.key').stdout.split('\n')
    assert [line.split()[1] for line in modes if line] == \
        ['644', '600'] * (len(files) + 1)
    # Signed by the etcd CA (not the cluster CA), for what kubeadm signs.
    assert master.run(
        f'openssl verify -CAfile {ETCD_PKI}/ca.crt {ETCD_PKI}/server.crt '
        f'{ETCD_PKI}/peer.crt {ETCD_PKI}/healthcheck-client.crt '
        '/etc/kubernetes/pki/apiserver-etcd-client.crt').returncode == 0

    def text(name):
        return master.run(f'openssl x509 -noout -text -in {name}').stdout

    assert 'Subject: CN = etcd-ca' in text(f'{ETCD_PKI}/ca.crt')
    assert 'CA:TRUE' in text(f'{ETCD_PKI}/ca.crt')
    for name in ('server', 'peer'):
        cert = text(f'{ETCD_PKI}/{name}.crt')
        assert 'Subject: CN = master1' in cert
        assert 'TLS Web Server Authentication, TLS Web Client ' \
               'Authentication' in cert
        sans = re.search(r'Subject Alternative Name: *\n *(.*)', cert)[1]
        assert sans.split(', ') == [
            'DNS:localhost', 'DNS:master1', f'IP Address:{master.ip}',
            'IP Address:127.0.0.1', 'IP Address:0:0:0:0:0:0:0:1']
    for name, cn in ((f'{ETCD_PKI}/healthcheck-client.crt',
                      'kube-etcd-healthcheck-client'),
                     ('/etc/kubernetes/pki/apiserver-etcd-client.crt',
                      'kube-apiserver-etcd-client')):
        cert = text(name)
        assert f'Subject: CN = {cn}' in cert
        assert 'TLS Web Client Authentication' in cert
        assert 'Server Authentication' not in cert


def test_init_runs_a_single_member_etcd(cluster):
    master = cluster.master1
    (pid, argv), = etcd_processes(master).items()
    flags = set(argv[1:])
    assert {'--name=master1', '--data-dir=/var/lib/etcd',
            f'--listen-client-urls=https://127.0.0.1:2379,'
            f'https://{master.ip}:2379',
            f'--advertise-client-urls=https://{master.ip}:2379',
            f'--listen-peer-urls=https://{master.ip}:2380',
            f'--initial-advertise-peer-urls=https://{master.ip}:2380',
            f'--initial-cluster=master1=https://{master.ip}:2380',
            '--client-cert-auth=true', '--peer-client-cert-auth=true',
            f'--trusted-ca-file={ETCD_PKI}/ca.crt',
            f'--peer-trusted-ca-file={ETCD_PKI}/ca.crt',
            f'--cert-file={ETCD_PKI}/server.crt',
            f'--peer-cert-file={ETCD_PKI}/peer.crt'} <= flags
    assert not any(f.startswith('--initial-cluster-state') for f in flags)
    # Detached like a static Pod: its own session, output to its log,
    # not to the caller's stdout/stderr.
    host_pid = int(master.read_file('/run/etcd.pid'))
    with open(f'/proc/{pid}/status') as status:
        assert re.search(r'^NSpid:.*\s(\d+)$', status.read(),
                         re.M)[1] == str(host_pid)
    assert os.getsid(pid) == pid
    assert master.run(f'readlink /proc/{host_pid}/fd/1 '
                      f'/proc/{host_pid}/fd/2').stdout.split() == \
        [standins.ETCD_LOG] * 2
    log = master.read_file(standins.ETCD_LOG)
    assert '"msg":"serving client traffic securely"' in log
    assert '[certs]' not in log
    assert '"level":' not in cluster.facts['init_output']
    assert '--name=master1' in master.read_file(
        '/etc/kubernetes/manifests/etcd.yaml')

    # The driver's route, over SSH with sudo: one started member, IDs as
    # JSON numbers in decimal; `member remove` and the table use hex.
    listed = json.loads(etcdctl(master, 'member', 'list', '-w', 'json',
                                ssh=True).stdout)
    member, = listed['members']
    assert isinstance(member['ID'], int)
    assert listed['header']['member_id'] == member['ID']
    assert member_summary([member]) == started(master)
    table = etcdctl(master, 'member', 'list', ssh=True).stdout
    assert table == (f'{member["ID"]:x}, started, master1, '
                     f'https://{master.ip}:2380, https://{master.ip}:2379, '
                     'false\n')
    health = etcdctl(master, 'endpoint', 'health', '--cluster', ssh=True)
    assert f'https://{master.ip}:2379 is healthy' in \
        health.stdout + health.stderr
    # Without the client certificate etcd refuses the client.
    anonymous = master.run('ETCDCTL_API=3 etcdctl --endpoints='
                           'https://127.0.0.1:2379 --cacert='
                           f'{ETCD_PKI}/ca.crt --dial-timeout=1s '
                           '--command-timeout=1s member list', check=False)
    assert anonymous.returncode != 0


def check_expiration_rows(cluster, master):
    """{name: (EXPIRES, RESIDUAL TIME)} of both tables of kubeadm certs
    check-expiration, split on kubeadm's column gaps."""
    out = cluster.kubeadm(master, 'certs', 'check-expiration').stdout
    assert out.startswith('[check-expiration] Reading configuration from '
                          'the cluster...\n')
    rows = [re.split(r'\s{3,}', line) for line in out.splitlines()
            if re.match(r'[a-z]', line)]
    return {row[0]: tuple(row[1:3]) for row in rows}


def public_key(master, path):
    return master.run(f'openssl pkey -pubout -in {path}').stdout


def test_certs_check_expiration_and_renew_all_on_real_certificates(
        cluster):
    master = cluster.master1
    names = ['apiserver-etcd-client', 'etcd-healthcheck-client',
             'etcd-peer', 'etcd-server', 'ca', 'etcd-ca']
    rows = check_expiration_rows(cluster, master)
    assert list(rows) == names
    year = datetime.datetime.utcnow() + datetime.timedelta(days=365)
    expires = datetime.datetime.strptime(rows['etcd-server'][0],
                                         '%b %d, %Y %H:%M UTC')
    assert abs(expires - year) < datetime.timedelta(minutes=10)
    assert rows['etcd-server'][1] == '364d'
    key = public_key(master, f'{ETCD_PKI}/server.key')

    standins.expire_certificates(master, 10)
    rows = check_expiration_rows(cluster, master)
    assert {name: rows[name][1] for name in names[:4]} == dict.fromkeys(
        names[:4], '9d')
    assert rows['etcd-ca'][1] != '9d'

    out = cluster.kubeadm(master, 'certs', 'renew', 'all').stdout
    assert 'certificate for serving etcd renewed' in out
    assert {name: check_expiration_rows(cluster, master)[name][1]
            for name in names[:4]} == dict.fromkeys(names[:4], '364d')
    # kubeadm renews with the same keys and the same CA.
    assert public_key(master, f'{ETCD_PKI}/server.key') == key
    assert master.run(
        f'openssl verify -CAfile {ETCD_PKI}/ca.crt {ETCD_PKI}/server.crt '
        f'{ETCD_PKI}/peer.crt').returncode == 0


def test_crictl_restarts_the_static_pods(cluster):
    master = cluster.master1
    pods = master.run('crictl pods --namespace kube-system --name '
                      '"^(kube-apiserver|etcd)-" -q').stdout.split()
    assert len(pods) == 2
    before = set(etcd_processes(master))
    api_pid = master.read_file(standins.API_SERVER_PID)
    master.run('crictl rmp -f ' + ' '.join(pods))
    assert not set(etcd_processes(master)) & before
    assert len(etcd_processes(master)) == 1
    wait_for_health(master, {f'https://{master.ip}:2379': True})
    polling.wait_until(
        lambda: master.run(f'cat {standins.API_SERVER_PID}',
                           check=False).stdout not in ('', api_pid) and
        port_open(master.ip, standins.API_PORT),
        'the API server forwarder to start again', timeout=30)


def test_init_and_join_refused_on_a_member(cluster):
    master = cluster.master1
    for args in (('init', '--control-plane-endpoint', f'{master.ip}:6443',
                  '--apiserver-advertise-address', master.ip),
                 ('join', f'{master.ip}:6443', '--token',
                  cluster.facts['init_token'],
                  '--discovery-token-ca-cert-hash',
                  ca_hash_of(cluster.kube.ca_pem))):
        result = cluster.kubeadm(master, *args, check=False)
        assert result.returncode == 1
        assert ('[ERROR FileAvailable--etc-kubernetes-kubelet.conf]: '
                '/etc/kubernetes/kubelet.conf already exists') \
            in result.stderr
    assert len(forwarder_processes(master)) == 1
    assert len(etcd_processes(master)) == 1


def test_kubectl_in_the_host_reaches_the_cluster(cluster):
    result = cluster.master1.run(
        'kubectl --kubeconfig /etc/kubernetes/admin.conf get nodes')
    assert 'master1' in result.stdout
    ready = cluster.master1.run(
        'kubectl --kubeconfig /etc/kubernetes/admin.conf get node master1 '
        '-o jsonpath=\'{.status.conditions[?(@.type=="Ready")].status}\'')
    assert ready.stdout == 'True'


def test_join_rejects_wrong_token_hash_or_endpoint(cluster):
    master, worker = cluster.master1, cluster.worker1
    token = cluster.kubeadm(master, 'token', 'create', '--ttl', '2h') \
        .stdout.strip().splitlines()[-1]
    assert re.fullmatch(r'[a-z0-9]{6}\.[a-z0-9]{16}', token)
    good_hash = ca_hash_of(cluster.kube.ca_pem)
    token_id = token.split('.')[0]
    endpoint = f'{master.ip}:6443'
    cases = [
        (token, 'sha256:' + '0' * 64,
         'cluster CA found in cluster-info ConfigMap is invalid: none of '
         f'the public keys "{good_hash}" are pinned'),
        (token, good_hash[len('sha256:'):],
         'invalid discovery token CA certificate hash'),
        ('zzzzzz.0123456789abcdef', good_hash,
         'could not find a JWS signature in the cluster-info ConfigMap for '
         'token ID "zzzzzz"'),
        (f'{token_id}.0123456789abcdef', good_hash,
         'failed to verify JWS signature'),
        ('not-a-token', good_hash, 'was not of the form'),
    ]
    for bad_token, bad_hash, message in cases:
        result = cluster.kubeadm(
            worker, 'join', endpoint, '--token', bad_token,
            '--discovery-token-ca-cert-hash', bad_hash, check=False)
        assert result.returncode == 1, (bad_token, bad_hash)
        assert message in result.stderr, result.stderr

    # Nothing listens there: kubeadm retries until its deadline.
    standins.connect_host(worker, cluster.kube, timeout=1)
    try:
        started = time.monotonic()
        result = cluster.kubeadm(
            worker, 'join', f'{master.ip}:6444', '--token', token,
            '--discovery-token-ca-cert-hash', good_hash, check=False)
        assert result.returncode == 1
        assert 'timed out' in result.stderr
        assert time.monotonic() - started < 5
    finally:
        standins.connect_host(worker, cluster.kube)
    assert worker.run('test -e /etc/kubernetes/kubelet.conf',
                      check=False).returncode == 1
    cluster.facts.update(token=token, hash=good_hash)


def test_join_config_is_checked_as_kubeadm_does(cluster):
    """kubeadm join --config FILE: discovery needs the token, which must
    be one the cluster signed; other flags cannot be mixed in."""
    master, worker = cluster.master1, cluster.worker1
    endpoint = f'{master.ip}:6443'
    token, good_hash = cluster.facts['token'], cluster.facts['hash']
    cases = [
        (join_configuration(endpoint, None, good_hash), (),
         'discovery.bootstrapToken.token'),
        (join_configuration(endpoint, 'zzzzzz.0123456789abcdef', good_hash),
         (), 'could not find a JWS signature'),
        (join_configuration(endpoint, token, 'sha256:' + '0' * 64), (),
         'none of the public keys'),
        (join_configuration(endpoint, token, good_hash, version='v1beta9'),
         (), 'v1beta9'),
        (join_configuration(endpoint, token, good_hash), ('--token', token),
         "can not mix '--config' with arguments [token]"),
        ('apiVersion: v1\nkind: ConfigMap\n', (), 'JoinConfiguration'),
    ]
    for text, extra, message in cases:
        worker.write_file(JOIN_CONFIG, text)
        result = cluster.kubeadm(worker, 'join', '--config', JOIN_CONFIG,
                                 *extra, check=False)
        assert result.returncode == 1, text
        assert message in result.stderr, result.stderr
        assert token not in result.stderr
    worker.run(f'rm -f {JOIN_CONFIG}')
    assert worker.run('test -e /etc/kubernetes/kubelet.conf',
                      check=False).returncode == 1


def test_worker_joins_with_token_and_hash(cluster):
    master, worker, kube = cluster.master1, cluster.worker1, cluster.kube
    # The hash as the install script computes it from the Master's CA file.
    script_hash = master.run(
        'openssl x509 -pubkey -noout -in /etc/kubernetes/pki/ca.crt | '
        'openssl pkey -pubin -outform der | sha256sum | cut -d" " -f1'
    ).stdout.strip()
    assert 'sha256:' + script_hash == cluster.facts['hash']
    cluster.kubeadm(worker, 'join', f'{master.ip}:6443',
                    '--token', cluster.facts['token'],
                    '--discovery-token-ca-cert-hash', cluster.facts['hash'])
    assert f'server: https://{master.ip}:6443\n' in \
        worker.read_file('/etc/kubernetes/kubelet.conf')
    assert worker.read_file('/etc/kubernetes/pki/ca.crt') == kube.ca_pem
    assert worker.run('test -e /etc/kubernetes/admin.conf',
                      check=False).returncode == 1
    assert not forwarder_processes(worker)
    assert not port_open(worker.ip, 6443)
    # Its kubelet runs (as systemd would start it): its port answers.
    assert port_open(worker.ip, 10250) and port_open(master.ip, 10250)
    assert node_summary(api_get(kube, '/api/v1/nodes/worker1')) == {
        'ip': [worker.ip], 'ready': ['True'], 'control_plane': False,
        'kubelet': standins.kubernetes_version()}


def test_control_plane_join_needs_the_last_uploaded_key(cluster):
    master, joiner, kube = cluster.master1, cluster.master2, cluster.kube
    out = cluster.kubeadm(master, 'init', 'phase', 'upload-certs',
                          '--upload-certs').stdout
    key = out.strip().splitlines()[-1]
    assert re.fullmatch(r'[0-9a-f]{64}', key)
    assert key != cluster.facts['init_key']
    join = ['join', f'{master.ip}:6443', '--token', cluster.facts['token'],
            '--discovery-token-ca-cert-hash', cluster.facts['hash'],
            '--control-plane', '--certificate-key']
    for stale_or_bad, message in (
            (cluster.facts['init_key'],
             'error decrypting certificate ca.crt: cipher: message '
             'authentication failed'),
            ('g' * 64, 'error decoding certificate key')):
        result = cluster.kubeadm(
            joiner, *join, stale_or_bad, '--apiserver-advertise-address',
            joiner.ip, check=False)
        assert result.returncode == 1
        assert message in result.stderr
    assert not forwarder_processes(joiner)
    assert not etcd_processes(joiner)
    assert member_summary(etcd_members(master)) == started(master)

    # Over SSH with sudo, as the driver runs the install script: the
    # detached API server and etcd must not keep the SSH channel open.
    began = time.monotonic()
    result = cluster.kubeadm(joiner, *join, key,
                             '--apiserver-advertise-address', joiner.ip,
                             ssh=True)
    assert time.monotonic() - began < 15
    cluster.facts['key'] = key
    assert 'a new control plane instance was created' in result.stdout
    assert https(f'https://{joiner.ip}:6443/healthz', kube.ca_pem) \
        == (200, 'ok')
    # Its own certificate: its name and address, the endpoint and the
    # extra SANs of init (the kubeadm-config ClusterConfiguration).
    assert standins.served_names(joiner.ip) == apiserver_names(
        'master2', joiner.ip, master.ip)
    assert len(forwarder_processes(joiner)) == 1
    assert f'server: https://{master.ip}:6443\n' in \
        joiner.read_file('/etc/kubernetes/admin.conf')
    assert node_summary(api_get(kube, '/api/v1/nodes/master2')) == {
        'ip': [joiner.ip], 'ready': ['True'], 'control_plane': True,
        'kubelet': standins.kubernetes_version()}
    # etcd: the CA came from the Secret, the member certificates are the
    # joiner's own, and it is a started voting member.
    for name in ('ca.crt', 'ca.key'):
        assert joiner.read_file(f'{ETCD_PKI}/{name}') == \
            master.read_file(f'{ETCD_PKI}/{name}')
    assert joiner.run(f'openssl x509 -noout -subject -nameopt RFC2253 '
                      f'-in {ETCD_PKI}/server.crt').stdout == \
        'subject=CN=master2\n'
    assert 'Announced new etcd member joining' in result.stdout
    assert len(etcd_processes(joiner)) == 1
    assert member_summary(etcd_members(master)) == started(master, joiner)


def test_upload_certs_carries_the_etcd_ca_encrypted(cluster):
    secret = api_get(cluster.kube,
                     '/api/v1/namespaces/kube-system/secrets/kubeadm-certs')
    ca_key = cluster.master1.read_file(f'{ETCD_PKI}/ca.key')
    for name in ('etcd-ca.crt', 'etcd-ca.key'):
        sealed = base64.b64decode(secret['data'][name])
        assert b'BEGIN' not in sealed
        assert ca_key.encode() not in sealed
    # The cipher, on the runner: only the certificate key opens it, and
    # a changed byte is noticed.
    kubeadm = load_kubeadm_module()
    key, other = '11' * 32, '22' * 32
    sealed = kubeadm.node.encrypt(key, ca_key.encode())
    assert kubeadm.node.decrypt(key, sealed, 'etcd-ca.key') == \
        ca_key.encode()
    tampered = sealed[:20] + bytes([sealed[20] ^ 1]) + sealed[21:]
    for wrong_key, blob in ((other, sealed), (key, tampered)):
        with pytest.raises(kubeadm.node.KubeadmError,
                           match='error decrypting certificate etcd-ca.key: '
                                 'cipher: message authentication failed'):
            kubeadm.node.decrypt(wrong_key, blob, 'etcd-ca.key')


def test_a_third_master_makes_three_started_members(cluster):
    master1, master2, master3 = cluster.master1, cluster.master2, \
        cluster.master3
    began = time.monotonic()
    cluster.join_master(master3)
    took = time.monotonic() - began
    assert took < 15, took
    # The driver's route on any Master, over SSH with sudo.
    members = etcd_members(master2, ssh=True)
    assert member_summary(members) == started(master1, master2, master3)
    assert all(isinstance(m['ID'], int) for m in members)
    table = etcdctl(master3, 'member', 'list', ssh=True).stdout
    assert sorted(table.splitlines()) == sorted(
        f'{m["ID"]:x}, started, {m["name"]}, {m["peerURLs"][0]}, '
        f'{m["clientURLs"][0]}, false' for m in members)
    health = etcdctl(master1, 'endpoint', 'health', '--cluster', ssh=True)
    for master in (master1, master2, master3):
        assert f'https://{master.ip}:2379 is healthy' in \
            health.stdout + health.stderr
    assert cluster_health(master1) == (
        health_of(master1, master2, master3), 0)


def test_etcd_costs_little(cluster):
    """Three members on a shared 2-core machine: tens of MB each and a
    few percent of a core, with the testbed's tuning flags."""
    with open('/proc/uptime') as uptime:
        now = float(uptime.read().split()[0])
    ticks = os.sysconf('SC_CLK_TCK')
    for master in (cluster.master1, cluster.master2, cluster.master3):
        (pid, argv), = etcd_processes(master).items()
        assert {'--quota-backend-bytes=67108864', '--snapshot-count=1000',
                '--heartbeat-interval=250', '--election-timeout=2500'} \
            <= set(argv)
        with open(f'/proc/{pid}/status') as status:
            rss_kb = int(re.search(r'^VmRSS:\s+(\d+) kB', status.read(),
                                   re.M)[1])
        with open(f'/proc/{pid}/stat') as stat:
            fields = stat.read().rsplit(')', 1)[1].split()
        cpu = (int(fields[11]) + int(fields[12])) / ticks  # utime + stime
        age = now - int(fields[19]) / ticks
        assert rss_kb < 100 * 1024, (master.name, rss_kb)
        assert cpu / age < 0.15, (master.name, cpu, age)


def test_losing_the_leader_and_removing_its_member_leaves_two(cluster):
    """What a heal of a Master does first: its etcd is gone, the driver
    removes its member through another Master."""
    master1, master2, master3 = cluster.master1, cluster.master2, \
        cluster.master3
    ids = {m['name']: m['ID'] for m in etcd_members(master1)}
    # Make master3 the leader, so that losing it takes an election.
    everyone = ETCDCTL.replace('https://127.0.0.1:2379', ','.join(
        f'https://{m.ip}:2379' for m in (master1, master2, master3)))

    def master3_leads():
        status = master1.run(f'{everyone} endpoint status -w json',
                             check=False).stdout
        if status and all(entry['Status']['leader'] == ids['master3']
                          for entry in json.loads(status)):
            return True
        master1.run(f'{everyone} move-leader {ids["master3"]:x}',
                    check=False)
        return False

    polling.wait_until(master3_leads, 'master3 to lead', timeout=30)
    (pid, _), = etcd_processes(master3).items()
    os.kill(pid, signal.SIGKILL)
    polling.wait_until(lambda: not etcd_processes(master3), 'etcd to die')

    assert wait_for_health(master1, health_of(master1, master2,
                                              sick=[master3])) != 0
    etcdctl(master1, 'member', 'remove', f'{ids["master3"]:x}', ssh=True)
    assert member_summary(etcd_members(master2, ssh=True)) == \
        started(master1, master2)
    assert wait_for_health(master2, health_of(master1, master2)) == 0


def test_a_join_failing_after_member_add_leaves_a_learner(cluster):
    """A fresh VM for master3 whose etcd cannot start (something holds
    its metrics port): the join fails after adding the member, which
    stays an unstarted learner, so the two voters keep their quorum;
    `kubeadm reset` removes it, and the next failure adds it again."""
    master1, master2 = cluster.master1, cluster.master2
    master3 = cluster.replace('master3')
    master3.run('setsid python3 -c "import signal, socket; '
                's = socket.create_server((\'127.0.0.1\', 2381)); '
                'signal.pause()" </dev/null >/dev/null 2>&1 &')
    polling.wait_until(lambda: '127.0.0.1:2381' in master3.run(
        'ss -Htln').stdout, 'the metrics port to be taken')
    learner = {'': ([f'https://{master3.ip}:2380'], [], True)}
    for attempt in range(2):
        began = time.monotonic()
        result = cluster.join_master(master3, check=False)
        assert time.monotonic() - began < 15
        assert result.returncode == 1
        assert 'error execution phase control-plane-join/etcd: etcd ' \
               'exited with status 1' in result.stderr
        assert 'address already in use' in result.stderr
        assert 'as a learner' in result.stdout
        assert not etcd_processes(master3)
        assert member_summary(etcd_members(master1)) == dict(
            started(master1, master2), **learner)
        assert cluster_health(master2) == (health_of(master1, master2), 0)
        if attempt == 0:
            cluster.kubeadm(master3, 'reset', '-f')
            assert member_summary(etcd_members(master1)) == \
                started(master1, master2)


def test_a_fresh_vm_at_the_same_address_rejoins(cluster):
    """The retry of the failed join on a new VM (the heal's replacement):
    kubeadm finds the learner with its peer URL and takes it over."""
    master1, master2 = cluster.master1, cluster.master2
    master3 = cluster.replace('master3')
    result = cluster.join_master(master3, ssh=True)
    assert f'The peer URL https://{master3.ip}:2380 is already a member' \
        in result.stdout
    assert member_summary(etcd_members(master3, ssh=True)) == \
        started(master1, master2, master3)
    assert wait_for_health(master1, health_of(master1, master2,
                                              master3)) == 0


def test_reset_removes_the_node_setup_but_not_the_node(cluster):
    joiner, kube = cluster.master2, cluster.kube
    result = cluster.kubeadm(joiner, 'reset', '-f')
    assert re.search(r'Removed etcd member [0-9a-f]+ \(https://'
                     + re.escape(joiner.ip) + r':2380\)', result.stdout)
    assert joiner.run('test -e /etc/kubernetes', check=False).returncode == 1
    assert joiner.run('ls -A /var/lib/etcd').stdout == ''
    assert not forwarder_processes(joiner)
    assert not etcd_processes(joiner)
    for port in (6443, 2379, 2380, 10250):
        assert not port_open(joiner.ip, port)
    assert api_get(kube, '/api/v1/nodes/master2') is not None
    # The other masters are untouched, and the node can join again.
    master1, master3 = cluster.master1, cluster.master3
    assert https(f'https://{master1.ip}:6443/healthz',
                 kube.ca_pem) == (200, 'ok')
    assert member_summary(etcd_members(master1)) == started(master1,
                                                            master3)
    assert wait_for_health(master3, health_of(master1, master3)) == 0
    cluster.join_master(joiner)
    assert member_summary(etcd_members(master1)) == started(
        master1, joiner, master3)
    cluster.kubeadm(cluster.worker1, 'reset', '-f')
    cluster.kubeadm(cluster.worker1, 'join', f'{cluster.master1.ip}:6443',
                    '--token', cluster.facts['token'],
                    '--discovery-token-ca-cert-hash', cluster.facts['hash'])
    assert node_summary(api_get(kube, '/api/v1/nodes/worker1'))['ready'] \
        == ['True']


def test_every_call_is_in_the_argument_log(cluster):
    assert cluster.calls  # the tests above ran
    for name, calls in cluster.calls.items():
        host = cluster.testbed.hosts[name]
        log = standins.call_log(host)
        assert [entry['argv'] for entry in log] == calls, name
        # A --config call logs the configuration, never its secrets.
        for entry in log:
            if '--config' in entry['argv'] and entry.get('config'):
                bootstrap = entry['config']['discovery']['bootstrapToken']
                assert bootstrap.get('token') in (None, '***')
                assert cluster.facts['token'] not in json.dumps(
                    entry['config'])
        times = [entry['time'] for entry in log]
        assert times == sorted(times)
        assert time.time() - 600 < times[0] <= time.time()
