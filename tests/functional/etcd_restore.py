"""The operator guide's etcd restore, run for real on this machine: its
restore block (section "Restore", the first ``code-block:: shell``) on a
snapshot into a fresh data directory, then the real etcd binary started
on that directory on loopback, and a key read back with etcdctl."""

import os
import shutil
import socket
import subprocess
import threading

GUIDE = os.path.join(os.path.dirname(__file__), '..', '..', 'doc',
                     'operator-guide.rst')
SECTION = '\nRestore\n-------\n'
# What etcd logs once it serves clients: 3.5 and later, then 3.4's zap.
READY = ('ready to serve client requests', 'serving client traffic')
START_TIMEOUT = 60


def restore_block():
    """The shell commands of the guide's restore block."""
    with open(GUIDE) as guide:
        section = guide.read().split(SECTION, 1)[1]
    block = section.split('.. code-block:: shell\n\n', 1)[1].splitlines()
    indent = block[0][:len(block[0]) - len(block[0].lstrip())]
    lines = []
    for line in block:
        if line and not line.startswith(indent):
            break
        lines.append(line[len(indent):])
    return '\n'.join(lines).strip() + '\n'


def free_port():
    with socket.socket() as probe:
        probe.bind(('127.0.0.1', 0))
        return probe.getsockname()[1]


def _environment(**values):
    env = dict(os.environ, ETCDCTL_API='3', **values)
    if shutil.which('etcdutl') is None:
        # etcd 3.4 (Debian's here) has no etcdutl: its etcdctl restores
        # with the same arguments.
        env['PATH'] = _etcdutl_shim(env)
    return env


def _etcdutl_shim(env):
    directory = os.path.join(env['SHIM_DIR'], 'bin')
    os.makedirs(directory, exist_ok=True)
    shim = os.path.join(directory, 'etcdutl')
    with open(shim, 'w') as script:
        script.write('#!/bin/sh\nexec etcdctl "$@"\n')
    os.chmod(shim, 0o755)
    return directory + os.pathsep + env['PATH']


def restored_value(snapshot, data_dir, key):
    """Restore ``snapshot`` with the guide's block into ``data_dir``,
    start etcd on it and return the value of ``key``."""
    peer = 'http://127.0.0.1:%d' % free_port()
    client = 'http://127.0.0.1:%d' % free_port()
    env = _environment(SNAPSHOT=str(snapshot), DATA_DIR=str(data_dir),
                       NAME='restored', PEER_URL=peer,
                       SHIM_DIR=str(data_dir) + '.shim')
    subprocess.run(['sh', '-eu', '-c', restore_block()], env=env, check=True,
                   capture_output=True, timeout=120)
    server = subprocess.Popen(
        ['etcd', '--name', 'restored', '--data-dir', str(data_dir),
         '--listen-peer-urls', peer, '--initial-advertise-peer-urls', peer,
         '--listen-client-urls', client, '--advertise-client-urls', client,
         '--logger', 'zap', '--log-outputs', 'stderr'],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        _wait_ready(server)
        return subprocess.run(
            ['etcdctl', '--endpoints', client, 'get', key,
             '--print-value-only'], env=env, check=True, capture_output=True,
            text=True, timeout=60).stdout.strip()
    finally:
        server.kill()
        server.wait()


def _wait_ready(server):
    """Until etcd logs that it serves clients; fails when it exits or
    START_TIMEOUT passes first (its log is read on, so it never blocks
    on a full pipe)."""
    answered, ready = threading.Event(), []

    def read():
        for line in server.stderr:
            if any(mark in line for mark in READY) and not ready:
                ready.append(line)
                answered.set()
        answered.set()  # etcd exited

    threading.Thread(target=read, daemon=True).start()
    answered.wait(START_TIMEOUT)
    assert ready, 'the restored etcd did not start'
