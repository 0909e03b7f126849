"""The Heat engine behind the fake Heat API, driven with python-heatclient
as Tacker drives it, on the sample BaseHOTs (no Tacker needed).

Its guests boot a stock cloud image: the driver logs in to them with the
key file whose public half is the Nova keypair the BaseHOT names, and
nothing logs in to a guest booted without a keypair or user data.

Needs root (it boots testbed hosts); skipped otherwise.
"""

import ipaddress
import os
import socket
import time

from novaclient import exceptions as novaclient_exceptions
import paramiko
import pytest
import yaml

from kubernetes_mgmt_pv import config
from kubernetes_mgmt_pv import exceptions
from kubernetes_mgmt_pv.remote import remote
from testbed import heat_engine
from testbed import hosts
from testbed import openstack_api
from testbed import polling
from testbed import security_groups

BASEHOT = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), 'samples', 'kubernetes_pv_vnf', 'BaseHOT')
NETWORK = 'a0e0c0e0-7e57-4bed-8000-000000000001'
KEYPAIR = 'nodes'


@pytest.fixture(scope='module')
def cloud():
    reason = hosts.require_testbed() or \
        security_groups.BridgeFilter.unavailable()
    if reason:
        pytest.skip(reason)
    # Longer than the default, so the test sees each stage of a boot.
    engine = heat_engine.HeatEngine(boot_delays=(4.0, 1.0))
    fake = openstack_api.FakeOpenStack(heat_engine=engine)
    engine.start()
    fake.start()
    config.CONF.set_override('ssh_connect_retries', 0, config.GROUP_NAME)
    try:
        # The operator's step: the public half of the key as a keypair.
        nova_client(fake).keypairs.create(
            KEYPAIR, public_key=engine.testbed.client_public_key())
        yield fake
    finally:
        config.CONF.clear_override('ssh_connect_retries', config.GROUP_NAME)
        fake.stop()
        engine.stop()


@pytest.fixture
def heat(cloud):
    from heatclient import client
    from keystoneauth1.identity import v3
    from keystoneauth1 import session
    auth = v3.Password(auth_url=cloud.auth_url, username=cloud.username,
                       password=cloud.password,
                       project_name=cloud.project_name,
                       user_domain_name='Default',
                       project_domain_name='Default')
    return client.Client('1', session=session.Session(auth=auth),
                         endpoint=cloud.heat_url)


def nova_client(cloud):
    from keystoneauth1.identity import v3
    from keystoneauth1 import session
    from novaclient import client
    auth = v3.Password(auth_url=cloud.auth_url, username=cloud.username,
                       password=cloud.password,
                       project_name=cloud.project_name,
                       user_domain_name='Default',
                       project_domain_name='Default')
    return client.Client('2.1', session=session.Session(auth=auth))


def wait(predicate, timeout=300):
    delay, deadline = 0.05, time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, 'timed out'
        time.sleep(delay)
        delay = min(delay * 2, 0.5)


def create(cloud, heat, flavour, name):
    """POST /stacks as Tacker does: the top template, the nested ones in
    files and the nfv parameter KubernetesClusterUserData computes (the
    request's management CIDR: the runner, Tacker's host)."""
    directory = os.path.join(BASEHOT, flavour)
    top = next(f for f in os.listdir(directory) if f.endswith('.yaml'))
    with open(os.path.join(directory, top)) as handle:
        template = handle.read()
    files = {}
    for nested in os.listdir(os.path.join(directory, 'nested')):
        with open(os.path.join(directory, 'nested', nested)) as handle:
            files[nested] = handle.read()
    vdus = ('masterNode', 'workerNode', 'storage_server')
    nfv = {'VDU': {vdu: {'flavor': 'm1.medium', 'image': 'ubuntu'}
                   for vdu in vdus},
           'keypairs': {vdu: KEYPAIR for vdu in vdus},
           'CP': {cp: {'network': NETWORK} for cp in (
               'masterNode_CP1', 'workerNode_CP2', 'storage_server_CP')},
           'management_cidr': cloud.engine.testbed.bridge_ip + '/32'}
    stack = heat.stacks.create(stack_name=name, template=template,
                               files=files, parameters={'nfv': nfv},
                               disable_rollback=True)
    stack_id = stack['stack']['id']
    wait(lambda: heat.stacks.get(stack_id).stack_status
         != 'CREATE_IN_PROGRESS')
    return stack_id


def driver_login(host, key_file=None, password=None):
    """Log in as the driver does (as ubuntu, by key or password) and run
    ``sudo -n id -un``; its output."""
    executor = remote.RemoteCommandExecutor(
        host.ip, 'ubuntu', password, host_key_policy=paramiko.AutoAddPolicy(),
        pkey=paramiko.Ed25519Key.from_private_key_file(key_file)
        if key_file else None)
    with executor:
        return executor.run(['id', '-un'], sudo=True).stdout.strip()


def listen(host, port):
    """A TCP listener on a host (what NFS would serve there)."""
    host.run('setsid -f python3 -m http.server %d >/dev/null 2>&1' % port)
    wait(lambda: host.run('ss -Htln sport = :%d' % port).stdout.strip())


def runner_connects(address, port):
    """True when the runner (Tacker's host) opens address:port."""
    try:
        socket.create_connection((address, port), timeout=1).close()
        return True
    except OSError:
        return False


def members(heat, stack_id, group):
    group_id = heat.resources.get(stack_id, group).physical_resource_id
    return heat.resources.list(group_id)


def member_server(heat, member):
    return heat.resources.get(member.physical_resource_id, 'workerNode')


def idle(heat, stack_id, group):
    return lambda: all('IN_PROGRESS' not in r.resource_status
                       for r in members(heat, stack_id, group))


def sshd_answers(host):
    return hosts.tcp_banner(host.ip, 22).startswith(b'SSH-')


def wait_for_sshd(*guests):
    """A server is ACTIVE before its guest has booted, as on Nova: wait
    for its sshd, seen from inside (a security group may keep the runner
    out)."""
    for host in guests:
        polling.wait_until(lambda: host.listens(22),
                           'sshd on %s' % host.name, 30, max_delay=0.05)


def check_boot_order(cloud, server_ids):
    """As on Nova, the last server of those just made ACTIVE has not
    booted yet: its sshd starts later, and its console shows its host keys
    only after that."""
    engine = cloud.engine
    server_id = max(server_ids, key=list(engine.hosts).index)
    host = engine.testbed.hosts[engine.hosts[server_id]]
    full = host.console_output()
    assert not sshd_answers(host)
    assert cloud._consoles[server_id] != full
    polling.wait_until(lambda: sshd_answers(host), 'sshd', 30,
                       max_delay=0.05)
    assert cloud._consoles[server_id] != full
    polling.wait_until(lambda: cloud._consoles[server_id] == full,
                       'the host keys on the console', 30, max_delay=0.05)


def check_security_groups(engine, storage):
    """The sample's security groups, enforced on the bridge."""
    # Every guest has booted: a refused connection is the filter's doing.
    for host in engine.testbed.hosts.values():
        polling.wait_until(lambda: sshd_answers(host), 'sshd', 30)
    # SSH only from the management CIDR (the runner), NFS only from the
    # nodes, and a port sends only from its own addresses.
    worker, master = (next(h for h in engine.testbed.hosts.values()
                           if h.role == role) for role in ('worker',
                                                           'master'))
    listen(storage, 2049)
    assert security_groups.connects(worker, storage.ip, 2049)
    assert not runner_connects(storage.ip, 2049)
    assert not security_groups.connects(worker, storage.ip, 22)
    assert not security_groups.connects(master, worker.ip, 22)
    spoofed = engine._free_address()
    worker.run('ip addr add %s/32 dev eth0' % spoofed)
    assert not security_groups.connects(worker, storage.ip, 2049,
                                        source=spoofed)
    worker.run('ip addr del %s/32 dev eth0' % spoofed)


def scale_out_and_in(heat, stack_id):
    """The Worker group scaled out, then in; its members after."""
    # Scale out, then in: Heat removes the oldest member, by creation time
    # in whole seconds and then by name (the new one, if all three were
    # created within the same second and its name sorts first).
    last = list(heat.events.list(stack_id, 'worker_instance_scale_out',
                                 limit=1, sort_dir='desc'))[0].id
    heat.resources.signal(stack_id, 'worker_instance_scale_out')
    assert list(heat.events.list(stack_id, 'worker_instance_scale_out',
                                 limit=1, sort_dir='desc'))[0].id != last
    wait(idle(heat, stack_id, 'worker_instance'))
    scaled_out = members(heat, stack_id, 'worker_instance')
    assert len(scaled_out) == 3
    oldest = min(scaled_out,
                 key=lambda r: (r.creation_time, r.resource_name))
    assert heat.resources.get(stack_id, 'worker_instance').attributes[
        'current_size'] == 3
    assert heat.resources.metadata(stack_id, 'worker_instance')[
        'scaling_in_progress'] is False
    heat.resources.signal(stack_id, 'worker_instance_scale_in')
    wait(idle(heat, stack_id, 'worker_instance'))
    after = members(heat, stack_id, 'worker_instance')
    assert len(after) == 2
    assert oldest.resource_name not in {r.resource_name for r in after}
    return after


def stop_and_heal_a_worker(cloud, heat, stack_id, member_resource):
    """A Worker powered off, then replaced by a heal."""
    # openstack server stop: the VM stops answering until a heal replaces
    # it; a second stop is a conflict.
    stopped = member_server(heat, member_resource)
    host = cloud.engine.testbed.hosts[cloud.engine.hosts[
        stopped.physical_resource_id]]
    nova = nova_client(cloud)
    nova.servers.stop(stopped.physical_resource_id)
    wait(lambda: member_server(heat, member_resource).attributes['status'] ==
         'SHUTOFF')
    assert hosts.tcp_banner(host.ip, 22) == b''
    with pytest.raises(novaclient_exceptions.Conflict):
        nova.servers.stop(stopped.physical_resource_id)
    member = member_resource.physical_resource_id
    heat.resources.mark_unhealthy(member, 'workerNode', True, 'heal')
    heat.stacks.update(stack_id, existing=True)
    wait(lambda: heat.stacks.get(stack_id).stack_status !=
         'UPDATE_IN_PROGRESS')
    replaced = member_server(heat, member_resource)
    assert replaced.attributes['status'] == 'ACTIVE'
    check_boot_order(cloud, [replaced.physical_resource_id])


def heal_the_storage_server(cloud, heat, stack_id, storage):
    """The Storage server healed alone: its volume kept, its port's
    address and security group on the new VM."""
    engine = cloud.engine
    storage_cp = heat.resources.get(stack_id, 'storage_server_CP').attributes
    storage_server = heat.resources.get(stack_id, 'storage_server')
    volume = heat.resources.get(stack_id, 'storage_server_volume')
    # Heal the storage server alone: new VM, same address, same volume.
    storage.run('touch /volume-probe && mkdir -p /mnt/v && '
                'mkfs.ext4 -q /dev/vdb && mount /dev/vdb /mnt/v && '
                'touch /mnt/v/kept && umount /mnt/v')
    heat.resources.mark_unhealthy(stack_id, 'storage_server', True, 'heal')
    heat.stacks.update(stack_id, existing=True)
    wait(lambda: heat.stacks.get(stack_id).stack_status
         != 'UPDATE_IN_PROGRESS')
    assert heat.stacks.get(stack_id).stack_status == 'UPDATE_COMPLETE'
    healed = heat.resources.get(stack_id, 'storage_server')
    assert healed.physical_resource_id != \
        storage_server.physical_resource_id
    host = engine.testbed.hosts[engine.hosts[healed.physical_resource_id]]
    assert host.ip == storage.ip
    assert host.run('ls /volume-probe', check=False).returncode != 0
    kept = heat.resources.get(stack_id, 'storage_server_volume')
    assert kept.physical_resource_id == volume.physical_resource_id
    # Volume and port stay, attached to the new server.
    assert kept.attributes['attachments'][0]['server_id'] == \
        healed.physical_resource_id
    port = heat.resources.get(stack_id, 'storage_server_CP')
    assert port.physical_resource_id == storage_cp['id']
    assert port.attributes['device_id'] == healed.physical_resource_id
    assert port.attributes['fixed_ips'][0]['ip_address'] == storage.ip
    host.run('mkdir -p /mnt/v && mount /dev/vdb /mnt/v')
    assert host.run('ls /mnt/v').stdout.split() == ['kept', 'lost+found']
    host.run('umount /mnt/v')
    worker = next(h for h in engine.testbed.hosts.values()
                  if h.role == 'worker')
    polling.wait_until(lambda: sshd_answers(host), 'sshd', 30)
    assert not security_groups.connects(worker, host.ip, 22)


def heal_the_storage_server_and_volume(cloud, heat, stack_id):
    """Server and volume healed (Tacker's default): a blank new volume."""
    engine = cloud.engine
    volume = heat.resources.get(stack_id, 'storage_server_volume')
    heat.resources.mark_unhealthy(stack_id, 'storage_server', True, 'heal')
    heat.resources.mark_unhealthy(stack_id, 'storage_server_volume', True,
                                  'heal')
    heat.stacks.update(stack_id, existing=True)
    wait(lambda: heat.stacks.get(stack_id).stack_status
         != 'UPDATE_IN_PROGRESS')
    assert heat.resources.get(stack_id, 'storage_server_volume'
                              ).physical_resource_id != \
        volume.physical_resource_id
    healed = heat.resources.get(stack_id, 'storage_server')
    host = engine.testbed.hosts[engine.hosts[healed.physical_resource_id]]
    assert host.run('blkid /dev/vdb', check=False).stdout == ''


def test_simple_flavour_lifecycle(cloud, heat):
    engine = cloud.engine
    testbed = engine.testbed
    stack_id = create(cloud, heat, 'simple', 'vnflcm_simple')
    stack = heat.stacks.get(stack_id)
    assert stack.stack_status == 'CREATE_COMPLETE', stack.stack_status_reason
    listed = heat.resources.list(stack_id, nested_depth=2)
    servers = [r for r in listed if r.resource_type == 'OS::Nova::Server']
    assert len(servers) == 4  # 1 master, 2 workers, the storage server
    # Every port has the address of the host Heat booted for its server.
    storage_cp = heat.resources.get(stack_id, 'storage_server_CP').attributes
    storage_server = heat.resources.get(stack_id, 'storage_server')
    storage = testbed.hosts[engine.hosts[storage_server.physical_resource_id]]
    assert storage_cp['fixed_ips'][0]['ip_address'] == storage.ip
    assert storage_cp['device_id'] == storage_server.physical_resource_id
    # Tacker finds a scaled-out server's ports by the port's required_by.
    assert heat.resources.get(stack_id, 'storage_server_CP').required_by == [
        'storage_server']
    assert storage_server.required_by == []
    volume = heat.resources.get(stack_id, 'storage_server_volume')
    assert volume.attributes['attachments'][0]['device'] == '/dev/vdb'
    assert storage.volumes == ['/dev/vdb']
    check_boot_order(cloud, [s.physical_resource_id for s in servers])
    check_security_groups(engine, storage)
    # A Kubernetes API server for the cluster of this stack.
    assert list(engine.kubes) == [stack_id]
    # Nested stacks by owner, as Tacker walks them.
    nested = heat.stacks.list(filters={'owner_id': stack_id,
                                       'show_nested': True})
    assert len(list(nested)) == 2
    assert [s.id for s in heat.stacks.list(
        filters={'name': 'vnflcm_simple'})] == [stack_id]

    after = scale_out_and_in(heat, stack_id)
    stop_and_heal_a_worker(cloud, heat, stack_id, after[0])
    heal_the_storage_server(cloud, heat, stack_id, storage)
    heal_the_storage_server_and_volume(cloud, heat, stack_id)

    # Every address handed out is a testbed host address.
    for address in engine.ever_handed_out:
        assert ipaddress.ip_address(address) in testbed._subnet
        assert address != testbed.bridge_ip

    # Delete: the stack answers by id until DELETE_COMPLETE, and leaves
    # lists and name lookups; its hosts and API server are gone.
    heat.stacks.delete(stack_id)
    wait(lambda: heat.stacks.get(stack_id).stack_status == 'DELETE_COMPLETE')
    assert list(heat.stacks.list(filters={'name': 'vnflcm_simple'})) == []
    assert cloud.find_stack('vnflcm_simple') is None
    assert testbed.hosts == {}
    assert engine.kubes == {}
    assert engine.errors == []


def test_ha_flavour_virtual_ip(cloud, heat):
    engine = cloud.engine
    stack_id = create(cloud, heat, 'ha', 'vnflcm_ha')
    stack = heat.stacks.get(stack_id)
    assert stack.stack_status == 'CREATE_COMPLETE', stack.stack_status_reason
    vip = heat.resources.get(stack_id, 'vip_CP').attributes
    address = vip['fixed_ips'][0]['ip_address']
    assert vip['device_id'] == ''
    assert address not in {h.ip for h in engine.testbed.hosts.values()}
    assert ipaddress.ip_address(address) in engine.testbed._subnet
    masters = members(heat, stack_id, 'master_instance')
    assert len(masters) == 3
    for member in masters:
        port = heat.resources.get(member.physical_resource_id,
                                  'masterNode_CP1').attributes
        assert port['allowed_address_pairs'] == [{'ip_address': address}]
    # Every guest takes the key of its keypair, and its user data gives
    # the login user passwordless sudo.
    testbed = engine.testbed
    for server in heat.resources.list(stack_id, nested_depth=2):
        if server.resource_type == 'OS::Nova::Server':
            host = testbed.hosts[engine.hosts[server.physical_resource_id]]
            wait_for_sshd(host)
            assert driver_login(host, testbed.client_key_file) == 'root'
    # A Master may send from the virtual IP (its allowed address pair), a
    # Worker may not.
    testbed = engine.testbed
    storage = next(h for h in testbed.hosts.values() if h.role == 'storage')
    listen(storage, 2049)
    for role, allowed in (('master', True), ('worker', False)):
        host = next(h for h in testbed.hosts.values() if h.role == role)
        host.run('ip addr add %s/32 dev eth0' % address)
        assert security_groups.connects(host, storage.ip, 2049,
                                        source=address) is allowed, role
        host.run('ip addr del %s/32 dev eth0' % address)
    heat.stacks.delete(stack_id)
    wait(lambda: heat.stacks.get(stack_id).stack_status == 'DELETE_COMPLETE')
    assert engine.testbed.hosts == {}
    assert engine.errors == []


def test_a_port_without_security_groups_is_in_the_default_group(cloud,
                                                                heat):
    """What the sample templates were before they had groups: the
    project's default group lets in only its own members, so the runner
    (Tacker's host) gets no answer from the VM's SSH."""
    port = {'type': 'OS::Neutron::Port', 'properties': {'network': NETWORK}}
    server = {'type': 'OS::Nova::Server', 'properties': {
        'name': 'workerNode', 'flavor': 'm1.medium', 'image': 'ubuntu',
        'networks': [{'port': {'get_resource': 'vm_CP'}}]}}
    stack_id = heat.stacks.create(stack_name='no-groups', template=yaml.dump({
        'heat_template_version': '2016-10-14',
        'resources': {'vm_CP': port, 'vm': server}}))['stack']['id']
    wait(lambda: heat.stacks.get(stack_id).stack_status
         != 'CREATE_IN_PROGRESS')
    vm = heat.resources.get(stack_id, 'vm').physical_resource_id
    host = cloud.engine.testbed.hosts[cloud.engine.hosts[vm]]
    wait_for_sshd(host)
    assert not runner_connects(host.ip, 22)
    heat.stacks.delete(stack_id)
    wait(lambda: heat.stacks.get(stack_id).stack_status == 'DELETE_COMPLETE')
    assert cloud.engine.errors == []


def test_unsupported_resource_fails_the_stack(cloud, heat):
    template = yaml.safe_dump({
        'heat_template_version': '2016-10-14',
        'resources': {'lb': {'type': 'OS::Octavia::LoadBalancer',
                             'properties': {}}}})
    stack = heat.stacks.create(stack_name='unsupported', template=template)
    stack_id = stack['stack']['id']
    wait(lambda: heat.stacks.get(stack_id).stack_status
         != 'CREATE_IN_PROGRESS')
    stack = heat.stacks.get(stack_id)
    assert stack.stack_status == 'CREATE_FAILED'
    assert 'OS::Octavia::LoadBalancer' in stack.stack_status_reason
    cloud.engine.errors.clear()
    heat.stacks.delete(stack_id)
    wait(lambda: heat.stacks.get(stack_id).stack_status == 'DELETE_COMPLETE')


def server_stack(heat, name, **servers):
    """A stack of one stock-image server per keyword (its properties
    besides image, flavor and name); its id, once no longer in progress."""
    template = yaml.safe_dump({
        'heat_template_version': '2016-10-14',
        'resources': {server: {'type': 'OS::Nova::Server', 'properties': dict(
            image='ubuntu', flavor='m1.small', name=server, **properties)}
            for server, properties in servers.items()}})
    stack_id = heat.stacks.create(stack_name=name,
                                  template=template)['stack']['id']
    wait(lambda: heat.stacks.get(stack_id).stack_status
         != 'CREATE_IN_PROGRESS')
    return stack_id


def test_a_guest_without_keypair_or_user_data_has_no_login(cloud, heat):
    """A stock image with neither a keypair nor user data setting a
    password: the driver's login is refused, naming the host, the SSH
    login and what to configure. User data may set a password."""
    engine, testbed = cloud.engine, cloud.engine.testbed
    stack_id = server_stack(heat, 'logins', bare={}, by_password={
        'user_data_format': 'RAW', 'user_data': '#cloud-config\n' +
        yaml.safe_dump({'password': 'secret-1', 'ssh_pwauth': True,
                        'chpasswd': {'expire': False}})})
    assert heat.stacks.get(stack_id).stack_status == 'CREATE_COMPLETE'
    bare, by_password = (testbed.hosts[engine.hosts[
        heat.resources.get(stack_id, name).physical_resource_id]]
        for name in ('bare', 'by_password'))
    wait_for_sshd(bare, by_password)
    for login in ({'key_file': testbed.client_key_file},
                  {'password': testbed.password}):
        with pytest.raises(exceptions.RemoteConnectError) as caught:
            driver_login(bare, **login)
        message = str(caught.value)
        assert message.startswith(bare.ip + ': SSH authentication failed')
        assert ('key_name' if 'key_file' in login
                else 'SSH password logins') in message
    assert driver_login(by_password, password='secret-1') == 'root'
    heat.stacks.delete(stack_id)
    wait(lambda: heat.stacks.get(stack_id).stack_status == 'DELETE_COMPLETE')
    assert engine.errors == []


def test_a_server_naming_an_unknown_keypair_fails(cloud, heat):
    """Heat refuses a key_name that is no Nova keypair: nothing boots."""
    booted = set(cloud.engine.testbed.hosts)
    stack_id = server_stack(heat, 'no-keypair', vm={'key_name': 'missing'})
    stack = heat.stacks.get(stack_id)
    assert stack.stack_status == 'CREATE_FAILED'
    assert 'The Key (missing) could not be found' in \
        stack.stack_status_reason
    assert set(cloud.engine.testbed.hosts) == booted
    cloud.engine.errors.clear()
    heat.stacks.delete(stack_id)
    wait(lambda: heat.stacks.get(stack_id).stack_status == 'DELETE_COMPLETE')


def test_nova_keypairs(cloud):
    """openstack keypair create --public-key / list / show / delete, as
    novaclient sends them."""
    nova = nova_client(cloud)
    public_key = cloud.engine.testbed.client_public_key()
    shown = nova.keypairs.get(KEYPAIR)
    assert (shown.name, shown.public_key) == (KEYPAIR, public_key)
    assert shown.fingerprint.count(':') == 15  # MD5, as Nova's
    assert [k.name for k in nova.keypairs.list()] == [KEYPAIR]
    with pytest.raises(novaclient_exceptions.Conflict):
        nova.keypairs.create(KEYPAIR, public_key=public_key)
    with pytest.raises(novaclient_exceptions.BadRequest):
        nova.keypairs.create('other', public_key='ssh-ed25519 not-base64')
    nova.keypairs.create('other', public_key=public_key)
    nova.keypairs.delete('other')
    with pytest.raises(novaclient_exceptions.NotFound):
        nova.keypairs.get('other')
    assert cloud.keypair(KEYPAIR) == public_key
