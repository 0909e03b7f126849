"""Hooks of several VNFs at once in one process stay within the caps.

Two VNFs (storage server, 1 Master, 1 Worker each) run instantiate_end at
the same time with caps smaller than one hook's needs: one hook doing
remote work, two SSH sessions for three hosts, one node thread. The peaks
are seen from outside (paramiko's connect and close, thread starts): the
driver keeps no counter.
"""

import threading

import paramiko
import pytest

from kubernetes_mgmt_pv import config
from testbed import hosts
from testbed import virtual_vnf

CAPS = {'max_concurrent_hooks': 1, 'max_ssh_sessions': 2,
        'max_node_threads': 1}
HOOK_TIMEOUT = 600


class Peaks(object):
    """Open SSH clients (by VNF) and running driver threads, at their
    highest."""

    def __init__(self, vnf_of_address):
        self.lock = threading.Lock()
        self.vnf_of_address = vnf_of_address
        self.open = {}  # client -> VNF
        self.sessions = self.vnfs = self.threads = 0

    def connected(self, client, hostname):
        with self.lock:
            self.open[client] = self.vnf_of_address[hostname]
            self.sessions = max(self.sessions, len(self.open))
            self.vnfs = max(self.vnfs, len(set(self.open.values())))

    def closed(self, client):
        with self.lock:
            self.open.pop(client, None)

    def thread_started(self):
        running = sum(1 for t in threading.enumerate()
                      if t.name.startswith('k8s-mgmt'))
        with self.lock:
            self.threads = max(self.threads, running)


@pytest.fixture
def vnfs():
    reason = hosts.require_testbed()
    if reason:
        pytest.skip(reason)
    clusters = []
    try:
        for _ in range(2):
            clusters.append(virtual_vnf.VirtualCluster(
                masters=1, workers=1, volumes=1).__enter__())
        yield clusters
    finally:
        for cluster in clusters:
            cluster.stop()


def test_hooks_of_two_vnfs_stay_within_small_caps_and_all_finish(
        vnfs, monkeypatch):
    for name, value in CAPS.items():
        config.CONF.set_override(name, value, config.GROUP_NAME)
    peaks = Peaks({host.ip: number for number, cluster in enumerate(vnfs)
                   for host in cluster.testbed.hosts.values()})
    connect, close = paramiko.SSHClient.connect, paramiko.SSHClient.close
    start = threading.Thread.start

    def counted_connect(client, hostname, *args, **kwargs):
        connect(client, hostname, *args, **kwargs)
        peaks.connected(client, hostname)

    def counted_close(client):
        peaks.closed(client)
        close(client)

    def counted_start(thread):
        start(thread)
        peaks.thread_started()

    monkeypatch.setattr(paramiko.SSHClient, 'connect', counted_connect)
    monkeypatch.setattr(paramiko.SSHClient, 'close', counted_close)
    monkeypatch.setattr(threading.Thread, 'start', counted_start)

    errors, threads = [], []
    for cluster in vnfs:
        def hook(cluster=cluster):
            try:
                cluster.instantiate_end()
            except Exception as error:  # reported below
                errors.append(error)
        threads.append(threading.Thread(target=hook))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(HOOK_TIMEOUT)
    assert not any(thread.is_alive() for thread in threads)
    assert errors == []

    assert 1 <= peaks.sessions <= CAPS['max_ssh_sessions']
    assert peaks.vnfs == CAPS['max_concurrent_hooks']
    assert peaks.threads <= CAPS['max_node_threads']
    assert peaks.open == {}  # every session closed when its hook ended
    for cluster in vnfs:
        master = cluster.nodes('master')[0]
        assert set(virtual_vnf.persistent_volumes(master)) == {
            'nfs-pv1', 'nfs-pv2', 'nfs-pv3'}
