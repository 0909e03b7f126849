"""The storage server's decisions as tables: facts and desired state in,
commands or file contents out (or a refusal). No host, no executor."""

import re
import stat

import pytest

from kubernetes_mgmt_pv import exceptions
from kubernetes_mgmt_pv.remote import facts
from kubernetes_mgmt_pv.remote import managed_block
from kubernetes_mgmt_pv.request import param_model
from kubernetes_mgmt_pv.storage import server_steps

BLOCK = stat.S_IFBLK | 0o660
DIRECTORY = stat.S_IFDIR | 0o755
REGULAR = stat.S_IFREG | 0o644
MKFS = ['mkfs', '-t', 'ext4', '-q', '--', '/dev/vdb']


def result(status=0, stdout=b'', stderr=b''):
    return facts.CommandResult(status, stdout, stderr)


# -- the gathered facts -------------------------------------------------------

def test_sections_keep_stdout_bytes_status_and_stderr_apart():
    boundary = 'kubernetes-mgmt-pv-0123'
    output = (b'\nkubernetes-mgmt-pv-0123 file /etc/fstab\n'
              b'# admin\r\n\xe9 no final newline'
              b'\nkubernetes-mgmt-pv-0123 status 0\n'
              b'\nkubernetes-mgmt-pv-0123 probe 0\n'
              b'\nkubernetes-mgmt-pv-0123 status 2\n'
              b'\nkubernetes-mgmt-pv-0123 stat 0\n/dev/vdb\t252:16\t61b0\n'
              b'\nkubernetes-mgmt-pv-0123 status 1\n'
              b'stat: cannot statx \'/volume1\': No such file or directory')
    sections = facts.parse_sections(output, boundary)
    assert sorted(sections) == ['file /etc/fstab', 'probe 0', 'stat 0']
    fstab = sections['file /etc/fstab']
    assert (fstab.exit_status, fstab.stdout_bytes, fstab.stderr) == (
        0, b'# admin\r\n\xe9 no final newline', '')
    assert (sections['probe 0'].exit_status,
            sections['probe 0'].stdout_bytes) == (2, b'')
    assert sections['stat 0'].stdout == '/dev/vdb\t252:16\t61b0\n'
    assert server_steps.stat_errors(sections['stat 0']) == ''


@pytest.mark.parametrize('link, device', [
    (None, '/dev/vdb'),                                  # no volume id
    (result(1), '/dev/vdb'),                             # no by-id link
    (result(0, b'/dev/vdc\n'), '/dev/vdc'),              # the guest's name
    (result(0, b'/dev/vdb\n'), '/dev/vdb'),
])
def test_device_of_a_volume(link, device):
    assert server_steps.located_device('/dev/vdb', link) == device


@pytest.mark.parametrize('output, probe', [
    (result(2), {}),                                     # blank
    (result(0, b'TYPE=ext4\nUUID=1234\n'), {'TYPE': 'ext4', 'UUID': '1234'}),
    (result(0, b'PTTYPE=dos\n'), {'PTTYPE': 'dos'}),
    (result(4, b'', b'blkid: error'), None),             # blkid failed
])
def test_blkid_probe(output, probe):
    assert server_steps.parse_probe(output) == probe


@pytest.mark.parametrize('output, entry', [
    (None, None),                                        # not a directory
    (result(0, b''), None),                              # empty
    (result(0, b'lost+found\0'), 'lost+found'),
    (result(1, b'', b'find: Permission denied'), None),
])
def test_first_entry_of_a_mount_point(output, entry):
    assert server_steps.parse_entry(output) == entry


# -- the volume's filesystem --------------------------------------------------

ZEROS = {'first': 'zero', 'last': 'zero'}


@pytest.mark.parametrize('probe, regions, plan', [
    ({}, ZEROS, MKFS),                                       # blank device
    ({'TYPE': 'ext4', 'UUID': 'u1'}, ZEROS, None),           # ext4 present
    ({'TYPE': 'ext4', 'UUID': 'u1'}, None, None),            # regions moot
    ({'TYPE': 'xfs', 'UUID': 'u2'}, ZEROS, None),            # never reformat
    ({'PTTYPE': 'gpt'}, ZEROS,
     'holds no filesystem but other data (PTTYPE=gpt)'),
    ({'TYPE': '', 'USAGE': 'raid'}, ZEROS,
     'holds no filesystem but other data (TYPE=, USAGE=raid)'),
    # No signature blkid knows, yet not blank: a raw tar stream, a GPT
    # backup at the end, a block that cannot be read.
    ({}, {'first': 'data', 'last': 'zero'},
     'holds no filesystem signature, but data in its first MiB'),
    ({}, {'first': 'zero', 'last': 'data'},
     'holds no filesystem signature, but data in its last MiB'),
    ({}, {'first': 'data', 'last': 'data'},
     'holds no filesystem signature, but data in its first MiB and data '
     'in its last MiB'),
    ({}, {'first': 'zero', 'last': 'unreadable'},
     'holds no filesystem signature, but an unreadable block in its last '
     'MiB'),
    ({}, None, 'holds no filesystem signature, but its first and last MiB '
     'could not be read'),
])
def test_filesystem_plan(probe, regions, plan):
    if isinstance(plan, str):
        with pytest.raises(exceptions.StorageSetupError,
                           match=r'^/dev/vdb ' + re.escape(plan) +
                           '; refusing to format it'):
            server_steps.plan_filesystem('/dev/vdb', probe, regions)
    else:
        assert server_steps.plan_filesystem('/dev/vdb', probe, regions) == plan


@pytest.mark.parametrize('result, regions', [
    ((0, 'size 4096\nfirst zero\nlast zero\n'), ZEROS),
    ((0, 'size 8388608\nfirst data\nlast unreadable\n'),
     {'first': 'data', 'last': 'unreadable'}),
    ((0, 'size 0\nfirst zero\n'), None),         # cut short
    ((1, ''), None),                               # blockdev failed
    (None, None),                                  # not gathered
])
def test_regions_parsed(result, regions):
    if result is not None:
        result = facts.CommandResult(result[0], result[1].encode(), b'')
    assert server_steps.parse_regions(result) == regions


@pytest.mark.parametrize('probe, identity', [
    ({'TYPE': 'ext4', 'UUID': 'u1'}, ('ext4', 'u1')),
    ({'TYPE': 'ext4'}, 'the filesystem on /dev/vdb has no UUID'),
    ({'UUID': 'u1'}, 'the filesystem on /dev/vdb has no type'),
])
def test_filesystem_identity_for_fstab(probe, identity):
    if isinstance(identity, str):
        with pytest.raises(exceptions.StorageSetupError, match=identity):
            server_steps.filesystem_identity('/dev/vdb', probe)
    else:
        assert server_steps.filesystem_identity('/dev/vdb', probe) == identity


# -- the mount ----------------------------------------------------------------

def point(**facts):
    values = dict(device='/dev/vdb', mount_to='/volume1',
                  device_id='252:16', device_mode=BLOCK)
    values.update(facts)
    return server_steps.MountPoint(**values)


MOUNT = [['mkdir', '-p', '--', '/volume1'],
         ['mount', '-t', 'ext4', '--', '/dev/vdb', '/volume1']]


@pytest.mark.parametrize('facts, plan', [
    # Mounted already: nothing, even though the directory holds data.
    (dict(mounted_here='252:16', mode=DIRECTORY, entry='data'),
     []),
    (dict(mode=None), MOUNT),                            # will be created
    (dict(mode=DIRECTORY), MOUNT),                       # empty directory
    (dict(mode=DIRECTORY, entry='lost+found'),
     "/volume1 is not empty (it holds 'lost+found')"),
    (dict(mode=DIRECTORY, entry='dpkg'),
     "/volume1 is not empty (it holds 'dpkg'): mounting /dev/vdb over it"),
    (dict(mode=REGULAR), '/volume1 exists and is not a directory'),
    (dict(mounted_here='252:99'),
     'another filesystem (device 252:99) is already mounted on /volume1'),
    (dict(mounted_elsewhere=['/mnt']),
     '/dev/vdb is already mounted on /mnt, not on /volume1'),
    (dict(device_id=None), 'device /dev/vdb does not exist'),
    (dict(device_mode=REGULAR), '/dev/vdb is not a block device'),
])
def test_mount_plan(facts, plan):
    checked = point(**facts)
    if isinstance(plan, str):
        with pytest.raises(exceptions.StorageSetupError) as caught:
            server_steps.check_mount_point(checked)
        assert str(caught.value).startswith(plan)
    else:
        server_steps.check_mount_point(checked)
        assert server_steps.plan_mount(checked, 'ext4') == plan


@pytest.mark.parametrize('facts, listed', [
    (dict(mode=DIRECTORY), True),
    (dict(mode=DIRECTORY, mounted_here='252:16'), False),
    (dict(mode=None), False),
    (dict(mode=REGULAR), False),
])
def test_only_an_unmounted_directory_needs_its_listing(facts, listed):
    assert server_steps.needs_listing(point(**facts)) is listed


STATS = {'/dev/vdb': ['252:16', '61b0'], '/dev/vdc': ['252:32', '61b0'],
         '/volume1': ['0:0', '41ed']}
MOUNTS = [('/', '252:1'), ('/volume1', '252:16'), ('/mnt/other', '252:32')]


@pytest.mark.parametrize('device, mount_to, expected', [
    ('/dev/vdb', '/volume1', dict(device_id='252:16', mounted_here='252:16',
                                  mounted_elsewhere=(), mode=DIRECTORY)),
    ('/dev/vdc', '/volume2', dict(device_id='252:32', mounted_here=None,
                                  mounted_elsewhere=('/mnt/other',),
                                  mode=None)),
    ('/dev/vdd', '/volume2', dict(device_id=None, mounted_here=None,
                                  mounted_elsewhere=(), mode=None)),
])
def test_mount_point_facts(device, mount_to, expected):
    found = server_steps.mount_point(device, mount_to, STATS, MOUNTS)
    assert {key: getattr(found, key) for key in expected} == expected


# -- /etc/fstab and /etc/exports blocks ---------------------------------------

FSTAB_LINES = server_steps.fstab_lines([('u1', '/volume1', 'ext4')])
FSTAB_BLOCK = (managed_block.BEGIN + b'\nUUID=u1 /volume1 ext4 '
               b'defaults,nofail 0 2\n' + managed_block.END + b'\n')
ADMIN = b'/dev/vda1 / ext4 defaults 0 1\n'


@pytest.mark.parametrize('current, planned', [
    (None, FSTAB_BLOCK),                                 # no file yet
    (ADMIN, ADMIN + FSTAB_BLOCK),                        # block appended
    (ADMIN + FSTAB_BLOCK, None),                         # nothing to do
    (ADMIN + FSTAB_BLOCK.replace(b'u1', b'u0'), ADMIN + FSTAB_BLOCK),
    (managed_block.BEGIN + b'\n', 'unterminated managed block'),
])
def test_fstab_block_plan(current, planned):
    if isinstance(planned, str):
        with pytest.raises(exceptions.StorageSetupError,
                           match='/etc/fstab: ' + planned):
            managed_block.planned_content('/etc/fstab', current, FSTAB_LINES)
    else:
        assert managed_block.planned_content(
            '/etc/fstab', current, FSTAB_LINES) == planned


OPTIONS = server_steps.EXPORT_OPTIONS
EXPORTS = [param_model.NfsExport('/volume1/nfs/pv1', 'WORKER1'),
           param_model.NfsExport('/volume1/nfs/pv2', '10.10.0.0/24')]
EXPORTS_BLOCK = (managed_block.BEGIN + b'\n' +
                 ('/volume1/nfs/pv1 WORKER1(%s)\n'
                  '/volume1/nfs/pv2 10.10.0.0/24(%s)\n' % (OPTIONS, OPTIONS)
                  ).encode() + managed_block.END + b'\n')
ACTIVE = ('/volume1/nfs/pv1\n\t\tworker1(%s)\n'
          '/volume1/nfs/pv2\n\t\t10.10.0.0/24(%s)\n' % (OPTIONS, OPTIONS))


@pytest.mark.parametrize('current, exportfs, planned, reexport', [
    # Everything in place; exportfs prints the host name in lower case.
    (EXPORTS_BLOCK, ACTIVE, None, False),
    # No file, or a file without the block: write it and re-export.
    (None, '', EXPORTS_BLOCK, True),
    (b'/srv x(ro)\n', ACTIVE, b'/srv x(ro)\n' + EXPORTS_BLOCK, True),
    # The file says it, but an export is not active: re-export only.
    (EXPORTS_BLOCK, ACTIVE.split('/volume1/nfs/pv2')[0], None, True),
    (EXPORTS_BLOCK, '', None, True),
])
def test_exports_plan(current, exportfs, planned, reexport):
    assert server_steps.plan_exports(EXPORTS, current, exportfs) == (
        planned, reexport)


# -- the export directories ---------------------------------------------------

VOLUMES = {'/volume1': '252:16', '/volume2': '252:32'}


@pytest.mark.parametrize('found, chown', [
    ({'/volume1/nfs/pv1': ['252:16', 'nobody:nogroup'],
      '/volume2/nfs/pv2': ['252:32', 'nobody:nogroup']}, []),
    ({'/volume1/nfs/pv1': ['252:16', 'root:root'],
      '/volume2/nfs/pv2': ['252:32', 'nobody:nogroup']},
     ['/volume1/nfs/pv1']),
    # A symlink (followed by stat -L) or another mount inside the volume.
    ({'/volume1/nfs/pv1': ['0:41', 'ubuntu:ubuntu'],
      '/volume2/nfs/pv2': ['252:32', 'nobody:nogroup']},
     '/volume1/nfs/pv1 is on device 0:41, not on the volume mounted on '
     '/volume1 (device 252:16); refusing to chown or export it'),
    ({'/volume1/nfs/pv1': ['252:32', 'nobody:nogroup'],
      '/volume2/nfs/pv2': ['252:32', 'nobody:nogroup']},
     '/volume1/nfs/pv1 is on device 252:32'),
    ({'/volume2/nfs/pv2': ['252:32', 'root:root']},
     'cannot stat /volume1/nfs/pv1 after creating it'),
])
def test_export_directory_ownership_plan(found, chown):
    directories = ['/volume1/nfs/pv1', '/volume2/nfs/pv2']
    if isinstance(chown, str):
        with pytest.raises(exceptions.StorageSetupError) as caught:
            server_steps.plan_ownership(directories, VOLUMES, found)
        assert str(caught.value).startswith(chown)
    else:
        assert server_steps.plan_ownership(
            directories, VOLUMES, found) == chown


@pytest.mark.parametrize('directories, homes', [
    (['/volume1/nfs/pv1', '/volume2'],
     {'/volume1/nfs/pv1': '/volume1', '/volume2': '/volume2'}),
    (['/volume10/pv', '/home/ubuntu'],
     'export_dir /volume10/pv, /home/ubuntu is not inside any mount_to'),
])
def test_export_directories_must_be_on_a_volume(directories, homes):
    if isinstance(homes, str):
        with pytest.raises(exceptions.StorageSetupError, match=homes):
            server_steps.export_homes(directories, VOLUMES)
    else:
        assert server_steps.export_homes(directories, VOLUMES) == homes


# -- the whole setup ---------------------------------------------------------

SERVER = param_model.StorageServer(
    'ssh', 'nic', 'ubuntu', 'secret',
    volumes=(param_model.VolumeSetup('storage_server_volume1', '/volume1'),),
    exports=(param_model.NfsExport('/volume1/nfs/pv1', '10.0.0.0/24'),))
SETUP_EXPORTS = managed_block.with_block(b'', server_steps.export_lines(
    SERVER.exports))
SETUP_FSTAB = managed_block.with_block(ADMIN, FSTAB_LINES)
MOUNTED = server_steps.MountPoint('/dev/vdb', '/volume1', '252:16', BLOCK,
                                  mounted_here='252:16', mode=DIRECTORY)
EMPTY = server_steps.MountPoint('/dev/vdb', '/volume1', '252:16', BLOCK,
                                mode=DIRECTORY)
INSTALLED = {'nfs-kernel-server': 'install ok installed'}
OWNED = {'/volume1/nfs/pv1': ['252:16', 'nobody:nogroup']}
EXPORTED = '/volume1/nfs/pv1\n\t\t10.0.0.0/24(rw)\n'
BOOM = exceptions.StorageSetupError('boom')


def server_facts(point=MOUNTED, probe=None, fstab=SETUP_FSTAB,
                 statuses=INSTALLED, directories=OWNED,
                 exports=SETUP_EXPORTS, exportfs=EXPORTED, listing=None):
    def fact(value):
        return server_steps.Fact(error=value) if value is BOOM else \
            server_steps.Fact(value)

    return server_steps.ServerFacts(
        points=(point,), listings=(fact(listing),),
        probes=(fact({'TYPE': 'ext4', 'UUID': 'u1'} if probe is None
                     else probe),),
        regions=(ZEROS,), fstab=fact(fstab), statuses=fact(statuses),
        directories=fact(directories), exports=fact(exports),
        exportfs=fact(exportfs))


def fields(plan):
    return dict(
        mkfs=[list(v.mkfs) if v.mkfs else None for v in plan.volumes],
        mount=[[list(argv) for argv in v.mount] for v in plan.volumes],
        fstab=plan.fstab is not None,
        fstab_after_format=plan.fstab_after_format,
        install=list(plan.install), create=list(plan.create),
        chown=list(plan.chown), restat=plan.restat_directories,
        exports=plan.exports is not None, reexport=plan.reexport,
        reread=plan.reread_exports, changes=plan.changes)


NOTHING = dict(mkfs=[None], mount=[[]], fstab=False,
               fstab_after_format=False, install=[], create=[], chown=[],
               restat=False, exports=False, reexport=False, reread=False,
               changes=False)


@pytest.mark.parametrize('case, found, expected', [
    ('set up: nothing to do', server_facts(), NOTHING),
    ('a blank volume: mkfs and mount; fstab after mkfs, the directories '
     'after the mount (their facts are not even needed)',
     server_facts(point=EMPTY, probe={},
                  directories=BOOM),
     dict(NOTHING, mkfs=[MKFS], mount=[MOUNT], fstab_after_format=True,
          restat=True, changes=True)),
    ('its filesystem, not mounted: mount, fstab now',
     server_facts(point=EMPTY, fstab=ADMIN),
     dict(NOTHING, mount=[MOUNT], fstab=True, restat=True, changes=True)),
    ('no NFS server: install it, /etc/exports after (its facts are not '
     'needed)', server_facts(statuses={}, exports=BOOM, exportfs=BOOM),
     dict(NOTHING, install=['nfs-kernel-server'], reexport=True,
          reread=True, changes=True)),
    ('an export not active (exportfs -u): re-export only',
     server_facts(exportfs=''), dict(NOTHING, reexport=True, changes=True)),
    ('/etc/exports without its block: write and re-export',
     server_facts(exports=b''),
     dict(NOTHING, exports=True, reexport=True, changes=True)),
    ('an export directory missing: created and chowned',
     server_facts(directories={}),
     dict(NOTHING, create=['/volume1/nfs/pv1'], chown=['/volume1/nfs/pv1'],
          changes=True)),
    ('an export directory owned by root: chowned',
     server_facts(directories={'/volume1/nfs/pv1': ['252:16', 'root:root']}),
     dict(NOTHING, chown=['/volume1/nfs/pv1'], changes=True)),
])
def test_server_plan(case, found, expected):
    assert fields(server_steps.plan_server('10.0.0.5', SERVER, found)) == \
        expected, case


@pytest.mark.parametrize('found, step', [
    (server_facts(fstab=BOOM), '/etc/fstab update'),
    (server_facts(statuses=BOOM), 'NFS server installation'),
    (server_facts(directories=BOOM), 'export directories'),
    (server_facts(exports=BOOM), 'NFS exports'),
    (server_facts(exportfs=BOOM), 'NFS exports'),
    (server_facts(probe=BOOM), 'format /dev/vdb'),
    (server_facts(point=EMPTY, listing=BOOM), 'mount /volume1'),
    (server_facts(directories={
        '/volume1/nfs/pv1': ['252:1', 'nobody:nogroup']}),
     'export directories'),  # not on the volume
])
def test_a_failed_fact_or_refusal_is_named_by_its_step(found, step):
    with pytest.raises(exceptions.StepError,
                       match='^%s failed on 10.0.0.5' % re.escape(step)):
        server_steps.plan_server('10.0.0.5', SERVER, found)


def test_a_mounted_volumes_listing_is_not_needed():
    plan = server_steps.plan_server('10.0.0.5', SERVER,
                                    server_facts(listing=BOOM))
    assert not plan.changes
