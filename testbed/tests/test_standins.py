"""Self-tests of the Kubernetes stand-ins (testbed/standins) in test hosts.

Three hosts (master1, master2, worker1) share one test API server, as a
cluster's API servers share etcd. The tests run in file order and build on
each other like an install does: init on master1, worker join, control-plane
join of master2, reset. They need root, `ip netns` and sshd and are skipped
otherwise.
"""

import base64
import ipaddress
import json
import os
import re
import socket
import ssl
import subprocess
import time
import types
import urllib.error
import urllib.request

import pytest

from testbed import hosts, kubeapi, standins

SKIP_REASON = hosts.require_testbed()
pytestmark = pytest.mark.skipif(SKIP_REASON is not None,
                                reason=SKIP_REASON or '')

POD_CIDR, SERVICE_CIDR = '192.168.0.0/16', '10.96.0.0/12'


# --- helpers ---------------------------------------------------------------

def https(url, ca_pem, token=None, method='GET', timeout=5):
    """(status, body text) of a request verifying the certificate (and the
    host name / IP) against ca_pem, from the runner."""
    context = ssl.create_default_context(cadata=ca_pem)
    request = urllib.request.Request(url, method=method)
    if token:
        request.add_header('Authorization', f'Bearer {token}')
    opener = urllib.request.build_opener(
        urllib.request.ProxyHandler({}),
        urllib.request.HTTPSHandler(context=context))
    try:
        with opener.open(request, timeout=timeout) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def api_get(kube, path):
    """A JSON object from the test API server, or None if not found."""
    status, body = https(kube.url + path, kube.ca_pem, kube.token)
    if status == 404:
        return None
    assert status == 200, (path, status, body)
    return json.loads(body)


def ca_hash_of(pem):
    """The discovery hash computed as kubeadm's documentation (and the
    install script) does, on the runner."""
    return 'sha256:' + subprocess.run(
        'openssl x509 -pubkey -noout | openssl pkey -pubin -outform der '
        '| sha256sum | cut -d" " -f1', shell=True, input=pem, text=True,
        capture_output=True, check=True).stdout.strip()


def port_open(ip, port):
    try:
        with socket.create_connection((ip, port), timeout=1):
            return True
    except OSError:
        return False


def node_summary(node):
    status = node['status']
    return {
        'ip': [a['address'] for a in status['addresses']
               if a['type'] == 'InternalIP'],
        'ready': [c['status'] for c in status['conditions']
                  if c['type'] == 'Ready'],
        'control_plane': 'node-role.kubernetes.io/control-plane'
                         in node['metadata'].get('labels', {}),
        'kubelet': status['nodeInfo']['kubeletVersion']}


def forwarder_processes(host):
    """Command lines of the API server stand-ins in a host's PID namespace."""
    found = []
    for pid in hosts.pids_in_namespace(hosts.pid_namespace(host.pid)):
        try:
            with open(f'/proc/{pid}/cmdline', 'rb') as f:
                argv = f.read().decode().split('\0')
        except FileNotFoundError:
            continue
        if standins.API_SERVER in argv:
            found.append(argv)
    return found


class Cluster(types.SimpleNamespace):
    """The testbed, the API server and what the tests learnt so far."""

    def kubeadm(self, host, *args, check=True, ssh=False):
        """Run kubeadm on a host (as root, or over SSH with sudo as the
        driver does) and remember the call for the call-log test."""
        self.calls.setdefault(host.name, []).append(['kubeadm', *args])
        command = 'kubeadm ' + ' '.join(args)
        if ssh:
            client = host.ssh_client()
            try:
                _, stdout, stderr = client.exec_command('sudo ' + command,
                                                        timeout=90)
                out, err = stdout.read().decode(), stderr.read().decode()
                result = types.SimpleNamespace(
                    returncode=stdout.channel.recv_exit_status(),
                    stdout=out, stderr=err)
            finally:
                client.close()
        else:
            result = host.run(command, check=False)
        if check:
            assert result.returncode == 0, result.stderr
        return result


@pytest.fixture(scope='module')
def cluster():
    with hosts.Testbed() as testbed:
        subnet = ipaddress.ip_network(testbed.subnet)
        kube = kubeapi.KubeApiServer(
            host=testbed.bridge_ip,
            extra_sans=tuple(str(ip) for ip in subnet.hosts()))
        kube.start()
        try:
            started = time.monotonic()
            members = {name: testbed.add_host(name, role) for name, role in
                       (('master1', 'master'), ('master2', 'master'),
                        ('worker1', 'worker'))}
            boot = time.monotonic() - started
            for host in members.values():
                standins.connect_host(host, kube)
                # As the install script always does.
                host.write_file('/etc/default/kubelet',
                                f'KUBELET_EXTRA_ARGS=--node-ip={host.ip}\n')
            yield Cluster(testbed=testbed, kube=kube, boot_seconds=boot,
                          calls={}, facts={}, **members)
        finally:
            kube.stop()


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
        '--upload-certs').stdout
    took = time.monotonic() - started
    assert took < 10, took

    assert master.read_file('/etc/kubernetes/pki/ca.crt') == kube.ca_pem
    for conf in ('admin.conf', 'kubelet.conf'):
        text = master.read_file(f'/etc/kubernetes/{conf}')
        assert f'server: https://{master.ip}:6443\n' in text
        assert f'token: {kube.token}\n' in text
        assert master.run(f'stat -c %a /etc/kubernetes/{conf}').stdout \
            == '600\n'

    # The "static pod" answers on <ip>:6443 with the upstream certificate,
    # which verifies for that IP; it lives in the host's PID namespace.
    assert https(f'https://{master.ip}:6443/healthz', kube.ca_pem) \
        == (200, 'ok')
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
    cluster.facts.update(init_token=token, init_key=key)


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

    # Over SSH with sudo, as the driver runs the install script: the
    # detached API server must not keep the SSH channel open.
    started = time.monotonic()
    result = cluster.kubeadm(joiner, *join, key,
                             '--apiserver-advertise-address', joiner.ip,
                             ssh=True)
    assert time.monotonic() - started < 10
    assert 'a new control plane instance was created' in result.stdout
    assert https(f'https://{joiner.ip}:6443/healthz', kube.ca_pem) \
        == (200, 'ok')
    assert len(forwarder_processes(joiner)) == 1
    assert f'server: https://{master.ip}:6443\n' in \
        joiner.read_file('/etc/kubernetes/admin.conf')
    assert node_summary(api_get(kube, '/api/v1/nodes/master2')) == {
        'ip': [joiner.ip], 'ready': ['True'], 'control_plane': True,
        'kubelet': standins.kubernetes_version()}


def test_reset_removes_the_node_setup_but_not_the_node(cluster):
    joiner, kube = cluster.master2, cluster.kube
    cluster.kubeadm(joiner, 'reset', '-f')
    assert joiner.run('test -e /etc/kubernetes', check=False).returncode == 1
    assert not forwarder_processes(joiner)
    assert not port_open(joiner.ip, 6443)
    assert api_get(kube, '/api/v1/nodes/master2') is not None
    # The master is untouched, and the node can join again.
    assert https(f'https://{cluster.master1.ip}:6443/healthz',
                 kube.ca_pem) == (200, 'ok')
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
        times = [entry['time'] for entry in log]
        assert times == sorted(times)
        assert time.time() - 600 < times[0] <= time.time()
