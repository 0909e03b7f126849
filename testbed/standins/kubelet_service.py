"""The kubelet service of a test host, as systemd runs it on a node:
kubeadm's kubelet-start phase starts it (``systemctl restart kubelet``),
``kubeadm reset`` stops it, and it dies with its VM. It serves nothing
but its port, 10250: what a probe of the node's kubelet sees, which
answers while the kubelet runs and not once it stopped.

Installed as /usr/lib/testbed/kubelet_service.py (kubeadm package);
``/usr/bin/kubelet --config=...`` (kubelet.py) runs ``serve``.
"""

import os
import signal
import socket
import subprocess
import time

PID_FILE = '/run/kubelet.pid'
PORT = 10250
BINARY = '/usr/bin/kubelet'
# The command line of kubeadm's systemd drop-in (10-kubeadm.conf).
ARGV = [BINARY, '--kubeconfig=/etc/kubernetes/kubelet.conf',
        '--config=/var/lib/kubelet/config.yaml']
START_TIMEOUT = 10.0


def running():
    """PID of this host's kubelet, or None."""
    try:
        with open(PID_FILE) as handle:
            pid = int(handle.read().strip())
        with open(f'/proc/{pid}/cmdline', 'rb') as handle:
            return pid if BINARY.encode() in handle.read() else None
    except (OSError, ValueError):
        return None


def start():
    """Start the kubelet detached (own session), unless it runs; wait
    until it listens."""
    if running():
        return
    process = subprocess.Popen(ARGV, stdin=subprocess.DEVNULL,
                               stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL,
                               start_new_session=True, close_fds=True)
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f'the kubelet exited with status '
                               f'{process.returncode}')
        try:
            socket.create_connection(('127.0.0.1', PORT), timeout=1).close()
            return
        except OSError:
            time.sleep(0.02)
    raise RuntimeError(f'the kubelet did not listen on port {PORT}')


def stop():
    """Stop the kubelet; whether one ran."""
    pid = running()
    if pid is None:
        return False
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + START_TIMEOUT
    while running() == pid and time.monotonic() < deadline:
        time.sleep(0.01)  # as systemctl stop: back once it exited
    return True


def serve():
    """Listen on the kubelet's port and close what connects, until
    stopped."""
    listener = socket.create_server(('0.0.0.0', PORT), backlog=64)
    with open(PID_FILE, 'w') as handle:
        handle.write(f'{os.getpid()}\n')
    while True:
        connection, _ = listener.accept()
        connection.close()
