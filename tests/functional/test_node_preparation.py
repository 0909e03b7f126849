"""The install script's node preparation on fresh hosts (nothing of
Kubernetes installed, no apt source): the offline sources of an
air-gapped site. The testbed serves a signed apt repository on a bridge of
its own (testbed.apt_repo) with the kubeadm/kubelet stand-ins, a real
kubectl and Debian's containerd; the package ships the repository's key
and the CNI manifest. Kernel modules, sysctls, swap and systemd are stood
in for (testbed.fresh_nodes) and their calls asserted."""

import time

import pytest

from kubernetes_mgmt_pv import exceptions
from kubernetes_mgmt_pv.request import offline_params
from testbed import apt_repo
from testbed import fresh_nodes
from testbed import http_proxy
from testbed import standins
from testbed import virtual_vnf
from tests.functional.conftest import skip_without_testbed

KEY_FILE = apt_repo.KEY_FILE
MIRROR = apt_repo.REGISTRY_MIRROR
PAUSE = apt_repo.PAUSE_IMAGE
KUBERNETES = ('kubelet', 'kubeadm', 'kubectl')
PACKAGES = KUBERNETES + ('containerd', 'runc')
KEYRING = '/etc/apt/keyrings/kubernetes-apt-keyring.asc'
SOURCE_LIST = '/etc/apt/sources.list.d/kubernetes.list'
FAILED_STEP = 'apt-get update of the Kubernetes apt repository'
PROXY_PASSWORD = 'pr0xy-s3cret'
# What the stand-ins record of one preparation, in this order.
STOOD_IN = [['swapoff', '-a'], ['modprobe', 'overlay'],
            ['modprobe', 'br_netfilter'], ['sysctl', '--system'],
            ['systemctl', 'daemon-reload'],
            ['systemctl', 'enable', 'containerd', 'kubelet'],
            ['systemctl', 'restart', 'containerd']]


@pytest.fixture(scope='module')
def repository():
    skip_without_testbed()
    with apt_repo.AptRepository() as repo:
        yield repo


@pytest.fixture
def fresh(repository):
    """1 Master and 1 Worker with nothing of Kubernetes, whose request
    names the repository, the package's key and CNI manifest, a registry
    mirror and a pause image; no route to the repository yet."""
    with virtual_vnf.VirtualCluster(masters=1, workers=1, volumes=1,
                                    install_cluster=True,
                                    fresh_nodes=True) as virtual:
        apt_repo.use_in(virtual, repository, virtual_vnf.CALICO_STAND_IN)
        yield virtual


def route(virtual, repository):
    for node in virtual.nodes():
        repository.route_from(node, virtual.testbed.bridge_ip)


def fetched(repository, node, since=0):
    """The files a node fetched from the repository (name: status)."""
    return {path.rsplit('/', 1)[-1]: status for _, method, path, status in
            repository.requests_from(node.ip, since) if method == 'GET'}


def assert_prepared(virtual, repository, direct=True):
    """Every node prepared from the repository (``direct``: not through a
    proxy, so the repository saw the node's own requests)."""
    version = standins.k8s_package_version()
    key = repository.key.public_armored.decode()
    for node in virtual.nodes():
        states = fresh_nodes.package_states(node, PACKAGES)
        assert {name: states[name] for name in KUBERNETES} == dict.fromkeys(
            KUBERNETES, 'hold installed ' + version), node.name
        assert states['containerd'].startswith('install installed 1.6.')
        assert states['runc'].startswith('install installed ')
        if direct:
            files = fetched(repository, node)
            assert files['InRelease'] == 200
            for name in PACKAGES:
                assert [status for deb, status in files.items()
                        if deb.startswith(name + '_')] == [200], (name, files)
        assert node.read_file(KEYRING) == key
        assert node.read_file(SOURCE_LIST) == (
            'deb [signed-by=%s] %s /\n' % (KEYRING, repository.url))
        config = node.read_file('/etc/containerd/config.toml')
        assert 'SystemdCgroup = true' in config
        assert 'sandbox_image = "%s"' % PAUSE in config
        assert 'config_path = "/etc/containerd/certs.d"' in config
        for registry in apt_repo.MIRRORED_REGISTRIES:
            hosts_toml = node.read_file(
                '/etc/containerd/certs.d/%s/hosts.toml' % registry)
            assert '[host."%s"]' % MIRROR in hosts_toml
        assert node.read_file('/etc/modules-load.d/kubernetes.conf') == \
            'overlay\nbr_netfilter\n'
        assert 'net.ipv4.ip_forward = 1' in node.read_file(
            '/etc/sysctl.d/90-kubernetes.conf')
        assert fresh_nodes.calls(node)[-len(STOOD_IN):] == STOOD_IN
    master = virtual.host('master1')
    assert virtual_vnf.node_readiness(master) == {'master1': 'True',
                                                  'worker1': 'True'}
    # The CNI manifest of the package, not a download.
    assert master.read_file(offline_params.NODE_CNI_MANIFEST) == \
        virtual_vnf.CALICO_STAND_IN
    assert 'calico_backend' in virtual_vnf.kubectl(
        master, 'get', 'configmap', '-n', 'kube-system', 'calico-config',
        '-o', 'yaml')


def node_state(virtual, repository):
    return {node.name: (virtual_vnf.dpkg_log_size(node),
                        len(fresh_nodes.calls(node)),
                        len(repository.requests_from(node.ip)))
            for node in virtual.nodes()}


def test_fresh_nodes_are_prepared_from_the_signed_repository(fresh,
                                                             repository):
    route(fresh, repository)
    fresh.instantiate_end()
    assert_prepared(fresh, repository)
    for node in fresh.nodes():
        assert fresh_nodes.calls(node) == STOOD_IN

    # A re-run installs, downloads and reconfigures nothing.
    before = node_state(fresh, repository)
    fresh.instantiate_end()
    assert node_state(fresh, repository) == before
    assert_prepared(fresh, repository)


def assert_fails_fast_and_clean(virtual, url):
    """The first node's install script stops at the repository, naming
    the node, the step and the URL, with nothing installed."""
    leader = virtual.host('master1')
    started = time.monotonic()
    with pytest.raises(exceptions.MgmtDriverError) as caught:
        virtual.instantiate_end()
    assert time.monotonic() - started < virtual_vnf.TEST_OPTIONS[
        'command_timeout']
    message = str(caught.value)
    assert leader.ip in message
    assert '%s %s' % (FAILED_STEP, url) in message
    for node in virtual.nodes():
        assert fresh_nodes.package_states(node, PACKAGES) == {}, node.name
        assert node.run('test -e %s' % SOURCE_LIST,
                        check=False).returncode == 1
    assert virtual.vims == {}


def test_a_wrong_key_fails_fast_and_a_rerun_with_the_right_one_converges(
        fresh, repository):
    route(fresh, repository)
    other = apt_repo.SigningKey()
    try:
        fresh.add_package_file(KEY_FILE, other.public_armored.decode())
    finally:
        other.close()
    assert_fails_fast_and_clean(fresh, repository.url)

    fresh.add_package_file(KEY_FILE, repository.key.public_armored.decode())
    fresh.instantiate_end()
    assert_prepared(fresh, repository)


def test_an_unreachable_mirror_fails_fast_and_a_rerun_converges(
        fresh, repository):
    # No route to the repository's bridge yet.
    assert_fails_fast_and_clean(fresh, repository.url)

    route(fresh, repository)
    fresh.instantiate_end()
    assert_prepared(fresh, repository)


def test_nodes_reach_the_repository_through_the_proxy(fresh, repository):
    # No route to the repository: only the proxy on the runner reaches it.
    since = len(repository.log)
    with http_proxy.TinyProxy(fresh.testbed.bridge_ip,
                              fresh.testbed.subnet) as proxy:
        # tinyproxy asks for no credentials; the nodes send them all the
        # same, as to a site's authenticating proxy.
        url = proxy.url.replace('http://', 'http://mgmt:%s@' % PROXY_PASSWORD)
        fresh.proxy = {'http_proxy': url,
                       'k8s_node_cidr': fresh.testbed.subnet}
        fresh.instantiate_end()
        log = proxy.log()
    assert_prepared(fresh, repository, direct=False)
    # Every request came from the proxy, none from a node itself.
    clients = {client for client, _, _, _ in repository.log[since:]}
    assert clients == {repository.address}
    for node in fresh.nodes():
        for unit in ('containerd', 'kubelet'):
            directory = '/etc/systemd/system/%s.service.d/' % unit
            # The drop-in, which systemd shows any user, names the file
            # that holds the credentials, which only root reads.
            assert node.read_file(directory + 'http-proxy.conf') == (
                '[Service]\nEnvironmentFile=%shttp-proxy.env\n' % directory)
            assert 'HTTP_PROXY="%s"' % url in node.read_file(
                directory + 'http-proxy.env')
            assert node.run('runuser -u ubuntu -- cat %shttp-proxy.env'
                            % directory, check=False).returncode != 0
    # kubeadm copies its *_proxy variables into the static Pod manifests,
    # which anyone who may read kube-system's Pods sees: not the proxy's.
    master = fresh.host('master1')
    manifest = master.read_file('/etc/kubernetes/manifests/'
                                'kube-apiserver.yaml')
    assert 'no_proxy' in manifest
    assert master.run('grep -rlF %s /etc/kubernetes' % PROXY_PASSWORD,
                      check=False).stdout == ''
    assert repository.url + 'InRelease' in log
    assert repository.url + 'Packages' in log
    assert 'kubeadm_' in log and 'containerd_' in log
