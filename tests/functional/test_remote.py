"""RemoteCommandExecutor and SessionPool against a real OpenSSH server."""

import collections
import functools
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time

import paramiko
import pytest

from kubernetes_mgmt_pv import config
from kubernetes_mgmt_pv import exceptions
from kubernetes_mgmt_pv import redaction
from kubernetes_mgmt_pv.remote import parallel
from kubernetes_mgmt_pv.remote import remote
from testbed import polling
from testbed import security_groups

# The most of a command's output an error keeps.
SHOWN_OUTPUT = redaction.OUTPUT_HEAD + redaction.OUTPUT_TAIL + 40


@pytest.fixture(scope='module')
def host(testbed):
    return testbed.add_host('vm', 'worker')


@pytest.fixture
def options():
    config.CONF.set_override('ssh_connect_retries', 0, config.GROUP_NAME)
    config.CONF.set_override('ssh_connect_timeout', 5, config.GROUP_NAME)
    # No Nova here: host keys are the subject of test_host_keys.py.
    config.CONF.set_override('host_key_policy', 'warn', config.GROUP_NAME)
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


def test_vm_output_in_an_error_is_printable(executor):
    """A Latin-1 path and a terminal escape in a failed command's output:
    the error (Tacker's LCM error, and its log line) gets replacement
    characters and no escape."""
    with pytest.raises(exceptions.RemoteCommandError) as caught:
        executor.run(['sh', '-c', "printf '/srv/caf\\351: \\033[2Jbad\\n' >&2;"
                      ' exit 1'])
    message = str(caught.value)
    assert message.endswith('/srv/caf\ufffd: bad')
    message.encode('utf-8')  # strict, as a log file handler encodes


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


def test_output_is_returned_exactly_even_when_it_holds_a_secret(host,
                                                                options):
    """The login password 'ubuntu' occurs in paths the driver parses and
    writes back: it is hidden in error messages only."""
    with remote.RemoteCommandExecutor(host.ip, 'ubuntu', 'ubuntu') as session:
        result = session.run(['printf', '/home/ubuntu/data\\n\\377'])
        assert result.stdout_bytes == b'/home/ubuntu/data\n\xff'
        assert result.stdout.encode('utf-8', 'surrogateescape') == \
            result.stdout_bytes
        with pytest.raises(exceptions.RemoteCommandError) as caught:
            session.run(['sh', '-c', 'echo /home/ubuntu/data >&2; exit 1'])
    assert 'ubuntu' not in str(caught.value)
    assert '/home/***/data' in str(caught.value)


def test_install_file_keeps_mode_owner_and_symlink(executor, host):
    assert executor.read_bytes('/etc/does-not-exist') is None
    assert executor.read_file('/etc/does-not-exist') is None
    executor.install_file(b'new\n', '/etc/kmpv-new.conf')
    assert host.run('stat -c "%U %a" /etc/kmpv-new.conf').stdout == \
        'root 644\n'
    host.run('printf old > /srv/kmpv-real && chown ubuntu:adm /srv/kmpv-real'
             ' && chmod 640 /srv/kmpv-real'
             ' && ln -sf /srv/kmpv-real /etc/kmpv-link')
    content = b'caf\xe9\r\nline\x0cfeed\n'  # Latin-1, CRLF, form feed
    executor.install_file(content, '/etc/kmpv-link')
    assert executor.read_bytes('/etc/kmpv-link', sudo=True) == content
    assert host.run('readlink /etc/kmpv-link').stdout == '/srv/kmpv-real\n'
    assert host.run('stat -c "%U %G %a" /srv/kmpv-real').stdout == \
        'ubuntu adm 640\n'
    assert host.run('ls /srv /etc | grep -c kubernetes-mgmt-pv',
                    check=False).stdout.strip() == '0'


def test_truncated_content_is_never_installed(executor, host):
    host.run('printf intact > /etc/kmpv-keep.conf')
    with pytest.raises(exceptions.RemoteCommandError) as caught:
        executor.run(['sh', '-c', remote._INSTALL, 'sh', '/etc/kmpv-keep.conf',
                      '0644', 'root', 'root', '0' * 64], sudo=True,
                     stdin=b'half of it')
    assert 'incomplete' in str(caught.value)
    assert host.read_file('/etc/kmpv-keep.conf') == 'intact'
    assert 'kubernetes-mgmt-pv' not in host.run('ls /etc').stdout


def test_environment_and_input_reach_the_command_together(executor):
    """The variables head the standard input; the command reads the rest
    (the install script's join secrets), byte for byte."""
    data = b'token=abcdef.0123456789abcdef\n\xff\nno newline at the end'
    result = executor.run(
        ['sh', '-c', 'printf "%s|" "$http_proxy" "$no_proxy"; cat'],
        sudo=True, stdin=data,
        env={'http_proxy': "http://p:3128/'$x'", 'no_proxy': 'a,b\nc'})
    assert result.stdout_bytes == (b"http://p:3128/'$x'|a,b\nc|" + data)


def test_environment_stays_out_of_the_process_list(executor):
    proxy = 'http://user:s3cret@proxy.invalid:3128'
    result = executor.run(
        ['sh', '-c', 'ps -eo args; echo "proxy=$http_proxy"'], sudo=True,
        env={'http_proxy': proxy})
    lines = result.stdout.splitlines()
    assert lines[-1] == 'proxy=' + proxy
    assert not [line for line in lines[:-1] if 's3cret' in line]


def test_wrong_password_fails_at_once_without_retry(host, options, logins):
    config.CONF.set_override('ssh_connect_retries', 5, config.GROUP_NAME)
    session = remote.RemoteCommandExecutor(host.ip, 'ubuntu', 'WRONGPW')
    with pytest.raises(exceptions.RemoteConnectError) as caught:
        session.connect()
    assert 'authentication failed' in str(caught.value)
    assert 'WRONGPW' not in str(caught.value)
    assert logins == []


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


def test_ssh_dropped_by_a_security_group_is_named_as_such(
        testbed, host, options):
    """A VM whose security group lacks the SSH rule for the conductor:
    the error names the host, the SSH login and why; with the rule the
    same login works."""
    if security_groups.BridgeFilter.unavailable():
        pytest.skip(security_groups.BridgeFilter.unavailable())
    config.CONF.set_override('ssh_connect_timeout', 1, config.GROUP_NAME)
    nfs_only = security_groups.Rule('tcp', 2049, 2049)
    ssh = security_groups.Rule('tcp', 22, 22, testbed.bridge_ip + '/32')
    port = security_groups.Port((host.ip,), ('nodes',),
                                device=host._veths[0])
    bridge = security_groups.BridgeFilter(testbed.prefix, testbed.bridge)
    bridge.start()
    try:
        bridge.apply(security_groups.render(testbed.prefix, [port], {
            'nodes': [nfs_only]}))
        with pytest.raises(exceptions.RemoteConnectError) as caught:
            remote.RemoteCommandExecutor(host.ip, 'ubuntu', 'ubuntu'
                                         ).connect()
        message = str(caught.value)
        assert message.startswith(host.ip + ': cannot connect over SSH')
        assert 'no answer from port 22' in message
        assert 'security group' in message
        bridge.apply(security_groups.render(testbed.prefix, [port], {
            'nodes': [nfs_only, ssh]}))
        with remote.RemoteCommandExecutor(host.ip, 'ubuntu', 'ubuntu') as ok:
            assert ok.run(['true']).ok
    finally:
        bridge.stop()


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


def test_console_policy_without_a_server_is_a_clear_error(host, options):
    config.CONF.set_override('host_key_policy', 'console', config.GROUP_NAME)
    with pytest.raises(exceptions.RemoteConnectError) as caught:
        remote.RemoteCommandExecutor(host.ip, 'ubuntu', 'ubuntu').connect()
    assert 'no Nova server is known' in str(caught.value)


def test_session_pool_opens_one_connection_per_host(host, options, logins):
    with remote.SessionPool() as pool:
        first = pool.get(host.ip, 'ubuntu', 'ubuntu')
        again = pool.get(host.ip, 'ubuntu', 'ubuntu')
        assert first is again
        first.run(['true'])
    assert logins == [host.ip]


def _established_ssh(addresses):
    """TCP connections to port 22 of ``addresses`` established now, as the
    kernel of this (the driver's) namespace lists them."""
    wanted = {'%s:0016' % ''.join(
        '%02X' % int(octet) for octet in reversed(address.split('.')))
        for address in addresses}
    count = 0
    with open('/proc/net/tcp') as table:
        next(table)
        for line in table:
            fields = line.split()
            count += fields[2] in wanted and fields[3] == '01'
    return count


@pytest.fixture(scope='module')
def ten_hosts(testbed):
    return [testbed.add_host('pool%d' % n, 'worker').ip for n in range(10)]


def test_hooks_fitting_the_cap_log_in_once_per_host_at_any_count(
        ten_hosts, options, logins):
    """Three hooks of 4, 3 and 3 hosts at once with 4 sessions for all:
    each step walks its hook's hosts in the same order, as the driver's
    steps do. A hook waits for permits rather than closing another hook's
    session, so each host is logged in to once, and never are more than 4
    connections established (counted by the kernel, not by the driver)."""
    config.CONF.set_override('max_ssh_sessions', 4, config.GROUP_NAME)
    groups = [ten_hosts[:4], ten_hosts[4:7], ten_hosts[7:]]
    peak, lock, errors = [0], threading.Lock(), []

    def command(pool, address):
        pool.get(address, 'ubuntu', 'ubuntu').run(['true'])
        with lock:
            peak[0] = max(peak[0], _established_ssh(ten_hosts))

    def hook(addresses):
        try:
            with remote.SessionPool() as pool:
                pool.reserve(len(addresses))
                for step in range(3):
                    parallel.run_on_nodes(
                        'step %d' % step, functools.partial(command, pool),
                        {a: a for a in addresses}, max_workers=4)
        except Exception as error:  # reported below
            errors.append(error)

    hooks = [threading.Thread(target=hook, args=(group,)) for group in groups]
    for thread in hooks:
        thread.start()
    for thread in hooks:
        thread.join(120)
    assert errors == [] and not any(t.is_alive() for t in hooks)
    assert collections.Counter(logins) == dict.fromkeys(ten_hosts, 1)
    assert 1 <= peak[0] <= 4
    # paramiko's transport threads close the sockets just after the hooks.
    polling.wait_until(lambda: _established_ssh(ten_hosts) == 0,
                       'the connections to close', timeout=10)


# -- a host that stops answering ----------------------------------------------

@pytest.fixture
def silent_host(testbed):
    """A host whose link the test can cut: packets vanish, no reset."""
    host = testbed.add_host('silent', 'worker')
    yield host
    testbed.remove_host('silent')


def _silence(host):
    host.run('ip link set eth0 down')


def _no_answer(error):
    """(host, seconds) of a "no answer from <host> for N s" reason."""
    found = re.search(r'no answer from (\S+) for (\d+) s', str(error))
    assert found, str(error)
    return found.group(1), int(found.group(2))


def _silence_during_a_long_command(host):
    """Run `sleep 600` under a 600 s timeout (like the install script),
    cut the host's link once it runs; the error and the seconds from the
    cut to the error."""
    session = remote.RemoteCommandExecutor(host.ip, 'ubuntu', 'ubuntu')
    session.connect()
    cut = []

    def cut_when_running():
        polling.wait_until(lambda: host.run('pgrep -x sleep',
                                            check=False).returncode == 0,
                           'the command to start')
        _silence(host)
        cut.append(time.monotonic())

    cutter = threading.Thread(target=cut_when_running)
    cutter.start()
    with pytest.raises(exceptions.RemoteCommandError) as caught:
        session.run(['sleep', '600'], timeout=600)
    since_cut = time.monotonic() - cut[0]
    cutter.join()
    assert caught.value.timed_out and caught.value.host == host.ip
    assert str(caught.value).startswith(host.ip + ': `sleep 600`')
    return caught.value, since_cut


def test_silent_host_during_a_long_command_fails_it_in_command_timeout(
        silent_host, options):
    """The host is given up command_timeout after it fell silent, before
    the kernel's own limit (three keepalive intervals after the first
    unanswered packet: up to 8 s here) and long before the command's."""
    config.CONF.set_override('command_timeout', 6, config.GROUP_NAME)
    config.CONF.set_override('ssh_keepalive_interval', 2, config.GROUP_NAME)
    error, since_cut = _silence_during_a_long_command(silent_host)
    assert since_cut < 6 + 5, since_cut
    host, seconds = _no_answer(error)
    # Heard last at most one keepalive interval before the cut.
    assert host == silent_host.ip and 6 <= seconds <= since_cut + 2 + 1


def test_silent_host_dropped_by_the_kernel_first_is_no_answer_too(
        silent_host, options):
    """With a command_timeout far beyond three keepalive intervals the
    kernel's TCP user timeout ends the connection first: silence all the
    same, not a connection the host closed."""
    config.CONF.set_override('command_timeout', 60, config.GROUP_NAME)
    config.CONF.set_override('ssh_keepalive_interval', 1, config.GROUP_NAME)
    error, since_cut = _silence_during_a_long_command(silent_host)
    assert since_cut < 1 + 3 + 5, since_cut
    host, seconds = _no_answer(error)
    assert host == silent_host.ip and 2 <= seconds <= since_cut + 1 + 1


def test_a_quiet_command_outliving_command_timeout_is_not_silence(
        executor, options):
    """The host answers the driver's questions while the command prints
    nothing for longer than command_timeout."""
    config.CONF.set_override('command_timeout', 2, config.GROUP_NAME)
    config.CONF.set_override('ssh_keepalive_interval', 0.5,
                             config.GROUP_NAME)
    result = executor.run(['sh', '-c', 'sleep 5; echo done'], timeout=30)
    assert result.stdout == 'done\n'


def test_silent_host_before_a_command_fails_it_in_time(silent_host, options):
    config.CONF.set_override('command_timeout', 3, config.GROUP_NAME)
    config.CONF.set_override('ssh_keepalive_interval', 0, config.GROUP_NAME)
    session = remote.RemoteCommandExecutor(silent_host.ip, 'ubuntu', 'ubuntu')
    session.connect()
    _silence(silent_host)
    begin = time.monotonic()
    with pytest.raises(exceptions.RemoteCommandError) as caught:
        session.run(['true'])
    elapsed = time.monotonic() - begin
    assert elapsed < 3 + 5
    host, seconds = _no_answer(caught.value)
    assert host == silent_host.ip and 3 <= seconds <= elapsed
    # The next command does not wait on the dead connection again forever.
    config.CONF.set_override('ssh_connect_timeout', 2, config.GROUP_NAME)
    begin = time.monotonic()
    with pytest.raises(exceptions.MgmtDriverError):
        session.run(['true'])
    assert time.monotonic() - begin < 2 + 5


def test_dropped_connection_is_named_and_the_next_command_reconnects(
        executor, host):
    with pytest.raises(exceptions.RemoteCommandError) as caught:
        # The parent of the command is the sshd process of this session.
        executor.run(['sh', '-c', 'kill -9 $PPID; sleep 5'])
    message = str(caught.value)
    assert message.startswith(host.ip + ': ')
    assert 'connection lost' in message, message
    assert executor.run(['true']).ok


def _rss_bytes():
    with open('/proc/self/status') as status:
        for line in status:
            if line.startswith('VmRSS:'):
                return int(line.split()[1]) * 1024


def test_a_host_printing_without_end_fails_the_command_in_bounded_memory(
        executor, host, options):
    """1 GiB on stdout: the command is abandoned at command_output_limit,
    well within command_timeout, naming host and command, while this
    process's memory stays far below what it was sent."""
    config.CONF.set_override('command_timeout', 60, config.GROUP_NAME)
    limit = options.command_output_limit
    baseline, peak = _rss_bytes(), [0]
    done = threading.Event()

    def sample():
        while not done.is_set():
            peak[0] = max(peak[0], _rss_bytes())
            time.sleep(0.05)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    started = time.monotonic()
    try:
        with pytest.raises(exceptions.RemoteCommandError) as caught:
            executor.run(['sh', '-c', 'yes | head -c 1G'],
                         description='print a gibibyte')
    finally:
        done.set()
        sampler.join()
    assert time.monotonic() - started < options.command_timeout
    error = caught.value
    assert error.host == host.ip and error.description == 'print a gibibyte'
    assert str(error).startswith('%s: `print a gibibyte`' % host.ip)
    assert str(limit) in str(error) and 'stdout' in str(error)
    # What the error shows: the head and the tail, nothing more kept.
    assert error.stdout.startswith('y\ny\n') and 'left out' in error.stdout
    assert len(error.stdout) <= SHOWN_OUTPUT
    assert peak[0] - baseline < 8 * limit
    assert executor.run(['true']).ok  # a new connection serves the next


def test_output_limit_applies_to_stderr_too(executor, options):
    config.CONF.set_override('command_output_limit', 65536, config.GROUP_NAME)
    config.CONF.set_override('command_timeout', 10, config.GROUP_NAME)
    with pytest.raises(exceptions.RemoteCommandError) as caught:
        executor.run(['sh', '-c', 'echo first >&2; yes >&2'])
    assert 'stderr' in str(caught.value)
    assert caught.value.stderr.startswith('first\ny\n')
    assert 'left out' in caught.value.stderr
    assert len(caught.value.stderr) <= SHOWN_OUTPUT


# A failed command's output of 16 MiB (command_output_limit) that makes a
# URL pattern restart at every word: the step, as a hook runs it, and the
# redaction of its error by the doors (v1: redacted_error, v2: failure).
_FLOOD_STEP = '''
import json, sys
from kubernetes_mgmt_pv import config, exceptions, redaction, step_report
from kubernetes_mgmt_pv.doors import v2_failure
from kubernetes_mgmt_pv.remote import remote
host, timeout = sys.argv[1], float(sys.argv[2])
for name, value in (('ssh_connect_retries', 0), ('host_key_policy', 'warn'),
                    ('command_timeout', timeout)):
    config.CONF.set_override(name, value, config.GROUP_NAME)
with remote.SessionPool(secrets=('ubuntu',)) as pool:
    session = pool.get(host, 'ubuntu', 'ubuntu')
    try:
        with step_report.step(host, 'flood check'):
            session.run(['sh', '-c', 'yes a- | tr -d "\\n" | '
                         'head -c 16777216; exit 1'])
    except exceptions.StepError as error:
        clean = redaction.redacted_error(error, pool.hidden)
        found = v2_failure.failure('instantiate_end', clean, pool.hidden)
        print(json.dumps({'message': str(clean), 'step': found.step,
                          'host': found.host, 'reason': found.reason}))
'''


def test_a_flood_of_hostile_output_fails_the_step_in_time(host):
    """16 MiB of "a-a-a-..." and exit 1: the step fails within
    command_timeout plus a few seconds (a quadratic redaction of the output
    held the GIL for days), naming host, step and exit status."""
    timeout = 30
    begin = time.monotonic()
    child = subprocess.run(
        [sys.executable, '-c', _FLOOD_STEP, host.ip, str(timeout)],
        capture_output=True, text=True, timeout=timeout + 15, check=True,
        env=dict(os.environ, PYTHONPATH=os.path.dirname(
            os.path.dirname(exceptions.__file__))))
    assert time.monotonic() - begin < timeout + 15
    failure = json.loads(child.stdout)
    assert failure['message'].startswith('flood check failed on %s: '
                                         % host.ip)
    assert 'exit status 1' in failure['message']
    assert (failure['step'], failure['host']) == ('flood check', host.ip)
    assert 'exit status 1' in failure['reason']
    assert len(failure['message']) < 2 * SHOWN_OUTPUT
