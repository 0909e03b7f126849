"""The Heat engine behind the fake Heat API, driven with python-heatclient
as Tacker drives it, on the sample BaseHOTs (no Tacker needed).

Needs root (it boots testbed hosts); skipped otherwise.
"""

import ipaddress
import os
import socket
import time

from novaclient import exceptions as novaclient_exceptions
import pytest
import yaml

from testbed import heat_engine
from testbed import hosts
from testbed import openstack_api
from testbed import security_groups

BASEHOT = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), 'samples', 'kubernetes_pv_vnf', 'BaseHOT')
NETWORK = 'a0e0c0e0-7e57-4bed-8000-000000000001'


@pytest.fixture(scope='module')
def cloud():
    reason = hosts.require_testbed() or \
        security_groups.BridgeFilter.unavailable()
    if reason:
        pytest.skip(reason)
    engine = heat_engine.HeatEngine()
    fake = openstack_api.FakeOpenStack(heat_engine=engine)
    engine.start()
    fake.start()
    try:
        yield fake
    finally:
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
    nfv = {'VDU': {vdu: {'flavor': 'm1.medium', 'image': 'ubuntu'}
                   for vdu in ('masterNode', 'workerNode', 'storage_server')},
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


def check_security_groups(engine, storage):
    """The sample's security groups, enforced on the bridge."""
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
    assert hosts.tcp_banner(host.ip, 22).startswith(b'SSH-')


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
    assert hosts.tcp_banner(host.ip, 22).startswith(b'SSH-')
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
    assert cloud._consoles[storage_server.physical_resource_id] == \
        storage.console_output()
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
    assert host.run('ss -Htln sport = :22').stdout.strip()  # sshd is up
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
