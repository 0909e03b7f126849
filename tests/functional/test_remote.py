"""RemoteCommandExecutor and SessionPool against a real OpenSSH server."""

import socket
import subprocess

import paramiko
import pytest

from kubernetes_mgmt_pv import config
from kubernetes_mgmt_pv import exceptions
from kubernetes_mgmt_pv import remote


@pytest.fixture(scope='module')
def host(testbed):
    return testbed.add_host('vm', 'worker')


@pytest.fixture
def options():
    config.CONF.set_override('ssh_connect_retries', 0, config.GROUP_NAME)
    config.CONF.set_override('ssh_connect_timeout', 5, config.GROUP_NAME)
    yield config.options()
    config.CONF.reset()


@pytest.fixture
def executor(host, options):
    with remote.RemoteCommandExecutor(host.ip, 'ubuntu', 'ubuntu') as session:
        yield session


def test_arguments_reach_the_command_literally(executor):
    tricky = ['a b', '$(reboot)', '`id`', "it's", '; rm -rf /', '*']
    result = executor.run(['printf', '%s\\n'] + tricky)
    assert result.stdout.splitlines() == tricky


def test_exit_status_decides_not_stderr(executor):
    noisy = executor.run(['sh', '-c', 'echo warning >&2; exit 0'])
    assert noisy.ok and noisy.stderr == 'warning\n'
    with pytest.raises(exceptions.RemoteCommandError) as caught:
        executor.run(['sh', '-c', 'echo out; echo boom >&2; exit 3'])
    assert caught.value.exit_status == 3
    assert caught.value.stdout == 'out\n' and 'boom' in str(caught.value)
    assert not executor.run(['false'], check=False).ok


def test_large_output_on_both_streams_is_collected(executor):
    result = executor.run(['sh', '-c', 'seq 200000; seq 100000 >&2'])
    assert len(result.stdout.splitlines()) == 200000
    assert len(result.stderr.splitlines()) == 100000


def test_timeout_abandons_the_command(executor):
    with pytest.raises(exceptions.RemoteCommandError) as caught:
        executor.run(['sleep', '30'], timeout=0.5)
    assert caught.value.timed_out and 'timed out' in str(caught.value)
    assert executor.run(['true']).ok  # the connection is still usable


def test_sudo_and_environment(executor):
    assert executor.run(['id', '-u'], sudo=True).stdout.strip() == '0'
    result = executor.run(['sh', '-c', 'echo "$GREETING"'], sudo=True,
                          env={'GREETING': 'hello world'})
    assert result.stdout == 'hello world\n'


def test_passwords_and_proxy_credentials_are_redacted(host, options):
    with remote.RemoteCommandExecutor(
            host.ip, 'ubuntu', 'ubuntu',
            secrets=('http://u:pw@proxy:3128',)) as session:
        with pytest.raises(exceptions.RemoteCommandError) as caught:
            session.run(['sh', '-c', 'echo "proxy http://u:pw@proxy:3128 '
                         'pass ubuntu" >&2; exit 1'])
    text = str(caught.value)
    assert 'pw@' not in text and 'pass ubuntu' not in text and '***' in text


def test_files_upload_and_atomic_install(executor):
    directory = executor.make_private_dir()
    assert executor.run(['stat', '-c', '%a', directory]).stdout.strip() == \
        '700'
    executor.upload(b'data\n', directory + '/f', mode=0o640)
    assert executor.read_file(directory + '/f') == 'data\n'
    executor.install_file(b'managed\n', '/etc/kmpv-test.conf')
    assert executor.read_file('/etc/kmpv-test.conf') == 'managed\n'
    owner = executor.run(['stat', '-c', '%U %a', '/etc/kmpv-test.conf'])
    assert owner.stdout.strip() == 'root 644'
    assert executor.read_file('/etc/does-not-exist') is None


def test_wrong_password_fails_at_once_without_retry(host, options):
    config.CONF.set_override('ssh_connect_retries', 5, config.GROUP_NAME)
    session = remote.RemoteCommandExecutor(host.ip, 'ubuntu', 'WRONGPW')
    before = remote.RemoteCommandExecutor.connections_opened
    with pytest.raises(exceptions.RemoteConnectError) as caught:
        session.connect()
    assert 'authentication failed' in str(caught.value)
    assert 'WRONGPW' not in str(caught.value)
    assert remote.RemoteCommandExecutor.connections_opened == before


def test_unreachable_host_is_retried_then_reported(host, options):
    config.CONF.set_override('ssh_connect_retries', 2, config.GROUP_NAME)
    config.CONF.set_override('ssh_retry_backoff', 0.05, config.GROUP_NAME)
    listener = socket.socket()
    listener.bind(('127.0.0.1', 0))
    port = listener.getsockname()[1]
    listener.close()  # nothing listens there now
    session = remote.RemoteCommandExecutor('127.0.0.1', 'u', 'p', port=port)
    with pytest.raises(exceptions.RemoteConnectError) as caught:
        session.connect()
    assert 'after 3 attempt(s)' in str(caught.value)


def test_reject_policy_refuses_unknown_host_key(host, options, tmp_path):
    config.CONF.set_override('host_key_policy', 'reject', config.GROUP_NAME)
    config.CONF.set_override('known_hosts_file', str(tmp_path / 'kh'),
                             config.GROUP_NAME)
    with pytest.raises(exceptions.RemoteConnectError) as caught:
        remote.RemoteCommandExecutor(host.ip, 'ubuntu', 'ubuntu').connect()
    assert 'unknown SSH host key' in str(caught.value)


def test_known_hosts_policy_records_then_detects_a_changed_key(
        host, options, tmp_path):
    known_hosts = tmp_path / 'known_hosts'
    config.CONF.set_override('host_key_policy', 'known_hosts',
                             config.GROUP_NAME)
    config.CONF.set_override('known_hosts_file', str(known_hosts),
                             config.GROUP_NAME)
    with remote.RemoteCommandExecutor(host.ip, 'ubuntu', 'ubuntu') as s:
        s.run(['true'])
    recorded = paramiko.HostKeys(str(known_hosts))
    assert host.ip in recorded
    # Trusted now, even under "reject".
    config.CONF.set_override('host_key_policy', 'reject', config.GROUP_NAME)
    with remote.RemoteCommandExecutor(host.ip, 'ubuntu', 'ubuntu') as s:
        s.run(['true'])
    # A different key for the same address (a re-created VM) is refused.
    key_type = next(iter(recorded[host.ip]))
    known_hosts.write_text('%s %s\n' % (host.ip,
                                          _other_public_key(tmp_path, key_type)))
    with pytest.raises(exceptions.RemoteConnectError) as caught:
        remote.RemoteCommandExecutor(host.ip, 'ubuntu', 'ubuntu').connect()
    assert 'does not match' in str(caught.value)


def _other_public_key(directory, key_type):
    """A freshly generated public key of the given SSH key type."""
    algorithm = {'ssh-ed25519': 'ed25519', 'ssh-rsa': 'rsa'}.get(
        key_type, 'ecdsa')
    path = str(directory / 'other')
    subprocess.run(['ssh-keygen', '-q', '-t', algorithm, '-N', '', '-f',
                    path], check=True)
    with open(path + '.pub') as stream:
        return ' '.join(stream.read().split()[:2])


def test_session_pool_opens_one_connection_per_host(host, options):
    before = remote.RemoteCommandExecutor.connections_opened
    with remote.SessionPool() as pool:
        first = pool.get(host.ip, 'ubuntu', 'ubuntu')
        again = pool.get(host.ip, 'ubuntu', 'ubuntu')
        assert first is again
        first.run(['true'])
    assert remote.RemoteCommandExecutor.connections_opened == before + 1
