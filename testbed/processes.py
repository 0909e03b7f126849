"""Processes the testbed starts on this machine (MariaDB, RabbitMQ,
Tacker): free ports, PID files, liveness, log tails and memory."""

import os
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


def free_port(host='127.0.0.1'):
    with socket.socket() as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def alive(pid):
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie child of ours counts as gone.
    try:
        with open('/proc/%d/stat' % pid) as stat:
            return stat.read().split(') ', 1)[1][0] != 'Z'
    except (FileNotFoundError, IndexError):
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
