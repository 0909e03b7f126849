"""Storage server steps: Cinder volumes as filesystems, NFS exports.

Each step looks at the host first and changes only what differs, so a
re-run changes nothing and a volume that already holds a filesystem (and
data) is never formatted again.
"""

import collections

from kubernetes_mgmt_pv import exceptions
from kubernetes_mgmt_pv import managed_block
from kubernetes_mgmt_pv import packages

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
        if result.ok and result.stdout.strip():
            device = result.stdout.strip()
            if device != attachment.device:
                report.record(executor.host, 'device of volume %s' %
                              attachment.volume_id, False,
                              '%s (Nova reported %s)' % (device,
                                                         attachment.device))
            return device
    return attachment.device


def probe_device(executor, device):
    """blkid's low-level probe of ``device`` as a dict (empty: blank)."""
    result = executor.run(['blkid', '-p', '-o', 'export', '--', device],
                          sudo=True, check=False)
    if result.exit_status == 2:  # blkid: nothing found on the device
        return {}
    if not result.ok:
        raise exceptions.StorageSetupError(
            '%s: cannot probe %s: %s' % (executor.host, device,
                                         result.stderr.strip()))
    fields = {}
    for line in result.stdout.splitlines():
        key, sep, value = line.partition('=')
        if sep:
            fields[key] = value
    return fields


def ensure_filesystem(executor, device, report):
    """Create ext4 on ``device`` only if it holds no signature at all."""
    found = probe_device(executor, device)
    if found.get('TYPE'):
        report.record(executor.host, 'filesystem %s' % device, False,
                      found['TYPE'])
        return found
    if found:
        raise exceptions.StorageSetupError(
            '%s: %s holds no filesystem but other data (%s); refusing to '
            'format it' % (executor.host, device, ', '.join(
                '%s=%s' % item for item in sorted(found.items()))))
    executor.run(['mkfs', '-t', NEW_FILESYSTEM, '-q', '--', device],
                 sudo=True)
    report.record(executor.host, 'filesystem %s' % device, True,
                  'created %s' % NEW_FILESYSTEM)
    return probe_device(executor, device)


def _mounts(executor):
    """(target, "major:minor") of every mount on the host."""
    result = executor.run(['findmnt', '-r', '-n', '-o', 'TARGET,MAJ:MIN'])
    return [tuple(line.split(' ', 1)) for line in result.stdout.splitlines()
            if ' ' in line]


def ensure_mounted(executor, device, mount_to, fstype, report):
    """Mount ``device`` on ``mount_to`` unless it already is.

    Devices are compared by major:minor so a symlinked device path (e.g.
    /dev/disk/by-id/...) is recognised as the same device.
    """
    device_id = executor.run(['stat', '-L', '-c', '%Hr:%Lr', '--',
                              device]).stdout.strip()
    mounts = _mounts(executor)
    at_target = [dev for target, dev in mounts if target == mount_to]
    if at_target and at_target[-1] == device_id:
        report.record(executor.host, 'mount %s' % mount_to, False, device)
        return False
    if at_target:
        raise exceptions.StorageSetupError(
            '%s: another filesystem (device %s) is already mounted on %s'
            % (executor.host, at_target[-1], mount_to))
    elsewhere = [target for target, dev in mounts if dev == device_id]
    if elsewhere:
        raise exceptions.StorageSetupError(
            '%s: %s is already mounted on %s, not on %s' % (
                executor.host, device, elsewhere[0], mount_to))
    executor.run(['mkdir', '-p', '--', mount_to], sudo=True)
    executor.run(['mount', '-t', fstype, '--', device, mount_to], sudo=True)
    report.record(executor.host, 'mount %s' % mount_to, True, device)
    return True


def ensure_fstab(executor, mounts, report):
    """Make the mounts survive a reboot: fstab entries by filesystem UUID.

    ``mounts`` is a list of (uuid, mount_to, fstype). ``nofail`` keeps the
    VM bootable if the volume is ever detached.
    """
    lines = ['UUID=%s %s %s defaults,nofail 0 2' % mount for mount in mounts]
    changed = managed_block.ensure_block(executor, FSTAB_FILE, lines)
    report.record(executor.host, FSTAB_FILE, changed)


def ensure_export_dir(executor, path, report):
    """Create the exported directory, owned by the squashed NFS user."""
    result = executor.run(['stat', '-c', '%U:%G', '--', path], check=False)
    if result.ok and result.stdout.strip() == EXPORT_OWNER:
        report.record(executor.host, 'directory %s' % path, False)
        return False
    executor.run(['mkdir', '-p', '--', path], sudo=True)
    executor.run(['chown', EXPORT_OWNER, '--', path], sudo=True)
    report.record(executor.host, 'directory %s' % path, True)
    return True


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


def active_exports(executor):
    return parse_exportfs(executor.run(['exportfs', '-v'], sudo=True).stdout)


def ensure_exports(executor, exports, report):
    """Write the managed exports block, re-export, verify every export."""
    changed = managed_block.ensure_block(executor, EXPORTS_FILE,
                                         export_lines(exports))
    wanted = {(e.export_dir, e.export_to) for e in exports}
    active = active_exports(executor)
    if changed or not wanted <= active:
        executor.run(['exportfs', '-ra'], sudo=True)
        changed = True
        active = active_exports(executor)
    missing = wanted - active
    if missing:
        raise exceptions.StorageSetupError(
            '%s: exportfs -v does not list %s after exportfs -ra' % (
                executor.host, ', '.join(
                    '%s to %s' % pair for pair in sorted(missing))))
    report.record(executor.host, 'NFS exports', changed,
                  '%d export(s)' % len(wanted))
    return changed


def setup_storage_server(executor, storage, attachments, proxy, conf,
                         report):
    """Bring the storage server to the requested state, step by step.

    ``attachments`` maps each volume_resource_id to its Heat attachment.
    """
    fstab = []
    for volume in storage.volumes:
        device = locate_device(executor,
                               attachments[volume.volume_resource_id], report)
        found = ensure_filesystem(executor, device, report)
        ensure_mounted(executor, device, volume.mount_to, found['TYPE'],
                       report)
        fstab.append((found['UUID'], volume.mount_to, found['TYPE']))
    ensure_fstab(executor, fstab, report)
    packages.ensure_installed(executor, SERVER_PACKAGES, proxy,
                              conf.package_install_timeout, report)
    for directory in dict.fromkeys(e.export_dir for e in storage.exports):
        ensure_export_dir(executor, directory, report)
    ensure_exports(executor, storage.exports, report)
