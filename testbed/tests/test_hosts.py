"""Tests of the test hosts themselves (testbed).

They need root, `ip netns` and sshd and are skipped otherwise; the parsing
tests at the end run everywhere.
"""

import glob
import ipaddress
import os
import socket
import stat
import subprocess
import tempfile
import threading

import paramiko
import pytest

from testbed import faults
from testbed import host_scripts
from testbed import hosts
from testbed.hosts import require_testbed
from testbed.hosts import Testbed
from testbed import nfs
from testbed import polling
from testbed import processes
from testbed import subnets

SKIP_REASON = require_testbed()
needs_testbed = pytest.mark.skipif(SKIP_REASON is not None,
                                   reason=SKIP_REASON or '')

# Files of the real machine that no host activity may change.
REAL_FILES = ('/etc/exports', '/etc/fstab', '/etc/hosts', '/etc/hostname',
              '/etc/passwd', '/etc/group', '/var/lib/nfs/etab')


def ssh(client, cmd):
    """Run cmd over SSH; return (exit status, stdout)."""
    _, stdout, _ = client.exec_command(cmd)
    out = stdout.read().decode()
    return stdout.channel.recv_exit_status(), out


def snapshot_real_machine():
    state = {'hostname': socket.gethostname(),
             '/volume exists': os.path.exists('/volume')}
    for path in REAL_FILES:
        try:
            with open(path, 'rb') as f:
                state[path] = f.read()
        except FileNotFoundError:
            state[path] = None
    return state


def all_pids():
    return [int(entry) for entry in os.listdir('/proc') if entry.isdigit()]


def started_processes(pids):
    """(pid, start time) of the processes that still exist."""
    found = set()
    for pid in pids:
        try:
            with open(f'/proc/{pid}/stat') as f:
                fields = f.read().rsplit(')', 1)[1].split()
        except FileNotFoundError:
            continue
        found.add((pid, int(fields[19])))  # field 22: starttime
    return found


def real_mounts():
    with open('/proc/self/mountinfo') as f:
        return f.read()


def leftovers(prefix, workdir):
    """Anything on the machine that a testbed with this prefix/dir created."""
    found = [f'netns {name}' for name in subprocess.run(
        ['ip', 'netns', 'list'], capture_output=True, text=True,
        check=True).stdout.split() if name.startswith(prefix)]
    links = subprocess.run(['ip', '-o', 'link', 'show'], capture_output=True,
                           text=True, check=True).stdout
    names = [line.split(':')[1].strip().split('@')[0]
             for line in links.splitlines()]
    found += [f'link {name}' for name in names if name.startswith(prefix)]
    loops = subprocess.run(['losetup', '--list', '--noheadings', '--output',
                            'NAME,BACK-FILE'], capture_output=True, text=True,
                           check=True).stdout
    found += [f'loop {line}' for line in loops.splitlines()
              if workdir in line]
    if os.path.exists(workdir):
        found.append(f'dir {workdir}')
    return found


@pytest.fixture(scope='module')
def real_state():
    """The real machine's state before any host ran."""
    return snapshot_real_machine()


@pytest.fixture(scope='module')
def tb(real_state):
    """storage (1 volume) + master + worker, shared by the module."""
    with Testbed() as testbed:
        testbed.add_host('storage', 'storage', volumes=1)
        testbed.add_host('master', 'master')
        testbed.add_host('worker', 'worker')
        yield testbed


@pytest.fixture
def make_testbed():
    """Factory for extra, short-lived testbeds; all stopped at teardown."""
    made = []

    def make(**kwargs):
        testbed = Testbed(**kwargs)
        made.append(testbed)
        testbed.start()
        return testbed

    yield make
    for testbed in made:
        testbed.stop()


@pytest.fixture(scope='module')
def volume(tb):
    """Storage host's /dev/vdb, formatted and mounted on /volume via SSH."""
    with tb.hosts['storage'].ssh_client() as client:
        status, out = ssh(client, 'sudo mkfs -t ext4 -q /dev/vdb && '
                                  'sudo mkdir -p /volume && '
                                  'sudo mount /dev/vdb /volume && '
                                  'findmnt -n -o SOURCE,FSTYPE /volume')
    assert status == 0, out
    return out.split()


@needs_testbed
def test_ssh_password_login_sudo_and_hostname(tb):
    for name, host in tb.hosts.items():
        with host.ssh_client() as client:
            # Debian's user PATH lacks sbin unless /etc/environment adds it.
            assert ssh(client, 'id -un; sudo -n id -u; hostname; '
                               'command -v exportfs') == (
                0, f'ubuntu\n0\n{name}\n/usr/sbin/exportfs\n')


@needs_testbed
def test_the_client_key_logs_in_and_is_placed_private(tb, tmp_path):
    directory = tb.place_client_key(str(tmp_path / 'keys'), 'a', 'b')
    assert stat.S_IMODE(os.stat(directory).st_mode) == 0o700
    for name in ('a', 'b'):
        status = os.lstat(os.path.join(directory, name))
        assert stat.S_ISREG(status.st_mode)
        assert stat.S_IMODE(status.st_mode) == 0o600
    key = paramiko.Ed25519Key.from_private_key_file(
        os.path.join(directory, 'a'))
    for host in tb.hosts.values():
        with paramiko.SSHClient() as client:
            client.set_missing_host_key_policy(paramiko.AutoAddPolicy())
            client.connect(host.ip, username='ubuntu', pkey=key,
                           look_for_keys=False, allow_agent=False,
                           timeout=10)
            assert ssh(client, 'id -un') == (0, 'ubuntu\n')


@needs_testbed
def test_hosts_resolve_and_reach_each_other_and_the_runner(tb):
    with socket.socket() as server:
        server.bind((tb.bridge_ip, 0))
        server.listen()
        server.settimeout(10)
        port = server.getsockname()[1]
        accepted = []

        def accept_one_per_host():
            for _ in tb.hosts:
                connection, peer = server.accept()
                connection.close()
                accepted.append(peer[0])

        acceptor = threading.Thread(target=accept_one_per_host,
                                    daemon=True)
        acceptor.start()
        names = ' '.join(tb.hosts)
        for host in tb.hosts.values():
            with host.ssh_client() as client:
                status, out = ssh(client, f'getent hosts {names}')
                assert sorted(out.split()) == sorted(
                    [h.ip for h in tb.hosts.values()] + list(tb.hosts))
                connect = ' && '.join(
                    f'timeout 5 bash -c "</dev/tcp/{name}/22"'
                    for name in tb.hosts)
                assert ssh(client, connect)[0] == 0
                assert ssh(client, 'timeout 5 bash -c '
                           f'"</dev/tcp/{tb.bridge_ip}/{port}"')[0] == 0
        acceptor.join(timeout=5)
    assert sorted(accepted) == sorted(h.ip for h in tb.hosts.values())


@needs_testbed
def test_volume_mount_is_invisible_on_the_real_machine(tb, volume):
    assert volume == ['/dev/vdb', 'ext4']
    storage = tb.hosts['storage']
    loop = storage._disks[0].loop
    storage.write_file('/volume/data', 'on the volume\n')
    assert storage.read_file('/volume/data') == 'on the volume\n'
    assert loop not in real_mounts()
    assert ' /volume ' not in real_mounts()
    assert not os.path.exists('/dev/vdb')
    assert not os.path.exists('/volume/data')


@needs_testbed
def test_host_writes_stay_inside_the_host(tb):
    marker = f'{tb.prefix}-marker'
    with tb.hosts['worker'].ssh_client() as client:
        status, _ = ssh(client, f'echo x > /tmp/{marker} && '
                                f'sudo sh -c "echo x > /etc/{marker}"')
    assert status == 0
    assert tb.hosts['worker'].read_file(f'/etc/{marker}') == 'x\n'
    assert not os.path.exists(f'/tmp/{marker}')
    assert not os.path.exists(f'/etc/{marker}')
    assert tb.hosts['master'].run(f'test -e /etc/{marker}',
                                  check=False).returncode == 1


@needs_testbed
def test_nfs_round_trip_through_ganesha(tb, volume):
    storage, worker = tb.hosts['storage'], tb.hosts['worker']
    storage.write_file(
        '/etc/exports',
        f'/volume {tb.subnet}(rw,sync,no_subtree_check,no_root_squash)\n')
    storage.run('exportfs -ra')
    exports = nfs.active_exports(storage)
    assert [(e.path, e.client) for e in exports] == [('/volume', tb.subnet)]

    nfs.start_ganesha(storage)
    nfs.nfs_write(worker, storage.ip, '/volume', 'hello.txt', 'from worker\n')
    assert storage.read_file('/volume/hello.txt') == 'from worker\n'
    assert nfs.nfs_read(worker, storage.ip, '/volume',
                        'hello.txt') == 'from worker\n'


@needs_testbed
def test_ganesha_refuses_clients_not_exported_to(tb, volume):
    storage = tb.hosts['storage']
    storage.write_file('/volume/shared.txt', 'shared\n')
    nfs.start_ganesha(storage, [nfs.Export(
        '/volume', tb.hosts['worker'].ip, ('ro', 'no_root_squash'))])
    assert nfs.nfs_read(tb.hosts['worker'], storage.ip, '/volume',
                        'shared.txt') == 'shared\n'
    with pytest.raises(subprocess.CalledProcessError):
        nfs.nfs_read(tb.hosts['master'], storage.ip, '/volume', 'shared.txt')
    with pytest.raises(subprocess.CalledProcessError):
        nfs.nfs_write(tb.hosts['worker'], storage.ip, '/volume', 'new', 'x')


@needs_testbed
def test_ganesha_root_squash_maps_root_to_nobody(tb, volume):
    storage = tb.hosts['storage']
    storage.run('mkdir -p -m 1777 /volume/open')
    nfs.start_ganesha(storage, [nfs.Export(
        '/volume', tb.subnet, ('rw', 'root_squash'))])
    nfs.nfs_write(tb.hosts['worker'], storage.ip, '/volume', 'open/squashed',
                  'x')
    assert storage.run('stat -c %u:%g /volume/open/squashed').stdout == (
        '65534:65534\n')


@needs_testbed
def test_ganesha_cannot_serve_the_overlay_root(tb):
    with pytest.raises(ValueError, match='overlay'):
        nfs.start_ganesha(tb.hosts['storage'],
                          [nfs.Export('/srv', '<world>', ('rw',))])


@needs_testbed
def test_real_machine_untouched(tb, volume, real_state):
    """Runs after the driver-like steps above (file order)."""
    assert snapshot_real_machine() == real_state


@needs_testbed
def test_replace_host_gives_a_fresh_root(make_testbed):
    testbed = make_testbed()
    old = testbed.add_host('worker', 'worker')
    old.write_file('/home/ubuntu/before-heal', 'old\n')
    old_processes = started_processes(
        processes.pids_in_namespace(processes.pid_namespace(old.pid)))
    assert old_processes

    new = testbed.replace_host('worker')

    # By PID and start time: the kernel recycles namespace inode numbers,
    # so the new host's namespace may carry the old one's.
    assert old_processes & started_processes(all_pids()) == set()
    assert (new.ip, new.role) == (old.ip, 'worker')
    assert new.run('test -e /home/ubuntu/before-heal',
                   check=False).returncode == 1
    with new.ssh_client() as client:
        assert ssh(client, 'hostname') == (0, 'worker\n')

    moved = testbed.replace_host('worker', same_ip=False)
    assert moved.ip != new.ip
    with moved.ssh_client() as client:
        assert ssh(client, 'hostname') == (0, 'worker\n')

    # A VM still booting (hold_sshd): no sshd yet, but its own root from
    # the start (every host's /etc/hosts was just rewritten), until its
    # sshd is let go.
    held = testbed.replace_host('worker', hold_sshd=True)
    marker = f'{testbed.prefix}-held'
    held.write_file(f'/etc/{marker}', 'x\n')
    assert not os.path.exists(f'/etc/{marker}')
    assert os.path.exists(os.path.join(held.written_files_dir, 'etc',
                                       marker))
    assert 'worker' in held.read_file('/etc/hosts')
    assert hosts.tcp_banner(held.ip, 22) == b''
    held.run(f'echo > {host_scripts.SSHD_GO}')
    polling.wait_until(lambda: hosts.tcp_banner(held.ip, 22), 'sshd')
    with held.ssh_client() as client:
        assert ssh(client, 'hostname') == (0, 'worker\n')


@needs_testbed
def test_a_host_that_is_not_running_takes_no_command(make_testbed):
    """Its PID is soon another process's: nsenter would enter that one."""
    testbed = make_testbed()
    testbed.add_host('worker', 'worker')
    testbed.add_host('other', 'worker')
    testbed.power_off('worker')
    powered_off = testbed.hosts['worker']
    replaced = testbed.hosts['other']
    testbed.replace_host('other')
    for host in (powered_off, replaced):
        with pytest.raises(hosts.HostDownError, match=host.name):
            host.run('true')
        with pytest.raises(hosts.HostDownError):
            faults.host_root(host)
    assert testbed.hosts['other'].run('hostname').stdout == 'other\n'


@needs_testbed
def test_replace_host_volumes_kept_or_blank(make_testbed):
    testbed = make_testbed()
    storage = testbed.add_host('storage', 'storage', volumes=2,
                               volume_size_mb=64)
    assert storage.volumes == ['/dev/vdb', '/dev/vdc']
    storage.run('mkfs.ext4 -q /dev/vdc && mkdir /data && '
                'mount /dev/vdc /data && echo kept > /data/file')

    healed = testbed.replace_host('storage', keep_volumes=True)
    healed.run('mkdir /data && mount /dev/vdc /data')
    assert healed.read_file('/data/file') == 'kept\n'

    blank = testbed.replace_host('storage')
    assert blank.volumes == ['/dev/vdb', '/dev/vdc']
    assert blank.run('blkid /dev/vdc', check=False).returncode == 2


@needs_testbed
def test_remove_host_and_stop_leave_nothing_behind(make_testbed):
    testbed = make_testbed()
    prefix, workdir = testbed.prefix, testbed.workdir
    storage = testbed.add_host('storage', 'storage', volumes=2)
    worker = testbed.add_host('worker', 'worker')
    storage.run('mkfs.ext4 -q /dev/vdb && mkdir /volume && '
                'mount /dev/vdb /volume')
    with worker.ssh_client() as client:
        assert ssh(client, 'nohup sleep 600 >/dev/null 2>&1 &')[0] == 0
    namespaces = {name: processes.pid_namespace(h.pid)
                  for name, h in testbed.hosts.items()}
    # sshd plus the background sleep
    assert len(processes.pids_in_namespace(namespaces['worker'])) >= 2
    assert len([item for item in leftovers(prefix, workdir)
                if item.startswith('loop')]) == 2

    testbed.remove_host('storage')
    assert processes.pids_in_namespace(namespaces['storage']) == []
    assert set(leftovers(prefix, workdir)) == {
        f'netns {prefix}-worker', *(f'link {v}' for v in worker._veths),
        f'link {prefix}br', f'dir {workdir}'}
    assert not os.path.exists(storage._dir)

    testbed.stop()
    assert processes.pids_in_namespace(namespaces['worker']) == []
    assert leftovers(prefix, workdir) == []
    assert testbed.workdir is None


@needs_testbed
def test_a_cluster_network_is_a_second_nic_on_a_second_bridge(make_testbed):
    testbed = make_testbed(cluster_network=True)
    prefix, workdir = testbed.prefix, testbed.workdir
    master = testbed.add_host('master', 'master')
    worker = testbed.add_host('worker', 'worker')
    cluster = testbed.cluster_subnet
    assert not cluster.overlaps(ipaddress.ip_network(testbed.subnet))
    for host in (master, worker):
        assert ipaddress.ip_address(host.cluster_ip) in cluster
        assert host.cluster_ip.split('.')[-1] == host.ip.split('.')[-1]
        nics = host.run('ip -o -4 addr show').stdout
        assert f'eth0    inet {host.ip}/24' in nics
        assert f'eth1    inet {host.cluster_ip}/24' in nics
    # The hosts reach each other, and the runner reaches them, on both.
    banner = master.run(f"timeout 5 bash -c 'exec 3<>/dev/tcp/"
                        f"{worker.cluster_ip}/22; head -c4 <&3'").stdout
    assert banner == 'SSH-'
    assert hosts.tcp_banner(worker.cluster_ip, 22).startswith(b'SSH-')
    testbed.stop()
    assert leftovers(prefix, workdir) == []


@needs_testbed
def test_failed_add_host_cleans_up(make_testbed, monkeypatch):
    testbed = make_testbed()
    prefix, workdir = testbed.prefix, testbed.workdir

    def broken(host):
        raise RuntimeError('sshd did not come up')

    with monkeypatch.context() as patch:
        patch.setattr(Testbed, '_sshd_ready', staticmethod(broken))
        with pytest.raises(RuntimeError, match='sshd did not come up'):
            testbed.add_host('storage', 'storage', volumes=1)
    assert testbed.hosts == {}
    assert [item for item in leftovers(prefix, workdir)
            if not item.startswith(('dir', f'link {prefix}br'))] == []
    # The testbed is still usable after the failure.
    assert testbed.add_host('storage', 'storage', volumes=1).volumes == [
        '/dev/vdb']
    testbed.stop()
    assert leftovers(prefix, workdir) == []


@needs_testbed
def test_failed_start_cleans_up(monkeypatch):
    real_run = hosts._run
    testbed = Testbed()

    def failing_run(args, **kwargs):
        if args[:3] == ['ip', 'link', 'set']:
            raise RuntimeError('injected failure')
        return real_run(args, **kwargs)

    monkeypatch.setattr(hosts, '_run', failing_run)
    with pytest.raises(RuntimeError, match='injected failure'):
        testbed.start()
    monkeypatch.undo()
    assert testbed.workdir is None
    workdir_pattern = os.path.join(tempfile.gettempdir(),
                                   f'{testbed.prefix}-')
    assert leftovers(testbed.prefix, workdir_pattern) == []
    assert glob.glob(workdir_pattern + '*') == []


@needs_testbed
def test_two_testbeds_coexist(make_testbed):
    first, second = make_testbed(), make_testbed()
    assert first.prefix != second.prefix
    assert first.subnet != second.subnet
    one = first.add_host('worker', 'worker')
    two = second.add_host('worker', 'worker')
    for host in (one, two):
        with host.ssh_client() as client:
            assert ssh(client, 'hostname') == (0, 'worker\n')
    # Separate bridges and no routing: the networks cannot see each other.
    assert one.run(f'timeout 5 bash -c "</dev/tcp/{two.ip}/22"',
                   check=False).returncode != 0


@needs_testbed
def test_purged_package_reinstalls_offline_from_apt_cache(make_testbed):
    testbed = make_testbed(purge_packages=('libnfs-utils',))
    host = testbed.add_host('worker', 'worker')
    status = "dpkg-query -W -f='${Status}' libnfs-utils"
    assert host.run(status, check=False).stdout != 'install ok installed'
    assert subprocess.run(status, shell=True, capture_output=True,
                          text=True).stdout == 'install ok installed'
    with host.ssh_client() as client:
        assert ssh(client, 'sudo apt-get install -y -q libnfs-utils')[0] == 0
    assert host.run(status).stdout == 'install ok installed'


def test_role_purged_packages_are_missing_from_that_roles_hosts(
        make_testbed):
    testbed = make_testbed(role_purge_packages={'worker': ('libnfs-utils',)})
    worker = testbed.add_host('worker', 'worker')
    storage = testbed.add_host('storage', 'storage')
    based = testbed.add_host('based', 'worker', role_image=False)
    status = "dpkg-query -W -f='${Status}' libnfs-utils"
    assert worker.run(status, check=False).stdout != 'install ok installed'
    assert storage.run(status).stdout == 'install ok installed'
    assert based.run(status).stdout == 'install ok installed'
    # A heal's new VM boots from the image the old one had.
    assert testbed.replace_host('based').run(status).stdout == \
        'install ok installed'
    assert testbed.replace_host('worker').run(
        status, check=False).stdout != 'install ok installed'


def test_package_lists_name_only_what_an_offline_host_can_install(tb):
    """The image's lists are trimmed (host_scripts.BASE_SCRIPT) to the
    runner's installed packages and its cached .debs, so that apt-get
    does not weigh 63,000 packages a host could never download."""
    host = next(iter(tb.hosts.values()))
    listed = set(host.run(
        "apt-cache dumpavail | sed -n 's/^Package: //p'").stdout.split())
    installed = subprocess.run(
        ['dpkg-query', '-W', '-f=${Package}\\n'], capture_output=True,
        text=True, check=True).stdout.split()
    cached = {name.split('_', 1)[0]
              for name in os.listdir('/var/cache/apt/archives')
              if name.endswith('.deb')}
    assert 'nfs-common' in listed
    assert listed <= set(installed) | cached, sorted(
        listed - set(installed) - cached)[:10]


def test_parse_exportfs_handles_wrapped_long_paths():
    text = ('/srv/a/rather/long/export/path\n'
            '\t\t10.1.2.13(sync,wdelay,ro,root_squash)\n'
            '/volume       \t10.1.2.0/24(sync,rw,no_root_squash)\n'
            '/volume       \t<world>(sync,ro)\n')
    assert nfs.parse_exportfs(text) == [
        nfs.Export('/srv/a/rather/long/export/path', '10.1.2.13',
                   ('sync', 'wdelay', 'ro', 'root_squash')),
        nfs.Export('/volume', '10.1.2.0/24',
                   ('sync', 'rw', 'no_root_squash')),
        nfs.Export('/volume', '<world>', ('sync', 'ro')),
    ]


def test_ganesha_config_has_one_export_per_path_and_client_blocks():
    config = nfs.ganesha_config(nfs.parse_exportfs(
        '/volume 10.1.2.0/24(rw,no_root_squash)\n'
        '/volume <world>(ro,all_squash)\n'
        '/other 10.1.2.13(rw,root_squash)\n'))
    assert config.count('EXPORT {') == 2
    assert 'Export_Id = 1; Path = "/volume"' in config
    assert 'Export_Id = 2; Path = "/other"' in config
    assert ('CLIENT { Clients = 10.1.2.0/24; Access_Type = RW; '
            'Squash = No_Root_Squash; }') in config
    assert ('CLIENT { Clients = *; Access_Type = RO; '
            'Squash = All_Squash; }') in config
    assert ('CLIENT { Clients = 10.1.2.13; Access_Type = RW; '
            'Squash = Root_Squash; }') in config


def test_the_bridge_keeps_its_mac_when_vms_come_and_go(tb):
    """Host-side veths get random MACs; a bridge without an address of its
    own would take the lowest one, changing the bridge IP's MAC under
    every host's neighbour cache."""
    def bridge(attribute):
        with open('/sys/class/net/%s/%s' % (tb.bridge, attribute)) as stream:
            return stream.read().strip()
    # 3: NET_ADDR_SET, an address given by the user, which ports never
    # change (random ones, 0 or 1, follow the lowest port MAC).
    assert bridge('addr_assign_type') == '3'
    before = bridge('address')
    tb.add_host('mac-test', 'worker')
    try:
        assert bridge('address') == before
    finally:
        tb.remove_host('mac-test')


def test_no_subnet_falls_in_the_clusters_service_network(monkeypatch):
    """The driver refuses a node network inside the Service network, so a
    test run whose random subnet landed there would fail."""
    monkeypatch.setattr(subnets, 'used_networks', lambda: [])
    picked = [subnets.free_subnet() for _ in range(500)]
    assert not [net for net in picked
                if net.overlaps(subnets.KUBERNETES_SERVICE_NETWORK)]
