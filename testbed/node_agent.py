"""The node agent: in the kubelet's place on a test host, it mounts the
NFS volumes of the pods scheduled to the host's Node.

For each pod bound to its Node whose claims are Bound, it mounts the
export of each claim's PersistentVolume (its server, path and
mountOptions) at the kubelet's pod-volume path
``/var/lib/kubelet/pods/<pod uid>/volumes/kubernetes.io~nfs/<PV name>``
inside the host, with testbed/nfs_fuse.py (FUSE over libnfs: the hosts
have no kernel NFS client), then tells the test API server, which only
then runs the pod. When the pod is deleted it unmounts them, and the
pod's deletion completes only after that. It registers its Node if
the cluster has none of that name.

The agent itself is a thread of the test process acting for one host
(as the API server's controllers act for the kubelets); the mounts and
the FUSE processes are in the host, so they go with it when it dies.
"""

import dataclasses
import logging
import os
import shlex
import threading

from testbed import hosts
from testbed import polling

LOG = logging.getLogger(__name__)
FUSE_SCRIPT = '/usr/lib/testbed/nfs_fuse.py'
CSI_NFS_DRIVER = 'nfs.csi.k8s.io'
NFS, CSI = 'nfs', 'csi'  # the kubelet's volume plugins for NFS PVs
PODS_DIR = '/var/lib/kubelet/pods'
_SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                       'nfs_fuse.py')


@dataclasses.dataclass(frozen=True)
class NfsMount:
    """One NFS volume of a pod, where the kubelet would mount it."""
    path: str
    server: str
    export: str
    options: tuple


def volume_path(pod_uid: str, pv_name: str, plugin: str = NFS) -> str:
    """Where the kubelet mounts a pod's volume: the nfs plugin's path, or
    a CSI volume's ``mount`` directory."""
    volumes = f'{PODS_DIR}/{pod_uid}/volumes'
    if plugin == CSI:
        return f'{volumes}/kubernetes.io~csi/{pv_name}/mount'
    return f'{volumes}/kubernetes.io~nfs/{pv_name}'


def pod_mounts(pod: dict, claims: dict, volumes: dict):
    """The NFS mounts a pod needs, or None while one of its claims is not
    Bound. ``claims``: (namespace, name) -> PVC; ``volumes``: name -> PV.
    A claim's PV without ``nfs`` needs no mount here."""
    mounts = []
    namespace = pod['metadata']['namespace']
    for volume in pod['spec'].get('volumes') or []:
        claim_name = (volume.get('persistentVolumeClaim') or {}).get(
            'claimName')
        if not claim_name:
            continue
        claim = claims.get((namespace, claim_name))
        if claim is None or claim['status'].get('phase') != 'Bound':
            return None
        pv = volumes.get(claim['spec'].get('volumeName'))
        if pv is None:
            return None
        source = nfs_source(pv)
        if source:
            server, export, read_only, plugin = source
            options = tuple(pv['spec'].get('mountOptions') or ())
            if read_only or volume['persistentVolumeClaim'].get('readOnly'):
                options += ('ro',)
            mounts.append(NfsMount(
                volume_path(pod['metadata']['uid'], pv['metadata']['name'],
                            plugin), server, export, options))
    return mounts


def nfs_source(pv: dict):
    """(server, export, read only, kubelet plugin) of an NFS PV, static
    or provisioned by csi-driver-nfs (its node plugin mounts
    server:share/subdir); None for another kind of volume."""
    spec = pv['spec']
    if spec.get('nfs'):
        nfs = spec['nfs']
        return nfs['server'], nfs['path'], bool(nfs.get('readOnly')), NFS
    csi = spec.get('csi') or {}
    if csi.get('driver') == CSI_NFS_DRIVER:
        attributes = csi.get('volumeAttributes') or {}
        share = attributes.get('share', '').rstrip('/')
        subdir = attributes.get('subdir', '').strip('/')
        return (attributes.get('server'),
                f'{share}/{subdir}' if subdir else share or '/',
                bool(csi.get('readOnly')), CSI)
    return None


class NodeAgent:
    """The node agent of one host, for the Node ``node_name`` of the test
    API server ``kube``. Use as a context manager, or start() and
    stop()."""

    def __init__(self, kube, host, node_name=None, interval=0.3):
        self.kube, self.host = kube, host
        self.node_name = node_name or host.hostname.lower()
        self.interval = interval
        self.failures = {}  # pod uid -> why its volumes could not mount
        self._mounted = {}  # pod uid -> [NfsMount]
        self._stopping = threading.Event()
        self._thread = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc_info):
        self.stop()

    def start(self):
        install_fuse(self.host)
        if self.kube.get('node', self.node_name) is None:
            self.kube.create(self._node())
        self.kube.attach_node_agent(self.node_name)
        self._thread = threading.Thread(
            target=self._run, daemon=True,
            name=f'node-agent-{self.node_name}')
        self._thread.start()
        return self

    def _node(self) -> dict:
        """The Node a kubelet registers when none is there (a cluster the
        testbed made without the kubeadm stand-ins)."""
        return {'apiVersion': 'v1', 'kind': 'Node',
                'metadata': {'name': self.node_name, 'labels': {
                    'kubernetes.io/hostname': self.node_name,
                    'kubernetes.io/os': 'linux'}},
                'status': {
                    'addresses': [{'type': 'InternalIP',
                                   'address': self.host.ip},
                                  {'type': 'Hostname',
                                   'address': self.node_name}],
                    'conditions': [{'type': 'Ready', 'status': 'True',
                                    'reason': 'KubeletReady'}]}}

    def stop(self):
        """Stop watching (the mounts stay, as a stopped kubelet's do)."""
        self._stopping.set()
        if self._thread is not None:
            self._thread.join()

    def mounted(self, pod_uid: str) -> list:
        return list(self._mounted.get(pod_uid, ()))

    def _run(self):
        while not self._stopping.wait(self.interval):
            try:
                self.sync()
            except Exception:  # a host gone is retried, as a kubelet would
                LOG.exception('node agent of %s', self.node_name)

    def sync(self):
        """One pass: mount for new pods, unmount for the ones going."""
        pods = {pod['metadata']['uid']: pod
                for pod in self.kube.objects('pod')
                if pod['spec'].get('nodeName') == self.node_name}
        claims = {(pvc['metadata']['namespace'], pvc['metadata']['name']):
                  pvc for pvc in self.kube.objects('pvc')}
        volumes = {pv['metadata']['name']: pv
                   for pv in self.kube.objects('pv')}
        for uid in list(self._mounted):
            pod = pods.get(uid)
            if pod is None or pod['metadata'].get('deletionTimestamp'):
                for mount in self._mounted.pop(uid):
                    fuse_unmount(self.host, mount.path)
                self.host.run(f'rm -rf {PODS_DIR}/{uid}')
                self.kube.volumes_unmounted(uid)
        for uid, pod in pods.items():
            if (uid in self._mounted or uid in self.failures
                    or pod['metadata'].get('deletionTimestamp')
                    or pod['status'].get('phase') != 'Pending'):
                continue
            mounts = pod_mounts(pod, claims, volumes)
            if mounts is None:  # a claim not Bound yet
                continue
            done = []
            try:
                for mount in mounts:
                    fuse_mount(self.host, mount)
                    done.append(mount)
            except (hosts.CommandError, polling.WaitTimeout) as error:
                self.failures[uid] = str(error)
                LOG.error('node agent of %s: volumes of pod %s/%s: %s',
                          self.node_name, pod['metadata']['namespace'],
                          pod['metadata']['name'], error)
                for mount in done:
                    fuse_unmount(self.host, mount.path)
                continue
            self._mounted[uid] = mounts
            self.kube.volumes_mounted(uid)


def install_fuse(host) -> None:
    """nfs_fuse.py and /dev/fuse in the host."""
    with open(_SOURCE) as handle:
        script = handle.read()
    host.run(f'mkdir -p {os.path.dirname(FUSE_SCRIPT)} && '
             '{ [ -e /dev/fuse ] || mknod -m 666 /dev/fuse c 10 229; }')
    host.write_file(FUSE_SCRIPT, script)


def fuse_mount(host, mount: NfsMount) -> None:
    """Start nfs_fuse.py in the host and wait for its mount; the error
    names the export and shows its output if it ends first."""
    path = shlex.quote(mount.path)
    log, pid = shlex.quote(mount.path + '.log'), \
        shlex.quote(mount.path + '.pid')
    args = ' '.join(shlex.quote(arg) for arg in (
        mount.server, mount.export, mount.path, ','.join(mount.options)))
    host.run(f'mkdir -p {path} && {{ setsid /usr/bin/python3 '
             f'{FUSE_SCRIPT} {args} > {log} 2>&1 < /dev/null & '
             f'echo $! > {pid}; }}')

    def mounted():
        if host.run(f'findmnt -n {path}', check=False).returncode == 0:
            return True
        if host.run(f'kill -0 $(cat {pid})', check=False).returncode:
            raise hosts.CommandError(
                1, f'nfs_fuse {mount.server}:{mount.export}',
                host.run(f'cat {log}', check=False).stdout, '')
        return False
    polling.wait_until(mounted, f'{mount.path} on {host.name}', timeout=30)


def fuse_unmount(host, path: str) -> None:
    path = shlex.quote(path)
    host.run(f'umount {path} || umount -l {path}', check=False)
