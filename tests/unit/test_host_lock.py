"""The step lock on a host (remote/host_lock.py): its guard script runs
here with the real flock (util-linux), as it runs on a VM."""

import logging
import subprocess
import threading

import pytest

from kubernetes_mgmt_pv import exceptions
from kubernetes_mgmt_pv.remote import facts
from kubernetes_mgmt_pv.remote import host_lock


class LocalHost(object):
    """Runs the argv here, as remote.RemoteCommandExecutor would there."""
    host = '10.0.0.5'

    def __init__(self):
        self.calls = []

    def run(self, argv, sudo=False, check=True, timeout=None,
            description=None, env=None, stdin=None):
        self.calls.append((argv, sudo, timeout, description))
        done = subprocess.run(argv, input=stdin, capture_output=True,
                              timeout=timeout)
        return facts.CommandResult(done.returncode, done.stdout,
                                   done.stderr)

    def failure(self, description, result):
        return exceptions.RemoteCommandError(
            self.host, description, result.exit_status, result.stdout,
            result.stderr)


@pytest.fixture
def lock(tmp_path, monkeypatch):
    path = str(tmp_path / 'run' / 'steps.lock')
    monkeypatch.setattr(host_lock, 'LOCK_FILE', path)
    return path


class Holder(object):
    """An earlier run holding the lock until ``release``."""

    def __init__(self):
        # The same guard the driver uses, around a command that waits.
        self.process = subprocess.Popen(
            host_lock.guarded_argv(['sh', '-c', 'echo held; read line'], 1,
                                   60),
            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL)
        assert self.process.stdout.readline() == b'held\n'

    def release(self):
        self.process.communicate(b'\n', timeout=10)


@pytest.mark.parametrize('status, stderr, expected', [
    (0, '', (None, False)),
    (0, 'kubernetes-mgmt-pv host lock: waited 12s\nkubeadm: ok\n',
     (12, False)),
    (75, 'kubernetes-mgmt-pv host lock: busy after 30s\n', (None, True)),
    # The command's own exit status 75 is not the lock's.
    (75, 'kubeadm: temporary failure\n', (None, False)),
    (1, 'x kubernetes-mgmt-pv host lock: waited 3s\n', (None, False)),
])
def test_lock_outcome(status, stderr, expected):
    result = facts.CommandResult(status, b'', stderr.encode())
    assert host_lock.lock_outcome(result) == expected


def test_a_free_lock_runs_the_command_at_once(lock, caplog):
    executor = LocalHost()
    with caplog.at_level(logging.WARNING):
        result = host_lock.run_exclusive(
            executor, ['sh', '-c', 'cat; echo done'], 'kubeadm upgrade node',
            30, stdin=b'secret\n')
    assert result.stdout == 'secret\ndone\n'
    argv, sudo, timeout, description = executor.calls[0]
    assert argv[-3:] == ['sh', '-c', 'cat; echo done'] and sudo
    # Waits at most 30 s, then runs at most 30 s: the executor's bound
    # covers both and the command's own kill grace.
    assert argv[-5:-3] == ['30', '30']
    assert 60 < timeout <= 80 and description == 'kubeadm upgrade node'
    assert 'waited' not in caplog.text


def test_a_later_run_waits_for_the_earlier_and_says_so(
        lock, caplog, tmp_path):
    holder = Holder()
    order = tmp_path / 'order'
    threading.Timer(0.5, lambda: (order.write_text('earlier\n'),
                                  holder.release())).start()
    with caplog.at_level(logging.WARNING):
        host_lock.run_exclusive(
            LocalHost(), ['sh', '-c', 'echo later >> "$0"', str(order)],
            'kubeadm upgrade node', 30)
    assert order.read_text() == 'earlier\nlater\n'
    assert 'waited' in caplog.text
    assert '10.0.0.5' in caplog.text and 'kubeadm upgrade node' in caplog.text


def test_an_earlier_run_past_the_bound_fails_the_step_unstarted(
        lock, tmp_path):
    holder = Holder()
    ran = tmp_path / 'ran'
    try:
        with pytest.raises(exceptions.ClusterInstallError) as raised:
            host_lock.run_exclusive(LocalHost(), ['touch', str(ran)],
                                    'kubeadm upgrade node', 1)
    finally:
        holder.release()
    message = str(raised.value)
    assert '10.0.0.5' in message and 'kubeadm upgrade node' in message
    assert 'still running' in message
    assert not ran.exists()


def test_the_command_holds_no_copy_of_the_lock(lock):
    """A daemon the command starts must not keep the lock: only the
    guard's shell holds it, until the command ends."""
    result = host_lock.run_exclusive(
        LocalHost(), ['sh', '-c', 'ls -l /proc/$$/fd'], 'kubeadm init', 30)
    assert 'steps.lock' not in result.stdout


def test_a_failed_command_raises_with_check_and_returns_without(lock):
    executor = LocalHost()
    with pytest.raises(exceptions.RemoteCommandError):
        host_lock.run_exclusive(executor, ['false'], 'kubeadm reset -f', 30)
    result = host_lock.run_exclusive(executor, ['false'], 'kubeadm reset -f',
                                     30, check=False)
    assert result.exit_status == 1


def test_the_command_runs_its_own_timeout_after_the_lock(lock):
    """Waiting for the lock does not lengthen the command's own time: it
    is ended at its timeout and reported as timed out."""
    executor = LocalHost()
    with pytest.raises(exceptions.RemoteCommandError) as raised:
        host_lock.run_exclusive(executor, ['sleep', '30'], 'kubeadm reset',
                                1)
    assert raised.value.timed_out
    assert 'timed out after 1s' in str(raised.value)
    assert executor.calls[0][2] < 30  # the executor's bound, wait included
