"""csi-driver-nfs's controller in the testbed: its external-provisioner
and its CreateVolume/DeleteVolume, acting for the pod of the Deployment
kube-system/csi-nfs-controller while that pod runs.

For a Pending claim of a StorageClass whose provisioner is
nfs.csi.k8s.io, it creates the class's subdirectory (``subDir`` with the
claim's namespace and name put in) inside the class's share on the NFS
server, through the real data path: nfs_fuse.py mounts the share in the
host of the controller pod's Node (testbed/node_agent.py, libnfs to the
Storage server's nfs-ganesha), as the controller mounts it. It then
creates the PV bound to the claim, with the driver's volumeHandle
(``server#share#subdir#pv name#onDelete``) and volumeAttributes, the
class's mountOptions and reclaim policy. When a claim is gone and its PV
Released, it applies the class's ``onDelete`` to the directory (delete:
removed; archive: renamed ``archived-<subdir>``; retain: kept) and
deletes the PV. The stand-in is a thread of the test process, like the
node agents; nothing happens while no controller pod runs.
"""

import dataclasses
import logging
import shlex
import threading

from testbed import node_agent

LOG = logging.getLogger(__name__)

DRIVER = 'nfs.csi.k8s.io'
CONTROLLER = ('kube-system', 'csi-nfs-controller')
PROVISIONED_BY = 'pv.kubernetes.io/provisioned-by'
WORK_DIR = '/tmp/csi-nfs-controller'


@dataclasses.dataclass(frozen=True)
class Volume:
    """One provisioned volume, as the driver's volume id names it."""
    server: str
    share: str
    subdir: str
    name: str  # the PV's
    on_delete: str

    @property
    def handle(self) -> str:
        on_delete = self.on_delete if self.on_delete in (
            'retain', 'archive') else ''
        return '#'.join((self.server, self.share.strip('/'),
                         self.subdir.strip('/'), self.name, on_delete))

    @classmethod
    def from_handle(cls, handle: str) -> 'Volume':
        server, share, subdir, name, on_delete = (handle.split('#') +
                                                  [''] * 5)[:5]
        return cls(server, '/' + share, subdir, name, on_delete or 'delete')


def subdir_for(template: str, claim: dict, pv_name: str) -> str:
    """The class's subDir with the claim's metadata put in, as the
    external-provisioner's --extra-create-metadata lets the driver."""
    meta = claim['metadata']
    return (template.replace('${pvc.metadata.namespace}', meta['namespace'])
            .replace('${pvc.metadata.name}', meta['name'])
            .replace('${pv.metadata.name}', pv_name))


def volume_for(storage_class: dict, claim: dict) -> Volume:
    parameters = {key.lower(): value for key, value
                  in (storage_class.get('parameters') or {}).items()}
    name = f'pvc-{claim["metadata"]["uid"]}'
    template = parameters.get('subdir')
    return Volume(parameters['server'], parameters['share'],
                  subdir_for(template, claim, name) if template else name,
                  name, parameters.get('ondelete', 'delete'))


def pv_for(storage_class: dict, claim: dict, volume: Volume) -> dict:
    meta = claim['metadata']
    return {
        'apiVersion': 'v1', 'kind': 'PersistentVolume',
        'metadata': {'name': volume.name,
                     'annotations': {PROVISIONED_BY: DRIVER}},
        'spec': {
            'capacity': {'storage': claim['spec']['resources']['requests'][
                'storage']},
            'accessModes': list(claim['spec']['accessModes']),
            'persistentVolumeReclaimPolicy': storage_class.get(
                'reclaimPolicy', 'Delete'),
            'storageClassName': storage_class['metadata']['name'],
            'mountOptions': list(storage_class.get('mountOptions') or []),
            'volumeMode': claim['spec'].get('volumeMode', 'Filesystem'),
            'claimRef': {'kind': 'PersistentVolumeClaim', 'apiVersion': 'v1',
                         'namespace': meta['namespace'],
                         'name': meta['name'], 'uid': meta['uid']},
            'csi': {'driver': DRIVER, 'volumeHandle': volume.handle,
                    'volumeAttributes': {
                        'server': volume.server, 'share': volume.share,
                        'subdir': volume.subdir,
                        'csi.storage.k8s.io/pv/name': volume.name,
                        'csi.storage.k8s.io/pvc/name': meta['name'],
                        'csi.storage.k8s.io/pvc/namespace':
                            meta['namespace']}}}}


class Provisioner:
    """The stand-in for ``kube`` (a KubeApiServer); ``host_of(node
    name)`` gives the test host of a Node. Use as a context manager."""

    def __init__(self, kube, host_of, interval=0.3):
        self.kube, self.host_of = kube, host_of
        self.interval = interval
        self.failures = {}  # claim uid or PV name -> why it failed
        self._installed = set()
        self._stopping = threading.Event()
        self._thread = None

    def __enter__(self):
        self._thread = threading.Thread(target=self._run, daemon=True,
                                        name='csi-nfs-provisioner')
        self._thread.start()
        return self

    def __exit__(self, *exc_info):
        self._stopping.set()
        self._thread.join()

    def _run(self):
        while not self._stopping.wait(self.interval):
            try:
                self.sync()
            except Exception:  # a host gone is retried, as a pod restarts
                LOG.exception('csi-nfs provisioner')

    def controller_host(self):
        """The host of the running controller pod's Node, or None."""
        namespace, name = CONTROLLER
        for pod in self.kube.objects('pod', namespace):
            if pod['metadata']['name'].startswith(name + '-') and \
                    pod['status'].get('phase') == 'Running' and \
                    not pod['metadata'].get('deletionTimestamp'):
                return self.host_of(pod['spec']['nodeName'])
        return None

    def sync(self):
        host = self.controller_host()
        if host is None:
            return
        classes = {c['metadata']['name']: c
                   for c in self.kube.objects('storageclass')
                   if c.get('provisioner') == DRIVER}
        provisioned = {pv['metadata']['name']: pv
                       for pv in self.kube.objects('pv')}
        for claim in self.kube.objects('pvc'):
            storage_class = classes.get(claim['spec'].get('storageClassName'))
            name = f'pvc-{claim["metadata"]["uid"]}'
            if storage_class and claim['status'].get('phase') == 'Pending' \
                    and name not in provisioned \
                    and claim['metadata']['uid'] not in self.failures:
                self._provision(host, storage_class, claim)
        for pv in provisioned.values():
            if (pv['metadata'].get('annotations') or {}).get(
                    PROVISIONED_BY) == DRIVER and \
                    pv['status'].get('phase') == 'Released' and \
                    pv['metadata']['name'] not in self.failures:
                self._delete(host, pv)

    def _provision(self, host, storage_class, claim):
        volume = volume_for(storage_class, claim)
        try:
            self._on_share(host, volume, 'mkdir -p -- {dir}')
        except Exception as error:
            self.failures[claim['metadata']['uid']] = str(error)
            LOG.error('csi-nfs provisioner: claim %s/%s: %s',
                      claim['metadata']['namespace'],
                      claim['metadata']['name'], error)
            return
        self.kube.create(pv_for(storage_class, claim, volume))

    def _delete(self, host, pv):
        volume = Volume.from_handle(pv['spec']['csi']['volumeHandle'])
        command = {'retain': None, 'delete': 'rm -rf -- {dir}',
                   'archive': 'mv -- {dir} {archived}'}.get(volume.on_delete)
        try:
            if command:
                self._on_share(host, volume, command)
        except Exception as error:
            self.failures[pv['metadata']['name']] = str(error)
            LOG.error('csi-nfs provisioner: PV %s: %s',
                      pv['metadata']['name'], error)
            return
        self.kube.delete('pv', pv['metadata']['name'])

    def _on_share(self, host, volume, command):
        """Run ``command`` ({dir}: the volume's directory, {archived}: its
        archived name) in the host with the share mounted there."""
        if host.name not in self._installed:
            node_agent.install_fuse(host)
            self._installed.add(host.name)
        mount = node_agent.NfsMount(f'{WORK_DIR}/{volume.name}',
                                    volume.server, volume.share, ())
        node_agent.fuse_mount(host, mount)
        try:
            parent, _, leaf = volume.subdir.rpartition('/')
            archived = '/'.join(filter(None, (parent, 'archived-' + leaf)))
            host.run('cd {} && {}'.format(
                shlex.quote(mount.path), command.format(
                    dir=shlex.quote(volume.subdir),
                    archived=shlex.quote(archived))))
        finally:
            node_agent.fuse_unmount(host, mount.path)
            host.run(f'rmdir {shlex.quote(mount.path)}', check=False)
