"""The storage server's steps applied to gathered facts: one command looks
at the host, a re-run that changes nothing runs nothing else, a fact's
failure is reported by the step that needs it, and a refused mount changes
nothing."""

import types

import pytest

from kubernetes_mgmt_pv import exceptions
from kubernetes_mgmt_pv.openstack import heat
from kubernetes_mgmt_pv.remote import facts
from kubernetes_mgmt_pv.remote import managed_block
from kubernetes_mgmt_pv.request import param_model
from kubernetes_mgmt_pv import step_report
from kubernetes_mgmt_pv.storage import server_steps
from kubernetes_mgmt_pv.storage import storage_setup

OPTIONS = server_steps.EXPORT_OPTIONS
FSTAB = (b'/dev/vda1 / ext4 defaults 0 1\n' + managed_block.BEGIN +
         b'\nUUID=u1 /volume1 ext4 defaults,nofail 0 2\n' +
         managed_block.END + b'\n')
EXPORTS = (managed_block.BEGIN + b'\n/volume1/nfs/pv1 10.0.0.0/24(' +
           OPTIONS.encode() + b')\n' + managed_block.END + b'\n')
LINK = '/dev/disk/by-id/virtio-0123456789abcdef0123'
# What the gathering command reports about a storage server that is
# already set up: (exit status, stdout, stderr) by fact.
SET_UP = {
    'link 0': (0, '/dev/vdc\n', ''),
    'stat 0': (0, '%s\t252:32\t61b0\n/volume1\t0:0\t41ed\n' % LINK, ''),
    'entry 0': (0, 'lost+found\0', ''),
    'probe 0': (0, 'TYPE=ext4\nUUID=u1\n', ''),
    'mounts': (0, '/ 252:1\n/volume1 252:32\n', ''),
    'package nfs-kernel-server': (0, 'install ok installed', ''),
    'file /etc/fstab': (0, FSTAB, ''),
    'file /etc/exports': (0, EXPORTS, ''),
    'directories': (0, '/volume1/nfs/pv1\t252:32\tnobody:nogroup\n', ''),
    'exportfs': (0, '/volume1/nfs/pv1\n\t\t10.0.0.0/24(rw)\n', ''),
}


BLANK = (0, 'size 1073741824\nfirst zero\nlast zero\n', '')


class FakeStorageServer(object):
    """Answers the gathering command with ``facts``; records every
    command; any other command succeeds with no output."""

    host = '10.0.0.5'

    def __init__(self, facts):
        self.facts = facts
        self.commands = []

    def run(self, argv, sudo=False, check=True, description=None, **kwargs):
        self.commands.append(argv)
        stdout = b''
        if argv[:2] == ['sh', '-c'] and argv[2] == server_steps._GATHER:
            boundary = argv[4].encode()
            for name, (status, out, err) in self.facts.items():
                out = out if isinstance(out, bytes) else out.encode()
                stdout += b'\n%s %s\n%s\n%s status %d\n%s' % (
                    boundary, name.encode(), out, boundary, status,
                    err.encode())
        return facts.CommandResult(0, stdout, b'')

    def failure(self, description, result, stderr=None):
        return exceptions.RemoteCommandError(
            self.host, description, result.exit_status, result.stdout,
            result.stderr if stderr is None else stderr)

    def install_file(self, data, path, **kwargs):
        self.commands.append(['install', path])


def set_up(executor, outcomes=None):
    server = param_model.StorageServer(
        'ssh', 'nic', 'ubuntu', 'secret',
        volumes=(param_model.VolumeSetup(
            'storage_server_volume1', '/volume1'),),
        exports=(param_model.NfsExport('/volume1/nfs/pv1', '10.0.0.0/24'),))
    attachments = {'storage_server_volume1': heat.VolumeAttachment(
        '0123456789abcdef0123-4567', '/dev/vdb')}
    proxy = types.SimpleNamespace(environment=dict)
    conf = types.SimpleNamespace(package_install_timeout=600)
    storage_setup.setup_storage_server(executor, server, attachments, proxy,
                                       conf, outcomes or step_report.Report())


def test_a_rerun_that_changes_nothing_runs_one_command():
    host = FakeStorageServer(SET_UP)
    outcomes = step_report.Report()
    set_up(host, outcomes)
    assert len(host.commands) == 1
    assert not any(outcome.changed for outcome in outcomes.outcomes)
    assert str(outcomes.outcomes[0]) == (
        '10.0.0.5: device of volume 0123456789abcdef0123-4567 unchanged '
        '(/dev/vdc (Nova reported /dev/vdb))')


def test_a_blank_volume_is_formatted_then_probed_again():
    answers = dict(SET_UP)
    del answers['link 0'], answers['entry 0'], answers['exportfs']
    answers.update({
        'stat 0': (0, '/dev/vdb\t252:16\t61b0\n', ''),
        'probe 0': (2, '', ''),
        'regions 0': BLANK,
        'mounts': (0, '/ 252:1\n', ''),
        'file /etc/exports': (0, b'', ''),
        'directories': (0, '', ''),
    })
    answers['file /etc/fstab'] = (0, b'/dev/vda1 / ext4 defaults 0 1\n', '')
    host = FakeStorageServer(answers)
    with pytest.raises(exceptions.StepError,
                       match='^format /dev/vdb failed on 10.0.0.5: the '
                             'filesystem on /dev/vdb has no type'):
        # The fake's blkid after mkfs prints nothing: the step says so.
        set_up(host)
    assert [argv[0] for argv in host.commands] == ['sh', 'mkfs', 'blkid']


@pytest.mark.parametrize('regions, found', [
    ((0, 'size 1073741824\nfirst data\nlast zero\n', ''),
     'data in its first MiB'),
    ((0, 'size 1073741824\nfirst zero\nlast data\n', ''),
     'data in its last MiB'),
    ((1, '', 'blockdev: boom'), 'its first and last MiB could not be read'),
])
def test_data_without_a_signature_is_never_formatted(regions, found):
    """A raw tar stream has no signature blkid knows: refused before any
    command that changes the host, the device and what was found named."""
    answers = dict(SET_UP)
    del answers['link 0'], answers['entry 0']
    answers.update({'stat 0': (0, '/dev/vdb\t252:16\t61b0\n', ''),
                    'probe 0': (2, '', ''), 'regions 0': regions,
                    'mounts': (0, '/ 252:1\n', '')})
    host = FakeStorageServer(answers)
    with pytest.raises(exceptions.StepError,
                       match='^format /dev/vdb failed on 10.0.0.5: /dev/vdb '
                             'holds no filesystem signature, but ' + found):
        set_up(host)
    assert [argv[0] for argv in host.commands] == ['sh']


@pytest.mark.parametrize('fact, answer, refusal', [
    ('entry 0', (1, '', 'find: boom'), None),  # not needed: mounted there
    ('probe 0', (4, '', 'blkid: boom'),
     '^format /dev/vdc failed on 10.0.0.5: .*blkid -p -- /dev/vdc.*boom'),
    ('stat 0', (1, '', 'stat: boom'),
     '^volume inspection failed on 10.0.0.5: .*stat -L.*boom'),
    ('mounts', (1, '', 'findmnt: boom'),
     '^volume inspection failed on 10.0.0.5: .*findmnt.*boom'),
    ('link 0', (1, '', 'readlink: boom'),
     '^device lookup for volume storage_server_volume1 failed on '
     '10.0.0.5: .*readlink -e.*boom'),
    ('file /etc/fstab', (1, '', 'cat: boom'),
     '^/etc/fstab update failed on 10.0.0.5: .*cat -- /etc/fstab.*boom'),
    ('package nfs-kernel-server', (2, '', 'dpkg-query: boom'),
     '^NFS server installation failed on 10.0.0.5: .*dpkg-query.*boom'),
    ('directories', (1, '', 'stat: boom'),
     '^export directories failed on 10.0.0.5: .*stat -L.*boom'),
    ('exportfs', (1, '', 'exportfs: boom'),
     '^NFS exports failed on 10.0.0.5: .*exportfs -v.*boom'),
    # Mounted elsewhere: refused before anything changes.
    ('mounts', (0, '/mnt 252:32\n', ''),
     '^mount /volume1 failed on 10.0.0.5: /dev/vdc is already mounted on '
     '/mnt, not on /volume1'),
])
def test_a_fact_fails_the_step_that_needs_it(fact, answer, refusal):
    host = FakeStorageServer(dict(SET_UP, **{fact: answer}))
    if refusal is None:
        set_up(host)
    else:
        with pytest.raises(exceptions.StepError, match=refusal):
            set_up(host)
    assert len(host.commands) == 1


def test_mount_over_a_non_empty_directory_changes_nothing():
    host = FakeStorageServer(dict(SET_UP, mounts=(0, '/ 252:1\n', '')))
    with pytest.raises(exceptions.StepError,
                       match="^mount /volume1 failed on 10.0.0.5: /volume1 "
                             "is not empty \\(it holds 'lost\\+found'\\)"):
        set_up(host)
    assert len(host.commands) == 1


VOLUMES = {'/volume1': '252:16', '/volume2': '252:32'}


def test_export_directories_are_created_then_chowned():
    host = FakeStorageServer({})
    listing = '/volume2/nfs/pv3\t252:32\troot:root\n'
    host.run = lambda argv, **kwargs: (
        host.commands.append(argv) or
        facts.CommandResult(0, listing.encode(), b''))
    outcomes = step_report.Report()
    server_steps.ensure_export_dirs(
        host, ['/volume1/nfs/pv1', '/volume2/nfs/pv2', '/volume2/nfs/pv3'],
        VOLUMES, {'/volume1/nfs/pv1': ['252:16', 'nobody:nogroup'],
                  '/volume2/nfs/pv2': ['252:32', 'root:root']}, outcomes)
    assert host.commands == [
        ['mkdir', '-p', '--', '/volume2/nfs/pv3'],
        ['stat', '-L', '--printf', '%n\t%Hd:%Ld\t%U:%G\n', '--',
         '/volume2/nfs/pv3'],
        ['chown', 'nobody:nogroup', '--', '/volume2/nfs/pv2',
         '/volume2/nfs/pv3']]
    assert [o.changed for o in outcomes.outcomes] == [False, True, True]


def test_export_directory_outside_every_volume_is_refused_untouched():
    host = FakeStorageServer({})
    with pytest.raises(exceptions.StorageSetupError,
                       match='export_dir /home/ubuntu is not inside any '
                             'mount_to'):
        server_steps.ensure_export_dirs(host, ['/home/ubuntu'], VOLUMES, {},
                                        step_report.Report())
    assert host.commands == []
