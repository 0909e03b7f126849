"""Dynamic provisioning end to end on one cluster (1 Master, 2 Workers,
the Storage server), its tests in file order: instantiate_end applies the
sample package's csi-driver-nfs and a default StorageClass on the Storage
server's export /volume1/nfs/dynamic, and a re-run changes nothing; a
claim that names no class gets the default one, csi-driver-nfs's
controller (testbed/csi_nfs.py, acting for its pod) creates the claim's
directory through the real NFS data path and the PV, the pod's Worker
mounts it (the node agent) and a file the pod writes is in that
directory on the Storage server's volume; a heal that re-creates the
volume is refused while the claim is Bound, naming the PV and the claim;
a heal that keeps the volume leaves the class and the claim as they were,
the file still there; with ``on_delete: retain`` the directory stays once
the claim is gone.
"""

import contextlib
import json
import shlex

import pytest

from kubernetes_mgmt_pv import exceptions
from testbed import csi_nfs
from testbed import nfs
from testbed import nfs_fuse
from testbed import node_agent
from testbed import virtual_vnf
from tests.functional.conftest import skip_without_testbed
from tests.functional import pod_volumes

EXPORT = '/volume1/nfs/dynamic'
# The testbed's NFS client (libnfs) speaks NFSv4.0 only, not the
# default nfsvers=4.1.
CLASS = {'name': 'nfs-dynamic', 'export_dir': EXPORT,
         'mount_options': list(nfs_fuse.V4_0_MOUNT_OPTIONS),
         'default_class': True}
CLAIM = {'apiVersion': 'v1', 'kind': 'PersistentVolumeClaim',
         'metadata': {'name': 'data', 'namespace': 'default'},
         'spec': {'accessModes': ['ReadWriteMany'],
                  'resources': {'requests': {'storage': '1Gi'}}}}
CLAIM_DIR = EXPORT + '/default/data'


@pytest.fixture(scope='module')
def dynamic():
    skip_without_testbed()
    with virtual_vnf.VirtualCluster(masters=1, workers=2, volumes=1,
                                    install_cluster=True) as virtual:
        virtual.use_storage_classes([CLASS])
        virtual.instantiate_end()
        yield virtual


@pytest.fixture(scope='module')
def provisioning(dynamic):
    """ganesha on the Storage server, csi-driver-nfs's controller and a
    node agent on every node, for the rest of the module."""
    hosts = {host.hostname.lower(): host for host in dynamic.nodes()}
    nfs.start_ganesha(dynamic.host('storage'))
    with csi_nfs.Provisioner(dynamic.kube, hosts.get) as provisioner, \
            contextlib.ExitStack() as agents:
        for host in dynamic.nodes():
            agents.enter_context(node_agent.NodeAgent(dynamic.kube, host))
        yield provisioner


def test_instantiate_end_installs_csi_driver_nfs_and_the_class(dynamic):
    kube, storage = dynamic.kube, dynamic.host('storage')
    storage_class = kube.get('storageclass', 'nfs-dynamic')
    assert storage_class['provisioner'] == 'nfs.csi.k8s.io'
    assert storage_class['parameters'] == {
        'server': storage.ip, 'share': EXPORT,
        'subDir': '${pvc.metadata.namespace}/${pvc.metadata.name}',
        'onDelete': 'retain'}
    assert storage_class['metadata']['annotations'][
        'storageclass.kubernetes.io/is-default-class'] == 'true'
    assert storage_class['mountOptions'] == CLASS['mount_options']
    plugin = kube.get('daemonset', 'csi-nfs-node', 'kube-system')
    assert plugin['status']['numberAvailable'] == 3  # every node
    # A re-run looks, and changes nothing.
    report = dynamic.driver().storage.workflow(
        None, dynamic.vnf_instance()).deploy()
    applied = [outcome for outcome in report.outcomes
               if '/' in outcome.step or
               outcome.step.startswith('StorageClass')]
    assert len(applied) > 5 and not any(o.changed for o in applied), \
        applied


def test_a_claim_of_the_default_class_is_provisioned_on_the_export(
        dynamic, provisioning):
    kube, storage = dynamic.kube, dynamic.host('storage')
    kube.create(CLAIM)
    kube.create(dict(pod_volumes.DEPLOYMENT))
    pod = pod_volumes.running_pod(kube)
    claim = kube.get('pvc', 'data')
    assert claim['spec']['storageClassName'] == 'nfs-dynamic'
    volume = kube.get('pv', claim['spec']['volumeName'])
    assert volume['spec']['csi']['volumeHandle'] == '#'.join((
        storage.ip, EXPORT.strip('/'), 'default/data',
        volume['metadata']['name'], 'retain'))
    worker = dynamic.host(next(
        host.name for host in dynamic.nodes()
        if host.hostname.lower() == pod['spec']['nodeName']))
    path = node_agent.volume_path(pod['metadata']['uid'],
                                  volume['metadata']['name'],
                                  node_agent.CSI)
    worker.run(f'echo written by the pod > {shlex.quote(path)}/pod.txt')
    assert storage.read_file(CLAIM_DIR + '/pod.txt') == \
        'written by the pod\n'


def test_a_heal_that_recreates_the_volume_is_refused_while_bound(dynamic):
    claim = dynamic.kube.get('pvc', 'data')
    assert claim['status']['phase'] == 'Bound'
    with pytest.raises(exceptions.PersistentVolumeInUseError) as caught:
        dynamic.heal_start([dynamic.vnfcs['storage'].vnfc_id])
    assert caught.value.names == [claim['spec']['volumeName']]
    assert caught.value.claims == ['default/data']
    assert dynamic.kube.get('pv', 'nfs-pv1') is not None  # nothing deleted


def test_a_storage_heal_keeping_the_volume_keeps_classes_and_claims(
        dynamic, provisioning):
    """A v2 heal of the Storage VNFC without ``all`` (its volume
    re-attached to the new VM at the same address) goes ahead while the
    claim is Bound: the class and the claim's PV stay as they were, the
    claim's directory and file are on the new VM's mounted volume."""
    kube = dynamic.kube
    claim = kube.get('pvc', 'data')
    before = {(kind, name): kube.get(kind, name)['metadata'][
        'resourceVersion'] for kind, name in (
            ('storageclass', 'nfs-dynamic'),
            ('pv', claim['spec']['volumeName']))}
    storage_vnfc = dynamic.vnfcs['storage'].vnfc_id
    dynamic.heal_start([storage_vnfc], removed_storage=())
    dynamic.replace_host('storage', keep_volumes=True)
    dynamic.heal_end([storage_vnfc], removed_storage=())
    assert {key: kube.get(*key)['metadata']['resourceVersion']
            for key in before} == before
    assert kube.get('pvc', 'data')['status']['phase'] == 'Bound'
    assert dynamic.host('storage').read_file(CLAIM_DIR + '/pod.txt') == \
        'written by the pod\n'


def test_retain_keeps_the_directory_when_the_claim_goes(dynamic,
                                                        provisioning):
    kube, storage = dynamic.kube, dynamic.host('storage')
    name = kube.get('pvc', 'data')['spec']['volumeName']
    kube.delete('deployment', 'app')
    assert kube.wait_for(lambda: not [
        pod for pod in kube.objects('pod')
        if pod['metadata']['name'].startswith('app-')], 60)
    kube.delete('pvc', 'data')
    assert kube.wait_for(lambda: kube.get('pv', name) is None, 60), \
        json.dumps(kube.get('pv', name))
    assert storage.read_file(CLAIM_DIR + '/pod.txt') == \
        'written by the pod\n'
