"""Self-tests of the kubeadm stand-in's upgrade (kubeadm_upgrade.py) and
the kubelet's restart at a new version: one Master and one Worker on a
test API server, upgraded to the next minor from its stand-in packages,
as the install script's -U stages install them. The tests run in file
order and build on each other."""

import json
import os
import re
import shutil
import sys
import tempfile

import pytest

from testbed import faults
from testbed import hosts
from testbed import standins
from testbed.tests.standins_support import api_get
from testbed.tests.standins_support import Cluster
from testbed.tests.standins_support import host_processes
from testbed.tests.standins_support import load_kubeadm_module
from testbed.tests.standins_support import prepare
from testbed.tests.standins_support import testbed_and_api_server

SKIP_REASON = hosts.require_testbed()
OLD = standins.kubernetes_version()
NEXT = standins.next_minor()
NEW = standins.kubernetes_version(NEXT)


def upgrade_module():
    load_kubeadm_module()  # puts the stand-in's directory on sys.path
    return sys.modules['kubeadm_upgrade']


@pytest.mark.parametrize('target, cluster, own, refused', [
    ('v1.36.1', 'v1.35.4', 'v1.36.1', None),
    ('v1.36.1', 'v1.36.1', 'v1.36.1', None),  # a re-run
    ('v1.36.1', 'v1.35.4', 'v1.35.4', 'higher than the kubeadm version'),
    ('v1.35.0', 'v1.35.4', 'v1.36.1', 'Downgrades are not supported'),
    ('v1.37.0', 'v1.35.4', 'v1.37.0', 'only 1 minor version at a time'),
    ('1.36.1', 'v1.35.4', 'v1.36.1', 'unable to parse version'),
])
def test_apply_checks_the_version_as_kubeadm_does(target, cluster, own,
                                                  refused):
    module = upgrade_module()
    if refused is None:
        module.check_target(target, cluster, own)
        return
    with pytest.raises(Exception) as raised:
        module.check_target(target, cluster, own)
    assert refused in str(raised.value)


def test_the_next_minors_script_names_its_version():
    script = standins.script_at(NEXT)
    assert f"readonly K8S_PACKAGE_VERSION='{NEXT}'".encode() in script
    assert standins.script_at(standins.k8s_package_version()) == open(
        standins.INSTALL_SCRIPT, 'rb').read()


@pytest.fixture(scope='module')
def cluster():
    if SKIP_REASON:
        pytest.skip(SKIP_REASON)
    debs = tempfile.mkdtemp(prefix='next-minor-debs-')
    try:
        with testbed_and_api_server() as (testbed, kube):
            members = {name: testbed.add_host(name, role) for name, role in
                       (('master1', 'master'), ('worker1', 'worker'))}
            for host in members.values():
                prepare(host, kube)
            packages = {os.path.basename(path).split('_')[0]: path
                        for path in standins.build_packages(debs, NEXT)}
            yield Cluster(testbed=testbed, kube=kube, calls={},
                          facts={'debs': packages}, **members)
    finally:
        shutil.rmtree(debs, ignore_errors=True)


def install_next(cluster, host, name):
    """dpkg -i of the next minor's package, as apt-get install runs it."""
    path = cluster.facts['debs'][name]
    shutil.copy(path, faults.host_root(host) + '/tmp/')
    return host.run('dpkg -i /tmp/%s' % os.path.basename(path))


def kubelet_version(cluster, name):
    return api_get(cluster.kube, '/api/v1/nodes/' + name)['status'][
        'nodeInfo']['kubeletVersion']


def forwarders(host):
    """PIDs of the API server stand-ins in the host."""
    return [pid for pid, argv in host_processes(host).items()
            if standins.API_SERVER in argv]


def cluster_version(cluster):
    config = api_get(cluster.kube, '/api/v1/namespaces/kube-system/'
                                   'configmaps/kubeadm-config')
    return re.search(r'kubernetesVersion: (\S+)',
                     config['data']['ClusterConfiguration'])[1]


def test_init_uploads_the_cluster_configuration(cluster):
    master, worker = cluster.master1, cluster.worker1
    out = cluster.kubeadm(master, 'init', '--control-plane-endpoint',
                          f'{master.ip}:6443', '--upload-certs').stdout
    assert cluster_version(cluster) == OLD
    token = re.search(r'\[bootstrap-token\] Using token: (\S+)', out)[1]
    ca_hash = re.search(r'--discovery-token-ca-cert-hash (\S+)', out)[1]
    cluster.kubeadm(worker, 'join', f'{master.ip}:6443', '--token', token,
                    '--discovery-token-ca-cert-hash', ca_hash)
    plan = cluster.kubeadm(master, 'upgrade', 'plan').stdout
    assert "you're up-to-date" in plan


def test_apply_needs_a_kubeadm_of_the_target(cluster):
    result = cluster.kubeadm(cluster.master1, 'upgrade', 'apply', NEW,
                             '--yes', check=False)
    assert result.returncode != 0
    assert 'higher than the kubeadm version "%s"' % OLD in result.stderr
    assert cluster_version(cluster) == OLD


def test_apply_asks_unless_yes(cluster):
    master = cluster.master1
    install_next(cluster, master, 'kubeadm')
    assert f'kubeadm upgrade apply {NEW}' in \
        cluster.kubeadm(master, 'upgrade', 'plan').stdout
    result = cluster.kubeadm(master, 'upgrade', 'apply', NEW, check=False)
    assert result.returncode != 0 and "won't proceed" in result.stderr
    assert cluster_version(cluster) == OLD


def test_apply_restarts_the_control_plane_at_the_new_version(cluster):
    master = cluster.master1
    before = forwarders(master)
    out = cluster.kubeadm(master, 'upgrade', 'apply', NEW, '-y').stdout
    assert f'upgraded to "{NEW}"' in out
    assert cluster_version(cluster) == NEW
    manifest = json.loads(master.read_file(
        '/etc/kubernetes/manifests/kube-apiserver.yaml'))
    assert manifest['spec']['containers'][0]['image'].endswith(':' + NEW)
    after = forwarders(master)
    assert len(after) == 1 and not set(after) & set(before)
    # kubeadm does not restart the kubelet: the Node's version waits.
    assert kubelet_version(cluster, 'master1') == OLD
    install_next(cluster, master, 'kubelet')
    assert kubelet_version(cluster, 'master1') == NEW


def test_upgrade_node_on_a_worker_then_its_kubelet(cluster):
    worker = cluster.worker1
    result = cluster.kubeadm(worker, 'upgrade', 'node', check=False)
    assert result.returncode != 0
    assert f'cluster version "{NEW}" is higher' in result.stderr
    # Packages built in the same second give the new modules the old ones'
    # size and mtime: the upgraded kubeadm must still run the new code.
    module = standins.KUBEADM_NODE
    mtime = worker.run(f'stat -c %Y {module}').stdout.strip()
    install_next(cluster, worker, 'kubeadm')
    worker.run(f'touch -d @{mtime} {module}')
    assert 'successfully upgraded' in cluster.kubeadm(
        worker, 'upgrade', 'node').stdout
    assert kubelet_version(cluster, 'worker1') == OLD
    install_next(cluster, worker, 'kubelet')
    assert kubelet_version(cluster, 'worker1') == NEW
    assert worker.run('kubelet --version').stdout == f'Kubernetes {NEW}\n'
