"""What the stand-ins' self-tests (test_standins.py) share: HTTPS and
etcdctl helpers, process and health probes of the test hosts, kubeadm join
configurations and the ``Cluster`` the tests build on."""

import contextlib
import importlib.util
import ipaddress
import json
import os
import socket
import ssl
import subprocess
import types
import urllib.error
import urllib.request

from testbed import hosts
from testbed import kubeapi
from testbed import polling
from testbed import processes
from testbed import standins
from testbed import subnets


POD_CIDR = '192.168.0.0/16'
SERVICE_CIDR = str(subnets.KUBERNETES_SERVICE_NETWORK)


# The driver's route to etcd on a Master, word for word (with sudo).
ETCDCTL = ('ETCDCTL_API=3 etcdctl --endpoints=https://127.0.0.1:2379 '
           '--cacert=/etc/kubernetes/pki/etcd/ca.crt '
           '--cert=/etc/kubernetes/pki/etcd/healthcheck-client.crt '
           '--key=/etc/kubernetes/pki/etcd/healthcheck-client.key')


ETCD_PKI = '/etc/kubernetes/pki/etcd'


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


def host_processes(host):
    """{runner PID: argv} of the live processes in a host's PID namespace."""
    found = {}
    for pid in processes.pids_in_namespace(processes.pid_namespace(host.pid)):
        try:
            with open(f'/proc/{pid}/cmdline', 'rb') as f:
                argv = f.read().decode().split('\0')
            with open(f'/proc/{pid}/stat') as f:
                if f.read().rsplit(')', 1)[1].split()[0] == 'Z':
                    continue
        except (FileNotFoundError, ProcessLookupError):
            continue
        found[pid] = argv
    return found


def forwarder_processes(host):
    """Command lines of the API server stand-ins in a host's PID namespace."""
    return [argv for argv in host_processes(host).values()
            if standins.API_SERVER in argv]


def etcd_processes(host):
    """{runner PID: argv} of the etcd servers in a host's PID namespace."""
    return {pid: argv for pid, argv in host_processes(host).items()
            if argv[0] == standins.ETCD}


def run_as_root(host, command, ssh, timeout):
    """``command`` as root on a host, or over SSH with sudo as the driver
    runs it: returncode, stdout and stderr."""
    if not ssh:
        return host.run(command, check=False)
    client = host.ssh_client()
    try:
        _, stdout, stderr = client.exec_command('sudo ' + command,
                                                timeout=timeout)
        out, err = stdout.read().decode(), stderr.read().decode()
        return types.SimpleNamespace(
            returncode=stdout.channel.recv_exit_status(),
            stdout=out, stderr=err)
    finally:
        client.close()


def etcdctl(host, *args, ssh=False, check=True):
    """The driver's etcdctl route on a Master: as root, or over SSH as
    the driver runs it, with sudo."""
    command = f'{ETCDCTL} {" ".join(args)}'
    result = run_as_root(host, command, ssh, timeout=60)
    if check:
        assert result.returncode == 0, (command, result.stderr)
    return result


def etcd_members(host, ssh=False):
    """`member list -w json` on a Master: the "members" as printed."""
    return json.loads(etcdctl(host, 'member', 'list', '-w', 'json',
                              ssh=ssh).stdout)['members']


def member_summary(members):
    """{name (or '' if unstarted): (peer URLs, client URLs, learner)}."""
    return {m.get('name', ''): (m['peerURLs'], m.get('clientURLs', []),
                                m.get('isLearner', False))
            for m in members}


def started(*masters):
    """The member_summary() of started voting members on these hosts."""
    return {m.name: ([f'https://{m.ip}:2380'], [f'https://{m.ip}:2379'],
                     False) for m in masters}


def cluster_health(host):
    """{endpoint: healthy} of `endpoint health --cluster -w json`, and
    etcdctl's exit status."""
    result = etcdctl(host, 'endpoint', 'health', '--cluster', '-w', 'json',
                     check=False)
    try:
        report = json.loads(result.stdout)
    except ValueError:
        report = []
    return {entry['endpoint']: entry['health'] for entry in report}, \
        result.returncode


def wait_for_health(host, expected, timeout=60):
    """Poll `endpoint health --cluster` until it reports exactly
    ``expected`` ({endpoint: healthy}); elections take a few seconds."""
    last = []

    def matches():
        last[:] = [cluster_health(host)]
        return last[0][0] == expected

    try:
        polling.wait_until(matches, 'etcd health', timeout=timeout)
    except TimeoutError:
        raise AssertionError(f'etcd health {last} != {expected}')
    return last[0][1]


def health_of(*masters, sick=()):
    report = {f'https://{m.ip}:2379': True for m in masters}
    report.update({f'https://{m.ip}:2379': False for m in sick})
    return report


def load_kubeadm_module():
    """The kubeadm stand-in's source, imported on the runner."""
    path = os.path.join(standins.HERE, 'kubeadm.py')
    spec = importlib.util.spec_from_file_location('kubeadm_standin', path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def prepare(host, kube):
    """Connect a (new) host to the API server; write /etc/default/kubelet
    as the install script always does."""
    standins.connect_host(host, kube)
    host.write_file('/etc/default/kubelet',
                    f'KUBELET_EXTRA_ARGS=--node-ip={host.ip}\n')


JOIN_CONFIG = '/run/testbed-join.yaml'


def join_configuration(endpoint, token, ca_hash, key=None, address=None,
                       version='v1beta4'):
    """A JoinConfiguration as kubeadm's documentation writes one."""
    lines = [f'apiVersion: kubeadm.k8s.io/{version}',
             'kind: JoinConfiguration', 'discovery:', '  bootstrapToken:',
             f'    apiServerEndpoint: "{endpoint}"']
    if token is not None:
        lines.append(f'    token: "{token}"')
    lines += ['    caCertHashes:', f'    - "{ca_hash}"']
    if key is not None:
        lines += ['controlPlane:', '  localAPIEndpoint:',
                  f'    advertiseAddress: "{address}"',
                  f'  certificateKey: "{key}"']
    return '\n'.join(lines) + '\n'


class Cluster(types.SimpleNamespace):
    """The testbed, the API server and what the tests learnt so far."""

    def replace(self, name):
        """A fresh VM at the same address, as a heal makes it."""
        host = self.testbed.replace_host(name)
        prepare(host, self.kube)
        setattr(self, name, host)
        self.calls[name] = []  # the new VM's call log starts empty
        return host

    def join_master(self, host, ssh=False, check=True):
        """kubeadm join --config with a control-plane JoinConfiguration
        through master1, with the last uploaded certificate key."""
        host.write_file(JOIN_CONFIG, join_configuration(
            f'{self.master1.ip}:6443', self.facts['token'],
            self.facts['hash'], self.facts['key'], host.ip))
        try:
            return self.kubeadm(host, 'join', '--config', JOIN_CONFIG,
                                ssh=ssh, check=check)
        finally:
            host.run(f'rm -f {JOIN_CONFIG}')

    def kubeadm(self, host, *args, check=True, ssh=False):
        """Run kubeadm on a host (as root, or over SSH with sudo as the
        driver does) and remember the call for the call-log test."""
        self.calls.setdefault(host.name, []).append(['kubeadm', *args])
        command = 'kubeadm ' + ' '.join(args)
        result = run_as_root(host, command, ssh, timeout=90)
        if check:
            assert result.returncode == 0, result.stderr
        return result


@contextlib.contextmanager
def testbed_and_api_server():
    """A Testbed and a test API server on its bridge whose certificate
    names every address of the subnet, as the Masters' API servers do."""
    with hosts.Testbed() as testbed:
        subnet = ipaddress.ip_network(testbed.subnet)
        kube = kubeapi.KubeApiServer(
            host=testbed.bridge_ip,
            extra_sans=tuple(str(ip) for ip in subnet.hosts()))
        kube.start()
        try:
            yield testbed, kube
        finally:
            kube.stop()


testbed_and_api_server.__test__ = False  # a helper, not a test
