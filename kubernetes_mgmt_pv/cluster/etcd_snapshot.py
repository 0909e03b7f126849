"""etcd snapshots taken before the control plane changes.

Before ``kubeadm upgrade apply`` and before a Master's etcd member is
removed (heal, scale-in), ``etcdctl snapshot save`` runs on the Master
the driver works through, against its local member with the client
certificate kubeadm left there (``etcd.etcdctl``). The file goes to
``DIRECTORY`` on that Master: root's, the directory 0700 and each file
0600 (it holds every Secret of the cluster), named
``etcd-<UTC time>-<reason>.db``.

When the VNF has a Storage server, a copy goes to ``.etcd-snapshots`` at
the top of one of its volumes (``storage_directory``): on the Cinder
volume, outside every NFS export (no PV and no NFS client sees it), so
the snapshot survives the loss of every Master. The copy is streamed
through the driver (``relay``) and checked against the SHA-256 taken on
the Master before it replaces anything.

Each place keeps the newest ``etcd_snapshot_keep`` of the driver's
snapshot files (``expired``); files of other names are left alone.
A snapshot that cannot be taken or copied fails the step before the
change it protects; only a Storage server that does not answer at all
(down, or healed by the same request) gets no copy, with a warning.
"""

import contextlib
import dataclasses
import datetime
import re

from oslo_log import log as logging

from kubernetes_mgmt_pv.cluster import etcd
from kubernetes_mgmt_pv import exceptions
from kubernetes_mgmt_pv import flow
from kubernetes_mgmt_pv.remote import relay
from kubernetes_mgmt_pv.request import param_checks
from kubernetes_mgmt_pv import step_report

LOG = logging.getLogger(__name__)

DIRECTORY = '/var/backups/etcd-snapshots'
STORAGE_DIRECTORY = '.etcd-snapshots'
UPGRADE, MEMBER_REMOVAL = 'upgrade', 'member-removal'
STEP, COPY_STEP = 'etcd snapshot', 'etcd snapshot copy'
_NAME = re.compile(r'etcd-(\d{8}T\d{6}Z)-([a-z][a-z-]{0,30})\.db')
_DIGEST = re.compile(r'[0-9a-f]{64}')
_LISTED = 1000  # names of a listing looked at: the rest is not ours

# Takes the snapshot root-only; prints its SHA-256, then the directory.
_SAVE = r'''set -eu
dir=$1 name=$2
shift 2
umask 077
mkdir -p -- "$dir"
chown root:root -- "$dir"
chmod 0700 -- "$dir"
"$@" "$dir/$name" >/dev/null
chmod 0600 -- "$dir/$name"
sha256sum -- "$dir/$name" | cut -d' ' -f1
ls -1A -- "$dir"
'''
# Keeps standard input as the copy once its SHA-256 matches, only on the
# mounted volume; prints the directory.
_KEEP = r'''set -eu
mount=$1 dir=$2 name=$3 sum=$4
if ! mountpoint -q -- "$mount"; then
    echo "$mount is not mounted: no copy on the root disk" >&2; exit 3
fi
umask 077
mkdir -p -- "$dir"
chown root:root -- "$dir"
chmod 0700 -- "$dir"
tmp="$dir/.$name.part"
trap 'rm -f -- "$tmp"' EXIT
cat > "$tmp"
echo "$sum  $tmp" | sha256sum -c --status - || {
    echo "the copy arrived incomplete" >&2; exit 1; }
chmod 0600 -- "$tmp"
mv -f -- "$tmp" "$dir/$name"
trap - EXIT
ls -1A -- "$dir"
'''


@dataclasses.dataclass(frozen=True)
class Snapshot(object):
    """Where a snapshot was kept: host and path, and the copy's."""
    host: str
    path: str
    copy_host: str = None
    copy_path: str = None

    def places(self):
        places = ['%s:%s' % (self.host, self.path)]
        if self.copy_path:
            places.append('%s:%s' % (self.copy_host, self.copy_path))
        return places

    def fields(self):
        """What userScriptErrHandlingData keeps of it."""
        found = {'host': self.host, 'path': self.path}
        if self.copy_path:
            found.update(copyHost=self.copy_host, copyPath=self.copy_path)
        return found


def file_name(now, reason):
    """``etcd-20261128T232501Z-upgrade.db`` for ``now`` (UTC)."""
    return 'etcd-%s-%s.db' % (now.strftime('%Y%m%dT%H%M%SZ'), reason)


def expired(names, keep, taken=None):
    """The snapshot files among ``names`` to remove so that the newest
    ``keep`` (at least one) stay: the driver's names only, oldest first
    (their UTC time, then their name). The one just ``taken`` stays
    and counts, even if a clock set wrong once named others later."""
    ours = sorted((found.group(1), name) for name in names
                  for found in [_NAME.fullmatch(name)]
                  if found and name != taken)
    left = max(1, keep) - (taken is not None)
    return [name for _, name in ours[:max(0, len(ours) - left)]]


def parse_saved(output):
    """(SHA-256, names in the directory) of the save script's output:
    VM text, checked like user input."""
    lines = output.splitlines()
    if not lines or not _DIGEST.fullmatch(lines[0]):
        raise exceptions.ClusterInstallError(
            'etcdctl snapshot save printed no SHA-256 of the snapshot: %r'
            % output[:80])
    return lines[0], lines[1:_LISTED + 1]


def storage_directory(storage):
    """(mount_to, directory) for the copy on the Storage server
    (``param_model.StorageServer``): ``.etcd-snapshots`` at the top of
    the first volume whose place for it is neither inside an export nor
    holds one; None when every volume is exported at its top."""
    exported = [export.export_dir.rstrip('/') for export in storage.exports]
    for volume in storage.volumes:
        mount = volume.mount_to.rstrip('/')
        directory = '%s/%s' % (mount, STORAGE_DIRECTORY)
        if not any(param_checks.is_within(directory, export) or
                   param_checks.is_within(export, directory)
                   for export in exported):
            return mount or '/', directory
    return None


def take(workflow, sessions, leader, reason, report, now=None):
    """Snapshot etcd on the Master ``leader`` (its session), keep a copy
    on the Storage server if the VNF has one, prune both; the Snapshot.
    ``workflow``: the ``cluster_workflow.ClusterWorkflow`` of the hook."""
    name = file_name(now or datetime.datetime.now(datetime.timezone.utc),
                     reason)
    path = '%s/%s' % (DIRECTORY, name)
    keep = workflow.conf.etcd_snapshot_keep
    with step_report.step(leader.host, STEP):
        workflow.etcd_session(leader, report)
        saved = leader.run(['sh', '-c', _SAVE, 'sh', DIRECTORY, name] +
                           etcd.etcdctl('snapshot', 'save'), sudo=True,
                           description='etcdctl snapshot save %s' % path)
        digest, listed = parse_saved(saved.stdout)
        _prune(leader, DIRECTORY, listed, keep, name)
    report.record(leader.host, STEP, True, path)
    snapshot = Snapshot(leader.host, path)
    if workflow.params.storage is not None:
        snapshot = _copy(workflow, sessions, leader, snapshot, digest, report)
    return snapshot


def _copy(workflow, sessions, leader, snapshot, digest, report):
    place = storage_directory(workflow.params.storage)
    server = workflow.topology.storage
    skipped = _why_no_copy(place, server)
    if skipped:
        LOG.warning('etcd snapshot %s not copied to the Storage server %s: '
                    '%s', snapshot.path, server.address, skipped)
        report.record(server.address, COPY_STEP, False,
                      'not copied: ' + skipped)
        return snapshot
    mount, directory = place
    name = snapshot.path.rsplit('/', 1)[1]
    storage = workflow.session(sessions, server)
    with step_report.step(storage.host, COPY_STEP):
        listing = relay.copy(
            leader, ['cat', '--', snapshot.path], storage,
            ['sh', '-c', _KEEP, 'sh', mount, directory, name, digest],
            'copy of %s from %s' % (snapshot.path, leader.host))
        _prune(storage, directory, listing.splitlines()[:_LISTED],
               workflow.conf.etcd_snapshot_keep, name)
    copy_path = '%s/%s' % (directory, name)
    report.record(storage.host, COPY_STEP, True, copy_path)
    return dataclasses.replace(snapshot, copy_host=storage.host,
                               copy_path=copy_path)


def _why_no_copy(place, server):
    if place is None:
        return 'every volume is exported at its top'
    if not flow.answers_ssh(server.address):
        return 'the Storage server does not answer (SSH)'
    return None


def _prune(executor, directory, names, keep, taken):
    old = expired(names, keep, taken)
    if old:
        executor.run(['rm', '-f', '--'] + ['%s/%s' % (directory, name)
                                           for name in old], sudo=True,
                     description='rm of %d old etcd snapshot(s) in %s'
                     % (len(old), directory))


def note(snapshot):
    """What an error says of the snapshot taken before the change."""
    return 'etcd snapshot taken before the change: %s' % ', '.join(
        snapshot.places())


@contextlib.contextmanager
def named_in_errors(holder):
    """Let a failure name the snapshot ``holder.etcd_snapshot`` (if one
    was taken by then): in its reason, so the one-line error shows it,
    and as ``etcd_snapshot`` (Snapshot) for the door's record."""
    try:
        yield
    except exceptions.MgmtDriverError as error:
        snapshot = getattr(holder, 'etcd_snapshot', None)
        if snapshot is not None:
            error.etcd_snapshot = snapshot
            text = note(snapshot)
            if getattr(error, 'reason', None):
                error.reason = '%s; %s' % (error.reason, text)
            error.args = ('%s; %s' % (error, text),)
        raise
