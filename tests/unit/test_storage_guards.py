"""The storage server's guards, decided from what the host reports: never
mount over data, never chown or export what is not on the volume."""

import stat
import types

import pytest

from kubernetes_mgmt_pv import exceptions
from kubernetes_mgmt_pv import report
from kubernetes_mgmt_pv import storage

BLOCK = '%x' % (stat.S_IFBLK | 0o660)
DIRECTORY = '%x' % (stat.S_IFDIR | 0o755)
REGULAR = '%x' % (stat.S_IFREG | 0o644)


class FakeHost(object):
    """Answers each command by its program name; records every command."""

    host = '10.0.0.5'

    def __init__(self, **stdout):
        self.stdout = stdout
        self.commands = []

    def run(self, argv, sudo=False, check=True, **kwargs):
        self.commands.append(argv)
        output = self.stdout.get(argv[0], '')
        if callable(output):
            output = output(argv)
        return types.SimpleNamespace(stdout=output, stderr='', ok=True,
                                     exit_status=0)

    def ran(self, program):
        return [argv for argv in self.commands if argv[0] == program]


def test_mount_facts_come_from_one_stat_and_one_findmnt():
    host = FakeHost(
        stat='/dev/vdb\t252:16\t%s\n/dev/vdc\t252:32\t%s\n'
             '/volume1\t0:0\t%s\n' % (BLOCK, BLOCK, DIRECTORY),
        findmnt='/ 252:1\n/volume1 252:16\n/mnt/other 252:32\n')
    first, second = storage.inspect_mount_points(
        host, [('/dev/vdb', '/volume1'), ('/dev/vdc', '/volume2')])
    assert (first.device_id, first.mounted_here, first.mounted_elsewhere) == \
        ('252:16', '252:16', [])
    assert stat.S_ISDIR(first.mode)
    assert (second.device_id, second.mounted_here, second.mode,
            second.mounted_elsewhere) == ('252:32', None, None, ['/mnt/other'])
    assert [argv[0] for argv in host.commands] == ['stat', 'findmnt']


def point(**facts):
    values = dict(device='/dev/vdb', mount_to='/volume1',
                  device_id='252:16', device_mode=int(BLOCK, 16))
    values.update(facts)
    return storage.MountPoint(**values)


@pytest.mark.parametrize('facts, entry, refusal', [
    # Already mounted there: fine even though the directory is not empty.
    (dict(mounted_here='252:16', mode=int(DIRECTORY, 16)), 'data', None),
    (dict(mode=None), None, None),                    # will be created
    (dict(mode=int(DIRECTORY, 16)), None, None),      # empty directory
    (dict(mode=int(DIRECTORY, 16)), 'lost+found',
     "/volume1 is not empty (it holds 'lost+found')"),
    (dict(mode=int(DIRECTORY, 16)), 'dpkg',
     "/volume1 is not empty (it holds 'dpkg'): mounting /dev/vdb over it"),
    (dict(mode=int(REGULAR, 16)), None,
     '/volume1 exists and is not a directory'),
    (dict(mounted_here='252:99'), None,
     'another filesystem (device 252:99) is already mounted on /volume1'),
    (dict(mounted_elsewhere=['/mnt']), None,
     '/dev/vdb is already mounted on /mnt, not on /volume1'),
    (dict(device_id=None), None, 'device /dev/vdb does not exist'),
    (dict(device_mode=int(REGULAR, 16)), None,
     '/dev/vdb is not a block device'),
])
def test_mount_point_check(facts, entry, refusal):
    host = FakeHost(find='' if entry is None else entry + '\0')
    if refusal is None:
        storage.check_mount_point(host, point(**facts))
        return
    with pytest.raises(exceptions.StepError) as caught:
        with report.step(host.host, 'mount /volume1'):
            storage.check_mount_point(host, point(**facts))
    assert str(caught.value).startswith(
        'mount /volume1 failed on 10.0.0.5: ' + refusal)


def test_only_an_unmounted_directory_is_listed():
    host = FakeHost()
    storage.check_mount_point(host, point(mounted_here='252:16',
                                          mode=int(DIRECTORY, 16)))
    assert host.commands == []


VOLUMES = {'/volume1': '252:16', '/volume2': '252:32'}


def test_export_directories_on_their_volume_are_created_and_chowned():
    listings = iter([
        '/volume1/nfs/pv1\t252:16\tnobody:nogroup\n'
        '/volume2/nfs/pv2\t252:32\troot:root\n',
        '/volume2/nfs/pv3\t252:32\troot:root\n'])
    host = FakeHost(stat=lambda argv: next(listings))
    outcomes = report.Report()
    storage.ensure_export_dirs(
        host, ['/volume1/nfs/pv1', '/volume2/nfs/pv2', '/volume2/nfs/pv3'],
        VOLUMES, outcomes)
    assert host.ran('mkdir') == [['mkdir', '-p', '--', '/volume2/nfs/pv3']]
    assert host.ran('chown') == [['chown', 'nobody:nogroup', '--',
                                  '/volume2/nfs/pv2', '/volume2/nfs/pv3']]
    assert [o.changed for o in outcomes.outcomes] == [False, True, True]


@pytest.mark.parametrize('listing, refusal', [
    # A symlink (followed by stat -L) or another mount inside the volume.
    ('/volume1/nfs/pv1\t0:41\tubuntu:ubuntu\n',
     '/volume1/nfs/pv1 is on device 0:41, not on the volume mounted on '
     '/volume1 (device 252:16); refusing to chown or export it'),
    ('/volume1/nfs/pv1\t252:32\tnobody:nogroup\n',
     '/volume1/nfs/pv1 is on device 252:32'),
])
def test_export_directory_off_its_volume_is_refused(listing, refusal):
    host = FakeHost(stat=listing)
    with pytest.raises(exceptions.StorageSetupError) as caught:
        storage.ensure_export_dirs(host, ['/volume1/nfs/pv1'], VOLUMES,
                                   report.Report())
    assert str(caught.value).startswith(refusal)
    assert not host.ran('chown') and not host.ran('mkdir')


def test_export_directory_outside_every_volume_is_refused_untouched():
    host = FakeHost()
    with pytest.raises(exceptions.StorageSetupError,
                       match='export_dir /home/ubuntu is not inside any '
                             'mount_to'):
        storage.ensure_export_dirs(host, ['/home/ubuntu'], VOLUMES,
                                   report.Report())
    assert host.commands == []
