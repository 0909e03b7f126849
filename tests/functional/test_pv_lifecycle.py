"""Every PV hook end to end: real sshd hosts, ext4 loop volumes, exportfs,
apt from the local cache, the real kubectl, and the real heatclient."""

import logging

import pytest

from kubernetes_mgmt_pv import config
from kubernetes_mgmt_pv import exceptions
from kubernetes_mgmt_pv.remote import managed_block
from testbed import nfs
from testbed.virtual_vnf import dpkg_log_size
from testbed.virtual_vnf import installed
from testbed.virtual_vnf import kubectl
from testbed.virtual_vnf import persistent_volumes
from tests.functional import pod_volumes

PV_NAMES = ['nfs-pv1', 'nfs-pv2', 'nfs-pv3']


def assert_storage_ready(cluster):
    """The checks the user guide tells operators to make after a hook."""
    storage = cluster.host('storage')
    df = storage.run('df -h').stdout
    for device, mount in zip(storage.volumes, cluster.mount_points()):
        assert any(line.split()[0] == device and line.split()[-1] == mount
                   for line in df.splitlines()[1:]), df
    active = {(e.path, e.client)
              for e in nfs.parse_exportfs(storage.run('exportfs -v').stdout)}
    assert active == {(d, cluster.testbed.subnet)
                      for d in cluster.export_dirs()}
    fstab = storage.read_file('/etc/fstab')
    assert fstab.count(managed_block.BEGIN.decode()) == 1
    for mount in cluster.mount_points():
        assert ' %s ext4 defaults,nofail' % mount in fstab


def assert_pvs_available(cluster):
    storage_ip = cluster.host('storage').ip
    volumes = persistent_volumes(cluster.nodes('master')[0])
    assert sorted(volumes) == PV_NAMES
    for name, volume in volumes.items():
        assert volume['status']['phase'] == 'Available', name
        assert volume['spec']['nfs']['server'] == storage_ip
    table = kubectl(cluster.nodes('master')[0], 'get', 'pv')
    assert table.count('Available') == 3, table


def test_instantiate_end_sets_up_storage_clients_and_pvs(instantiated):
    cluster = instantiated
    assert_storage_ready(cluster)
    assert_pvs_available(cluster)
    for node in cluster.nodes():
        assert installed(node, 'nfs-common'), node.name
    assert installed(cluster.host('storage'), 'nfs-kernel-server')
    # The data path: a worker writes through NFS, the file is on the volume.
    storage, worker = cluster.host('storage'), cluster.nodes('worker')[0]
    nfs.start_ganesha(storage)
    export = cluster.export_dirs()[1]
    nfs.nfs_write(worker, storage.ip, export, 'hello.txt', 'written by NFS')
    assert storage.read_file(export + '/hello.txt') == 'written by NFS'
    assert storage.run('stat -c %U ' + export + '/hello.txt').stdout.strip() \
        == 'nobody'
    # A pod's claim of a PV: mounted on its Worker, kept when it moves.
    pod_volumes.assert_pod_volume_follows_the_pod(cluster)


def test_guest_device_names_win_over_novas(cluster):
    """Nova says volume1 is /dev/vdb, but the guest discovered it as
    /dev/vdc (and volume2 as /dev/vdb): the by-id links decide."""
    storage = cluster.host('storage')
    storage.run('mkdir -p /dev/disk/by-id')
    for number, guest_device in ((1, 'vdc'), (2, 'vdb')):
        volume_id = cluster.openstack.resource(
            cluster.stack_id,
            'storage_server_volume%d' % number).physical_resource_id
        storage.run('ln -s ../../%s /dev/disk/by-id/virtio-%s' % (
            guest_device, volume_id[:20]))
    cluster.instantiate_end()
    mounts = storage.run('findmnt -rn -o SOURCE,TARGET').stdout.splitlines()
    assert '/dev/vdc /volume1' in mounts and '/dev/vdb /volume2' in mounts


def test_instantiate_end_again_changes_nothing(instantiated, caplog):
    cluster = instantiated
    storage = cluster.host('storage')
    storage.write_file(cluster.export_dirs()[0] + '/keep.txt', 'precious')
    uuids = storage.run('blkid -s UUID -o value ' +
                        ' '.join(storage.volumes)).stdout
    exports = storage.read_file('/etc/exports')
    dpkg_logs = {h.name: dpkg_log_size(h) for h in cluster.testbed.hosts
                 .values()}
    versions = {n: v['metadata']['resourceVersion'] for n, v in
                persistent_volumes(cluster.nodes('master')[0]).items()}
    caplog.set_level(logging.INFO, logger='kubernetes_mgmt_pv.step_report')

    cluster.instantiate_end()

    outcomes = [r.getMessage() for r in caplog.records
                if r.name == 'kubernetes_mgmt_pv.step_report']
    assert outcomes and not [o for o in outcomes if ' changed' in o], outcomes
    assert storage.read_file(cluster.export_dirs()[0] + '/keep.txt') == \
        'precious'
    assert storage.run('blkid -s UUID -o value ' +
                       ' '.join(storage.volumes)).stdout == uuids
    assert storage.read_file('/etc/exports') == exports
    assert {h.name: dpkg_log_size(h)
            for h in cluster.testbed.hosts.values()} == dpkg_logs
    assert {n: v['metadata']['resourceVersion'] for n, v in
            persistent_volumes(cluster.nodes('master')[0]).items()} == versions
    assert_storage_ready(cluster)


def bind_claim(master):
    """A PersistentVolumeClaim bound to nfs-pv1, as an application makes."""
    master.write_file('/tmp/claim.yaml', CLAIM)
    kubectl(master, 'apply', '-f', '/tmp/claim.yaml')
    kubectl(master, 'wait', '--for=jsonpath={.status.phase}=Bound',
            'pvc/claim1', '--timeout=20s')


def test_heal_storage_server_refuses_while_bound_then_rebuilds(instantiated):
    cluster = instantiated
    master = cluster.nodes('master')[0]
    bind_claim(master)
    storage_vnfc = cluster.vnfcs['storage'].vnfc_id

    with pytest.raises(exceptions.PersistentVolumeInUseError) as caught:
        cluster.heal_start([storage_vnfc])
    assert caught.value.names == ['nfs-pv1']
    assert 'nfs-pv1' in str(caught.value)
    # The Master the PVs were read on, for the failure's host.
    assert caught.value.host == master.ip
    assert sorted(persistent_volumes(master)) == PV_NAMES  # nothing deleted

    kubectl(master, 'delete', 'pvc', 'claim1', '--wait=true')
    cluster.heal_start([storage_vnfc])
    assert persistent_volumes(master) == {}

    old_ip = cluster.host('storage').ip
    cluster.replace_host('storage', same_ip=False)
    assert cluster.host('storage').ip != old_ip
    cluster.heal_end([storage_vnfc])
    assert_storage_ready(cluster)
    assert_pvs_available(cluster)


def test_storage_heal_keeps_the_data_of_a_reattached_volume(instantiated):
    cluster = instantiated
    export = cluster.export_dirs()[0]
    cluster.host('storage').write_file(export + '/keep.txt', 'precious')
    storage_vnfc = cluster.vnfcs['storage'].vnfc_id
    cluster.heal_start([storage_vnfc])
    cluster.replace_host('storage', keep_volumes=True)
    cluster.heal_end([storage_vnfc])
    assert cluster.host('storage').read_file(export + '/keep.txt') == \
        'precious'
    assert_storage_ready(cluster)
    assert_pvs_available(cluster)


def test_storage_heal_that_keeps_the_volume_leaves_the_claims_bound(
        instantiated):
    """A v2 heal of the Storage VNFC without ``all``: Heat replaces the
    server and re-attaches its volumes at the same address. heal_start
    lets it go on while a claim is Bound; heal_end (and its re-run) mounts
    the existing filesystems, exports them again and leaves the PVs."""
    cluster = instantiated
    master, worker = cluster.nodes('master')[0], cluster.nodes('worker')[0]
    bind_claim(master)
    storage = cluster.host('storage')
    export = cluster.export_dirs()[0]  # nfs-pv1's, the claim's
    storage.write_file(export + '/keep.txt', 'precious')
    uuids = storage.run('blkid -s UUID -o value ' +
                        ' '.join(storage.volumes)).stdout
    before = persistent_volumes(master)
    storage_vnfc = cluster.vnfcs['storage'].vnfc_id

    cluster.heal_start([storage_vnfc], removed_storage=())
    assert persistent_volumes(master) == before
    cluster.replace_host('storage', keep_volumes=True)
    storage = cluster.host('storage')
    assert storage.run('findmnt -n ' + export, check=False).returncode != 0
    cluster.heal_end([storage_vnfc], removed_storage=())
    cluster.heal_end([storage_vnfc], removed_storage=())  # a retry

    assert storage.read_file(export + '/keep.txt') == 'precious'
    assert storage.run('blkid -s UUID -o value ' +
                       ' '.join(storage.volumes)).stdout == uuids
    assert_storage_ready(cluster)
    after = persistent_volumes(master)
    assert {name: volume['metadata']['resourceVersion']
            for name, volume in after.items()} == {
        name: volume['metadata']['resourceVersion']
        for name, volume in before.items()}
    assert after['nfs-pv1']['status']['phase'] == 'Bound'
    # The claim's export is served again: writable, the old file there.
    nfs.start_ganesha(storage)
    nfs.nfs_write(worker, storage.ip, export, 'after.txt', 'healed')
    assert storage.read_file(export + '/after.txt') == 'healed'
    assert nfs.nfs_read(worker, storage.ip, export, 'keep.txt') == 'precious'


def test_scale_out_installs_nfs_client_only_on_new_workers(instantiated):
    cluster = instantiated
    existing = {h.name: dpkg_log_size(h) for h in cluster.nodes()}
    new = [cluster.add_node('worker') for _ in range(2)]
    for host in new:
        assert not installed(host, 'nfs-common')

    cluster.scale_end(new)

    for host in new:
        assert installed(host, 'nfs-common'), host.name
    assert {name: dpkg_log_size(cluster.host(name))
            for name in existing} == existing


@pytest.mark.parametrize('node', ['worker1', 'master1'])
def test_heal_of_a_node_installs_nfs_client_on_the_new_vm(instantiated, node):
    cluster = instantiated
    vnfc_id = cluster.replace_host(node)
    assert not installed(cluster.host(node), 'nfs-common')
    cluster.heal_start([vnfc_id])
    cluster.heal_end([vnfc_id])
    assert installed(cluster.host(node), 'nfs-common')
    assert_pvs_available(cluster)


def test_entire_cluster_heal_refuses_while_bound(instantiated):
    """An entire-cluster heal re-creates the storage VM and its volume,
    so, like the storage-server heal, it refuses while a PV is Bound."""
    cluster = instantiated
    master = cluster.nodes('master')[0]
    bind_claim(master)
    with pytest.raises(exceptions.PersistentVolumeInUseError) as caught:
        cluster.heal_start()
    assert caught.value.names == ['nfs-pv1']
    volumes = persistent_volumes(master)
    assert sorted(volumes) == PV_NAMES  # nothing deleted
    assert volumes['nfs-pv1']['status']['phase'] == 'Bound'


def test_entire_cluster_heal_rebuilds_storage_clients_and_pvs(instantiated):
    cluster = instantiated
    cluster.heal_start()
    for name in list(cluster.testbed.hosts):
        cluster.replace_host(name, same_ip=(name != 'storage'))
    cluster.heal_end()
    assert_storage_ready(cluster)
    assert_pvs_available(cluster)
    for node in cluster.nodes():
        assert installed(node, 'nfs-common'), node.name


# -- guards that keep data ---------------------------------------------------

def test_mount_over_a_non_empty_directory_is_refused(cluster):
    storage = cluster.host('storage')
    storage.run('mkdir -p /volume2 && echo precious > /volume2/keep.txt')
    fstab = storage.read_file('/etc/fstab')
    with pytest.raises(exceptions.NodeStepError) as caught:
        cluster.instantiate_end()
    message = str(caught.value)
    assert 'mount /volume2 failed on %s: /volume2 is not empty' % storage.ip \
        in message, message
    assert "'keep.txt'" in message
    # Every mount point is checked first: volume1 is neither formatted nor
    # mounted either.
    mounts = storage.run('findmnt -rn -o TARGET').stdout.split()
    assert '/volume1' not in mounts and '/volume2' not in mounts
    assert all(storage.run('blkid -p ' + device, check=False).returncode == 2
               for device in storage.volumes)
    assert storage.read_file('/etc/fstab') == fstab
    assert storage.read_file('/volume2/keep.txt') == 'precious\n'

    storage.run('rm /volume2/keep.txt')
    cluster.instantiate_end()
    assert_storage_ready(cluster)


# Data that blkid knows no signature of, as a user would leave it: a raw
# tar stream at the start of the volume, or a few bytes in its last MiB
# (where a GPT keeps its backup header).
WRITE_TAR = ('mkdir -p /srv/data && echo precious > /srv/data/keep.txt && '
             'tar -C /srv/data -cf {device} keep.txt')
WRITE_TAIL = ('printf precious | dd of={device} bs=1 conv=notrunc '
              'status=none seek=$(($(blockdev --getsize64 {device}) - 4096))')


@pytest.mark.parametrize('write, found', [
    (WRITE_TAR, 'data in its first MiB'),
    (WRITE_TAIL, 'data in its last MiB'),
])
def test_data_without_a_signature_is_never_formatted(cluster, write, found):
    storage = cluster.host('storage')
    device = storage.volumes[1]
    storage.run(write.format(device=device))
    before = storage.run('sha256sum %s' % device).stdout
    assert storage.run('blkid -p %s' % device, check=False).returncode == 2
    with pytest.raises(exceptions.NodeStepError) as caught:
        cluster.instantiate_end()
    message = str(caught.value)
    assert ('format {device} failed on {ip}: {device} holds no filesystem '
            'signature, but {found}; refusing to format it'.format(
                device=device, ip=storage.ip, found=found)) in message, message
    # Decided before any volume was formatted or mounted: volume1, blank,
    # is untouched too, and the data is as it was.
    mounts = storage.run('findmnt -rn -o TARGET').stdout.split()
    assert '/volume1' not in mounts and '/volume2' not in mounts
    assert storage.run('blkid -p %s' % storage.volumes[0],
                       check=False).returncode == 2
    assert storage.run('sha256sum %s' % device).stdout == before
    if write == WRITE_TAR:
        assert storage.run('tar -xOf %s keep.txt' % device).stdout == \
            'precious\n'

    storage.run('wipefs -a %s && dd if=/dev/zero of=%s bs=1M count=1 '
                'conv=notrunc status=none' % (device, device))
    if write == WRITE_TAIL:
        storage.run('dd if=/dev/zero of={device} bs=1 count=4096 '
                    'conv=notrunc status=none seek=$(($(blockdev '
                    '--getsize64 {device}) - 4096))'.format(device=device))
    cluster.instantiate_end()  # wiped deliberately: formatted now
    assert_storage_ready(cluster)


def test_export_directory_off_its_volume_is_neither_chowned_nor_exported(
        instantiated):
    """An export directory replaced by a symlink to data elsewhere."""
    cluster = instantiated
    storage = cluster.host('storage')
    export = cluster.export_dirs()[0]
    storage.run('mkdir -p /srv/private && echo secret > /srv/private/data')
    storage.run('rm -r %s && ln -s /srv/private %s' % (export, export))
    with pytest.raises(exceptions.NodeStepError) as caught:
        cluster.instantiate_end()
    message = str(caught.value)
    assert 'export directories failed on %s: %s is on device' % (
        storage.ip, export) in message, message
    assert 'not on the volume mounted on /volume1' in message
    assert storage.run('stat -c %U:%G /srv/private').stdout.strip() == \
        'root:root'


def test_export_to_host_name_in_capitals_converges(cluster, caplog):
    """exportfs -v lists WORKER1 as worker1; a re-run changes nothing.
    (The subnet, exported too, grants the other nodes.)"""
    params = cluster.additional_params()
    params['k8s_cluster_installation_param']['storage_server'][
        'nfs_server_setup_params'].append(
            {'export_dir': cluster.export_dirs()[0], 'export_to': 'WORKER1'})
    driver = cluster.driver()
    driver.instantiate_end(None, cluster.vnf_instance(), _request(params),
                           None, None)
    listed = cluster.host('storage').run('exportfs -v').stdout
    assert 'worker1(' in listed and 'WORKER1' not in listed
    caplog.set_level(logging.INFO, logger='kubernetes_mgmt_pv.step_report')
    driver.instantiate_end(None, cluster.vnf_instance(), _request(params),
                           None, None)
    outcomes = [r.getMessage() for r in caplog.records
                if r.name == 'kubernetes_mgmt_pv.step_report']
    assert outcomes and not [o for o in outcomes if ' changed' in o], outcomes


# -- bad input: a clear error, and the hosts exactly as they were ------------

def untouched(cluster):
    storage = cluster.host('storage')
    return (storage.run('blkid -p %s' % storage.volumes[0],
                        check=False).returncode == 2 and
            'kubernetes-mgmt-pv' not in storage.run(
                'cat /etc/exports', check=False).stdout and
            not any(installed(h, 'nfs-common') for h in cluster.nodes()) and
            persistent_volumes(cluster.nodes('master')[0]) == {})


def test_shell_metacharacters_in_export_path_are_refused(cluster, logins):
    params = cluster.additional_params()
    storage = params['k8s_cluster_installation_param']['storage_server']
    storage['nfs_server_setup_params'][0]['export_dir'] = '/volume1/$(reboot)'
    with pytest.raises(exceptions.ParameterErrors) as caught:
        cluster.driver().instantiate_end(
            None, cluster.vnf_instance(), _request(params), None, None)
    assert ('storage_server.nfs_server_setup_params[0].export_dir'
            in str(caught.value))
    assert logins == []
    assert untouched(cluster)


def test_missing_manifest_is_refused(cluster):
    params = cluster.additional_params()
    params['k8s_cluster_installation_param']['pv_registration_params'][2][
        'pv_manifest_file_path'] = 'Files/kubernetes/missing.yaml'
    with pytest.raises(exceptions.ParameterErrors) as caught:
        cluster.driver().instantiate_end(
            None, cluster.vnf_instance(), _request(params), None, None)
    assert 'pv_registration_params[2].pv_manifest_file_path' in \
        str(caught.value)
    assert 'missing.yaml' in str(caught.value)
    assert untouched(cluster)


def test_unreachable_worker_stops_before_any_change(cluster):
    worker = cluster.vnfcs['worker2']
    cluster.openstack.remove_resource(worker.member_stack_id, worker.cp_name)
    unused_ip = cluster.testbed.subnet.rsplit('.', 1)[0] + '.250'
    cluster.openstack.add_port(worker.member_stack_id, worker.cp_name,
                               fixed_ips=[unused_ip],
                               device_id=worker.server_id)
    with pytest.raises(exceptions.NodeStepError) as caught:
        cluster.instantiate_end()
    assert list(caught.value.failures) == [unused_ip]
    assert 'cannot connect' in str(caught.value)
    assert untouched(cluster)


def test_wrong_password_stops_before_any_change(cluster):
    params = cluster.additional_params()
    params['k8s_cluster_installation_param']['master_node'][
        'password'] = 'not-the-password'
    with pytest.raises(exceptions.NodeStepError) as caught:
        cluster.driver().instantiate_end(
            None, cluster.vnf_instance(), _request(params), None, None)
    assert 'authentication failed' in str(caught.value)
    assert 'not-the-password' not in str(caught.value)
    assert untouched(cluster)


def test_a_master_without_admin_conf_is_refused_before_any_change(cluster):
    """kubectl runs as root with /etc/kubernetes/admin.conf, never with the
    login user's ~/.kube/config: the Master still has that one."""
    master = cluster.nodes('master')[0]
    master.run('rm /etc/kubernetes/admin.conf')
    with pytest.raises(exceptions.StepError) as caught:
        cluster.instantiate_end()
    assert isinstance(caught.value.cause, exceptions.ClusterInstallError)
    message = str(caught.value)
    assert message.startswith('PersistentVolume registration failed on %s: '
                              '/etc/kubernetes/admin.conf is missing'
                              % master.ip)
    assert 'every Master' in message
    assert untouched(cluster)

    # Done as the message says, without the login user's copy: it works.
    master.run('install -m 600 /home/ubuntu/.kube/config '
               '/etc/kubernetes/admin.conf && rm /home/ubuntu/.kube/config')
    cluster.instantiate_end()
    assert sorted(volume['metadata']['name'] for volume in
                  cluster.kube.objects('pv')) == PV_NAMES


def _request(params):
    import types
    return types.SimpleNamespace(additional_params=params)


CLAIM = """apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: claim1
  namespace: default
spec:
  accessModes: [ReadWriteOnce]
  resources:
    requests:
      storage: 1Gi
  volumeName: nfs-pv1
  storageClassName: ""
"""


def test_pv_that_never_becomes_available_is_rolled_back(cluster):
    config.CONF.set_override('pv_available_timeout', 3, config.GROUP_NAME)
    cluster.kube.keep_pending('nfs-pv2')
    with pytest.raises(exceptions.StepError) as caught:
        cluster.instantiate_end()
    assert isinstance(caught.value.cause, exceptions.PersistentVolumeError)
    message = str(caught.value)
    assert message.startswith('PersistentVolume registration failed on %s: '
                              % cluster.nodes('master')[0].ip)
    assert 'nfs-pv2 (Pending)' in message and 'rolled back: nfs-pv2' in message
    assert 'nfs-pv1' not in message.split('rolled back')[0]
    volumes = persistent_volumes(cluster.nodes('master')[0])
    assert sorted(volumes) == ['nfs-pv1', 'nfs-pv3']

    cluster.kube.release_pending('nfs-pv2')
    cluster.instantiate_end()  # the re-run completes what failed
    assert_pvs_available(cluster)


def test_export_to_that_leaves_a_worker_out_is_refused_before_any_change(
        cluster):
    master, worker1, worker2 = (cluster.host(name) for name in
                                ('master1', 'worker1', 'worker2'))
    cluster.export_to = [master.ip, worker1.hostname]  # an address, a name
    with pytest.raises(exceptions.StorageSetupError) as caught:
        cluster.instantiate_end()
    message = str(caught.value)
    assert 'worker %s (worker_instance/' % worker2.ip in message, message
    for export in cluster.export_dirs():
        assert "%s by export_to '%s', '%s'" % (
            export, master.ip, worker1.hostname) in message, message
    granted = ('master %s' % master.ip, 'worker %s' % worker1.ip)
    assert not [node for node in granted if node in message], message
    assert untouched(cluster)
    assert not installed(cluster.host('storage'), 'nfs-kernel-server')


def test_wildcard_export_to_is_matched_on_the_storage_servers_names(
        cluster):
    """The Storage server's resolver names every node: master? and
    worker? grant them all."""
    cluster.export_to = ['master?', 'WORKER?']
    cluster.instantiate_end()
    active = {(e.path, e.client) for e in nfs.parse_exportfs(
        cluster.host('storage').run('exportfs -v').stdout)}
    assert active == {(d, c) for d in cluster.export_dirs()
                      for c in ('master?', 'WORKER?')}
    assert_pvs_available(cluster)


def test_scale_out_of_a_worker_outside_the_exports_is_refused(cluster):
    cluster.export_to = [host.ip for host in cluster.nodes()]
    cluster.instantiate_end()
    new = cluster.add_node('worker')
    with pytest.raises(exceptions.StorageSetupError) as caught:
        cluster.scale_end([new])
    assert 'worker %s (' % new.ip in str(caught.value)
    assert not installed(new, 'nfs-common')


def test_unsupported_os_is_refused_before_any_change(cluster):
    cluster.nodes('worker')[1].write_file(
        '/etc/os-release', 'ID=centos\nVERSION_ID="7"\n')
    with pytest.raises(exceptions.NodeStepError) as caught:
        cluster.instantiate_end()
    assert 'centos 7 is not supported' in str(caught.value)
    assert untouched(cluster)
