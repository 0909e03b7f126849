"""Today's guest images end to end: a cluster with persistent volumes on
look-alikes of Ubuntu 26.04 LTS and Debian 13 (testbed.guest_images).

The Masters and Workers are fresh (nothing of Kubernetes, no apt source,
no apt-key), so the sample install script prepares them from a signed
repository that serves the image's containerd (2.x's configuration
format on 26.04, 1.7's on 13) next to the kubeadm/kubelet stand-ins; the
driver checks every host's os-release first. One instantiation per image:
CI time is tight."""

import json

import pytest

from testbed import apt_repo
from testbed import fresh_nodes
from testbed import guest_images
from testbed import standins
from testbed import virtual_vnf
from tests.functional.conftest import skip_without_testbed

KUBERNETES = ('kubelet', 'kubeadm', 'kubectl')
RUNC_OPTIONS = '.containerd.runtimes.runc.options]'


def runc_options(config):
    """The key lines of the runc options table of a containerd config."""
    lines, inside = [], False
    for line in config.splitlines():
        line = line.strip()
        if line.startswith('['):
            inside = line.endswith(RUNC_OPTIONS)
        elif inside and line:
            lines.append(line)
    return lines


@pytest.mark.parametrize('image', [guest_images.UBUNTU_2604,
                                   guest_images.DEBIAN_13],
                         ids=lambda image: image.name)
def test_a_cluster_with_persistent_volumes_on_the_image(image):
    skip_without_testbed()
    with apt_repo.AptRepository(image=image) as repository, \
            virtual_vnf.VirtualCluster(masters=1, workers=1, volumes=1,
                                       install_cluster=True,
                                       fresh_nodes=True,
                                       guest_image=image,
                                       **virtual_vnf.STOCK_IMAGE) as virtual:
        apt_repo.use_in(virtual, repository, virtual_vnf.CALICO_STAND_IN)
        for node in virtual.nodes():
            repository.route_from(node, virtual.testbed.bridge_ip)

        virtual.instantiate_end()

        master = virtual.host('master1')
        assert virtual_vnf.node_readiness(master) == {'master1': 'True',
                                                      'worker1': 'True'}
        nodes = json.loads(virtual_vnf.kubectl(master, 'get', 'nodes', '-o',
                                               'json'))['items']
        assert {node['status']['nodeInfo']['osImage'] for node in nodes} \
            == {image.pretty_name}
        volumes = virtual_vnf.persistent_volumes(master)
        assert {name: pv['status']['phase'] for name, pv in volumes.items()} \
            == dict.fromkeys(('nfs-pv1', 'nfs-pv2', 'nfs-pv3'), 'Available')
        storage = virtual.host('storage')
        assert virtual_vnf.installed(storage, 'nfs-kernel-server')
        version = standins.k8s_package_version()
        for node in virtual.nodes():
            states = fresh_nodes.package_states(
                node, KUBERNETES + ('containerd',))
            assert states == dict(
                dict.fromkeys(KUBERNETES, 'hold installed ' + version),
                containerd='install installed ' + image.containerd_version)
            config = node.read_file('/etc/containerd/config.toml')
            assert [line for line in runc_options(config)
                    if line.startswith('SystemdCgroup')] == [
                        'SystemdCgroup = true']
            assert '"%s"' % apt_repo.PAUSE_IMAGE in config
            assert node.run('apt-key list', check=False).returncode == 127
