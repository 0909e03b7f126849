"""Throwaway "VMs" for driver tests: real OpenSSH hosts in Linux namespaces.

Each host is a network namespace on a private bridge plus mount/PID/UTS/IPC
namespaces whose PID 1 is a chrooted ``sshd``.  Its root file system is an
overlay over the runner's ``/``, so the hosts see the runner's installed
packages while every write lands in a per-host upper directory.  Cinder
volumes are sparse files on loop devices that appear in the host as
``/dev/vdb``, ``/dev/vdc``, ...  Killing a host's PID 1 makes its processes
and mounts vanish, which is how a VM lost to a heal is simulated.
"""

import contextlib
import ipaddress
import os
import re
import secrets
import shlex
import shutil
import signal
import socket
import subprocess
import tempfile

import paramiko

from testbed import cloud_init
from testbed import host_scripts
from testbed import image_cache
from testbed import loop_volumes
from testbed import polling
from testbed import processes
from testbed import standins
from testbed import subnets

ROLES = ('storage', 'master', 'worker')
HOST_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'
FIRST_HOST_OCTET = 11
MAX_PREFIX_LEN = 10  # leaves room for 'v<seq>' in 15-char interface names
# Each boot gets its own SSH host key, like a new VM: sshd uses only it, so
# a replaced host presents a new key at the same address.
HOST_KEY = '/etc/ssh/testbed_host_ed25519_key'
HOST_KEY_CONFIG = '/etc/ssh/sshd_config.d/10-testbed-host-key.conf'


class HostDownError(RuntimeError):
    """A command for a host that is not running."""


class CommandError(subprocess.CalledProcessError):
    """A failed command whose message shows its output."""

    def __str__(self):
        return (f'{super().__str__()}\nstdout: {self.stdout}\n'
                f'stderr: {self.stderr}')


def require_testbed():
    """Why this machine cannot run a Testbed (a skip reason), or None."""
    if os.geteuid() != 0:
        return 'testbed needs root (network namespaces, loop devices, mounts)'
    for tool in ('ip', 'unshare', 'nsenter', 'losetup'):
        if shutil.which(tool) is None:
            return f'testbed needs {tool}'
    if subprocess.run(['ip', 'netns', 'list'], capture_output=True).returncode:
        return 'testbed needs `ip netns`'
    if not os.path.exists('/usr/sbin/sshd'):
        return ('testbed needs /usr/sbin/sshd '
                '(run testbed/install-deps.sh)')
    return None


def _run(args, timeout=120):
    """Run a command on the runner; return stdout or raise CommandError."""
    result = subprocess.run(args, capture_output=True, text=True,
                            timeout=timeout)
    if result.returncode:
        raise CommandError(result.returncode, args, result.stdout,
                           result.stderr)
    return result.stdout


def tcp_banner(ip, port, timeout=1.0):
    """The first bytes a TCP server sends, or b'' while it is unreachable."""
    try:
        with socket.create_connection((ip, port), timeout=timeout) as sock:
            return sock.recv(64)
    except OSError:
        return b''


def _mac_for(ip):
    """A stable locally administered MAC per IP.

    A host replaced with the same IP keeps its MAC, so neighbour caches of
    the runner and the other hosts stay valid, like a kept Neutron port.
    """
    return '02:00:' + ':'.join(f'{b:02x}' for b in ip.packed)


class _Cleanup:
    """Run every teardown step even if some fail, then raise the first error.

    A half-built testbed must still be dismantled completely.
    """

    def __init__(self):
        self.errors = []

    def __call__(self, func, *args):
        try:
            func(*args)
        except Exception as exc:  # noqa: BLE001 - collected and re-raised
            self.errors.append(exc)

    def raise_first(self):
        if self.errors:
            raise self.errors[0]


class Host:
    """One test VM.

    run(), read_file() and write_file() bypass SSH: they are for test
    setup and assertions, while the code under test uses ssh_client().
    """

    def __init__(self, name, role, ip, username, password, hostname=None):
        self.name = name  # unique in the testbed
        # The guest's own host name, as cloud-init sets it from Nova's
        # metadata: VMs of one scaling group share it on a real cloud.
        self.hostname = hostname or name
        self.role = role
        self.ip = ip
        self.volumes = []  # in-host device paths, e.g. ['/dev/vdb']
        self.cluster_ip = None  # eth1's, with a cluster network
        self.pid = None  # the host's PID 1 (sshd) as seen by the runner
        self.role_image = True  # booted from its role's image (else base)
        self._username = username
        self._password = password
        self._disks = []  # loop_volumes.Volume objects behind self.volumes
        self._proc = None  # `ip netns exec ... unshare` process
        self._veths = []
        self._netns = None
        self._dir = None

    def __repr__(self):
        return f'<Host {self.name} {self.role} {self.ip} pid={self.pid}>'

    def running_pid(self):
        """The host's PID 1, while the host runs. A powered-off or removed
        host's PID is soon another process's (pid_max is 32768 here), and
        nsenter would then enter the real machine: while unshare runs, its
        child cannot have been reaped, so the PID is still the host's."""
        if self.pid is None or self._proc is None or \
                self._proc.poll() is not None:
            raise HostDownError(f'{self.name} is not running')
        return self.pid

    def run(self, cmd, check=True, input=None, timeout=120):
        """Run a shell command as root in the host's namespaces and root."""
        args = ['nsenter', f'--target={self.running_pid()}', '--mount',
                '--uts', '--ipc', '--net', '--pid', '--root', '--wd',
                '/bin/sh', '-c', cmd]
        env = {'PATH': HOST_PATH, 'HOME': '/root', 'LC_ALL': 'C',
               'DEBIAN_FRONTEND': 'noninteractive'}
        result = subprocess.run(args, input=input, capture_output=True,
                                text=True, env=env, timeout=timeout)
        if check and result.returncode:
            raise CommandError(result.returncode, cmd, result.stdout,
                               result.stderr)
        return result

    def read_file(self, path):
        return self.run(f'cat {shlex.quote(path)}').stdout

    def write_file(self, path, text):
        self.run(f'cat > {shlex.quote(path)}', input=text)

    @property
    def written_files_dir(self):
        """The runner's path of this host's overlay upper directory: every
        file the host wrote, except on its tmpfs mounts (/run, /tmp)."""
        return os.path.join(self._dir, 'upper')

    @property
    def public_host_key_file(self):
        """The runner's path of this boot's public SSH host key."""
        return os.path.join(self._dir, 'upper', HOST_KEY.lstrip('/') + '.pub')

    def console_output(self):
        """This VM's console log as Nova would serve it, with the real
        fingerprint and public key of its sshd's host key."""
        with open(self.public_host_key_file) as f:
            public_key = f.read().strip()
        fingerprint = _run(['ssh-keygen', '-l', '-f',
                            self.public_host_key_file]).strip()
        return cloud_init.CONSOLE_LOG.format(
            name=self.hostname, rule='#' * 61, fingerprint=fingerprint,
            public_key=public_key).replace('\n', '\r\n')

    def listens(self, port):
        """Whether a TCP server listens on ``port`` in this host, seen from
        inside (its security group may keep the runner out)."""
        return bool(self.run('ss -Htln sport = :%d' % port,
                             check=False).stdout.strip())

    def sshd_log(self):
        """What this host's sshd logged (-e: connections, auth attempts)."""
        return _read_log(self)

    def ssh_client(self, timeout=10):
        """A paramiko client logged in by password, as the driver does."""
        client = paramiko.SSHClient()
        # Every boot has a new host key: known_hosts would only get in the way.
        client.set_missing_host_key_policy(paramiko.AutoAddPolicy())
        client.connect(self.ip, username=self._username,
                       password=self._password, look_for_keys=False,
                       allow_agent=False, timeout=timeout)
        return client


class Testbed:
    """A private network of test VMs; use as a context manager.

    Names (prefix) and the /24 subnet are unique per instance, so several
    testbeds, e.g. from pytest-xdist workers, can run side by side.
    With ``cluster_network`` every host also has eth1 on a second bridge
    and /24 (``cluster_ip``, same last octet as ``ip``): a VM with a
    management and a cluster network. The runner has an address on both,
    as a Tacker host routed to both would.
    With ``install_standins`` (the default) every host has the kubeadm,
    kubelet and containerd stand-ins of testbed/standins installed as
    Debian packages; standins.connect_host() points them at an API server.
    ``purge_packages`` are missing from every host's image;
    ``role_purge_packages`` ({role: packages}) also from that role's: each
    distinct set is purged once, into an image layer of its own, rather
    than with an apt-get run on every host that boots. A host booted with
    ``add_host(..., role_image=False)`` has the base image instead.
    """

    __test__ = False  # not a pytest test class, despite its name
    username = 'ubuntu'
    password = 'ubuntu'

    def __init__(self, prefix=None, subnet=None, purge_packages=(),
                 install_standins=True, cluster_network=False,
                 role_purge_packages=None):
        self.prefix = prefix or f'tb{secrets.token_hex(3)}'
        if len(self.prefix) > MAX_PREFIX_LEN:
            raise ValueError(f'prefix longer than {MAX_PREFIX_LEN} chars')
        self._subnet = ipaddress.ip_network(subnet) if subnet else None
        self.purge_packages = tuple(purge_packages)
        self.role_purge_packages = {
            role: tuple(packages) for role, packages in
            (role_purge_packages or {}).items() if packages}
        self._role_images = {}  # role -> image layer dir, if not 'base'
        self._base_key = None  # the base layer's in testbed.image_cache
        self.install_standins = install_standins
        self.hosts = {}
        self.bridge = f'{self.prefix}br'
        self.bridge_ip = None
        self._bridges = []  # created, so stop() deletes them
        self.cluster_bridge = f'{self.prefix}cbr' if cluster_network else None
        self.cluster_subnet = None  # an ip_network once started
        self._volumes = []  # every attached volume, so stop() frees leftovers
        self._seq = 0
        self.workdir = None  # per-testbed temp dir: overlays, volume images
        # The private key every host's user accepts (besides its password).
        self.client_key_file = None

    @property
    def subnet(self):
        """The testbed network as a string, e.g. '10.23.7.0/24'."""
        return str(self._subnet)

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc_info):
        self.stop()

    def start(self):
        try:
            self.workdir = tempfile.mkdtemp(prefix=f'{self.prefix}-')
            with open(os.path.join(self.workdir, 'boot.sh'), 'w') as f:
                f.write(host_scripts.BOOT_SCRIPT)
            self.client_key_file = os.path.join(self.workdir, 'client_key')
            _run(['ssh-keygen', '-q', '-t', 'ed25519', '-N', '', '-C',
                  f'{self.prefix}-client', '-f', self.client_key_file])
            self._build_base()
            self._build_role_images()
            with subnets.network_lock():
                self._subnet = self._subnet or subnets.free_subnet()
                self.bridge_ip = str(self._subnet[1])
                self._add_bridge(self.bridge, self._subnet)
                if self.cluster_bridge:
                    # After the first: it is taken by then.
                    self.cluster_subnet = subnets.free_subnet()
                    self._add_bridge(self.cluster_bridge,
                                     self.cluster_subnet)
        except BaseException:
            self.stop()
            raise

    def stop(self):
        """Remove everything this testbed created, whatever state it is in."""
        cleanup = _Cleanup()
        for host in list(self.hosts.values()):
            cleanup(self._stop_host, host, True)
        self.hosts.clear()
        for volume in list(self._volumes):
            cleanup(self._free_volume, volume)
        while self._bridges:
            cleanup(_run, ['ip', 'link', 'del', self._bridges.pop()])
        if self.workdir:
            cleanup(self._remove_workdir)
        cleanup.raise_first()

    def add_host(self, name, role, volumes=0, volume_size_mb=256,
                 hostname=None, hold_sshd=False, role_image=True):
        """Boot a VM with an sshd and `volumes` blank disks (/dev/vdb, ...);
        `hostname`: its guest host name (default: `name`); with `hold_sshd`
        sshd starts once a line is written to host_scripts.SSHD_GO in it;
        `role_image`: from its role's image (else from the base one)."""
        if role not in ROLES:
            raise ValueError(f'role must be one of {ROLES}, not {role!r}')
        if name in self.hosts:
            raise ValueError(f'host {name!r} already exists')
        disks = [self._new_volume(name, volume_size_mb)
                 for _ in range(volumes)]
        host = self._start_host(name, role, self._free_ip(), disks,
                                hostname or name, hold_sshd, role_image)
        self._refresh_hosts_files()
        return host

    def remove_host(self, name, keep_volumes=False):
        """Kill a VM: its processes, mounts and root fs vanish."""
        self._stop_host(self.hosts.pop(name), free_volumes=not keep_volumes)
        self._refresh_hosts_files()

    def power_off(self, name):
        """Power a VM off (Nova's os-stop): every process of it dies, its
        address, network and disks stay until it is replaced or removed."""
        self._kill(self.hosts[name])

    def replace_host(self, name, same_ip=True, keep_volumes=False,
                     hold_sshd=False):
        """Replace a VM by a fresh one, as a heal does.

        The new VM has a fresh root fs; with keep_volumes its disks are the
        old ones (a re-attached Cinder volume), otherwise new blank ones.
        """
        old = self.hosts[name]
        ip = old.ip if same_ip else self._free_ip()  # while old.ip is taken
        del self.hosts[name]
        self._stop_host(old, free_volumes=not keep_volumes)
        if keep_volumes:
            disks = old._disks
        else:
            disks = [self._new_volume(name, d.size_mb) for d in old._disks]
        host = self._start_host(name, old.role, ip, disks, old.hostname,
                                hold_sshd, old.role_image)
        self._refresh_hosts_files()
        return host

    # -- internals ---------------------------------------------------------

    def _unshare(self, *args):
        """Command that boots a root fs in new mount/PID/UTS/IPC namespaces."""
        return ['unshare', '--mount', '--pid', '--uts', '--ipc', '--fork',
                '--kill-child', 'sh', os.path.join(self.workdir, 'boot.sh'),
                *args]

    def _build_base(self):
        """The "image" layer every host starts from (user, sudo, sshd and
        apt settings, the Kubernetes stand-ins), kept for other testbeds
        (testbed.image_cache). It is copied into every host's upper dir,
        not stacked as a second lower layer: layers overlapping `/` fail
        with ELOOP. The stand-in .debs are staged in the upper dir before
        it is mounted (the image's /tmp is a fresh tmpfs) and installed
        chrooted: the runner's own dpkg database is never touched."""
        base = os.path.join(self.workdir, 'base')
        for sub in ('work', 'root'):
            os.makedirs(os.path.join(base, sub))
        self._base_key = image_cache.key(
            host_scripts.BASE_SCRIPT, self.purge_packages,
            self.install_standins and (
                image_cache.directory_digest(standins.HERE),
                standins.k8s_package_version()),
            image_cache.runner_packages())
        image_cache.upper_dir(self._base_key, self._build_base_layer,
                              f'{base}/upper')

    def _build_base_layer(self, upper):
        os.makedirs(upper)
        staged = ''
        if self.install_standins:
            standins.stage_packages(upper)
            staged = standins.STAGING_DIR
        base = os.path.dirname(upper)
        _run(self._unshare(
            f'{base}/root', upper, f'{base}/work', f'{self.prefix}-base',
            '--', '/bin/sh', '-c', host_scripts.BASE_SCRIPT, 'base',
            ' '.join(self.purge_packages), staged), timeout=600)

    def _build_role_images(self):
        """The base image less each role's ``role_purge_packages``; then
        the client key in every layer."""
        images = {}  # packages -> layer dir
        for role, packages in sorted(self.role_purge_packages.items()):
            if packages not in images:
                layer = os.path.join(self.workdir, f'image{len(images) + 1}')
                os.makedirs(os.path.join(layer, 'work'))
                os.makedirs(os.path.join(layer, 'root'))
                image_cache.upper_dir(
                    image_cache.key(self._base_key, packages),
                    lambda upper: self._purge_layer(upper, packages),
                    f'{layer}/upper')
                images[packages] = layer
            self._role_images[role] = images[packages]
        for layer in [os.path.join(self.workdir, 'base'), *images.values()]:
            image_cache.authorize_key(os.path.join(layer, 'upper'), 'ubuntu',
                                      self.client_public_key())

    def _purge_layer(self, upper, packages):
        layer = os.path.dirname(upper)
        _run(['cp', '-a', os.path.join(self.workdir, 'base', 'upper'),
              upper])
        _run(self._unshare(
            f'{layer}/root', upper, f'{layer}/work', f'{self.prefix}-image',
            '--', 'env', 'DEBIAN_FRONTEND=noninteractive',
            'apt-get', 'purge', '-y', '-q', *packages), timeout=600)

    def _image_dir(self, role):
        return self._role_images.get(role) or os.path.join(
            self.workdir, 'base')

    def client_public_key(self):
        with open(self.client_key_file + '.pub') as handle:
            return handle.read().strip()

    def place_client_key(self, directory, *names):
        """Copy the client key into ``directory`` as each of ``names``,
        as an operator places a key for the driver: a regular file of this
        user, mode 0600, in a directory only this user can enter."""
        os.makedirs(directory, mode=0o700, exist_ok=True)
        with open(self.client_key_file, 'rb') as handle:
            key = handle.read()
        for name in names:
            path = os.path.join(directory, name)
            descriptor = os.open(path, os.O_WRONLY | os.O_CREAT |
                                 os.O_TRUNC | os.O_NOFOLLOW, 0o600)
            with os.fdopen(descriptor, 'wb') as handle:
                handle.write(key)
            os.chmod(path, 0o600)
        return directory

    def _new_volume(self, host_name, size_mb):
        self._seq += 1
        volume = loop_volumes.Volume(os.path.join(
            self.workdir, f'{host_name}-{self._seq}.img'), size_mb)
        self._volumes.append(volume)
        volume.attach()
        return volume

    def _free_volume(self, volume):
        volume.detach()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(volume.image)
        self._volumes.remove(volume)

    def _free_ip(self):
        used = {h.ip for h in self.hosts.values()}
        for address in list(self._subnet.hosts())[FIRST_HOST_OCTET - 1:]:
            if str(address) not in used:
                return str(address)
        raise RuntimeError(f'no free address in {self._subnet}')

    def _hosts_file(self, hostname, ip):
        """/etc/hosts for the host at `ip`: itself first (its own name must
        resolve, or sudo warns "unable to resolve host"), then every other
        host by its guest host name, which several may share."""
        lines = ['127.0.0.1 localhost',
                 '::1 localhost ip6-localhost ip6-loopback',
                 f'{ip} {hostname}']
        lines += [f'{h.ip} {h.hostname}' for h in self.hosts.values()
                  if h.ip != ip]
        return '\n'.join(lines) + '\n'

    def _refresh_hosts_files(self):
        """Make each host's /etc/hosts list all current hosts (cluster DNS),
        keeping the block the driver manages there, as a cloud's DNS would
        leave the guest's own file alone."""
        for host in self.hosts.values():
            if host._proc.poll() is not None:
                continue  # powered off: replaced before it runs again
            current = host.read_file('/etc/hosts')
            block = re.search(r'^# BEGIN kubernetes-mgmt-pv.*?^# END '
                              r'kubernetes-mgmt-pv\n', current, re.M | re.S)
            host.write_file('/etc/hosts',
                            self._hosts_file(host.hostname, host.ip) +
                            (block.group() if block else ''))

    def _start_host(self, name, role, ip, disks, hostname, hold_sshd=False,
                    role_image=True):
        """Boot a host; on any failure, undo what was done and re-raise."""
        self._seq += 1
        host = Host(name, role, ip, self.username, self.password, hostname)
        host.role_image = role_image
        if self.cluster_subnet is not None:
            host.cluster_ip = str(self.cluster_subnet.network_address + (
                int(ipaddress.ip_address(ip)) -
                int(self._subnet.network_address)))
        host._disks = disks
        host.volumes = [f'/dev/vd{chr(ord("b") + i)}'
                        for i in range(len(disks))]
        try:
            host._dir = os.path.join(self.workdir, f'{name}-{self._seq}')
            for sub in ('work', 'root'):
                os.makedirs(os.path.join(host._dir, sub))
            upper = os.path.join(host._dir, 'upper')
            image = self._image_dir(role) if role_image else os.path.join(
                self.workdir, 'base')
            _run(['cp', '-a', os.path.join(image, 'upper'), upper])
            with open(os.path.join(upper, 'etc', 'hostname'), 'w') as f:
                f.write(hostname + '\n')
            with open(os.path.join(upper, 'etc', 'hosts'), 'w') as f:
                f.write(self._hosts_file(hostname, ip))
            _new_host_key(upper, name)
            self._plug(host)
            devices = [f'{os.path.basename(path)}={disk.devno}'
                       for path, disk in zip(host.volumes, disks)]
            init = host_scripts.HELD_SSHD if hold_sshd else host_scripts.SSHD
            with open(os.path.join(host._dir, 'sshd.log'), 'w') as log:
                host._proc = subprocess.Popen(
                    ['ip', 'netns', 'exec', host._netns, *self._unshare(
                        f'{host._dir}/root', upper, f'{host._dir}/work',
                        hostname, *devices, '--', *init)],
                    stdin=subprocess.DEVNULL, stdout=log,
                    stderr=subprocess.STDOUT)
            host.pid = polling.wait_until(lambda: self._init_pid(host),
                                          f'{name} to boot')
            # Until PID 1 is chrooted (sshd answers, or waits on its FIFO),
            # a host.run() would reach the runner's own root.
            polling.wait_until(lambda: self._init_pid(host) and os.path.exists(
                f'/proc/{host.pid}/root{host_scripts.SSHD_GO}') if hold_sshd
                else self._sshd_ready(host), f'sshd on {name}')
        except BaseException:
            self._stop_host(host, free_volumes=True)
            raise
        self.hosts[name] = host
        return host

    def _add_bridge(self, name, subnet):
        """A bridge holding the subnet's first address, for the runner.

        A fixed MAC: a bridge without one takes the lowest MAC of its
        ports, so plugging in a new VM's veth could change it and leave
        every host's neighbour entry for the bridge IP stale (half a minute
        without the test API server).
        """
        _run(['ip', 'link', 'add', name, 'address', _mac_for(subnet[1]),
              'type', 'bridge'])
        self._bridges.append(name)
        _run(['ip', 'addr', 'add', f'{subnet[1]}/{subnet.prefixlen}',
              'dev', name])
        _run(['ip', 'link', 'set', name, 'up'])

    def _plug(self, host):
        """Give the host a netns with eth0 on the bridge (and eth1 on the
        cluster bridge) and loopback up."""
        host._netns = f'{self.prefix}-{host.name}'
        _run(['ip', 'netns', 'add', host._netns])
        self._add_nic(host, 'eth0', 'v', self.bridge, host.ip, self._subnet)
        if self.cluster_bridge:
            self._add_nic(host, 'eth1', 'c', self.cluster_bridge,
                          host.cluster_ip, self.cluster_subnet)
        _run(['ip', '-n', host._netns, 'link', 'set', 'lo', 'up'])

    def _add_nic(self, host, nic, tag, bridge, ip, subnet):
        veth = f'{self.prefix}{tag}{self._seq}'
        _run(['ip', 'link', 'add', veth, 'type', 'veth', 'peer', 'name',
              nic, 'address', _mac_for(ipaddress.ip_address(ip)),
              'netns', host._netns])
        host._veths.append(veth)
        _run(['ip', 'link', 'set', veth, 'master', bridge, 'up'])
        netns = ['ip', '-n', host._netns]
        _run([*netns, 'addr', 'add', f'{ip}/{subnet.prefixlen}', 'dev', nic])
        _run([*netns, 'link', 'set', nic, 'up'])

    @staticmethod
    def _init_pid(host):
        """The PID of unshare's forked child, i.e. the host's PID 1."""
        if host._proc.poll() is not None:
            raise RuntimeError(f'{host.name} failed to boot:\n'
                               + _read_log(host))
        pid = host._proc.pid
        try:
            with open(f'/proc/{pid}/task/{pid}/children') as f:
                children = f.read().split()
        except FileNotFoundError:
            return None
        return int(children[0]) if children else None

    @staticmethod
    def _sshd_ready(host):
        if host._proc.poll() is not None:
            raise RuntimeError(f'sshd on {host.name} exited:\n'
                               + _read_log(host))
        return tcp_banner(host.ip, 22).startswith(b'SSH-')

    def _stop_host(self, host, free_volumes):
        """Tear a host down in the order the kernel needs.

        `unshare --fork` ignores SIGTERM, so PID 1 is SIGKILLed, which kills
        the whole PID namespace and drops its mounts.  The veth is deleted
        before the netns because `ip netns del` frees it asynchronously.
        """
        cleanup = _Cleanup()
        if host._proc is not None:
            cleanup(self._kill, host)
        for veth in host._veths:
            cleanup(_run, ['ip', 'link', 'del', veth])
        if host._netns:
            cleanup(_run, ['ip', 'netns', 'del', host._netns])
        if free_volumes:
            for volume in host._disks:
                cleanup(self._free_volume, volume)
        if host._dir:
            cleanup(shutil.rmtree, host._dir)
        cleanup.raise_first()

    @staticmethod
    def _kill(host):
        """Kill the host's PID 1 and wait until every process of its PID
        namespace is gone: the kernel kills the others asynchronously, so
        they can outlive unshare by a moment."""
        namespace = None
        # While unshare runs, its child cannot have been reaped, so the PID
        # cannot have been reused.
        if host._proc.poll() is None:
            pid = host.pid or Testbed._init_pid(host)
            namespace = processes.pid_namespace(pid) if pid else None
            os.kill(pid or host._proc.pid, signal.SIGKILL)
        host._proc.wait(timeout=30)
        if namespace:
            try:
                polling.wait_until(
                    lambda: not processes.pids_in_namespace(namespace),
                    f'the processes of {host.name} to exit', timeout=120)
            except polling.WaitTimeout as timeout:
                left = processes.describe(
                    processes.pids_in_namespace(namespace))
                raise polling.WaitTimeout(f'{timeout}: {left}') from None

    def _remove_workdir(self):
        """Delete the temp dir, unless something is still mounted below it."""
        with open('/proc/self/mountinfo') as f:
            mounted = [line.split()[4] for line in f
                       if line.split()[4].startswith(self.workdir + '/')]
        if mounted:
            raise RuntimeError(f'still mounted, not removing: {mounted}')
        shutil.rmtree(self.workdir)
        self.workdir = None


def _new_host_key(upper, name):
    """Give a booting host its own ed25519 host key, the only one its sshd
    offers (the runner's keys stay in the shared lower layer)."""
    key = os.path.join(upper, HOST_KEY.lstrip('/'))
    _run(['ssh-keygen', '-q', '-t', 'ed25519', '-N', '', '-C',
          f'root@{name}', '-f', key])
    with open(os.path.join(upper, HOST_KEY_CONFIG.lstrip('/')), 'w') as f:
        f.write(f'HostKey {HOST_KEY}\n')


def _read_log(host):
    with open(os.path.join(host._dir, 'sshd.log')) as f:
        return f.read()
