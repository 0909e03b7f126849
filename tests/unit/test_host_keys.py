"""Host key verification against a VM's console (host_keys, nova).

Console logs are written the way cloud-init's keys_to_console leaves them
on real consoles; Nova is the HTTP fake, reached through the real
keystoneauth1 session of the Heat client.
"""

import base64
import fcntl
import logging
import shutil
import subprocess
import types
import urllib.error
import urllib.request

from cryptography.hazmat.primitives.asymmetric import ed25519
from cryptography.hazmat.primitives import serialization
import paramiko
import pytest

from kubernetes_mgmt_pv import exceptions
from kubernetes_mgmt_pv.openstack import heat
from kubernetes_mgmt_pv.openstack import nova
from kubernetes_mgmt_pv.remote import host_keys
from testbed import openstack_api

SERVER_ID = '0b5e2bb6-1f1e-4a51-9a55-3d6c1b1c2f77'
RULE = '#' * 61


@pytest.fixture
def cloud():
    with openstack_api.FakeOpenStack(password='s3cret-vim-pw') as fake:
        yield fake


@pytest.fixture
def stack_id(cloud):
    return cloud.add_stack('vnf-k8s')


def new_key():
    """A fresh ed25519 public key as paramiko presents a server's key."""
    public = ed25519.Ed25519PrivateKey.generate().public_key().public_bytes(
        serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    return paramiko.Ed25519Key(data=base64.b64decode(public.split()[1]))


def fingerprint_line(key, host='vm'):
    return '256 %s root@%s (ED25519)' % (host_keys.sha256_fingerprint(key),
                                         host)


def public_key_line(key, host='vm'):
    return '%s %s root@%s' % (key.get_name(), key.get_base64(), host)


def ubuntu_console(fingerprint_keys=(), listed_keys=()):
    """A console log of Ubuntu 22.04: the fingerprints through logger (its
    syslog header and the "ec2" tag), the keys plain, CRLF line ends."""
    lines = [
        '[    0.000000] Linux version 5.15.0-91-generic (buildd@lcy02)',
        "[   11.204915] cloud-init[812]: Cloud-init v. 23.3.3 running "
        "'modules:final'",
        # Authorized user keys are fingerprinted too, outside the blocks.
        'ci-info: | ssh-ed25519 | SHA256:%s | - | user@laptop |' % ('u' * 43),
        '<14>Jan  8 10:11:12 ec2:',
        '<14>Jan  8 10:11:12 ec2: ' + RULE,
        '<14>Jan  8 10:11:12 ec2: -----BEGIN SSH HOST KEY FINGERPRINTS-----',
    ]
    lines += ['<14>Jan  8 10:11:12 ec2: ' + fingerprint_line(key)
              for key in fingerprint_keys]
    lines += [
        '<14>Jan  8 10:11:12 ec2: -----END SSH HOST KEY FINGERPRINTS-----',
        '<14>Jan  8 10:11:12 ec2: ' + RULE,
        '-----BEGIN SSH HOST KEY KEYS-----',
    ]
    lines += [public_key_line(key) for key in listed_keys]
    lines += [
        '-----END SSH HOST KEY KEYS-----',
        '[   12.001234] cloud-init[905]: Cloud-init v. 23.3.3 finished',
        '',
        'vm login: ',
    ]
    return '\r\n'.join(lines)


def fingerprints(*keys):
    return frozenset(host_keys.sha256_fingerprint(key) for key in keys)


# -- fingerprints -------------------------------------------------------------

def test_fingerprint_is_openssh_sha256_without_padding(tmp_path):
    key = new_key()

    fingerprint = host_keys.sha256_fingerprint(key)

    assert fingerprint.startswith('SHA256:') and len(fingerprint) == 50
    assert not fingerprint.endswith('=')
    if shutil.which('ssh-keygen'):
        public = tmp_path / 'key.pub'
        public.write_text(public_key_line(key) + '\n')
        keygen = subprocess.run(['ssh-keygen', '-l', '-f', str(public)],
                                capture_output=True, text=True, check=True)
        assert keygen.stdout.split()[1] == fingerprint


# -- parsing console logs ----------------------------------------------------

def test_ubuntu_console_lists_fingerprints_and_public_keys():
    printed, listed = new_key(), new_key()

    found = host_keys.parse_console_fingerprints(
        ubuntu_console([printed], [listed]))

    assert found == fingerprints(printed, listed)


@pytest.mark.parametrize('prefix', [
    '',
    'ec2: ',
    '<14>Jan  8 10:11:12 ec2: ',
    '[   25.812345] cloud-init[1234]: ',
    '\x1b[0m',
])
def test_line_prefixes_of_real_consoles(prefix):
    key, other = new_key(), new_key()
    console = '\n'.join(prefix + line for line in [
        'random: crng init done',
        '-----BEGIN SSH HOST KEY FINGERPRINTS-----',
        fingerprint_line(key),
        '-----END SSH HOST KEY FINGERPRINTS-----',
        '-----BEGIN SSH HOST KEY KEYS-----',
        public_key_line(other),
        '-----END SSH HOST KEY KEYS-----',
    ])

    assert host_keys.parse_console_fingerprints(console) == fingerprints(
        key, other)


def test_only_the_last_report_counts():
    old, new = new_key(), new_key()
    console = ubuntu_console([old], [old]) + '\r\n' + ubuntu_console([new],
                                                                     [new])

    assert host_keys.parse_console_fingerprints(console) == fingerprints(new)


def test_a_last_fingerprints_block_stands_alone():
    old, new = new_key(), new_key()
    console = ubuntu_console([old], [old]) + '\n'.join([
        '',
        '-----BEGIN SSH HOST KEY FINGERPRINTS-----',
        fingerprint_line(new),
        '-----END SSH HOST KEY FINGERPRINTS-----',
    ])

    assert host_keys.parse_console_fingerprints(console) == fingerprints(new)


@pytest.mark.parametrize('console', [
    '',
    '[    0.000000] Linux version 5.15.0\r\nvm login: ',
    # Still being printed: no END marker yet.
    '-----BEGIN SSH HOST KEY FINGERPRINTS-----\n256 SHA256:%s root@vm'
    % ('a' * 43),
    # Its start cut off by Nova's length limit.
    '256 SHA256:%s root@vm (ED25519)\n-----END SSH HOST KEY FINGERPRINTS-----'
    % ('a' * 43),
])
def test_no_complete_block_means_not_yet(console):
    assert host_keys.parse_console_fingerprints(console) is None


def test_a_block_cut_off_by_a_reboot_is_not_trusted():
    cut, key = new_key(), new_key()
    console = '\n'.join([
        '-----BEGIN SSH HOST KEY FINGERPRINTS-----',
        fingerprint_line(cut),
        '[    0.000000] Linux version 5.15.0',
        '-----BEGIN SSH HOST KEY FINGERPRINTS-----',
        fingerprint_line(key),
        '-----END SSH HOST KEY FINGERPRINTS-----',
    ])

    assert host_keys.parse_console_fingerprints(console) == fingerprints(key)


def test_blocks_without_keys_give_an_empty_set():
    assert host_keys.parse_console_fingerprints(ubuntu_console()) == (
        frozenset())


def test_md5_fingerprints_of_old_images_are_ignored():
    key = new_key()
    console = '\n'.join([
        'ec2: -----BEGIN SSH HOST KEY FINGERPRINTS-----',
        'ec2: 256 17:4a:d6:bd:5c:43:41:cd:fc:ea:86:fe:d2:42:ef:58 root@vm '
        '(ECDSA)',
        'ec2: -----END SSH HOST KEY FINGERPRINTS-----',
        '-----BEGIN SSH HOST KEY KEYS-----',
        public_key_line(key),
        '-----END SSH HOST KEY KEYS-----',
    ])

    assert host_keys.parse_console_fingerprints(console) == fingerprints(key)


def test_key_lines_whose_type_and_blob_disagree_are_ignored():
    key = new_key()
    console = '\n'.join([
        '-----BEGIN SSH HOST KEY KEYS-----',
        'ssh-rsa %s root@vm' % key.get_base64(),
        'ssh-ed25519 AAAA!!not-base64 root@vm',
        'ssh-ed25519 AAAAB3NzaC1yc2EAAAADAQABAAABAQ root@vm',
        '-----END SSH HOST KEY KEYS-----',
    ])

    assert host_keys.parse_console_fingerprints(console) == frozenset()


# -- the policy ---------------------------------------------------------------

class FakeClock:
    """time.monotonic and time.sleep for the policy, without waiting."""

    def __init__(self):
        self.now = 100.0
        self.sleeps = []

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.sleeps.append(seconds)
        self.now += seconds


class Console:
    """fetch_console for the policy: answers in turn, the last repeated."""

    def __init__(self, *answers):
        self.answers = list(answers)
        self.calls = 0

    def __call__(self):
        self.calls += 1
        answer = self.answers[min(self.calls, len(self.answers)) - 1]
        if isinstance(answer, Exception):
            raise answer
        return answer


def policy(console, clock=None, timeout=60, **kwargs):
    clock = clock or FakeClock()
    return host_keys.ConsoleHostKeyPolicy(
        SERVER_ID, console, timeout=timeout, clock=clock, sleep=clock.sleep,
        **kwargs)


def test_a_key_on_the_console_is_accepted_and_the_console_read_once():
    key = new_key()
    console = Console(ubuntu_console([key], [key]))
    checker = policy(console)

    checker.missing_host_key(None, '10.0.0.5', key)
    checker.missing_host_key(None, '10.0.0.5', key)

    assert console.calls == 1


def test_an_impostor_key_is_refused_with_everything_to_act_on():
    genuine, impostor = new_key(), new_key()
    checker = policy(Console(ubuntu_console([genuine], [genuine])))

    with pytest.raises(host_keys.HostKeyMismatchError) as raised:
        checker.missing_host_key(None, '10.0.0.5', impostor)

    message = str(raised.value)
    assert isinstance(raised.value, exceptions.RemoteConnectError)
    assert message.startswith('10.0.0.5: ')
    assert host_keys.sha256_fingerprint(impostor) in message
    assert host_keys.sha256_fingerprint(genuine) in message
    assert SERVER_ID in message
    assert 'password was NOT sent' in message


def test_waits_for_a_booting_vm_with_a_doubling_delay():
    key = new_key()
    clock = FakeClock()
    console = Console('', '', '[ 3.1] booting', ubuntu_console([key]))

    policy(console, clock).missing_host_key(None, '10.0.0.5', key)

    assert console.calls == 4
    assert clock.sleeps == [1.0, 2.0, 4.0]


def test_transient_nova_errors_are_retried():
    key = new_key()
    clock = FakeClock()
    console = Console(nova.ConsoleOutputError('HTTP 409', retry=True),
                      ubuntu_console([key]))

    policy(console, clock).missing_host_key(None, '10.0.0.5', key)

    assert clock.sleeps == [1.0]


def test_no_keys_within_the_timeout_is_refused_by_default():
    clock = FakeClock()
    console = Console('[    0.000000] Linux version 5.15.0')

    with pytest.raises(host_keys.HostKeyUnverifiedError) as raised:
        policy(console, clock, timeout=60).missing_host_key(
            None, '10.0.0.5', new_key())

    assert sum(clock.sleeps) == 60
    assert clock.sleeps[:5] == [1.0, 2.0, 4.0, 8.0, 15.0]
    assert max(clock.sleeps) == host_keys.MAX_POLL_DELAY
    message = str(raised.value)
    assert SERVER_ID in message and 'waited 60s' in message
    assert 'keys_to_console' in message
    assert 'password was NOT sent' in message


def test_the_answer_is_kept_so_a_retried_connection_does_not_wait_again():
    clock = FakeClock()
    console = Console('')
    checker = policy(console, clock, timeout=5)

    for _ in range(2):
        with pytest.raises(host_keys.HostKeyUnverifiedError):
            checker.missing_host_key(None, '10.0.0.5', new_key())

    assert sum(clock.sleeps) == 5


@pytest.mark.parametrize('answer', [
    nova.ConsoleOutputError('Nova answered HTTP 501', retry=False),
    ubuntu_console(),  # blocks printed, every key type left out
])
def test_a_console_that_cannot_list_keys_is_not_waited_for(answer):
    clock = FakeClock()
    checker = policy(Console(answer), clock)

    with pytest.raises(host_keys.HostKeyUnverifiedError):
        checker.missing_host_key(None, '10.0.0.5', new_key())

    assert clock.sleeps == []
    assert checker.unverified_reason


def test_warn_fallback_accepts_with_a_warning(caplog):
    key = new_key()
    checker = policy(Console(''), timeout=0, fallback='warn')

    with caplog.at_level(logging.WARNING):
        checker.missing_host_key(None, '10.0.0.5', key)

    assert host_keys.sha256_fingerprint(key) in caplog.text
    assert 'console_key_fallback = warn' in caplog.text


def test_warn_fallback_still_refuses_a_key_off_the_console():
    genuine = new_key()
    checker = policy(Console(ubuntu_console([genuine])), fallback='warn')

    with pytest.raises(host_keys.HostKeyMismatchError):
        checker.missing_host_key(None, '10.0.0.5', new_key())


def test_known_hosts_fallback_trusts_on_first_use(tmp_path):
    known_hosts = str(tmp_path / 'known_hosts')
    first, impostor = new_key(), new_key()

    def unverified():
        return policy(Console(''), timeout=0, fallback='known_hosts',
                      known_hosts_file=known_hosts)

    unverified().missing_host_key(None, '10.0.0.5', first)
    unverified().missing_host_key(None, '10.0.0.5', first)
    with pytest.raises(host_keys.HostKeyMismatchError) as raised:
        unverified().missing_host_key(None, '10.0.0.5', impostor)

    assert known_hosts in str(raised.value)
    assert 'password was NOT sent' in str(raised.value)
    recorded = paramiko.HostKeys(known_hosts).lookup('10.0.0.5')
    assert recorded['ssh-ed25519'].asbytes() == first.asbytes()


def test_known_hosts_fallback_records_keys_verified_on_the_console(tmp_path):
    """A VM checked on its console once stays checked when its console no
    longer holds the keys; a heal replaces the recorded key."""
    known_hosts = str(tmp_path / 'known_hosts')
    old, healed = new_key(), new_key()

    def checked(console):
        return policy(Console(console), timeout=0, fallback='known_hosts',
                      known_hosts_file=known_hosts)

    checked(ubuntu_console([old])).missing_host_key(None, '10.0.0.5', old)
    checked('rotated away').missing_host_key(None, '10.0.0.5', old)
    with pytest.raises(host_keys.HostKeyMismatchError):
        checked('rotated away').missing_host_key(None, '10.0.0.5', new_key())
    checked(ubuntu_console([healed])).missing_host_key(None, '10.0.0.5',
                                                       healed)

    recorded = paramiko.HostKeys(known_hosts).lookup('10.0.0.5')
    assert recorded['ssh-ed25519'].asbytes() == healed.asbytes()


def test_known_hosts_writers_lock_out_other_conductors(tmp_path,
                                                       monkeypatch):
    """Another conductor (process or host) sharing the file cannot take
    its lock while an entry is being recorded: neither overwrites the
    other's VNFs' entries."""
    known_hosts = str(tmp_path / 'known_hosts')
    attempts = []
    load = host_keys._load_known_hosts

    def load_while_another_conductor_tries(path, hostname):
        with open(known_hosts + '.lock', 'a') as other:
            try:
                fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
                attempts.append('locked')
            except BlockingIOError:
                attempts.append('refused')
        return load(path, hostname)

    monkeypatch.setattr(host_keys, '_load_known_hosts',
                        load_while_another_conductor_tries)
    host_keys.record_known_host(known_hosts, '10.0.0.5', new_key())
    policy(Console(''), timeout=0, fallback='known_hosts',
           known_hosts_file=known_hosts).missing_host_key(
        None, '10.0.0.6', new_key())

    assert attempts == ['refused', 'refused']
    assert sorted(paramiko.HostKeys(known_hosts).keys()) == [
        '10.0.0.5', '10.0.0.6']


def test_known_hosts_file_is_replaced_whole(tmp_path, monkeypatch):
    """A connection loading the file while an entry is recorded (it takes
    no lock) reads the old entries, never a truncated file."""
    known_hosts = str(tmp_path / 'known_hosts')
    host_keys.record_known_host(known_hosts, '10.0.0.5', new_key())
    seen = []
    save = paramiko.HostKeys.save

    def save_and_look(known, filename):
        save(known, filename)
        seen.append(sorted(paramiko.HostKeys(known_hosts).keys()))

    monkeypatch.setattr(paramiko.HostKeys, 'save', save_and_look)
    host_keys.record_known_host(known_hosts, '10.0.0.6', new_key())

    assert seen == [['10.0.0.5']]
    assert sorted(paramiko.HostKeys(known_hosts).keys()) == [
        '10.0.0.5', '10.0.0.6']


def test_known_hosts_file_that_cannot_be_written_is_reported(tmp_path):
    known_hosts = str(tmp_path / 'missing-directory' / 'known_hosts')
    checker = policy(Console(''), timeout=0, fallback='known_hosts',
                     known_hosts_file=known_hosts)

    with pytest.raises(exceptions.RemoteConnectError,
                       match='10.0.0.5: cannot record its SSH host key in %s'
                             % known_hosts):
        checker.missing_host_key(None, '10.0.0.5', new_key())


def test_unknown_fallback_is_a_programming_error():
    with pytest.raises(ValueError):
        policy(Console(''), fallback='accept')
    with pytest.raises(ValueError):
        policy(Console(''), fallback='known_hosts')


def test_building_a_policy_asks_nothing_yet(cloud):
    client = heat.build_heat_client(cloud.access_info())
    options = types.SimpleNamespace(
        host_key_policy='console', console_key_timeout=1.0,
        console_key_fallback='reject', known_hosts_file='/nonexistent')
    built = host_keys.console_policy(client, SERVER_ID, options)
    assert isinstance(built, host_keys.ConsoleHostKeyPolicy)
    assert built.server_id == SERVER_ID
    assert cloud.requests == []  # nothing is asked before a key is checked


# -- through Nova (the HTTP fake) ---------------------------------------------

def compute(cloud, **access_overrides):
    return nova.Compute(heat.build_heat_client(
        cloud.access_info(**access_overrides)))


def test_the_console_is_read_on_the_heat_session(cloud, stack_id):
    key = new_key()
    cloud.add_port(stack_id, 'vm_cp', ['10.10.0.5'], device_id=SERVER_ID)
    cloud.add_server(stack_id, 'vm', SERVER_ID,
                     console_output=ubuntu_console([key]))
    client = heat.build_heat_client(cloud.access_info())

    server_id = heat.HeatStack(client, stack_id).cp_server_id('vm_cp')
    host_keys.console_policy(
        client, server_id,
        types.SimpleNamespace(console_key_timeout=0,
                              console_key_fallback='reject',
                              known_hosts_file=None),
    ).missing_host_key(None, '10.10.0.5', key)

    requests = ['%s %s %s %s' % (r.method, r.path, r.status, r.had_token)
                for r in cloud.requests]
    assert requests[0] == 'POST /v3/auth/tokens 201 False'
    assert requests[-1] == (
        'POST /compute/v2.1/servers/%s/action 200 True' % SERVER_ID)
    assert [r for r in requests if '/v3/auth/tokens' in r] == requests[:1]


def test_length_gives_the_last_lines(cloud, stack_id):
    cloud.add_server(stack_id, 'vm', SERVER_ID,
                     console_output='one\r\ntwo\r\nthree\r\n')

    whole = compute(cloud).console_output(SERVER_ID)

    assert whole == 'one\r\ntwo\r\nthree\r\n'
    assert compute(cloud).console_output(SERVER_ID, length=2) == (
        'two\r\nthree\r\n')


def test_a_console_growing_while_the_vm_boots(cloud, stack_id):
    key = new_key()
    cloud.add_server(stack_id, 'vm', SERVER_ID)
    clock = FakeClock()

    def boot_goes_on(seconds):
        clock.sleep(seconds)
        cloud.set_console_output(SERVER_ID, ubuntu_console([key]))

    checker = host_keys.ConsoleHostKeyPolicy(
        SERVER_ID, lambda: compute(cloud).console_output(SERVER_ID),
        timeout=60, clock=clock, sleep=boot_goes_on)
    checker.missing_host_key(None, '10.10.0.5', key)

    assert clock.sleeps == [1.0]
    assert len(cloud.nova_requests()) == 2


def test_unknown_server_is_not_retried(cloud):
    with pytest.raises(nova.ConsoleOutputError) as raised:
        compute(cloud).console_output(SERVER_ID)

    assert raised.value.retry is False
    assert 'HTTP 404: Instance %s could not be found' % SERVER_ID in str(
        raised.value)


def test_a_removed_server_leaves_nova(cloud, stack_id):
    cloud.add_server(stack_id, 'vm', SERVER_ID)
    cloud.remove_resource(stack_id, 'vm')

    with pytest.raises(nova.ConsoleOutputError, match='HTTP 404'):
        compute(cloud).console_output(SERVER_ID)


@pytest.mark.parametrize('status, retry, hint', [
    (409, True, ''),
    (503, True, ''),
    (403, False, 'os_compute_api:os-console-output'),
    (501, False, 'keeps no console log'),
])
def test_nova_errors_say_whether_to_retry(cloud, stack_id, status, retry,
                                          hint):
    cloud.add_server(stack_id, 'vm', SERVER_ID)
    cloud.fail_console(SERVER_ID, status)

    with pytest.raises(nova.ConsoleOutputError) as raised:
        compute(cloud).console_output(SERVER_ID)

    assert raised.value.retry is retry
    assert 'HTTP %d' % status in str(raised.value)
    assert hint in str(raised.value)


def test_wrong_vim_password_is_reported_without_it(cloud, stack_id):
    cloud.add_server(stack_id, 'vm', SERVER_ID)

    with pytest.raises(nova.ConsoleOutputError) as raised:
        compute(cloud, password='not-the-secret').console_output(SERVER_ID)

    assert 'rejected the VIM credentials' in str(raised.value)
    assert 'not-the-secret' not in str(raised.value)
    assert cloud.password not in str(raised.value)
    assert cloud.nova_requests() == []


def test_unreachable_nova_is_retried_and_reported_without_secrets():
    with openstack_api.FakeOpenStack() as stopped:
        access_info = stopped.access_info()

    with pytest.raises(nova.ConsoleOutputError) as raised:
        nova.Compute(heat.build_heat_client(access_info)).console_output(
            SERVER_ID)

    assert raised.value.retry is True
    assert 'cannot connect' in str(raised.value)
    assert access_info['password'] not in str(raised.value)


def test_the_compute_endpoint_of_the_vim_region_is_used():
    with openstack_api.FakeOpenStack(regions=['RegionTwo']) as cloud:
        stack_id = cloud.add_stack('vnf-k8s')
        cloud.add_server(stack_id, 'vm', SERVER_ID, console_output='boot')

        found = compute(cloud, region='RegionTwo').console_output(SERVER_ID)
        with pytest.raises(nova.ConsoleOutputError,
                           match='no compute endpoint') as raised:
            compute(cloud, region='RegionOne').console_output(SERVER_ID)

    assert found == 'boot'
    assert raised.value.retry is False


@pytest.mark.parametrize('server_id', [
    '../../../v3/auth/tokens', SERVER_ID + '/x', '', 'not-a-uuid'])
def test_a_server_id_that_is_not_a_uuid_is_never_sent(cloud, server_id):
    with pytest.raises(nova.ConsoleOutputError, match='not a Nova server id'):
        compute(cloud).console_output(server_id)

    assert cloud.requests == []


def test_fake_nova_refuses_requests_without_a_valid_token(cloud, stack_id):
    cloud.add_server(stack_id, 'vm', SERVER_ID, console_output='secret')
    request = urllib.request.Request(
        '%s/servers/%s/action' % (cloud.compute_url, SERVER_ID),
        data=b'{"os-getConsoleOutput": {"length": null}}',
        headers={'X-Auth-Token': 'forged',
                 'Content-Type': 'application/json'})

    with pytest.raises(urllib.error.HTTPError) as raised:
        urllib.request.urlopen(request)

    assert raised.value.code == 401
    assert cloud.nova_requests()[-1].had_token is False
