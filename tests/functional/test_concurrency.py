"""Nodes are handled concurrently in both runtimes of tacker-conductor.

tacker-conductor 16 runs on native threads; older releases monkey-patch
the process with eventlet. Each mode runs in its own interpreter, exactly
as the conductor would, and the remote commands must overlap in time.
"""

import json
import os
import subprocess
import sys

import pytest


PROBE = r'''
import json, sys, time
mode, addresses = sys.argv[1], sys.argv[2:]
if mode == 'eventlet':
    import eventlet
    eventlet.monkey_patch()
from eventlet import patcher
from kubernetes_mgmt_pv import mgmt_driver  # the whole driver is imported
from kubernetes_mgmt_pv import config, parallel, remote
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
