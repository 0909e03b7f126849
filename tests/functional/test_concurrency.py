"""Nodes are handled concurrently in both runtimes of tacker-conductor,
and so are the hooks of several VNFs, without cross-talk.

tacker-conductor 16 runs on native threads; older releases monkey-patch
the process with eventlet. Each mode runs in its own interpreter, exactly
as the conductor would, and the remote commands must overlap in time.
One conductor runs the hooks of many VNFs at once (a thread each): every
cluster must end up with its own nodes, exports, PVs and host keys only.
"""

import concurrent.futures
import json
import os
import subprocess
import sys
import time

import paramiko
import pytest

from kubernetes_mgmt_pv.remote import managed_block
from testbed import openstack_api
from testbed import virtual_vnf
from tests.functional.conftest import skip_without_testbed


PROBE = r'''
import json, sys, time
mode, addresses = sys.argv[1], sys.argv[2:]
if mode == 'eventlet':
    import eventlet
    eventlet.monkey_patch()
from eventlet import patcher
from kubernetes_mgmt_pv import config
from kubernetes_mgmt_pv.remote import parallel, remote
from kubernetes_mgmt_pv import mgmt_driver  # the whole driver is imported
# No Nova here: host keys are the subject of test_host_keys.py.
config.CONF.set_override('host_key_policy', 'warn', config.GROUP_NAME)

spans = {}

def hold(address):
    with remote.RemoteCommandExecutor(address, 'ubuntu', 'ubuntu') as ssh:
        started = time.monotonic()
        ssh.run(['sleep', '1'])
        spans[address] = (started, time.monotonic())

parallel.run_on_nodes('sleep', hold, {a: a for a in addresses}, 16)
print(json.dumps({'spans': spans,
                  'patched': patcher.is_monkey_patched('socket')}))
'''


@pytest.fixture(scope='module')
def addresses(testbed):
    return [testbed.add_host('w%d' % n, 'worker').ip for n in range(4)]


@pytest.mark.parametrize('mode', ['threading', 'eventlet'])
def test_remote_commands_on_nodes_overlap(addresses, mode):
    root = os.path.join(os.path.dirname(__file__), '..', '..')
    output = subprocess.run(
        [sys.executable, '-c', PROBE, mode] + addresses, cwd=root,
        capture_output=True, text=True, check=True, timeout=120).stdout
    result = json.loads(output.splitlines()[-1])
    assert result['patched'] == (mode == 'eventlet')
    spans = result['spans'].values()
    assert len(spans) == 4
    # All four one-second commands were running at the same moment.
    assert max(start for start, _ in spans) < min(end for _, end in spans)


# -- two VNFs at once: one conductor runs both VNFs' hooks -------------------

@pytest.fixture
def two_vnfs(tmp_path):
    """Two VNFs (1 Master, 1 Worker, Storage server each) on their own
    subnets, their stacks side by side in one fake Heat; the host keys
    verified on the consoles recorded in one known_hosts file."""
    skip_without_testbed()
    virtual_vnf.use_test_options(
        host_key_policy='console', console_key_fallback='known_hosts',
        known_hosts_file=str(tmp_path / 'known_hosts'))
    cloud = openstack_api.FakeOpenStack()
    cloud.start()
    try:
        with virtual_vnf.VirtualCluster(
                masters=1, workers=1, volumes=1, install_cluster=True,
                openstack=cloud) as first, virtual_vnf.VirtualCluster(
                masters=1, workers=1, volumes=1, install_cluster=True,
                openstack=cloud) as second:
            yield first, second
    finally:
        cloud.stop()


def _lifecycle(vnf):
    """instantiate_end, then a scale out by one Worker; returns when the
    instantiate_end hook ran (monotonic start and end)."""
    started = time.monotonic()
    vnf.instantiate_end()
    span = (started, time.monotonic())
    vnf.scale_end([vnf.add_node('worker')])
    return span


def _block(text):
    lines = text.splitlines()
    begin = lines.index(managed_block.BEGIN.decode())
    return lines[begin + 1:lines.index(managed_block.END.decode())]


def test_two_vnfs_at_once_keep_to_their_own_cluster(two_vnfs, tmp_path):
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        spans = [future.result() for future in
                 [pool.submit(_lifecycle, vnf) for vnf in two_vnfs]]
    # The two instantiate_end hooks were running at the same moment.
    assert max(start for start, _ in spans) < min(end for _, end in spans)
    known = paramiko.HostKeys(str(tmp_path / 'known_hosts'))
    for vnf, other in (two_vnfs, two_vnfs[::-1]):
        nodes = vnf.nodes()
        assert len(nodes) == 3
        master = vnf.nodes('master')[0]
        storage = vnf.host('storage')
        # /etc/hosts of every node names exactly this cluster's nodes.
        for host in nodes:
            block = _block(host.read_file('/etc/hosts'))
            assert sorted(line.split()[0] for line in block) == \
                sorted(h.ip for h in nodes), (host.name, block)
        # The exports grant this VNF's export_to only.
        exports = _block(storage.read_file('/etc/exports'))
        assert len(exports) == 3
        for line in exports:
            clients = [field.split('(')[0] for field in line.split()[1:]]
            assert clients == [vnf.testbed.subnet], line
        assert other.testbed.subnet not in storage.run(
            'exportfs -v').stdout
        # The PVs of this cluster are at this VNF's Storage server.
        volumes = virtual_vnf.persistent_volumes(master)
        assert sorted(volumes) == ['nfs-pv1', 'nfs-pv2', 'nfs-pv3']
        assert {pv['spec']['nfs']['server'] for pv in volumes.values()} \
            == {storage.ip}
        assert virtual_vnf.node_readiness(master) == dict.fromkeys(
            [h.hostname for h in nodes], 'True')
        # known_hosts: each host's own key, recorded from its console.
        for host in nodes + [storage]:
            with open(host.public_host_key_file) as handle:
                key_type, key = handle.read().split()[:2]
            entry = known.lookup(host.ip)
            assert entry is not None, host.ip
            assert entry[key_type].get_base64() == key, host.name
