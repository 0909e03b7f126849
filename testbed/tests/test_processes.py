"""testbed.processes: what a teardown names when processes outlive it."""

import os
import subprocess

from testbed import processes


def test_describe_names_each_process_its_state_and_parent():
    child = subprocess.Popen(['sleep', '30'])
    try:
        described = processes.describe([child.pid])
        assert described.startswith(f'{child.pid} sleep ')
        assert described.endswith(f' parent {os.getpid()}')
    finally:
        child.kill()
        child.wait()


def test_describe_skips_a_process_that_is_gone():
    child = subprocess.Popen(['true'])
    child.wait()
    assert processes.describe([child.pid]) == ''
