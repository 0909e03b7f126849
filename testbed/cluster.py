"""A whole virtual Kubernetes-cluster VNF for end-to-end driver runs.

Real SSH hosts (storage server with loop-device volumes, masters, workers)
from ``hosts.Testbed``; the fake Keystone/Heat describing them with their
real addresses, devices and Nova ids (a scaling group of nested stacks per
aspect, like the sample BaseHOT); the test Kubernetes API server that the
real kubectl on each Master talks to; a VNF package with PV manifests; and
the driver wired to all of it through its own seams. Shared by the
functional tests, the demo and the benchmark.
"""

import json
import os
import shlex
import shutil
import tempfile
import types
import uuid

from kubernetes_mgmt_pv import config
from kubernetes_mgmt_pv import mgmt_driver
from kubernetes_mgmt_pv import params
from testbed import openstack_api
from testbed import pv_manifest
from testbed import hosts
from testbed import kubeapi

STORAGE_CP = 'storage_server_CP'
MASTER_ASPECT, MASTER_CP = 'master_instance', 'masterNode_CP1'
WORKER_ASPECT, WORKER_CP = 'worker_instance', 'workerNode_CP2'

# The user guide's guests: Ubuntu 22.04, login ubuntu/ubuntu, and a storage
# password that occurs in the export paths (/volumeN/nfs/pvN), so a driver
# that parses or writes back redacted output fails every test.
STORAGE_PASSWORD = 'nfs'
UBUNTU_OS_RELEASE = '''PRETTY_NAME="Ubuntu 22.04.4 LTS"
NAME="Ubuntu"
VERSION_ID="22.04"
VERSION="22.04.4 LTS (Jammy Jellyfish)"
VERSION_CODENAME=jammy
ID=ubuntu
ID_LIKE=debian
HOME_URL="https://www.ubuntu.com/"
SUPPORT_URL="https://help.ubuntu.com/"
BUG_REPORT_URL="https://bugs.launchpad.net/ubuntu/"
UBUNTU_CODENAME=jammy
'''


# Fast failure in tests: hosts are up before the driver runs.
TEST_OPTIONS = {'ssh_connect_retries': 1, 'ssh_retry_backoff': 0.2,
                'ssh_connect_timeout': 5, 'command_timeout': 120,
                'package_install_timeout': 300, 'pv_available_timeout': 20,
                'pv_delete_timeout': 20, 'console_key_timeout': 5}


def kubectl(master, *args):
    """Run kubectl on a Master as the login user, like an operator would."""
    command = 'kubectl ' + ' '.join(shlex.quote(a) for a in args)
    return master.run('su - ubuntu -c %s' % shlex.quote(command)).stdout


def persistent_volumes(master):
    items = json.loads(kubectl(master, 'get', 'pv', '-o', 'json'))['items']
    return {item['metadata']['name']: item for item in items}


def installed(host, package):
    result = host.run("dpkg-query -W -f='${Status}' %s" % package, check=False)
    return result.stdout.strip() == 'install ok installed'


def dpkg_log_size(host):
    return len(host.run('cat /var/log/dpkg.log 2>/dev/null || true').stdout)


def look_like_the_user_guides_guest(host):
    """Make a freshly booted test host an Ubuntu 22.04 guest of the guide."""
    host.write_file('/etc/os-release', UBUNTU_OS_RELEASE)
    if host.role == 'storage':
        host.run('chpasswd', input='ubuntu:%s\n' % STORAGE_PASSWORD)
        host._password = STORAGE_PASSWORD  # for host.ssh_client()


def use_test_options(**overrides):
    """Apply TEST_OPTIONS (plus overrides) to the driver's global config."""
    for name, value in dict(TEST_OPTIONS, **overrides).items():
        config.CONF.set_override(name, value, group=config.GROUP_NAME)


class _Vnfc(object):
    """What Tacker's VnfcResourceInfo says about one VM."""

    def __init__(self, host_name, cp_name):
        self.host_name = host_name
        self.cp_name = cp_name
        self.vnfc_id = str(uuid.uuid4())
        self.server_id = str(uuid.uuid4())
        self.member_stack_id = None

    def as_tacker(self):
        return types.SimpleNamespace(
            id=self.vnfc_id,
            compute_resource=types.SimpleNamespace(resource_id=self.server_id),
            vnfc_cp_info=[types.SimpleNamespace(cpd_id=self.cp_name)])


class VirtualCluster(object):
    """Storage server + masters + workers, with Heat and Kubernetes fakes."""

    def __init__(self, masters=1, workers=2, volumes=2,
                 purge_packages=('nfs-kernel-server',)):
        self.master_count = masters
        self.worker_count = workers
        self.volume_count = volumes
        self.testbed = hosts.Testbed(purge_packages=purge_packages)
        self.openstack = openstack_api.FakeOpenStack()
        self.kube = None
        self.package_dir = None
        self.vnfcs = {}  # host name -> _Vnfc
        self.stack_id = None
        self._groups = {}
        self._seq = {'master': 0, 'worker': 0}

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc_info):
        self.stop()

    # -- lifecycle ----------------------------------------------------------

    def start(self):
        try:
            self.testbed.start()
            self.openstack.start()
            self.kube = kubeapi.KubeApiServer(host=self.testbed.bridge_ip)
            self.kube.start()
            self.package_dir = tempfile.mkdtemp(prefix='vnf-package-')
            self._write_manifests()
            self.stack_id = self.openstack.add_stack(
                'vnflcm_%s' % uuid.uuid4())
            storage = self.testbed.add_host('storage', 'storage',
                                            volumes=self.volume_count)
            look_like_the_user_guides_guest(storage)
            self._describe_storage(storage)
            for aspect in (MASTER_ASPECT, WORKER_ASPECT):
                self._groups[aspect] = self.openstack.add_scaling_group(
                    self.stack_id, aspect)
            for _ in range(self.master_count):
                self.add_node('master')
            for _ in range(self.worker_count):
                self.add_node('worker')
        except BaseException:
            self.stop()
            raise

    def stop(self):
        if self.kube is not None:
            self.kube.stop()
        self.openstack.stop()
        self.testbed.stop()
        if self.package_dir:
            shutil.rmtree(self.package_dir, ignore_errors=True)

    # -- the VNF package and the parameters ---------------------------------

    def _write_manifests(self):
        """Three PVs whose server fields must all be replaced by the driver:
        0.0.0.0, a host name and an IPv6 address."""
        directory = os.path.join(self.package_dir, 'Files', 'kubernetes')
        os.makedirs(directory)
        for number, server in ((1, '0.0.0.0'), (2, 'nfs.example.com'),
                               (3, '"fd00::1"')):
            with open(os.path.join(directory, 'nfs-pv%d.yaml' % number),
                      'w') as stream:
                stream.write(pv_manifest.TEMPLATE.format(
                    name='nfs-pv%d' % number, server=server,
                    path=self.export_dirs()[number - 1]))

    def mount_points(self):
        return ['/volume%d' % n for n in range(1, self.volume_count + 1)]

    def export_dirs(self):
        """Three exports spread over the volumes."""
        mounts = self.mount_points()
        return ['%s/nfs/pv%d' % (mounts[(n - 1) % len(mounts)], n)
                for n in (1, 2, 3)]

    def additional_params(self):
        login = {'username': self.testbed.username,
                 'password': self.testbed.password}
        return {params.ROOT: {
            'master_node': dict(login, aspect_id=MASTER_ASPECT,
                                ssh_cp_name=MASTER_CP, nic_cp_name=MASTER_CP),
            'worker_node': dict(login, aspect_id=WORKER_ASPECT,
                                ssh_cp_name=WORKER_CP, nic_cp_name=WORKER_CP),
            'storage_server': dict(
                login, password=STORAGE_PASSWORD,
                ssh_cp_name=STORAGE_CP, nic_cp_name=STORAGE_CP,
                cinder_volume_setup_params=[
                    {'volume_resource_id': 'storage_server_volume%d' % n,
                     'mount_to': mount}
                    for n, mount in enumerate(self.mount_points(), 1)],
                nfs_server_setup_params=[
                    {'export_dir': path, 'export_to': self.testbed.subnet}
                    for path in self.export_dirs()]),
            'pv_registration_params': [
                {'pv_manifest_file_path':
                    'Files/kubernetes/nfs-pv%d.yaml' % n,
                 'nfs_server_cp': STORAGE_CP} for n in (1, 2, 3)],
        }}

    # -- Heat's view of the hosts -------------------------------------------

    def _describe_storage(self, host):
        vnfc = self.vnfcs[host.name] = _Vnfc(host.name, STORAGE_CP)
        self.openstack.add_server(self.stack_id, 'storage_server',
                                  server_id=vnfc.server_id,
                                  console_output=host.console_output())
        self.openstack.add_port(self.stack_id, STORAGE_CP,
                                fixed_ips=[host.ip],
                                device_id=vnfc.server_id)
        for number, device in enumerate(host.volumes, 1):
            self.openstack.add_volume(self.stack_id,
                                      'storage_server_volume%d' % number,
                                      device=device,
                                      server_id=vnfc.server_id)

    def add_node(self, role):
        """Boot a Master or Worker VM and add it to its scaling group."""
        self._seq[role] += 1
        name = '%s%d' % (role, self._seq[role])
        host = self.testbed.add_host(name, role)
        look_like_the_user_guides_guest(host)
        aspect, cp_name = ((MASTER_ASPECT, MASTER_CP) if role == 'master'
                           else (WORKER_ASPECT, WORKER_CP))
        vnfc = self.vnfcs[name] = _Vnfc(name, cp_name)
        vnfc.member_stack_id = self.openstack.add_group_member(
            self._groups[aspect])
        self.openstack.add_server(vnfc.member_stack_id, role + 'Node',
                                  server_id=vnfc.server_id,
                                  console_output=host.console_output())
        self.openstack.add_port(vnfc.member_stack_id, cp_name,
                                fixed_ips=[host.ip],
                                device_id=vnfc.server_id)
        self._remove_nfs_client(host)
        if role == 'master':
            self._install_kubeconfig(host)
        return host

    @staticmethod
    def _remove_nfs_client(host):
        """A fresh node lacks nfs-common, so the driver really installs it.

        Done per node, not in the shared base image: the storage host keeps
        nfs-ganesha (the test NFS server), which depends on nfs-common.
        """
        host.run('apt-get purge -y -q nfs-common')

    def _install_kubeconfig(self, host):
        host.run('install -d -o ubuntu -g ubuntu -m 700 /home/ubuntu/.kube')
        host.write_file('/home/ubuntu/.kube/config', self.kube.kubeconfig())
        host.run('chown ubuntu:ubuntu /home/ubuntu/.kube/config && '
                 'chmod 600 /home/ubuntu/.kube/config')

    def replace_host(self, name, same_ip=True, keep_volumes=False):
        """A heal as Heat does it: a new VM (fresh root fs, new Nova id),
        and for the storage server blank new volumes, or with keep_volumes
        the old ones re-attached; returns the vnfc id."""
        host = self.testbed.replace_host(name, same_ip=same_ip,
                                         keep_volumes=keep_volumes)
        look_like_the_user_guides_guest(host)
        vnfc = self.vnfcs[name]
        stack_id = vnfc.member_stack_id or self.stack_id
        vnfc.server_id = str(uuid.uuid4())
        server_name = ('storage_server' if vnfc.cp_name == STORAGE_CP
                       else host.role + 'Node')
        self.openstack.remove_resource(stack_id, server_name)
        self.openstack.add_server(stack_id, server_name,
                                  server_id=vnfc.server_id,
                                  console_output=host.console_output())
        self.openstack.remove_resource(stack_id, vnfc.cp_name)
        self.openstack.add_port(stack_id, vnfc.cp_name, fixed_ips=[host.ip],
                                device_id=vnfc.server_id)
        if vnfc.cp_name == STORAGE_CP:
            for number, device in enumerate(host.volumes, 1):
                volume = 'storage_server_volume%d' % number
                self.openstack.remove_resource(stack_id, volume)
                self.openstack.add_volume(stack_id, volume, device=device,
                                          server_id=vnfc.server_id)
        if host.role != 'storage':
            self._remove_nfs_client(host)
        if host.role == 'master':
            self._install_kubeconfig(host)
        return vnfc.vnfc_id

    # -- Tacker's view --------------------------------------------------------

    def host(self, name):
        return self.testbed.hosts[name]

    def nodes(self, role=None):
        return [h for h in self.testbed.hosts.values()
                if h.role != 'storage' and role in (None, h.role)]

    def vnf_instance(self):
        """A VnfInstance as the driver reads it (attributes only)."""
        info = types.SimpleNamespace(
            instance_id=self.stack_id,
            additional_params=self.additional_params(),
            vnfc_resource_info=[v.as_tacker() for v in self.vnfcs.values()])
        return types.SimpleNamespace(
            id=str(uuid.uuid4()), vnfd_id=str(uuid.uuid4()),
            instantiated_vnf_info=info, vim_connection_info=[])

    def driver(self):
        """The entry-point driver class with the Tacker DB lookups answered
        by this cluster: the package directory and the fake VIM."""
        cluster = self

        class Driver(mgmt_driver.KubernetesPvMgmtDriver):
            def vnf_package_dir(self, context, vnf_instance):
                return cluster.package_dir

            def vim_access_info(self, context, vnf_instance):
                return cluster.openstack.access_info()

        return Driver()

    # -- hooks, called exactly as Tacker's VnfLcmDriver calls them ----------

    def instantiate_end(self):
        request = types.SimpleNamespace(
            flavour_id='simple', additional_params=self.additional_params())
        self.driver().instantiate_end(
            context=None, vnf_instance=self.vnf_instance(),
            instantiate_vnf_request=request, grant=None, grant_request=None,
            vnf={})

    def heal_start(self, vnfc_ids=()):
        self._heal('heal_start', vnfc_ids)

    def heal_end(self, vnfc_ids=()):
        self._heal('heal_end', vnfc_ids, vnf={})

    def _heal(self, hook, vnfc_ids, **extra):
        """A heal hook; no vnfc ids means the entire cluster (SOL003)."""
        request = types.SimpleNamespace(vnfc_instance_id=list(vnfc_ids),
                                        cause=None, additional_params=[])
        getattr(self.driver(), hook)(
            context=None, vnf_instance=self.vnf_instance(),
            heal_vnf_request=request, grant=None, grant_request=None,
            **extra)

    def scale_end(self, new_hosts):
        """scale_end of a SCALE_OUT that created ``new_hosts`` (workers)."""
        self.driver().scale_end(
            context=None, vnf_instance=self.vnf_instance(),
            scale_vnf_request=types.SimpleNamespace(
                type='SCALE_OUT', aspect_id=WORKER_ASPECT,
                number_of_steps=len(new_hosts), additional_params={}),
            grant=None, grant_request=None,
            scale_out_id_list=[self.vnfcs[h.name].member_stack_id
                               for h in new_hosts],
            vnf={})
