"""The HA flavour through real Tacker's REST API: three Masters behind a
virtual IP, and the heal of one of them.

An operator's session, in order (each test is one step and needs the ones
before it): onboard the sample package, instantiate it with the ``ha``
flavour of samples/requests/instantiate_ha.json (three Masters sharing the
address of the ``vip_CP`` port through haproxy and keepalived, two
Workers, the Storage server), heal the Master that holds the virtual IP
through ``POST .../heal`` with its vnfcInstanceId, terminate and delete.
Tacker runs the driver in tacker-conductor; the Heat engine boots the
BaseHOT's servers and replaces the healed one as Heat would (a new server
on the same port).

After each step: every Node Ready with three control-plane Nodes (kubectl
on a Master, through the VIP), three etcd members (etcdctl on the
Masters), one Master holding the VIP and the API answering there from
outside the cluster, and the Kubernetes VIM registered at the VIP.
"""

import json
import ssl
import urllib.request

import pytest

from kubernetes_mgmt_pv.cluster import etcd
from kubernetes_mgmt_pv.cluster import ha
from testbed import polling
from testbed import tacker_lab
from tests.tacker_rest import lifecycle_checks as checks
from tests.tacker_rest import test_lifecycle as simple

CONTROL_PLANE = 'node-role.kubernetes.io/control-plane'
# keepalived's VRRP election takes ~3 s (advert_int 1), an haproxy check
# ~2 s; a VIP that has not settled after this is a failure.
VIP_DEADLINE = 30.0


@pytest.fixture(scope='module')
def s():
    return checks.Session()


def openstack_vim_id(lab):
    """The OpenStack VIM of the session (registered by an earlier module,
    else here)."""
    for vim in lab.vims():
        if vim['type'] == 'openstack':
            return vim['id']
    return lab.register_openstack_vim()['id']


def instance_masters(lab, instance_id):
    """The test hosts of the instance's Masters (by Nova id, not by role:
    an earlier module's VNF may have left some)."""
    return sorted((lab.engine.testbed.hosts[lab.engine.hosts[
        vnfc['computeResource']['resourceId']]]
        for vnfc in lab.vnfcs(instance_id, 'masterNode')),
        key=lambda host: host.ip)


def nodes(lab, master):
    """{InternalIP: (control plane?, Ready?)} as kubectl on a Master (whose
    kubeconfig points at the VIP) shows them."""
    found = {}
    for node in json.loads(lab.kubectl('get', 'nodes', '-o', 'json',
                                       master=master))['items']:
        conditions = {c['type']: c['status']
                      for c in node['status'].get('conditions', [])}
        address, = [a['address'] for a in node['status']['addresses']
                    if a['type'] == 'InternalIP']
        found[address] = (CONTROL_PLANE in node['metadata'].get('labels', {}),
                          conditions.get('Ready') == 'True')
    return found


def etcd_members(master):
    """[(member id, peer URLs)] as etcdctl on a Master lists them."""
    output = master.run(' '.join(etcd.etcdctl('member', 'list', '-w',
                                              'json'))).stdout
    return sorted((member.id, member.peer_urls)
                  for member in etcd.parse_members(output))


def vip_holders(masters, vip):
    """The Masters whose eth0 carries the VIP."""
    return [master for master in masters if ' %s/' % vip in
            master.run('ip -o -4 addr show dev eth0').stdout]


def api_at_vip(lab, instance_id, vip):
    """(status, body) of GET https://<VIP>:16443/healthz from the runner,
    verifying the cluster's CA for the VIP, or None while nothing
    answers."""
    kube = lab.engine.kubes[lab.stack(instance_id).id]
    opener = urllib.request.build_opener(
        urllib.request.ProxyHandler({}), urllib.request.HTTPSHandler(
            context=ssl.create_default_context(cadata=kube.ca_pem)))
    try:
        with opener.open('https://%s:%d/healthz' % (vip, ha.FRONTEND_PORT),
                         timeout=5) as response:
            return response.status, response.read().decode()
    except OSError:
        return None


def check_control_plane(lab, instance_id):
    """Three Ready Masters (and every Worker Ready) on the API server, the
    same three etcd members on every Master, exactly one Master holding
    the VIP, the API answering there, and the Kubernetes VIM registered at
    the VIP; returns (VIP, etcd members, the Master holding the VIP)."""
    vip = lab.cp_address(instance_id, 'vip_CP')
    masters = instance_masters(lab, instance_id)
    addresses = sorted(master.ip for master in masters)
    assert len(addresses) == 3 and vip not in addresses
    listed = nodes(lab, masters[0])
    assert sorted(ip for ip, (control, _) in listed.items() if control) == \
        addresses, listed
    assert len(listed) == 5 and all(ready for _, ready in listed.values()), \
        listed
    members = etcd_members(masters[0])
    assert sorted(urls for _, urls in members) == [
        (etcd.peer_url(address),) for address in addresses]
    for master in masters[1:]:
        assert etcd_members(master) == members, master.name
    holders = polling.wait_until(
        lambda: (lambda found: found if len(found) == 1 else None)(
            vip_holders(masters, vip)),
        'exactly one Master to hold %s' % vip, timeout=VIP_DEADLINE)
    assert polling.wait_until(lambda: api_at_vip(lab, instance_id, vip),
                              'the API at %s' % vip, timeout=VIP_DEADLINE) == \
        (200, 'ok')
    vim, = checks.k8s_vims(lab)
    assert vim['name'] == checks.k8s_vim_name(instance_id)
    assert vim['auth_url'] == 'https://%s:%d' % (vip, ha.FRONTEND_PORT)
    return vip, members, holders[0]


# -- the steps --------------------------------------------------------------

def test_onboard_the_sample_package(lab, s, tmp_path_factory):
    s.errors_before = len(lab.engine.errors)  # an earlier module's
    s.vim_id = openstack_vim_id(lab)
    # Other modules of the lab onboard the sample v1 package too.
    s.vnfd_id, zip_path = lab.build_package(
        str(tmp_path_factory.mktemp('package')),
        vnfd_id=tacker_lab.own_vnfd_id())
    package = lab.client.onboard_package(zip_path)
    assert package['onboardingState'] == 'ONBOARDED'
    assert package['vnfdId'] == s.vnfd_id
    s.done.add('package')


def test_instantiate_three_masters(lab, s):
    s.need('package')
    assert checks.k8s_vims(lab) == [], 'a Kubernetes VIM is left over'
    instance = lab.client.post('/vnflcm/v1/vnf_instances',
                               {'vnfdId': s.vnfd_id}, expect=201).body
    s.instance_id = instance['id']
    request = lab.instantiate_request(s.vim_id, sample='instantiate_ha.json')
    assert request['flavourId'] == 'ha'
    assert request['additionalParams']['k8s_cluster_installation_param'][
        'master_node']['cluster_cp_name'] == 'vip_CP'
    occ = s.ops['instantiate'] = lab.lcm(s.instance_id, 'instantiate',
                                         request)
    simple._completed(occ, 'INSTANTIATE')
    assert lab.instance(s.instance_id)['instantiationState'] == \
        'INSTANTIATED'
    vdus = sorted(v['vduId'] for v in lab.vnfcs(s.instance_id))
    assert vdus == ['masterNode'] * 3 + ['storage_server'] + \
        ['workerNode'] * 2
    checks.check_storage_and_pvs(lab, s.instance_id)
    s.vip, s.members, s.holder = check_control_plane(lab, s.instance_id)
    s.hosts = {lab.engine.hosts[v['computeResource']['resourceId']]
               for v in lab.vnfcs(s.instance_id)}
    s.done.add('instantiate')


def test_heal_the_master_holding_the_vip(lab, s):
    s.need('instantiate')
    by_server = {v['computeResource']['resourceId']: v
                 for v in lab.vnfcs(s.instance_id, 'masterNode')}
    old_server, = [server for server, name in lab.engine.hosts.items()
                   if name == s.holder.name and server in by_server]
    master = by_server[old_server]
    old_member, = [member_id for member_id, urls in s.members
                   if urls == (etcd.peer_url(s.holder.ip),)]
    s.holder.run('touch /etc/before-heal')
    occ = s.ops['heal_master'] = lab.lcm(
        s.instance_id, 'heal', {'vnfcInstanceId': [master['id']],
                                'cause': 'Heal a Master node'})
    simple._completed(occ, 'HEAL')
    healed = {v['id']: v for v in lab.vnfcs(s.instance_id)}[master['id']]
    new_server = healed['computeResource']['resourceId']
    # A new server (new Nova id, fresh root file system) on the same port,
    # hence at the same address, as Heat replaces it.
    assert new_server != old_server
    assert lab.engine.hosts[new_server] == s.holder.name
    host = lab.engine.testbed.hosts[s.holder.name]
    assert host.ip == s.holder.ip
    assert host.run('test -e /etc/before-heal', check=False).returncode == 1
    vip, members, _ = check_control_plane(lab, s.instance_id)
    assert vip == s.vip
    # The old member was removed, the new Master joined as a new one.
    before = {member_id for member_id, _ in s.members}
    after = {member_id for member_id, _ in members}
    assert old_member not in after
    assert after & before == before - {old_member}
    checks.check_storage_and_pvs(lab, s.instance_id)
    s.done.add('heal_master')


def test_terminate_and_delete(lab, s):
    s.need('instantiate')
    stack_id = lab.stack(s.instance_id).id
    occ = s.ops['terminate'] = lab.lcm(s.instance_id, 'terminate',
                                       {'terminationType': 'FORCEFUL'})
    simple._completed(occ, 'TERMINATE')
    assert lab.stack(s.instance_id) is None
    assert lab.cloud.stack(stack_id).status == 'DELETE_COMPLETE'
    # Every VM, the cluster's API server and the Kubernetes VIM are gone.
    assert not s.hosts & set(lab.engine.testbed.hosts)
    assert stack_id not in lab.engine.kubes
    assert checks.k8s_vims(lab) == []
    lab.client.delete('/vnflcm/v1/vnf_instances/%s' % s.instance_id,
                      expect=204)
    assert lab.engine.errors[s.errors_before:] == []


def test_operation_times(s):
    """One instantiate and one heal of the HA flavour stay within bounds
    an operator can wait for on a 2-core machine."""
    s.need('heal_master')
    print('\nHA flavour: instantiate %ss, heal of a Master %ss' % (
        s.ops['instantiate']['seconds'], s.ops['heal_master']['seconds']))
    assert s.ops['instantiate']['seconds'] < 900
    assert s.ops['heal_master']['seconds'] < 600
