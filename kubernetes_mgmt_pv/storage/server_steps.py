"""Storage server steps: Cinder volumes as filesystems, NFS exports.

Each step is split in three: its facts come from one command that gathers
everything the storage server's steps look at (parsed by pure functions),
a pure function decides from the facts what to change, and the step
applies only that. A re-run therefore changes nothing and a volume that
already holds a filesystem (and data) is never formatted again. Data that
is not on the volumes is never touched: a volume is not mounted over a
directory that holds anything, and an export directory is changed (chown,
export) only when it lies on the filesystem of its volume.
"""

import collections
import dataclasses
import ipaddress
import stat

from kubernetes_mgmt_pv import exceptions
from kubernetes_mgmt_pv.remote import dpkg
from kubernetes_mgmt_pv.remote import facts
from kubernetes_mgmt_pv.remote import managed_block
from kubernetes_mgmt_pv import step_report

EXPORTS_FILE = '/etc/exports'
FSTAB_FILE = '/etc/fstab'
EXPORT_OPTIONS = 'rw,sync,no_subtree_check,insecure,all_squash'
# all_squash maps every client to nobody, so nobody must own the exports.
EXPORT_OWNER = 'nobody:nogroup'
NEW_FILESYSTEM = 'ext4'
SERVER_PACKAGES = ('nfs-kernel-server',)


# The storage server's facts (see scripts/storage_facts.sh).
_GATHER = facts.script('storage_facts.sh')
GATHERED = ('readlink -e, stat -L, find, blkid -p, dd of the first and '
            'last MiB, findmnt, dpkg-query, '
            'cat %s %s, exportfs -v' % (FSTAB_FILE, EXPORTS_FILE))


def gather_facts(executor, volumes, package_names, directories):
    """Every fact the storage server's steps need, from one command.

    ``volumes`` are (by-id link or '', Nova's device, mount_to). A fact
    whose command failed is only an error for the step that needs it.
    """
    arguments = [len(volumes)]
    arguments += [value for volume in volumes for value in volume]
    arguments += [len(package_names)] + list(package_names)
    arguments += [FSTAB_FILE, EXPORTS_FILE] + list(directories)
    return facts.gather(executor, _GATHER, arguments, GATHERED, sudo=True)


def by_id_link(attachment):
    """The by-id link of a virtio-blk disk: its serial is the first 20
    characters of the volume id ('' when the volume id is unknown)."""
    if not attachment.volume_id:
        return ''
    return '/dev/disk/by-id/virtio-%s' % attachment.volume_id[:20]


def located_device(nova_device, link):
    """The guest's device: the target of the by-id link when it exists.

    Nova's reported device name (``/dev/vdb``) is only a hint: the guest
    kernel names disks in discovery order. ``link`` is the result of
    ``readlink -e`` on the by-id link (None: no link to look at).
    """
    if link is not None and link.ok and link.stdout.strip():
        return link.stdout.strip()
    return nova_device


def locate_device(executor, attachment, link, report):
    """Apply ``located_device``: report when it is not Nova's device.

    readlink -e fails silently for a missing link; anything it says is a
    real failure, not "no such link".
    """
    if link is not None and not link.ok and link.stderr.strip():
        raise executor.failure('readlink -e -- %s' % by_id_link(attachment),
                               link)
    device = located_device(attachment.device, link)
    if device != attachment.device:
        report.record(executor.host, 'device of volume %s' %
                      attachment.volume_id, False,
                      '%s (Nova reported %s)' % (device, attachment.device))
    return device


def stat_errors(result):
    """stat's complaints other than about paths that do not exist."""
    return '\n'.join(line for line in result.stderr.split('\n') if line and
                     not line.endswith('No such file or directory'))


def parse_stat(result, paths):
    """``{path: [field, ...]}`` of the ``paths`` stat printed.

    Each line starts with the path as given: the paths are validated
    absolute paths or device names without tabs or newlines.
    """
    found = {}
    for line in result.stdout.split('\n'):
        name, _, values = line.partition('\t')
        if name in paths and values:
            found[name] = values.split('\t')
    return found


def checked_stat(executor, result, paths):
    unexplained = stat_errors(result)
    if unexplained:
        raise executor.failure('stat -L -- %s' % ' '.join(paths), result,
                               stderr=unexplained)
    return parse_stat(result, paths)


def stat_directories(executor, directories):
    """Device and owner of the ``directories`` that exist (one command)."""
    result = executor.run(['stat', '-L', '--printf', '%n\t%Hd:%Ld\t%U:%G\n',
                           '--'] + list(directories), sudo=True, check=False)
    return checked_stat(executor, result, directories)


def parse_mounts(output):
    """(target, "major:minor") of every mount findmnt lists, in order."""
    return [tuple(line.split(' ', 1)) for line in output.split('\n')
            if ' ' in line]


def parse_probe(result):
    """blkid's low-level probe as a dict (empty: blank), None on failure."""
    if result.exit_status == 2:  # blkid: nothing found on the device
        return {}
    if not result.ok:
        return None
    fields = {}
    for line in result.stdout.split('\n'):
        key, sep, value = line.partition('=')
        if sep:
            fields[key] = value
    return fields


@dataclasses.dataclass(frozen=True)
class MountPoint(object):
    """What the host says about one volume's device and its mount point."""
    device: str
    mount_to: str
    device_id: str = None  # "major:minor" of the device; None: missing
    device_mode: int = 0
    mounted_here: str = None  # "major:minor" mounted on mount_to, if any
    mounted_elsewhere: tuple = ()
    mode: int = None  # st_mode of mount_to; None: it does not exist
    entry: str = None  # one entry of the mount_to directory; None: empty


def mount_point(device, mount_to, stats, mounts, entry=None):
    """The ``MountPoint`` of a device from stat's ``{path: [major:minor,
    hex mode]}`` (the device under the name it was stat'ed by, which may
    be a by-id link) and findmnt's mounts."""
    device_stat = stats.get(device)
    device_id = device_stat[0] if device_stat else None
    here = [dev for target, dev in mounts if target == mount_to]
    return MountPoint(
        device, mount_to, entry=entry, device_id=device_id,
        device_mode=int(device_stat[1], 16) if device_stat else 0,
        # %f, the raw mode in hex: file type names (%F) are translated.
        mode=int(stats[mount_to][1], 16) if mount_to in stats else None,
        mounted_here=here[-1] if here else None,
        mounted_elsewhere=tuple(target for target, dev in mounts
                                if dev == device_id and
                                target != mount_to))


def parse_entry(result):
    """The first entry find printed (NUL-terminated); None when it
    printed none, failed or did not run."""
    if result is None or not result.ok:
        return None
    return result.stdout.split('\0')[0] or None


def needs_listing(point):
    """True when the mount point's content decides whether to mount."""
    return (point.mounted_here is None and point.mode is not None and
            stat.S_ISDIR(point.mode))


def check_mount_point(point):
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
    if point.entry is not None:
        raise exceptions.StorageSetupError(
            '%s is not empty (it holds %r): mounting %s over it would hide '
            'that data; refusing. Move the data away or choose another '
            'mount_to' % (point.mount_to, point.entry, point.device))


def parse_regions(result):
    """``{'first': state, 'last': state}`` of the device's first and last
    MiB (state: zero, data or unreadable); None when they were not read."""
    if result is None or not result.ok:
        return None
    states = dict(line.split(' ', 1) for line in result.stdout.split('\n')
                  if ' ' in line)
    if not {'first', 'last'} <= states.keys():
        return None
    return {'first': states['first'], 'last': states['last']}


def plan_filesystem(device, probe, regions, kept=False):
    """mkfs of ``device`` if it is blank, else None.

    Blank: blkid found no signature at all and the first and last MiB are
    all zeros. A filesystem is never formatted again; a device holding
    anything else (a partition table, RAID or LVM member, or data blkid
    knows no signature of, such as a raw tar stream) is refused.
    ``kept``: the volume was kept by a heal and must hold its filesystem;
    a blank one is refused, as formatting it would hand the bound claims
    an empty export.
    """
    if not probe and kept:
        raise exceptions.StorageSetupError(
            '%s is blank, but the heal kept this volume, which must hold the '
            'filesystem of the PersistentVolumes: refusing to format it. '
            'Check that Heat attached the old volume to the new Storage '
            'server' % device)
    if not probe:
        found = _data_found(regions)
        if found:
            raise exceptions.StorageSetupError(
                '%s holds no filesystem signature, but %s; refusing to '
                'format it. If that data is not needed, wipe the volume '
                '(wipefs -a, then zero its first and last MiB) and re-run'
                % (device, found))
        return ['mkfs', '-t', NEW_FILESYSTEM, '-q', '--', device]
    if not probe.get('TYPE'):
        raise exceptions.StorageSetupError(
            '%s holds no filesystem but other data (%s); refusing to '
            'format it' % (device, ', '.join(
                '%s=%s' % item for item in sorted(probe.items()))))
    return None


def _data_found(regions):
    """What keeps a device without signature from being blank, or ''."""
    if regions is None:
        return 'its first and last MiB could not be read'
    found = ['%s in its %s MiB' % (
        'data' if state == 'data' else 'an unreadable block', region)
        for region, state in sorted(regions.items()) if state != 'zero']
    return ' and '.join(found)


def filesystem_identity(device, probe):
    """(type, UUID) of the filesystem on ``device``, for /etc/fstab."""
    if not probe.get('TYPE') or not probe.get('UUID'):
        raise exceptions.StorageSetupError(
            'the filesystem on %s has no %s for /etc/fstab' % (
                device, 'UUID' if probe.get('TYPE') else 'type'))
    return probe['TYPE'], probe['UUID']


def probe_device(executor, device):
    """blkid's probe of ``device`` after it was formatted (one command)."""
    result = executor.run(['blkid', '-p', '-o', 'export', '--', device],
                          sudo=True, check=False)
    return checked_probe(executor, device, result)


def checked_probe(executor, device, result):
    probe = parse_probe(result)
    if probe is None:
        raise executor.failure('blkid -p -- %s' % device, result)
    return probe


def ensure_filesystem(executor, device, probe, mkfs, report):
    """Create ext4 on ``device`` when ``plan_filesystem`` decided to
    (``mkfs``). Returns the filesystem's (type, UUID).
    """
    if mkfs is None:
        report.record(executor.host, 'filesystem %s' % device, False,
                      probe['TYPE'])
        return filesystem_identity(device, probe)
    executor.run(mkfs, sudo=True)
    report.record(executor.host, 'filesystem %s' % device, True,
                  'created %s' % NEW_FILESYSTEM)
    return filesystem_identity(device, probe_device(executor, device))


def plan_mount(point, fstype):
    """The commands that mount the checked ``point`` (none if its device
    is mounted there already).

    Devices are compared by major:minor so a symlinked device path (e.g.
    /dev/disk/by-id/...) is recognised as the same device.
    """
    if point.mounted_here == point.device_id:
        return []
    return [['mkdir', '-p', '--', point.mount_to],
            ['mount', '-t', fstype, '--', point.device, point.mount_to]]


def ensure_mounted(executor, point, fstype, report):
    """Run ``plan_mount``; True when the volume was mounted now."""
    commands = plan_mount(point, fstype)
    for argv in commands:
        executor.run(argv, sudo=True)
    report.record(executor.host, 'mount %s' % point.mount_to, bool(commands),
                  point.device)
    return bool(commands)


def fstab_lines(mounts):
    """fstab entries by filesystem UUID for (uuid, mount_to, fstype).

    ``nofail`` keeps the VM bootable if the volume is ever detached.
    """
    return ['UUID=%s %s %s defaults,nofail 0 2' % mount for mount in mounts]


def volume_of(directory, mount_points):
    """The deepest mount point that contains ``directory``, or None."""
    containing = [mount for mount in mount_points
                  if directory == mount or
                  directory.startswith(mount.rstrip('/') + '/')]
    return max(containing, key=len) if containing else None


def export_homes(directories, volume_devices):
    """``{directory: mount_to}``; refuses directories outside every volume.

    ``volume_devices`` maps each mount_to to its device's "major:minor".
    """
    homes = {directory: volume_of(directory, volume_devices)
             for directory in directories}
    outside = [directory for directory, home in homes.items() if home is None]
    if outside:
        raise exceptions.StorageSetupError(
            'export_dir %s is not inside any mount_to (%s); refusing to '
            'export data that is not on a volume' % (
                ', '.join(outside), ', '.join(volume_devices)))
    return homes


def plan_ownership(directories, volume_devices, found):
    """The existing ``directories`` to chown to the squashed NFS user.

    ``found`` is stat's ``{directory: [major:minor, user:group]}``. A
    directory is chowned and later exported only if it lies on the
    filesystem of the volume mounted on its mount_to (symlinks followed):
    anything else would hand data that is not on the volume to every NFS
    client.
    """
    homes = export_homes(directories, volume_devices)
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
    return [directory for directory in directories
            if found[directory][1] != EXPORT_OWNER]


def ensure_export_dirs(executor, directories, volume_devices, found, report):
    """Create the exported directories, owned by the squashed NFS user.

    ``found`` is what stat says about the directories now.
    """
    export_homes(directories, volume_devices)
    created = [directory for directory in directories
               if directory not in found]
    if created:
        executor.run(['mkdir', '-p', '--'] + created, sudo=True)
        found = dict(found, **stat_directories(executor, created))
    chowned = plan_ownership(directories, volume_devices, found)
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


def listed_client(client):
    """A client as ``exportfs -v`` lists it: ``*`` as ``<world>``, a
    network by its prefix length whether written so or with a netmask,
    a host name as the resolver spells it (``WORKER1`` as ``worker1``),
    so names compare case-insensitively."""
    if client in ('*', '<world>'):
        return '<world>'
    if '/' in client:
        try:
            return str(ipaddress.ip_network(client, strict=False))
        except ValueError:
            pass
    return client.lower()


def missing_exports(exports, exportfs_output):
    """The (export_dir, export_to) pairs that ``exportfs -v`` does not
    list (compared as ``listed_client``)."""
    active = {(directory, listed_client(client))
              for directory, client in parse_exportfs(exportfs_output)}
    return sorted({(export.export_dir, export.export_to)
                   for export in exports
                   if (export.export_dir, listed_client(export.export_to))
                   not in active})


def plan_exports(exports, current, exportfs_output):
    """(new /etc/exports content or None, whether to run exportfs -ra).

    The server re-exports when the file changes or when an export is not
    active (an administrator's exportfs -u, a server restarted before the
    file was complete).
    """
    content = managed_block.planned_content(EXPORTS_FILE, current,
                                            export_lines(exports))
    reexport = content is not None or bool(
        missing_exports(exports, exportfs_output))
    return content, reexport


def exportfs_listing(executor):
    return executor.run(['exportfs', '-v'], sudo=True).stdout


def ensure_exports(executor, exports, current, exportfs_output, report):
    """Apply ``plan_exports``, then verify that every export is active."""
    content, reexport = plan_exports(exports, current, exportfs_output)
    if content is not None:
        executor.install_file(content, EXPORTS_FILE)
    if reexport:
        executor.run(['exportfs', '-ra'], sudo=True)
        missing = missing_exports(exports, exportfs_listing(executor))
        if missing:
            raise exceptions.StorageSetupError(
                'exportfs -v does not list %s after exportfs -ra' % ', '.join(
                    '%s to %s' % pair for pair in missing))
    report.record(executor.host, 'NFS exports', reexport,
                  '%d export(s)' % len(exports))
    return reexport


# -- the plan of the whole setup ---------------------------------------------

@dataclasses.dataclass(frozen=True)
class Fact(object):
    """A gathered fact, or the error reading it failed with: only a step
    that needs the fact fails."""
    value: object = None
    error: Exception = None

    def get(self):
        if self.error is not None:
            raise self.error
        return self.value


@dataclasses.dataclass(frozen=True)
class ServerFacts(object):
    """The storage server as gathered (see ``storage_setup``)."""
    points: tuple  # MountPoint of each volume
    listings: tuple  # Fact of each: listing its mount point worked
    probes: tuple  # Fact of each: blkid's probe of its device
    regions: tuple  # parse_regions of each device
    fstab: Fact  # bytes, None: missing
    statuses: Fact  # {package: dpkg Status}
    directories: Fact  # stat of the export directories
    exports: Fact  # bytes, None: missing
    exportfs: Fact  # exportfs -v output


@dataclasses.dataclass(frozen=True)
class VolumePlan(object):
    """What one volume needs: mkfs, a mount, and its fstab identity."""
    point: MountPoint
    probe: dict  # blkid's probe of its device
    mkfs: tuple = None  # argv; None: it holds its filesystem
    mount: tuple = ()  # argvs; (): its device is mounted there
    identity: tuple = None  # (type, UUID); None: known after mkfs


@dataclasses.dataclass(frozen=True)
class ServerPlan(object):
    """The storage server's setup, decided from ``ServerFacts``. A step
    after a change that alters its facts is decided again then (its
    re-gather point): /etc/fstab after a mkfs (the new UUID), the export
    directories after a mount, /etc/exports after the NFS server's
    installation (which writes it)."""
    volumes: tuple
    directories: tuple  # export directories
    volume_devices: dict  # {mount_to: "major:minor" of its device}
    fstab: bytes = None  # new content; None: unchanged (or after mkfs)
    fstab_after_format: bool = False
    install: tuple = ()  # packages
    create: tuple = ()  # export directories to create
    chown: tuple = ()  # and to hand to the squashed NFS user
    restat_directories: bool = False  # after a mount
    exports: bytes = None  # new /etc/exports; None: unchanged
    reexport: bool = False
    reread_exports: bool = False  # after the installation

    @property
    def changes(self):
        return bool(
            any(v.mkfs or v.mount for v in self.volumes) or
            self.fstab is not None or self.install or self.create or
            self.chown or self.exports is not None or self.reexport)


def plan_volume(host, point, listing, probe, regions, kept=False):
    """The ``VolumePlan`` of a volume, refusing what ``check_mount_point``
    and ``plan_filesystem`` refuse (named by the step they refuse)."""
    with step_report.step(host, 'mount %s' % point.mount_to):
        if needs_listing(point):
            listing.get()
        check_mount_point(point)
    with step_report.step(host, 'format %s' % point.device):
        probe = probe.get()
        mkfs = plan_filesystem(point.device, probe, regions, kept)
        identity = None if mkfs else filesystem_identity(point.device, probe)
    fstype = identity[0] if identity else NEW_FILESYSTEM
    return VolumePlan(point, probe, tuple(mkfs) if mkfs else None,
                      tuple(tuple(argv) for argv in plan_mount(point, fstype)),
                      identity)


def plan_export_dirs(directories, volume_devices, found):
    """(directories to create, to chown) given stat's ``found``: a new
    directory belongs to root, so it is chowned too."""
    export_homes(directories, volume_devices)
    create = tuple(d for d in directories if d not in found)
    existing = [d for d in directories if d in found]
    chown = plan_ownership(existing, volume_devices, found)
    return create, tuple(d for d in directories
                         if d in chown or d in create)


def plan_server(host, storage, found, volumes_kept=False):
    """The ``ServerPlan`` of the storage server ``host`` from its
    ``ServerFacts``; refusals and facts that failed are named by the step
    that needs them, before anything is changed. ``volumes_kept``: a heal
    kept the volumes, whose filesystems must be there."""
    volumes = tuple(plan_volume(host, *volume, kept=volumes_kept)
                    for volume in zip(found.points, found.listings,
                                      found.probes, found.regions))
    directories = tuple(dict.fromkeys(e.export_dir for e in storage.exports))
    devices = {v.point.mount_to: v.point.device_id for v in volumes}
    fresh = any(v.mkfs for v in volumes)
    restat = any(v.mount for v in volumes)
    with step_report.step(host, '%s update' % FSTAB_FILE):
        fstab = None if fresh else managed_block.planned_content(
            FSTAB_FILE, found.fstab.get(), fstab_lines(
                [(v.identity[1], v.point.mount_to, v.identity[0])
                 for v in volumes]))
    with step_report.step(host, 'NFS server installation'):
        install = tuple(dpkg.missing_packages(SERVER_PACKAGES,
                                              found.statuses.get()))
    with step_report.step(host, 'export directories'):
        export_homes(directories, devices)
        create, chown = ((), ()) if restat else plan_export_dirs(
            directories, devices, found.directories.get())
    with step_report.step(host, 'NFS exports'):
        exports, reexport = (None, True) if install else plan_exports(
            storage.exports, found.exports.get(), found.exportfs.get())
    return ServerPlan(
        volumes=volumes, directories=directories, volume_devices=devices,
        fstab=fstab, fstab_after_format=fresh, install=install,
        create=create, chown=chown, restat_directories=restat,
        exports=exports, reexport=reexport, reread_exports=bool(install))
