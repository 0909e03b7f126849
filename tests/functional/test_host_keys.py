"""No password to an impostor; a healed VM (new key, same address) is let in.

Real sshd hosts of the testbed, each with a host key of its own made at
boot; Nova's console log served by the OpenStack fake with each host's real
fingerprints (``Host.console_output()``); the driver's console policy
reading it through the real keystoneauth1 session. "Before the password"
is shown twice: paramiko's password authentication is never called, and
the host's sshd logs a connection closed before authentication and no
password attempt.
"""

import base64
import inspect
import itertools
import re

import paramiko
import pytest

from kubernetes_mgmt_pv.openstack import heat
from kubernetes_mgmt_pv.remote import host_keys
from kubernetes_mgmt_pv.remote import remote
from kubernetes_mgmt_pv.request import param_model
from testbed import hosts
from testbed import openstack_api
from testbed import polling

PASSWORD_ATTEMPT = re.compile(r'(Accepted|Failed) password')
_VM_NUMBERS = itertools.count(1)


@pytest.fixture
def cloud():
    with openstack_api.FakeOpenStack() as fake:
        fake.stack_id = fake.add_stack('vnf-host-keys')
        yield fake


@pytest.fixture
def password_attempts(monkeypatch):
    """Peers to which paramiko sent a password."""
    attempts = []
    send_password = paramiko.Transport.auth_password

    def spy(transport, *args, **kwargs):
        attempts.append(transport.getpeername()[0])
        return send_password(transport, *args, **kwargs)

    monkeypatch.setattr(paramiko.Transport, 'auth_password', spy)
    return attempts


@pytest.fixture
def vm(testbed):
    """A VM of the module's testbed, gone after the test."""
    name = 'hk%d' % next(_VM_NUMBERS)
    yield testbed.add_host(name, 'worker')
    if name in testbed.hosts:
        testbed.remove_host(name)


def policy_for(cloud, server_id):
    client = heat.build_heat_client(cloud.access_info())
    return host_keys.console_policy(client, server_id)


def connect(host, policy):
    """Log in by password as the driver does, with the given policy."""
    client = paramiko.SSHClient()
    client.set_missing_host_key_policy(policy)
    try:
        client.connect(host.ip, username=hosts.Testbed.username,
                       password=hosts.Testbed.password, look_for_keys=False,
                       allow_agent=False, timeout=10)
    except BaseException:
        client.close()
        raise
    return client


def fingerprint_of(host):
    with open(host.public_host_key_file) as f:
        blob = f.read().split()[1]
    return host_keys.sha256_fingerprint(
        paramiko.Ed25519Key(data=base64.b64decode(blob)))


def assert_closed_before_any_password(host):
    log = polling.wait_until(
        lambda: '[preauth]' in host.sshd_log() and host.sshd_log(),
        'sshd on %s to log the closed connection' % host.name)
    assert not PASSWORD_ATTEMPT.search(log), log


def test_a_fresh_vm_is_verified_on_its_console(cloud, vm, password_attempts):
    server_id = cloud.add_server(cloud.stack_id, 'vm',
                                 console_output=vm.console_output())

    connect(vm, policy_for(cloud, server_id)).close()

    assert password_attempts == [vm.ip]
    polling.wait_until(lambda: 'Accepted password' in vm.sshd_log(),
                       'sshd to log the login')


def test_an_impostor_at_the_vm_address_gets_no_password(
        testbed, cloud, vm, password_attempts):
    server_id = cloud.add_server(cloud.stack_id, 'vm',
                                 console_output=vm.console_output())
    # Another sshd with a fresh key takes the VM's address; Nova's console
    # log is still the VM's.
    impostor = testbed.replace_host(vm.name)
    assert impostor.ip == vm.ip

    with pytest.raises(host_keys.HostKeyMismatchError) as raised:
        connect(impostor, policy_for(cloud, server_id))

    message = str(raised.value)
    assert message.startswith(impostor.ip + ': ')
    assert fingerprint_of(impostor) in message
    assert server_id in message and 'password was NOT sent' in message
    assert password_attempts == []
    assert_closed_before_any_password(impostor)
    # The control: with "warn", the impostor gets the password and logs it.
    connect(impostor, paramiko.AutoAddPolicy()).close()
    assert password_attempts == [impostor.ip]
    polling.wait_until(lambda: PASSWORD_ATTEMPT.search(impostor.sshd_log()),
                       'the impostor to log the password attempt')


def test_a_healed_vm_with_a_new_key_at_the_same_address_is_accepted(
        testbed, cloud, vm, password_attempts):
    old_server_id = cloud.add_server(cloud.stack_id, 'vm',
                                     console_output=vm.console_output())
    old_fingerprint = fingerprint_of(vm)
    connect(vm, policy_for(cloud, old_server_id)).close()

    # A heal: Heat deletes the server and creates a new one, same address.
    healed = testbed.replace_host(vm.name)
    cloud.remove_resource(cloud.stack_id, 'vm')
    new_server_id = cloud.add_server(cloud.stack_id, 'vm',
                                     console_output=healed.console_output())

    with connect(healed, policy_for(cloud, new_server_id)) as client:
        _, stdout, _ = client.exec_command('hostname')
        assert stdout.read().decode().strip() == vm.name
    assert fingerprint_of(healed) != old_fingerprint
    assert password_attempts == [vm.ip, healed.ip]
    # The old server's console is gone with it: its policy lets nothing in.
    with pytest.raises(host_keys.HostKeyUnverifiedError, match='HTTP 404'):
        connect(healed, policy_for(cloud, old_server_id))
    assert password_attempts == [vm.ip, healed.ip]


def executor_takes_a_policy():
    return 'host_key_policy' in inspect.signature(
        remote.RemoteCommandExecutor).parameters


@pytest.mark.skipif(not executor_takes_a_policy(),
                    reason='RemoteCommandExecutor has no host_key_policy yet')
def test_the_executor_refuses_an_impostor_before_the_password(
        testbed, cloud, vm, password_attempts):
    server_id = cloud.add_server(cloud.stack_id, 'vm',
                                 console_output=vm.console_output())
    with remote.RemoteCommandExecutor(
            vm.ip, 'ubuntu', 'ubuntu',
            host_key_policy=policy_for(cloud, server_id)) as session:
        assert session.run(['true']).ok
    impostor = testbed.replace_host(vm.name)
    password_attempts.clear()

    impostor_session = remote.RemoteCommandExecutor(
        impostor.ip, 'ubuntu', 'ubuntu',
        host_key_policy=policy_for(cloud, server_id))
    with pytest.raises(host_keys.HostKeyMismatchError,
                       match='password was NOT sent'):
        impostor_session.connect()

    assert password_attempts == []
    assert_closed_before_any_password(impostor)


@pytest.mark.skipif(not executor_takes_a_policy(),
                    reason='RemoteCommandExecutor has no host_key_policy yet')
def test_cluster_vms_are_found_through_heat_and_verified_after_a_heal(
        cluster, password_attempts):
    client = heat.build_heat_client(cluster.openstack.access_info())
    stack = heat.HeatStack(client, cluster.stack_id)
    logins = cluster.additional_params()[param_model.ROOT]

    def login(name, section):
        vnfc = cluster.vnfcs[name]
        server_id = stack.cp_server_id(vnfc.cp_name, vnfc.member_stack_id)
        assert server_id == vnfc.server_id
        with remote.RemoteCommandExecutor(
                cluster.host(name).ip, logins[section]['username'],
                logins[section]['password'],
                host_key_policy=host_keys.console_policy(
                    client, server_id)) as session:
            return session.run(['hostname']).stdout.strip()

    assert login('storage', 'storage_server') == 'storage'
    assert login('worker1', 'worker_node') == 'worker1'
    cluster.replace_host('worker1')
    assert login('worker1', 'worker_node') == 'worker1'
    assert len(password_attempts) == 3
