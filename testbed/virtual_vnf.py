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
import re
import shlex
import shutil
import ssl
import tempfile
import types
import urllib.request
import uuid

from kubernetes_mgmt_pv.cluster import cluster_feature
from kubernetes_mgmt_pv.cluster import upgrade
from kubernetes_mgmt_pv import config
from kubernetes_mgmt_pv import mgmt_driver
from kubernetes_mgmt_pv.request import param_model
from testbed import cloud_init
from testbed import fresh_nodes
from testbed import guest_images
from testbed import hosts
from testbed import kubeapi
from testbed import node_lifecycle
from testbed import openstack_api
from testbed import pv_manifest
from testbed import standins
from testbed import subnets

STORAGE_CP = 'storage_server_CP'
MASTER_ASPECT, MASTER_CP = 'master_instance', 'masterNode_CP1'
WORKER_ASPECT, WORKER_CP = 'worker_instance', 'workerNode_CP2'
VIP_CP = 'vip_CP'
FIP_NAME = 'vip_FIP'
# With a cluster network: the Masters' and Workers' ports on it (their
# nic_cp_name), while ssh_cp_name stays on the first network.
CLUSTER_CPS = {'master': 'masterNode_cluster_CP',
               'worker': 'workerNode_cluster_CP'}
SAMPLE_PACKAGE = os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))), 'samples',
    'kubernetes_pv_vnf')
INSTALL_SCRIPT = os.path.join(SAMPLE_PACKAGE, 'Scripts',
                              'install_k8s_cluster.sh')
SCRIPT_PATH = 'Scripts/install_k8s_cluster.sh'
# The sample package's csi-driver-nfs release (dynamic provisioning).
CSI_DRIVER_DIR = 'Files/csi-driver-nfs/v4.13.4'
POD_CIDR = '192.168.0.0/16'
SERVICE_CIDR = str(subnets.KUBERNETES_SERVICE_NETWORK)

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


CALICO_STAND_IN = """apiVersion: v1
kind: ConfigMap
metadata:
  name: calico-config
  namespace: kube-system
data:
  calico_backend: bird
"""


def calico_manifest_path():
    """Where the install script looks for its pinned Calico manifest."""
    with open(INSTALL_SCRIPT) as stream:
        version = re.search(r"^readonly CALICO_VERSION='([^']+)'",
                            stream.read(), re.M).group(1)
    return '/usr/local/lib/kubernetes-mgmt-pv/calico-%s.yaml' % version


# Fast failure in tests: hosts are up before the driver runs.
TEST_OPTIONS = {'ssh_connect_retries': 1, 'ssh_retry_backoff': 0.2,
                'ssh_connect_timeout': 5, 'command_timeout': 120,
                'package_install_timeout': 300, 'pv_available_timeout': 20,
                'pv_delete_timeout': 20, 'console_key_timeout': 5}


def kubectl(master, *args):
    """Run kubectl on a Master as the login user, like an operator would."""
    command = 'kubectl ' + ' '.join(shlex.quote(a) for a in args)
    return master.run('su - ubuntu -c %s' % shlex.quote(command)).stdout


def node_readiness(master):
    """{Node name: status of its Ready condition} as kubectl on a Master
    shows them."""
    items = json.loads(kubectl(master, 'get', 'nodes', '-o', 'json'))['items']
    return {item['metadata']['name']: next(
        (c['status'] for c in item['status'].get('conditions') or []
         if c['type'] == 'Ready'), None) for item in items}


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
        host.run('chpasswd -c SHA512',  # as the image's (host_scripts)
                 input='ubuntu:%s\n' % STORAGE_PASSWORD)
        host._password = STORAGE_PASSWORD  # for host.ssh_client()


# What a Master's or Worker's image lacks, so that the driver installs it
# (prepare_guest): not the storage host's, whose nfs-ganesha (the test NFS
# server) depends on nfs-common.
NODE_IMAGE_PURGES = {'master': ('nfs-common',), 'worker': ('nfs-common',)}
# A cluster of VMs from the user guide's stock image, which lacks the NFS
# packages, so that the driver really installs them: for the tests of that
# installation, VirtualCluster(**STOCK_IMAGE). Any other test boots VMs
# that have them (each installation costs a VM ~1.5 s of CPU).
STOCK_IMAGE = {'purge_packages': ('nfs-kernel-server',), 'nfs_common': False}
# The same stock image by role, for a testbed whose VMs boot from it or not
# (heat_engine.HeatEngine.stock_image).
STOCK_ROLE_PURGES = dict(NODE_IMAGE_PURGES, storage=('nfs-kernel-server',))


def prepare_guest(host, kube, install_cluster=True, fresh=False,
                  image=None):
    """Make a freshly booted test host a VM of the user guide's VNF: an
    Ubuntu 22.04 look-alike; a Master or Worker either gets the kubeadm
    stand-ins' view of the cluster's state ``kube`` (the driver installs
    Kubernetes) or, as a Master of an existing kubeadm cluster, its
    admin.conf and API server. (It lacks nfs-common, so that the driver
    really installs it, when its testbed was made with NODE_IMAGE_PURGES.)
    A ``fresh`` Master or Worker has nothing of Kubernetes and no apt
    source (testbed.fresh_nodes).
    With a guest ``image`` (testbed.guest_images) the host looks like a
    VM of that image instead of Ubuntu 22.04."""
    look_like_the_user_guides_guest(host)
    if image is not None:
        guest_images.make(host, image)
    if host.role == 'storage':
        return
    if fresh:
        fresh_nodes.make(host)
        standins.connect_host(host, kube)
    elif install_cluster:
        standins.connect_host(host, kube)
        # Like an offline image, the host carries the network plugin's
        # manifest the script would download: here one the test API
        # server serves (it runs no DaemonSets).
        host.run('mkdir -p /usr/local/lib/kubernetes-mgmt-pv')
        host.write_file(calico_manifest_path(), CALICO_STAND_IN)
    elif host.role == 'master':
        standins.run_control_plane(host, kube, host.cluster_ip or host.ip)


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
    """Storage server + masters + workers, with Heat and Kubernetes fakes.

    ``install_cluster``: the driver installs Kubernetes with the
    sample install script (on the kubeadm stand-ins); otherwise the
    Masters come as Masters of an existing kubeadm cluster.
    ``nova_host_names``: the Masters and Workers boot with the host
    names cloud-init gives the sample's group members on a real cloud
    (all Workers ``workernode``), instead of the testbed's names.
    ``cluster_network``: every VM has a second NIC on a network of its
    own; ``nic_cp_name`` names the ports on it, ``ssh_cp_name`` the
    ports on the first network, and the VIP is on it.
    ``purge_packages``: packages no VM has (STOCK_IMAGE: the Storage
    server's nfs-kernel-server).
    ``nfs_common``: the Masters and Workers boot with nfs-common
    installed (False: the driver installs it, see STOCK_IMAGE).
    ``openstack``: a started FakeOpenStack shared with other clusters
    (their stacks side by side in one Heat); by default one of its
    own.
    ``fresh_nodes``: the Masters and Workers boot with nothing of
    Kubernetes and no apt source (testbed.fresh_nodes; nfs-common is
    kept), so the install script prepares them from the sources of
    ``offline`` (the request's ``offline`` object, None: none).
    ``guest_image``: every VM looks like a VM of that image
    (testbed.guest_images; default: the user guide's Ubuntu 22.04)."""

    def __init__(self, masters=1, workers=2, volumes=2, purge_packages=(),
                 install_cluster=False, nova_host_names=False,
                 cluster_network=False, nfs_common=True, openstack=None,
                 fresh_nodes=False, guest_image=None):
        self.fresh_nodes = fresh_nodes
        self.guest_image = guest_image
        self.offline = None
        self.proxy = None  # the request's proxy object, None: none
        self.storage_classes = []  # see use_storage_classes()
        self.cluster_network = cluster_network
        self.nova_host_names = nova_host_names
        self.master_count = masters
        self.worker_count = workers
        self.volume_count = volumes
        self.install_cluster = install_cluster
        self.vims = {}  # name -> VIM registered through the driver's seam
        # name -> {VIM id: VNF ids}: VIMs Tacker would refuse to delete
        self.vims_in_use = {}
        self.instance_id, self.vnfd_id = str(uuid.uuid4()), str(uuid.uuid4())
        self.vip = None
        self.fip_name = None  # cluster_fip_name, see add_floating_ip()
        # The clients of every export (default: the testbed's subnet).
        self.export_to = None
        self.testbed = hosts.Testbed(purge_packages=purge_packages,
                                     role_purge_packages=None if
                                     nfs_common or fresh_nodes
                                     else NODE_IMAGE_PURGES,
                                     cluster_network=cluster_network,
                                     install_standins=not fresh_nodes)
        self._own_openstack = openstack is None
        self.openstack = (openstack_api.FakeOpenStack() if openstack is None
                          else openstack)
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
            if self._own_openstack:
                self.openstack.start()
            self.kube = self._new_api_server()
            self.package_dir = tempfile.mkdtemp(prefix='vnf-package-')
            self._write_manifests()
            if self.install_cluster:
                os.makedirs(os.path.join(self.package_dir, 'Scripts'))
                shutil.copy(INSTALL_SCRIPT,
                            os.path.join(self.package_dir, SCRIPT_PATH))
            self.stack_id = self.openstack.add_stack(
                'vnflcm_%s' % uuid.uuid4())
            if self.master_count > 1:
                # The VIP: the subnet's last address, which no host takes.
                self.vip = str(list((self.testbed.cluster_subnet or
                                     self.testbed._subnet).hosts())[-1])
                self.openstack.add_port(self.stack_id, VIP_CP,
                                        fixed_ips=[self.vip])
            storage = self.testbed.add_host('storage', 'storage',
                                            volumes=self.volume_count)
            prepare_guest(storage, self.kube, image=self.guest_image)
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

    def _new_api_server(self):
        """The test API server: the cluster's shared state (its etcd).
        Its certificate names every address of the subnet, for the Masters
        of a cluster not built here (run_control_plane), whose API server
        stand-in relays TCP; the Masters kubeadm builds serve their own
        certificates."""
        server = kubeapi.KubeApiServer(
            host=self.testbed.bridge_ip,
            extra_sans=tuple(str(a) for subnet in (
                self.testbed._subnet, self.testbed.cluster_subnet) if subnet
                for a in subnet.hosts()))
        return server.start()

    def stop(self):
        if self.kube is not None:
            self.kube.stop()
        if self._own_openstack:
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

    def add_package_file(self, relative, content):
        """A file of the VNF package, e.g. the offline sources' key."""
        path = os.path.join(self.package_dir, relative)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, 'w') as stream:
            stream.write(content)

    def use_storage_classes(self, classes):
        """The request's storage_server.storage_classes from now on, each
        class's export_dir exported too, with the sample's csi-driver-nfs
        manifests in the package."""
        source = os.path.join(SAMPLE_PACKAGE, CSI_DRIVER_DIR)
        for name in sorted(os.listdir(source)):
            if name.endswith('.yaml'):
                with open(os.path.join(source, name)) as stream:
                    self.add_package_file(f'{CSI_DRIVER_DIR}/{name}',
                                          stream.read())
        self.storage_classes = list(classes)

    def _dynamic_keys(self):
        """storage_classes and csi_driver_manifest_file_paths, if any."""
        if not self.storage_classes:
            return {}
        return {'storage_classes': self.storage_classes,
                'csi_driver_manifest_file_paths': sorted(
                    f'{CSI_DRIVER_DIR}/{name}' for name in os.listdir(
                        os.path.join(self.package_dir, CSI_DRIVER_DIR)))}

    def mount_points(self):
        return ['/volume%d' % n for n in range(1, self.volume_count + 1)]

    def export_dirs(self):
        """Three exports spread over the volumes, then the storage
        classes' ones."""
        mounts = self.mount_points()
        return ['%s/nfs/pv%d' % (mounts[(n - 1) % len(mounts)], n)
                for n in (1, 2, 3)] + [
            spec['export_dir'] for spec in self.storage_classes]

    def additional_params(self):
        login = {'username': self.testbed.username,
                 'password': self.testbed.password}
        cluster_keys, network_keys = {}, {}
        if self.install_cluster:
            cluster_keys = {'script_path': SCRIPT_PATH,
                            'vim_name': 'kubernetes_vim_test'}
            network_keys = {'pod_cidr': POD_CIDR,
                            'cluster_cidr': SERVICE_CIDR}
            if self.vip:
                network_keys['cluster_cp_name'] = VIP_CP
            if self.fip_name:
                network_keys['cluster_fip_name'] = self.fip_name
        if self.offline:
            cluster_keys['offline'] = self.offline
        if self.proxy:
            cluster_keys['proxy'] = self.proxy
        return {param_model.ROOT: dict(cluster_keys, **{
            'master_node': dict(login, aspect_id=MASTER_ASPECT,
                                ssh_cp_name=MASTER_CP,
                                nic_cp_name=self._nic_cp('master'),
                                **network_keys),
            'worker_node': dict(login, aspect_id=WORKER_ASPECT,
                                ssh_cp_name=WORKER_CP,
                                nic_cp_name=self._nic_cp('worker')),
            'storage_server': dict(
                login, password=STORAGE_PASSWORD,
                ssh_cp_name=STORAGE_CP, nic_cp_name=STORAGE_CP,
                cinder_volume_setup_params=[
                    {'volume_resource_id': 'storage_server_volume%d' % n,
                     'mount_to': mount}
                    for n, mount in enumerate(self.mount_points(), 1)],
                nfs_server_setup_params=[
                    {'export_dir': path, 'export_to': client}
                    for path in self.export_dirs()
                    for client in self.export_to or [self.testbed.subnet]],
                **self._dynamic_keys()),
            'pv_registration_params': [
                {'pv_manifest_file_path':
                    'Files/kubernetes/nfs-pv%d.yaml' % n,
                 'nfs_server_cp': STORAGE_CP} for n in (1, 2, 3)],
        })}

    def add_floating_ip(self, address):
        """A floating IP in the stack, associated with the VIP's port (with
        one Master, a port of its address), named as cluster_fip_name from
        now on: the host of the VIM's URL."""
        port = VIP_CP
        if not self.vip:
            port = 'master_fip_CP'
            self.openstack.add_port(self.stack_id, port, fixed_ips=[
                self.nodes('master')[0].ip])
        self.openstack.add_floating_ip(self.stack_id, FIP_NAME, address,
                                       port_name=port)
        self.fip_name = FIP_NAME

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
        server_name = role + 'Node'  # the sample BaseHOT's
        host = self.testbed.add_host(
            name, role, hostname=cloud_init.guest_host_name(server_name)
            if self.nova_host_names else None)
        prepare_guest(host, self.kube, self.install_cluster,
                      self.fresh_nodes, self.guest_image)
        aspect, cp_name = ((MASTER_ASPECT, MASTER_CP) if role == 'master'
                           else (WORKER_ASPECT, WORKER_CP))
        vnfc = self.vnfcs[name] = _Vnfc(name, cp_name)
        vnfc.member_stack_id = self.openstack.add_group_member(
            self._groups[aspect])
        self.openstack.add_server(vnfc.member_stack_id, server_name,
                                  server_id=vnfc.server_id,
                                  console_output=host.console_output())
        self.openstack.add_port(vnfc.member_stack_id, cp_name,
                                fixed_ips=[host.ip],
                                device_id=vnfc.server_id)
        if self.cluster_network:  # kept by a heal, as Heat keeps ports
            self.openstack.add_port(vnfc.member_stack_id, CLUSTER_CPS[role],
                                    fixed_ips=[host.cluster_ip],
                                    device_id=vnfc.server_id)
        return host

    def _nic_cp(self, role):
        if self.cluster_network:
            return CLUSTER_CPS[role]
        return MASTER_CP if role == 'master' else WORKER_CP

    def replace_host(self, name, same_ip=True, keep_volumes=False):
        """A heal as Heat does it: a new VM (fresh root fs, new Nova id),
        and for the storage server blank new volumes, or with keep_volumes
        the old ones re-attached; returns the vnfc id."""
        host = self.testbed.replace_host(name, same_ip=same_ip,
                                         keep_volumes=keep_volumes)
        prepare_guest(host, self.kube, self.install_cluster,
                      self.fresh_nodes, self.guest_image)
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
        return vnfc.vnfc_id

    def power_off(self, name):
        """The VM dies under the cluster: its Node becomes unreachable and
        its pods stay (testbed.node_lifecycle)."""
        node_lifecycle.power_off(self.testbed, self.kube, name)

    def replace_everything(self):
        """An entire-VNF heal as Tacker does it: every VM (and the storage
        volumes) re-created, so the cluster and its state start anew."""
        self.kube.stop()
        self.kube = self._new_api_server()
        for name in list(self.vnfcs):
            self.replace_host(name)

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
            id=self.instance_id, vnfd_id=self.vnfd_id,
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

            def register_vim(self, context, vnf_instance, name, access):
                return cluster.register_vim(name, access)

            def delete_vim(self, context, vnf_instance, name):
                return cluster.vims.pop(name, None) is not None

            def vim_users(self, context, vnf_instance, name):
                return cluster.vims_in_use.get(name, {})

        return Driver()

    def register_vim(self, name, access):
        """Check the VIM's credentials as Tacker's Kubernetes VIM driver
        does (the API versions and the namespaces, with the bearer token,
        verifying the cluster's CA), then keep it."""
        context = ssl.create_default_context(cadata=access.ca_cert)
        for path in ('/api', '/api/v1/namespaces'):
            request = urllib.request.Request(
                access.url + path,
                headers={'Authorization': 'Bearer ' + access.bearer_token})
            with urllib.request.urlopen(request, context=context,
                                        timeout=10) as response:
                json.load(response)
        self.vims[name] = access
        return name

    def kubeadm_calls(self, name):
        """The kubeadm command lines run on a host, oldest first."""
        log = self.host(name).run(
            'cat /var/log/kubeadm-standin.log 2>/dev/null || true').stdout
        return [json.loads(line)['argv'] for line in log.splitlines()]

    # -- hooks, called exactly as Tacker's VnfLcmDriver calls them ----------

    def instantiate_end(self):
        request = types.SimpleNamespace(
            flavour_id='simple', additional_params=self.additional_params())
        self.driver().instantiate_end(
            context=None, vnf_instance=self.vnf_instance(),
            instantiate_vnf_request=request, grant=None, grant_request=None,
            vnf={})

    def heal_start(self, vnfc_ids=(), removed_storage=None,
                   **request_params):
        self._heal('heal_start', vnfc_ids, removed_storage, request_params)

    def heal_end(self, vnfc_ids=(), removed_storage=None, **request_params):
        self._heal('heal_end', vnfc_ids, removed_storage, request_params,
                   vnf={})

    def _heal(self, hook, vnfc_ids, removed_storage, request_params,
              **extra):
        """A heal hook; no vnfc ids means the entire cluster (SOL003);
        ``request_params``: the request's additionalParams;
        ``removed_storage``: the volume ids a v2 grant removes (None: a v1
        request, which does not tell)."""
        request = types.SimpleNamespace(vnfc_instance_id=list(vnfc_ids),
                                        cause=None,
                                        additional_params=request_params)
        if removed_storage is not None:
            request.removed_storage = tuple(removed_storage)
        getattr(self.driver(), hook)(
            context=None, vnf_instance=self.vnf_instance(),
            heal_vnf_request=request, grant=None, grant_request=None,
            **extra)

    def terminate_end(self):
        self.driver().terminate_end(
            context=None, vnf_instance=self.vnf_instance(),
            terminate_vnf_request=types.SimpleNamespace(
                termination_type='FORCEFUL'),
            grant=None, grant_request=None)

    def upgrade(self, package_version, **kwargs):
        """cluster.upgrade.upgrade_cluster as the v2 door calls it: the
        instance's cluster workflow and the new package's install script
        (the sample's at ``package_version``)."""
        feature = cluster_feature.ClusterFeature(self.driver())
        instance = self.vnf_instance()
        workflow = feature._workflow(None, instance,
                                     feature._params(instance))
        return upgrade.upgrade_cluster(
            workflow, standins.script_at(package_version), **kwargs)

    def scale_in(self, host):
        """A SCALE_IN of one Worker as Tacker does it: scale_start (the
        driver drains it), then Heat deletes the group member and its VM."""
        vnfc = self.vnfcs[host.name]
        self.driver().scale_start(
            context=None, vnf_instance=self.vnf_instance(),
            scale_vnf_request=types.SimpleNamespace(
                type='SCALE_IN', aspect_id=WORKER_ASPECT, number_of_steps=1,
                additional_params={}),
            grant=None, grant_request=None,
            scale_out_id_list=[vnfc.member_stack_id], vnf={})
        self.openstack.remove_group_member(self._groups[WORKER_ASPECT],
                                           vnfc.member_stack_id)
        self.testbed.remove_host(host.name)
        del self.vnfcs[host.name]

    def scale_end(self, new_hosts, **request_params):
        """scale_end of a SCALE_OUT that created ``new_hosts`` (workers);
        ``request_params``: the request's additionalParams (credential
        overrides)."""
        self.driver().scale_end(
            context=None, vnf_instance=self.vnf_instance(),
            scale_vnf_request=types.SimpleNamespace(
                type='SCALE_OUT', aspect_id=WORKER_ASPECT,
                number_of_steps=len(new_hosts),
                additional_params=request_params),
            grant=None, grant_request=None,
            scale_out_id_list=[self.vnfcs[h.name].member_stack_id
                               for h in new_hosts],
            vnf={})
