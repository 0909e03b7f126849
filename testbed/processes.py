"""Processes on this machine: those the testbed starts (MariaDB,
RabbitMQ, Tacker: free ports, PID files, liveness, log tails and memory)
and those of a test host's PID namespace."""

import os
import secrets
import socket


class ServiceError(RuntimeError):
    """A service did not start (the message names its log)."""


class Process(object):
    """A process we started, with its log file."""

    def __init__(self, name, popen, log):
        self.name = name
        self.popen = popen
        self.log = log

    @property
    def pid(self):
        return self.popen.pid

    def alive(self):
        return self.popen.poll() is None


LOWEST_PORT = 10000
PORT_RANGE = '/proc/sys/net/ipv4/ip_local_port_range'


def free_port(host='127.0.0.1'):
    """A port free on ``host`` now, below the kernel's ephemeral range:
    a port of that range may become some connection's source port
    between this pick and the service's bind (the service then fails to
    start), one below it only if another service takes it."""
    with open(PORT_RANGE) as handle:
        ephemeral_start = int(handle.read().split()[0])
    for _ in range(100):
        port = LOWEST_PORT + secrets.randbelow(
            max(1, ephemeral_start - LOWEST_PORT))
        with socket.socket() as sock:
            try:
                sock.bind((host, port))
            except OSError:
                continue
            return port
    raise ServiceError('no free port below %d on %s' % (ephemeral_start,
                                                        host))


def port_open(host, port, timeout=1.0):
    """Whether a TCP server accepts connections at ``host``:``port``."""
    try:
        socket.create_connection((host, port), timeout=timeout).close()
    except OSError:
        return False
    return True


def alive(pid):
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie child of ours counts as gone; so does one reaped since the
    # kill above (reading its stat then fails with ESRCH).
    try:
        with open('/proc/%d/stat' % pid) as stat:
            return stat.read().split(') ', 1)[1][0] != 'Z'
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False


def read_pid(path):
    try:
        with open(path) as handle:
            return int(handle.read().split()[0])
    except (FileNotFoundError, ValueError, IndexError):
        return None


def tail(path, lines=40):
    try:
        with open(path, errors='replace') as handle:
            return ''.join(handle.readlines()[-lines:])
    except OSError:
        return ''


def rss_mb(pid):
    """Resident memory of a process and its descendants, in MB."""
    total = 0
    pids = [pid]
    while pids:
        current = pids.pop()
        try:
            with open('/proc/%d/status' % current) as status:
                for line in status:
                    if line.startswith('VmRSS:'):
                        total += int(line.split()[1])
            with open('/proc/%d/task/%d/children' % (current, current)) as f:
                pids.extend(int(p) for p in f.read().split())
        except (FileNotFoundError, ProcessLookupError, ValueError):
            continue
    return total // 1024


def pid_namespace(pid):
    """The PID namespace of a process, as its /proc link names it."""
    try:
        return os.readlink(f'/proc/{pid}/ns/pid')
    except FileNotFoundError:
        return None  # it exited meanwhile


def pids_in_namespace(namespace):
    """All processes on the machine that live in the given PID namespace."""
    pids = []
    for entry in os.listdir('/proc'):
        if entry.isdigit():
            try:
                if os.readlink(f'/proc/{entry}/ns/pid') == namespace:
                    pids.append(int(entry))
            except (FileNotFoundError, PermissionError):
                pass  # exited meanwhile, or not ours to inspect
    return pids


def describe(pids):
    """'PID COMMAND STATE parent PPID' for each process still there, from
    /proc/PID/stat: what a teardown that waits on them should name."""
    found = []
    for pid in pids:
        try:
            with open(f'/proc/{pid}/stat') as stat:
                head, _, tail = stat.read().rpartition(')')
        except (FileNotFoundError, ProcessLookupError):
            continue
        fields = tail.split()
        found.append('%d %s %s parent %s' % (
            pid, head.partition('(')[2], fields[0], fields[1]))
    return '; '.join(found)
