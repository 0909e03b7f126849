"""The stand-ins' "static pod" processes: a stopped one counts as gone
only once its listening port is free again, so the one restarted in its
place can bind it."""

import importlib.util
import os
import socket
import subprocess
import sys
import threading
import time

import pytest

from testbed import standins

from testbed.tests.standins_support import load_kubeadm_module

# The main thread exits alone (pthread_exit), as the process's first
# thread can when exit_group races the others: the process is a zombie
# while a thread still holds its listening socket, until told to go.
LEADER_EXITS_FIRST = '''
import ctypes, socket, sys, threading
listener = socket.create_server(('127.0.0.1', 0))
def hold():
    sys.stdout.write('%d\\n' % listener.getsockname()[1])
    sys.stdout.flush()
    sys.stdin.readline()
threading.Thread(target=hold).start()
ctypes.CDLL(None).pthread_exit(None)
'''


def process_exited(pid):
    load_kubeadm_module()  # puts the stand-ins' directory on sys.path
    return sys.modules['kubeadm_etcd'].process_exited(pid)


def state(pid):
    with open(f'/proc/{pid}/stat') as handle:
        return handle.read().rsplit(')', 1)[1].split()[0]


def test_a_zombie_whose_thread_holds_the_port_has_not_exited():
    child = subprocess.Popen([sys.executable, '-c', LEADER_EXITS_FIRST],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             text=True)
    try:
        port = int(child.stdout.readline())
        deadline = time.monotonic() + 10
        while state(child.pid) != 'Z':  # the main thread's exit
            assert time.monotonic() < deadline
        assert not process_exited(child.pid)
        with pytest.raises(OSError):
            socket.create_server(('127.0.0.1', port))
        child.stdin.write('go\n')
        child.stdin.flush()
        deadline = time.monotonic() + 10
        while not process_exited(child.pid):
            assert time.monotonic() < deadline
        socket.create_server(('127.0.0.1', port)).close()
    finally:
        child.kill()
        child.wait()
    assert process_exited(child.pid)  # reaped: gone from /proc


def test_a_running_process_has_not_exited():
    assert not process_exited(os.getpid())


def test_the_api_server_binds_its_port_once_it_is_freed():
    spec = importlib.util.spec_from_file_location(
        'kube_apiserver_standin',
        os.path.join(standins.HERE, 'kube_apiserver_standin.py'))
    forwarder = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(forwarder)
    held = socket.create_server(('127.0.0.1', 0))
    address = held.getsockname()
    freed = threading.Timer(0.3, held.close)
    freed.start()
    listener = forwarder.listen(address, patience=10)
    listener.close()
    assert not freed.is_alive()
    with socket.create_server(('127.0.0.1', 0)) as still_held:
        with pytest.raises(OSError):
            forwarder.listen(still_held.getsockname(), patience=0)
