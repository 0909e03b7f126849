"""Storage server steps: Cinder volumes as filesystems, NFS exports.

Each step looks at the host first and changes only what differs, so a
re-run changes nothing and a volume that already holds a filesystem (and
data) is never formatted again. Data that is not on the volumes is never
touched: a volume is not mounted over a directory that holds anything, and
an export directory is changed (chown, export) only when it lies on the
filesystem of its volume.
"""

import collections
import dataclasses
import stat

from kubernetes_mgmt_pv import exceptions
from kubernetes_mgmt_pv import managed_block
from kubernetes_mgmt_pv import packages
from kubernetes_mgmt_pv import report as report_mod

EXPORTS_FILE = '/etc/exports'
FSTAB_FILE = '/etc/fstab'
EXPORT_OPTIONS = 'rw,sync,no_subtree_check,insecure,all_squash'
# all_squash maps every client to nobody, so nobody must own the exports.
EXPORT_OWNER = 'nobody:nogroup'
NEW_FILESYSTEM = 'ext4'
SERVER_PACKAGES = ('nfs-kernel-server',)


def locate_device(executor, attachment, report):
    """The guest's device for a Cinder volume.

    Nova's reported device name (``/dev/vdb``) is only a hint: the guest
    kernel names disks in discovery order. virtio-blk disks carry the first
    20 characters of the volume id as serial, visible as
    /dev/disk/by-id/virtio-<serial>; when that link exists it wins.
    """
    if attachment.volume_id:
        by_id = '/dev/disk/by-id/virtio-%s' % attachment.volume_id[:20]
        result = executor.run(['readlink', '-e', '--', by_id], check=False)
        if not result.ok and result.stderr.strip():
            # readlink -e fails silently for a missing link; anything it
            # says is a real failure, not "no such link".
            raise executor.failure('readlink -e -- %s' % by_id, result)
        if result.ok and result.stdout.strip():
            device = result.stdout.strip()
            if device != attachment.device:
                report.record(executor.host, 'device of volume %s' %
                              attachment.volume_id, False,
                              '%s (Nova reported %s)' % (device,
                                                         attachment.device))
            return device
    return attachment.device


def _stat(executor, paths, fields):
    """``{path: [field, ...]}`` of the paths that exist, in one command.

    ``fields`` are stat(1) format sequences joined by tabs; symlinks are
    followed, so a path is judged by what it really is. The paths are
    validated absolute paths, device names or link targets without tabs
    or newlines, so each output line starts with the path as given.
    """
    result = executor.run(['stat', '-L', '-c', '%n\t' + fields, '--'] +
                          list(paths), sudo=True, check=False)
    unexplained = [line for line in result.stderr.split('\n') if line and
                   not line.endswith('No such file or directory')]
    if unexplained:
        raise executor.failure('stat -L -- %s' % ' '.join(paths), result,
                               stderr='\n'.join(unexplained))
    found = {}
    for line in result.stdout.split('\n'):
        name, _, values = line.partition('\t')
        if name in paths and values:
            found[name] = values.split('\t')
    return found


def _mounts(executor):
    """(target, "major:minor") of every mount on the host, in mount order."""
    result = executor.run(['findmnt', '-r', '-n', '-o', 'TARGET,MAJ:MIN'])
    return [tuple(line.split(' ', 1)) for line in result.stdout.split('\n')
            if ' ' in line]


@dataclasses.dataclass
class MountPoint(object):
    """What the host says about one volume's device and its mount point."""
    device: str
    mount_to: str
    device_id: str = None  # "major:minor" of the device; None: missing
    device_mode: int = 0
    mounted_here: str = None  # "major:minor" mounted on mount_to, if any
    mounted_elsewhere: list = dataclasses.field(default_factory=list)
    mode: int = None  # st_mode of mount_to; None: it does not exist


def inspect_mount_points(executor, volumes):
    """A ``MountPoint`` per (device, mount_to), from two commands for all."""
    paths = [path for volume in volumes for path in volume]
    # %f, the raw mode in hex: file type names (%F) are translated.
    stats = _stat(executor, paths, '%Hr:%Lr\t%f')
    mounts = _mounts(executor)
    points = []
    for device, mount_to in volumes:
        point = MountPoint(device, mount_to)
        if device in stats:
            point.device_id = stats[device][0]
            point.device_mode = int(stats[device][1], 16)
        if mount_to in stats:
            point.mode = int(stats[mount_to][1], 16)
        here = [dev for target, dev in mounts if target == mount_to]
        point.mounted_here = here[-1] if here else None
        point.mounted_elsewhere = [target for target, dev in mounts
                                   if dev == point.device_id and
                                   target != mount_to]
        points.append(point)
    return points


def _first_entry(executor, directory):
    """The name of one entry of ``directory``, or None if it is empty.

    ``-H``: a symlinked mount point is judged by the directory it points
    to, which is where mount would put the volume.
    """
    result = executor.run(['find', '-H', directory, '-mindepth', '1',
                           '-maxdepth', '1', '-printf', '%P\\0', '-quit'],
                          sudo=True)
    return result.stdout.split('\0')[0] or None


def check_mount_point(executor, point):
    """Refuse a mount that would hide data or clash with another mount.

    Nothing is refused when the device is already mounted there, so a
    re-run stays idempotent.
    """
    if point.device_id is None:
        raise exceptions.StorageSetupError(
            'device %s does not exist' % point.device)
    if not stat.S_ISBLK(point.device_mode):
        raise exceptions.StorageSetupError(
            '%s is not a block device' % point.device)
    if point.mounted_here == point.device_id:
        return
    if point.mounted_here:
        raise exceptions.StorageSetupError(
            'another filesystem (device %s) is already mounted on %s'
            % (point.mounted_here, point.mount_to))
    if point.mounted_elsewhere:
        raise exceptions.StorageSetupError(
            '%s is already mounted on %s, not on %s' % (
                point.device, point.mounted_elsewhere[0], point.mount_to))
    if point.mode is None:
        return
    if not stat.S_ISDIR(point.mode):
        raise exceptions.StorageSetupError(
            '%s exists and is not a directory' % point.mount_to)
    entry = _first_entry(executor, point.mount_to)
    if entry is not None:
        raise exceptions.StorageSetupError(
            '%s is not empty (it holds %r): mounting %s over it would hide '
            'that data; refusing. Move the data away or choose another '
            'mount_to' % (point.mount_to, entry, point.device))


def probe_device(executor, device):
    """blkid's low-level probe of ``device`` as a dict (empty: blank)."""
    result = executor.run(['blkid', '-p', '-o', 'export', '--', device],
                          sudo=True, check=False)
    if result.exit_status == 2:  # blkid: nothing found on the device
        return {}
    if not result.ok:
        raise executor.failure('blkid -p -- %s' % device, result)
    fields = {}
    for line in result.stdout.split('\n'):
        key, sep, value = line.partition('=')
        if sep:
            fields[key] = value
    return fields


def ensure_filesystem(executor, device, report):
    """Create ext4 on ``device`` only if it holds no signature at all.

    Returns the filesystem's (type, UUID).
    """
    found = probe_device(executor, device)
    if found and not found.get('TYPE'):
        raise exceptions.StorageSetupError(
            '%s holds no filesystem but other data (%s); refusing to '
            'format it' % (device, ', '.join(
                '%s=%s' % item for item in sorted(found.items()))))
    if found:
        report.record(executor.host, 'filesystem %s' % device, False,
                      found['TYPE'])
    else:
        executor.run(['mkfs', '-t', NEW_FILESYSTEM, '-q', '--', device],
                     sudo=True)
        report.record(executor.host, 'filesystem %s' % device, True,
                      'created %s' % NEW_FILESYSTEM)
        found = probe_device(executor, device)
    if not found.get('TYPE') or not found.get('UUID'):
        raise exceptions.StorageSetupError(
            'the filesystem on %s has no %s for /etc/fstab' % (
                device, 'UUID' if found.get('TYPE') else 'type'))
    return found['TYPE'], found['UUID']


def ensure_mounted(executor, point, fstype, report):
    """Mount the checked ``point`` unless its device already is there.

    Devices are compared by major:minor so a symlinked device path (e.g.
    /dev/disk/by-id/...) is recognised as the same device.
    """
    if point.mounted_here == point.device_id:
        report.record(executor.host, 'mount %s' % point.mount_to, False,
                      point.device)
        return False
    executor.run(['mkdir', '-p', '--', point.mount_to], sudo=True)
    executor.run(['mount', '-t', fstype, '--', point.device, point.mount_to],
                 sudo=True)
    report.record(executor.host, 'mount %s' % point.mount_to, True,
                  point.device)
    return True


def ensure_fstab(executor, mounts, report):
    """Make the mounts survive a reboot: fstab entries by filesystem UUID.

    ``mounts`` is a list of (uuid, mount_to, fstype). ``nofail`` keeps the
    VM bootable if the volume is ever detached.
    """
    lines = ['UUID=%s %s %s defaults,nofail 0 2' % mount for mount in mounts]
    changed = managed_block.ensure_block(executor, FSTAB_FILE, lines)
    report.record(executor.host, FSTAB_FILE, changed)


def volume_of(directory, mount_points):
    """The deepest mount point that contains ``directory``, or None."""
    containing = [mount for mount in mount_points
                  if directory == mount or
                  directory.startswith(mount.rstrip('/') + '/')]
    return max(containing, key=len) if containing else None


def ensure_export_dirs(executor, directories, volume_devices, report):
    """Create the exported directories, owned by the squashed NFS user.

    ``volume_devices`` maps each mount_to to its device's "major:minor".
    A directory is created, chowned and later exported only if it lies on
    the filesystem of the volume mounted on its mount_to (symlinks
    followed): anything else would hand data that is not on the volume to
    every NFS client.
    """
    homes = {directory: volume_of(directory, volume_devices)
             for directory in directories}
    outside = [directory for directory, home in homes.items() if home is None]
    if outside:
        raise exceptions.StorageSetupError(
            'export_dir %s is not inside any mount_to (%s); refusing to '
            'export data that is not on a volume' % (
                ', '.join(outside), ', '.join(volume_devices)))
    found = _stat(executor, directories, '%Hd:%Ld\t%U:%G')
    created = [directory for directory in directories
               if directory not in found]
    if created:
        executor.run(['mkdir', '-p', '--'] + created, sudo=True)
        found.update(_stat(executor, created, '%Hd:%Ld\t%U:%G'))
    for directory in directories:
        if directory not in found:
            raise exceptions.StorageSetupError(
                'cannot stat %s after creating it' % directory)
        device, home = found[directory][0], homes[directory]
        if device != volume_devices[home]:
            raise exceptions.StorageSetupError(
                '%s is on device %s, not on the volume mounted on %s (device '
                '%s); refusing to chown or export it' % (
                    directory, device, home, volume_devices[home]))
    chowned = [directory for directory in directories
               if found[directory][1] != EXPORT_OWNER]
    if chowned:
        executor.run(['chown', EXPORT_OWNER, '--'] + chowned, sudo=True)
    for directory in directories:
        report.record(executor.host, 'directory %s' % directory,
                      directory in created or directory in chowned)


def export_lines(exports):
    """/etc/exports lines: one per directory, each client with options."""
    clients = collections.OrderedDict()
    for export in exports:
        clients.setdefault(export.export_dir, []).append(export.export_to)
    return ['%s %s' % (directory, ' '.join(
        '%s(%s)' % (client, EXPORT_OPTIONS) for client in targets))
        for directory, targets in clients.items()]


def parse_exportfs(output):
    """Set of (directory, client) pairs from ``exportfs -v`` output.

    exportfs prints ``dir client(opts)`` on one line, or the client on an
    indented continuation line when the directory name is long.
    """
    active = set()
    directory = None
    for token in output.split():
        if '(' in token:
            if directory is not None:
                active.add((directory, token.split('(', 1)[0]))
        else:
            directory = token
    return active


def missing_exports(exports, exportfs_output):
    """The (export_dir, export_to) pairs that ``exportfs -v`` does not list.

    Host names are compared case-insensitively: exportfs prints a name as
    the resolver spells it, so ``WORKER1`` is listed as ``worker1``.
    """
    active = {(directory, client.lower())
              for directory, client in parse_exportfs(exportfs_output)}
    return sorted({(export.export_dir, export.export_to)
                   for export in exports
                   if (export.export_dir, export.export_to.lower())
                   not in active})


def _exportfs_listing(executor):
    return executor.run(['exportfs', '-v'], sudo=True).stdout


def ensure_exports(executor, exports, report):
    """Write the managed exports block, re-export, verify every export."""
    changed = managed_block.ensure_block(executor, EXPORTS_FILE,
                                         export_lines(exports))
    if changed or missing_exports(exports, _exportfs_listing(executor)):
        executor.run(['exportfs', '-ra'], sudo=True)
        changed = True
        missing = missing_exports(exports, _exportfs_listing(executor))
        if missing:
            raise exceptions.StorageSetupError(
                'exportfs -v does not list %s after exportfs -ra' % ', '.join(
                    '%s to %s' % pair for pair in missing))
    report.record(executor.host, 'NFS exports', changed,
                  '%d export(s)' % len(exports))
    return changed


def setup_storage_server(executor, storage, attachments, proxy, conf,
                         report):
    """Bring the storage server to the requested state, step by step.

    ``attachments`` maps each volume_resource_id to its Heat attachment.
    Every mount point is checked before any volume is formatted or
    mounted, so a refused mount leaves the host as it was.
    """
    host = executor.host
    volumes = []
    for volume in storage.volumes:
        with report_mod.step(host, 'device lookup for volume %s'
                             % volume.volume_resource_id):
            volumes.append((locate_device(
                executor, attachments[volume.volume_resource_id], report),
                volume.mount_to))
    with report_mod.step(host, 'volume inspection'):
        points = inspect_mount_points(executor, volumes)
    for point in points:
        with report_mod.step(host, 'mount %s' % point.mount_to):
            check_mount_point(executor, point)
    fstab = []
    for point in points:
        with report_mod.step(host, 'format %s' % point.device):
            fstype, uuid = ensure_filesystem(executor, point.device, report)
        with report_mod.step(host, 'mount %s' % point.mount_to):
            ensure_mounted(executor, point, fstype, report)
        fstab.append((uuid, point.mount_to, fstype))
    with report_mod.step(host, '%s update' % FSTAB_FILE):
        ensure_fstab(executor, fstab, report)
    with report_mod.step(host, 'NFS server installation'):
        packages.ensure_installed(executor, SERVER_PACKAGES, proxy,
                                  conf.package_install_timeout, report)
    directories = list(dict.fromkeys(e.export_dir for e in storage.exports))
    with report_mod.step(host, 'export directories'):
        ensure_export_dirs(
            executor, directories,
            {point.mount_to: point.device_id for point in points}, report)
    with report_mod.step(host, 'NFS exports'):
        ensure_exports(executor, storage.exports, report)
