"""The storage server's setup: gather its facts with one command, plan
with ``server_steps.plan_server``, apply the plan step by step.

Every mount point and every format decision is checked before any volume
is formatted or mounted, so a refused mount or format leaves the host as
it was. The facts a change alters are looked at again after it: the new
filesystem's UUID after mkfs, the export directories after a mount,
/etc/exports after the NFS server's installation.
"""

from kubernetes_mgmt_pv.remote import dpkg
from kubernetes_mgmt_pv.remote import managed_block
from kubernetes_mgmt_pv import step_report
from kubernetes_mgmt_pv.storage import server_steps


def _fact(read):
    """``read()`` as a ``server_steps.Fact``: its failure kept for the step
    that needs it."""
    try:
        return server_steps.Fact(read())
    except Exception as error:
        return server_steps.Fact(error=error)


def _file(executor, gathered, path):
    """A gathered file's content (None: the file does not exist)."""
    result = gathered.get('file %s' % path)
    if result is None:
        return None
    if not result.ok:
        raise executor.failure('cat -- %s' % path, result)
    return result.stdout_bytes


def _exportfs_output(executor, gathered):
    result = gathered.get('exportfs')
    if result is None:
        return ''
    if not result.ok:
        raise executor.failure('exportfs -v', result)
    return result.stdout


def _mount_points(executor, gathered, devices, volumes):
    """The ``MountPoint`` of each volume from the gathered facts."""
    mounts = gathered['mounts']
    if not mounts.ok:
        raise executor.failure('findmnt -r -n -o TARGET,MAJ:MIN', mounts)
    mounts = server_steps.parse_mounts(mounts.stdout)
    points = []
    for index, (device, (link, nova_device, mount_to)) in enumerate(
            zip(devices, volumes)):
        # The script stat'ed the by-id link when it existed.
        located = server_steps.located_device(None,
                                              gathered.get('link %d' % index))
        stated = nova_device if located is None else link
        stats = server_steps.checked_stat(
            executor, gathered['stat %d' % index], [stated, mount_to])
        if stated in stats:
            stats[device] = stats.pop(stated)
        entry = server_steps.parse_entry(gathered.get('entry %d' % index))
        points.append(server_steps.mount_point(device, mount_to, stats, mounts,
                                               entry))
    return points


def _listing(executor, point, entry):
    """Raise when find failed on the mount point (None: not listed)."""
    if entry is not None and not entry.ok:
        raise executor.failure(
            'find -H %s -mindepth 1 -maxdepth 1' % point.mount_to, entry)


def _devices(executor, storage_server, attachments, gathered, report):
    devices = []
    for index, volume in enumerate(storage_server.volumes):
        with step_report.step(executor.host, 'device lookup for volume %s'
                              % volume.volume_resource_id):
            devices.append(server_steps.locate_device(
                executor, attachments[volume.volume_resource_id],
                gathered.get('link %d' % index), report))
    return devices


def read_facts(executor, storage_server, attachments, report):
    """The storage server's ``server_steps.ServerFacts``, from one command.

    ``attachments`` maps each volume_resource_id to its Heat attachment.
    """
    host = executor.host
    volumes = [(server_steps.by_id_link(attachments[v.volume_resource_id]),
                attachments[v.volume_resource_id].device, v.mount_to)
               for v in storage_server.volumes]
    directories = list(dict.fromkeys(
        e.export_dir for e in storage_server.exports))
    with step_report.step(host, 'storage server facts'):
        gathered = server_steps.gather_facts(
            executor, volumes, server_steps.SERVER_PACKAGES, directories)
    devices = _devices(executor, storage_server, attachments, gathered,
                       report)
    with step_report.step(host, 'volume inspection'):
        points = _mount_points(executor, gathered, devices, volumes)
    indexes = range(len(points))
    return server_steps.ServerFacts(
        points=tuple(points),
        listings=tuple(_fact(lambda i=i: _listing(
            executor, points[i], gathered.get('entry %d' % i)))
            for i in indexes),
        probes=tuple(_fact(lambda i=i: server_steps.checked_probe(
            executor, points[i].device, gathered['probe %d' % i]))
            for i in indexes),
        regions=tuple(
            server_steps.parse_regions(gathered.get('regions %d' % i))
            for i in indexes),
        fstab=_fact(lambda: _file(
            executor, gathered, server_steps.FSTAB_FILE)),
        statuses=_fact(lambda: dpkg.gathered_statuses(
            executor, gathered, server_steps.SERVER_PACKAGES)),
        directories=_fact(lambda: server_steps.checked_stat(
            executor, gathered['directories'], directories)
            if directories else {}),
        exports=_fact(lambda: _file(executor, gathered,
                                    server_steps.EXPORTS_FILE)),
        exportfs=_fact(lambda: _exportfs_output(executor, gathered)))


def plan(executor, storage_server, attachments, report, volumes_kept=False):
    """Gather and plan: the storage server's ``server_steps.ServerPlan`` and
    its facts. Changes nothing."""
    found = read_facts(executor, storage_server, attachments, report)
    return server_steps.plan_server(
        executor.host, storage_server, found, volumes_kept), found


def setup_storage_server(executor, storage_server, attachments, proxy, conf,
                         report, volumes_kept=False):
    """Bring the storage server to the requested state, step by step;
    ``volumes_kept``: a heal kept the volumes, never formatted then."""
    host = executor.host
    planned, found = plan(executor, storage_server, attachments, report,
                          volumes_kept)
    fstab = [_apply_volume(executor, volume, report)
             for volume in planned.volumes]
    with step_report.step(host, '%s update' % server_steps.FSTAB_FILE):
        changed = managed_block.ensure_block(
            executor, server_steps.FSTAB_FILE, found.fstab.get(),
            server_steps.fstab_lines(fstab))
        report.record(host, server_steps.FSTAB_FILE, changed)
    with step_report.step(host, 'NFS server installation'):
        dpkg.ensure_installed(
            executor, server_steps.SERVER_PACKAGES, proxy,
            conf.package_install_timeout, report, found.statuses.get())
    with step_report.step(host, 'export directories'):
        server_steps.ensure_export_dirs(
            executor, list(planned.directories), planned.volume_devices,
            _directories(executor, planned, found), report)
    with step_report.step(host, 'NFS exports'):
        current, listing = _exports(executor, planned, found)
        server_steps.ensure_exports(executor, storage_server.exports, current,
                                    listing, report)


def _apply_volume(executor, volume, report):
    """mkfs and mount of one volume; its (UUID, mount_to, type)."""
    point = volume.point
    with step_report.step(executor.host, 'format %s' % point.device):
        fstype, uuid = server_steps.ensure_filesystem(
            executor, point.device, volume.probe,
            list(volume.mkfs) if volume.mkfs else None, report)
    with step_report.step(executor.host, 'mount %s' % point.mount_to):
        server_steps.ensure_mounted(executor, point, fstype, report)
    return (uuid, point.mount_to, fstype)


def _directories(executor, planned, found):
    """stat of the export directories: again after a mount."""
    if planned.restat_directories:
        return server_steps.stat_directories(
            executor, list(planned.directories))
    return found.directories.get()


def _exports(executor, planned, found):
    """/etc/exports and exportfs -v: again after the installation, which
    wrote the file and started the server."""
    if planned.reread_exports:
        return (executor.read_bytes(server_steps.EXPORTS_FILE, sudo=True),
                server_steps.exportfs_listing(executor))
    return found.exports.get(), found.exportfs.get()
