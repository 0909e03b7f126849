"""Tests of kubernetes_mgmt_pv.openstack.heat against the Keystone/Heat
HTTP fake.

The real heatclient and keystoneauth1 run over HTTP, so these tests also
check that the driver uses them the way a real cloud expects (token on
every call, stack lookup redirects, catalog and region handling).
"""

import urllib.error
import urllib.request

import pytest

from kubernetes_mgmt_pv import exceptions
from kubernetes_mgmt_pv.openstack import heat
from testbed import openstack_api

WRONG_PASSWORD = 'not-the-secret-4711'


@pytest.fixture
def cloud():
    with openstack_api.FakeOpenStack(password='s3cret-vim-pw') as fake:
        yield fake


@pytest.fixture
def stack_id(cloud):
    return cloud.add_stack('vnf-k8s')


def heat_stack(cloud, stack_id, **access_overrides):
    client = heat.build_heat_client(cloud.access_info(**access_overrides))
    return heat.HeatStack(client, stack_id)


def request_lines(cloud):
    return ['%s %s %s' % (record.method, record.path, record.status)
            for record in cloud.requests]


# -- authentication and client construction --------------------------------

def test_password_auth_then_stack_lookup_and_resource_show(cloud, stack_id):
    cloud.add_port(stack_id, 'master_cp', ['10.10.0.5'])

    address = heat_stack(cloud, stack_id).cp_address('master_cp')

    assert address == heat.CpAddress('master_cp', '10.10.0.5', None)
    heat_base = '/heat/v1/%s/stacks' % cloud.project_id
    assert request_lines(cloud) == [
        'POST /v3/auth/tokens 201',
        'GET %s/%s 302' % (heat_base, stack_id),
        'GET %s/vnf-k8s/%s/resources/master_cp 200' % (heat_base, stack_id),
    ]


def test_wrong_password_is_reported_without_any_password(cloud, stack_id):
    cloud.add_port(stack_id, 'master_cp', ['10.10.0.5'])

    with pytest.raises(exceptions.HeatLookupError) as raised:
        heat_stack(cloud, stack_id,
                   password=WRONG_PASSWORD).cp_address('master_cp')

    message = str(raised.value)
    assert 'rejected the VIM credentials' in message
    assert "'master_cp'" in message and stack_id in message
    assert WRONG_PASSWORD not in message
    assert cloud.password not in message
    assert cloud.heat_requests() == []


@pytest.mark.parametrize('field, value', [
    ('username', 'someone-else'),
    ('project_name', 'other-project'),
    ('user_domain_name', 'OtherDomain'),
    ('project_domain_name', 'OtherDomain'),
])
def test_every_credential_field_is_checked(cloud, stack_id, field, value):
    cloud.add_port(stack_id, 'master_cp', ['10.10.0.5'])

    with pytest.raises(exceptions.HeatLookupError,
                       match='rejected the VIM credentials'):
        heat_stack(cloud, stack_id, **{field: value}).cp_address('master_cp')


def test_project_id_scopes_the_token(cloud, stack_id):
    cloud.add_port(stack_id, 'master_cp', ['10.10.0.5'])

    address = heat_stack(cloud, stack_id, project_name=None,
                         project_id=cloud.project_id).cp_address('master_cp')

    assert address.fixed_ip == '10.10.0.5'


def test_region_selects_the_orchestration_endpoint():
    with openstack_api.FakeOpenStack(regions=['RegionTwo']) as cloud:
        stack_id = cloud.add_stack('vnf-k8s')
        cloud.add_port(stack_id, 'master_cp', ['10.10.0.5'])

        found = heat_stack(cloud, stack_id,
                           region='RegionTwo').cp_address('master_cp')
        with pytest.raises(exceptions.HeatLookupError,
                           match='no orchestration endpoint'):
            heat_stack(cloud, stack_id,
                       region='RegionOne').cp_address('master_cp')

    assert found.fixed_ip == '10.10.0.5'


def test_unreachable_keystone_is_a_lookup_error():
    with openstack_api.FakeOpenStack() as stopped_cloud:
        access_info = stopped_cloud.access_info()

    client = heat.build_heat_client(access_info)
    with pytest.raises(exceptions.HeatLookupError,
                       match='cannot connect') as raised:
        heat.HeatStack(client, 'some-stack').cp_address('master_cp')
    assert access_info['password'] not in str(raised.value)


@pytest.mark.parametrize('cert_verify, expected', [
    ('True', True), ('False', False), ('false', False), (False, False),
    (True, True), (None, True),
    ('/etc/ssl/heat-ca.pem', '/etc/ssl/heat-ca.pem'),
])
def test_cert_verify_sets_session_tls_verification(cloud, cert_verify,
                                                   expected):
    access_info = cloud.access_info(cert_verify=cert_verify)
    if cert_verify is None:
        del access_info['cert_verify']

    client = heat.build_heat_client(access_info)

    assert client.http_client.session.verify == expected
    assert type(client.http_client.session.verify) is type(expected)


def test_invalid_cert_verify_is_rejected(cloud):
    with pytest.raises(exceptions.HeatLookupError, match='cert_verify'):
        heat.build_heat_client(cloud.access_info(cert_verify='maybe'))


def test_missing_access_info_key_is_named_without_password(cloud):
    access_info = cloud.access_info()
    del access_info['auth_url']

    with pytest.raises(exceptions.HeatLookupError,
                       match="'auth_url'") as raised:
        heat.build_heat_client(access_info)
    assert cloud.password not in str(raised.value)


# -- token on every Heat call ------------------------------------------------

def test_every_heat_request_carries_the_token(cloud, stack_id):
    group_stack_id = cloud.add_scaling_group(stack_id, 'worker_instance')
    member_stack_id = cloud.add_group_member(group_stack_id)
    cloud.add_port(member_stack_id, 'worker_cp', ['10.10.0.21'])
    cloud.add_volume(stack_id, 'storage_server_volume')
    lookups = heat_stack(cloud, stack_id)

    for member in lookups.group_member_stack_ids('worker_instance'):
        lookups.cp_address('worker_cp', member)
    lookups.volume_attachment('storage_server_volume')
    lookups.find_member_stack_of_server('no-such-server', ['worker_instance'])

    heat_requests = cloud.heat_requests()
    # Lookups (302) and the redirected requests (200) both carry the token.
    assert {record.status for record in heat_requests} == {200, 302}
    assert all(record.had_token for record in heat_requests)
    assert [record.path for record in cloud.requests
            if record.path == '/v3/auth/tokens'] == ['/v3/auth/tokens']


@pytest.mark.parametrize('headers', [{}, {'X-Auth-Token': 'forged'}])
def test_fake_heat_refuses_requests_without_a_valid_token(cloud, stack_id,
                                                          headers):
    url = '%s/stacks/%s' % (cloud.heat_url, stack_id)

    with pytest.raises(urllib.error.HTTPError) as raised:
        urllib.request.urlopen(urllib.request.Request(url, headers=headers))

    assert raised.value.code == 401
    assert cloud.requests[-1].had_token is False


# -- CP addresses ----------------------------------------------------------

def test_floating_ip_comes_first(cloud, stack_id):
    cloud.add_port(stack_id, 'master_cp', ['10.10.0.5'])
    cloud.add_floating_ip(stack_id, 'master_fip', '192.0.2.50',
                          port_name='master_cp')

    address = heat_stack(cloud, stack_id).cp_address('master_fip')

    assert address == heat.CpAddress('master_fip', '10.10.0.5', '192.0.2.50')
    assert address.ssh_host == '192.0.2.50'


def test_port_without_floating_ip_uses_first_fixed_ip(cloud, stack_id):
    cloud.add_port(stack_id, 'master_cp', ['10.10.0.5', '10.20.0.5'])

    address = heat_stack(cloud, stack_id).cp_address('master_cp')

    assert address.floating_ip is None
    assert address.ssh_host == '10.10.0.5'


def test_ipv6_fixed_ip(cloud, stack_id):
    cloud.add_port(stack_id, 'master_cp', ['fd00:10::5'])

    address = heat_stack(cloud, stack_id).cp_address('master_cp')

    assert address.ssh_host == 'fd00:10::5'


def test_unassociated_floating_ip_is_reported(cloud, stack_id):
    cloud.add_floating_ip(stack_id, 'master_fip', '192.0.2.50')

    with pytest.raises(exceptions.HeatLookupError,
                       match="'master_fip' of stack %s has no "
                             'fixed_ip_address' % stack_id):
        heat_stack(cloud, stack_id).cp_address('master_fip')


def test_port_without_fixed_ips_is_reported(cloud, stack_id):
    cloud.add_port(stack_id, 'master_cp', [])

    with pytest.raises(exceptions.HeatLookupError,
                       match="'master_cp' of stack %s has no fixed_ips"
                             % stack_id):
        heat_stack(cloud, stack_id).cp_address('master_cp')


def test_address_that_is_not_an_ip_is_rejected(cloud, stack_id):
    cloud.add_port(stack_id, 'master_cp', ['10.10.0.300'])

    with pytest.raises(exceptions.HeatLookupError,
                       match="'10.10.0.300', which is not an IP address"):
        heat_stack(cloud, stack_id).cp_address('master_cp')


def test_missing_resource_names_stack_and_resource(cloud, stack_id):
    with pytest.raises(exceptions.HeatLookupError) as raised:
        heat_stack(cloud, stack_id).cp_address('no_such_cp')

    message = str(raised.value)
    assert "'no_such_cp'" in message and stack_id in message
    assert 'not found' in message


def test_missing_stack_is_reported(cloud):
    with pytest.raises(exceptions.HeatLookupError,
                       match=r'The Stack \(gone-stack\) could not be found'):
        heat_stack(cloud, 'gone-stack').cp_address('master_cp')


# -- volumes -----------------------------------------------------------------

def test_volume_attachment_of_attached_volume(cloud, stack_id):
    volume_id = cloud.add_volume(stack_id, 'storage_server_volume',
                                 device='/dev/vdc')

    attachment = heat_stack(cloud, stack_id).volume_attachment(
        'storage_server_volume')

    assert attachment == heat.VolumeAttachment(volume_id, '/dev/vdc')


def test_unattached_volume_is_reported(cloud, stack_id):
    cloud.add_volume(stack_id, 'storage_server_volume', device=None)

    with pytest.raises(exceptions.HeatLookupError) as raised:
        heat_stack(cloud, stack_id).volume_attachment('storage_server_volume')

    assert str(raised.value) == (
        "Heat resource 'storage_server_volume' of stack %s has no "
        'attachments: is the volume attached to the storage server?'
        % stack_id)


@pytest.mark.parametrize('device', ['vdb', '/mnt/vdb', '/dev/../etc/x',
                                    '/dev/'])
def test_device_outside_dev_is_rejected(cloud, stack_id, device):
    cloud.add_volume(stack_id, 'storage_server_volume', device=device)

    with pytest.raises(exceptions.HeatLookupError,
                       match='not a path under /dev/'):
        heat_stack(cloud, stack_id).volume_attachment('storage_server_volume')


# -- scaling groups ----------------------------------------------------------

def add_workers(cloud, stack_id, addresses):
    """A worker group; member names sort opposite to Heat's listing order."""
    group_stack_id = cloud.add_scaling_group(stack_id, 'worker_instance')
    member_stack_ids = []
    for index, address in enumerate(addresses):
        member_stack_id = cloud.add_group_member(
            group_stack_id, name='member-%d' % (len(addresses) - index))
        cloud.add_port(member_stack_id, 'worker_cp', [address])
        cloud.add_server(member_stack_id, 'worker_vdu')
        member_stack_ids.append(member_stack_id)
    return group_stack_id, member_stack_ids


def test_group_members_are_listed_in_heat_order(cloud, stack_id):
    group_stack_id, member_stack_ids = add_workers(
        cloud, stack_id, ['10.10.0.23', '10.10.0.21', '10.10.0.22'])
    lookups = heat_stack(cloud, stack_id)

    assert lookups.group_member_stack_ids('worker_instance') == (
        member_stack_ids)
    assert [lookups.cp_address('worker_cp', member).fixed_ip
            for member in lookups.group_member_stack_ids(
                'worker_instance')] == ['10.10.0.23', '10.10.0.21',
                                        '10.10.0.22']
    shown = [record.path for record in cloud.heat_requests()
             if record.path.endswith('/resources/worker_cp')]
    assert [path.split('/')[-3] for path in shown] == member_stack_ids


def test_scale_in_removes_a_member(cloud, stack_id):
    group_stack_id, member_stack_ids = add_workers(
        cloud, stack_id, ['10.10.0.21', '10.10.0.22'])
    lookups = heat_stack(cloud, stack_id)

    cloud.remove_group_member(group_stack_id, member_stack_ids[0])

    assert lookups.group_member_stack_ids('worker_instance') == (
        member_stack_ids[1:])


def test_a_cp_without_stack_is_read_from_the_top_stack(cloud, stack_id):
    cloud.add_port(stack_id, 'master_cp', ['10.10.0.5'])

    address = heat_stack(cloud, stack_id).cp_address('master_cp')

    assert address == heat.CpAddress('master_cp', '10.10.0.5', None)


def test_unknown_aspect_is_reported(cloud, stack_id):
    with pytest.raises(exceptions.HeatLookupError,
                       match="stack %s has no resource 'worker_instance'"
                             % stack_id):
        heat_stack(cloud, stack_id).group_member_stack_ids('worker_instance')


def test_aspect_that_is_not_a_scaling_group_is_reported(cloud, stack_id):
    cloud.add_server(stack_id, 'worker_instance')

    with pytest.raises(exceptions.HeatLookupError,
                       match='is a OS::Nova::Server, not an '
                             'OS::Heat::AutoScalingGroup'):
        heat_stack(cloud, stack_id).group_member_stack_ids('worker_instance')


# -- finding the stack of a server -------------------------------------------

def test_server_in_a_group_member_is_found(cloud, stack_id):
    group_stack_id, member_stack_ids = add_workers(
        cloud, stack_id, ['10.10.0.21', '10.10.0.22'])
    server_id = cloud.resource(member_stack_ids[1],
                               'worker_vdu').physical_resource_id

    found = heat_stack(cloud, stack_id).find_member_stack_of_server(
        server_id, ['worker_instance'])

    assert found == member_stack_ids[1]


def test_server_in_the_top_stack_is_found_without_listing_groups(cloud,
                                                                 stack_id):
    add_workers(cloud, stack_id, ['10.10.0.21'])
    server_id = cloud.add_server(stack_id, 'storage_server')

    found = heat_stack(cloud, stack_id).find_member_stack_of_server(
        server_id, ['worker_instance'])

    assert found == stack_id
    assert len(cloud.heat_requests()) == 2


def test_unknown_server_is_not_found(cloud, stack_id):
    add_workers(cloud, stack_id, ['10.10.0.21'])

    found = heat_stack(cloud, stack_id).find_member_stack_of_server(
        'no-such-server', ['worker_instance'])

    assert found is None


# -- the Nova server behind a CP ---------------------------------------------

SERVER_ID = '6f1c4b2e-8a0d-4f4e-9b7a-2d3c5e6f7a8b'


def test_server_of_a_port_is_its_device_id(cloud, stack_id):
    cloud.add_port(stack_id, 'master_cp', ['10.10.0.5'], device_id=SERVER_ID)

    assert heat_stack(cloud, stack_id).cp_server_id('master_cp') == SERVER_ID


def test_server_of_a_port_in_a_group_member(cloud, stack_id):
    group_stack_id = cloud.add_scaling_group(stack_id, 'worker_instance')
    member_stack_id = cloud.add_group_member(group_stack_id)
    cloud.add_port(member_stack_id, 'worker_cp', ['10.10.0.21'],
                   device_id=SERVER_ID)

    assert heat_stack(cloud, stack_id).cp_server_id(
        'worker_cp', member_stack_id) == SERVER_ID


def test_server_of_a_floating_ip_from_its_port_details(cloud, stack_id):
    cloud.add_port(stack_id, 'master_cp', ['10.10.0.5'], device_id=SERVER_ID)
    cloud.add_floating_ip(stack_id, 'master_fip', '192.0.2.50',
                          port_name='master_cp')

    assert heat_stack(cloud, stack_id).cp_server_id('master_fip') == (
        SERVER_ID)
    assert len(cloud.heat_requests()) == 2  # lookup redirect + the FIP


def test_server_of_a_floating_ip_without_port_details(cloud, stack_id):
    """Neutron without fip-port-details: the port resource of the stack."""
    cloud.add_port(stack_id, 'master_cp', ['10.10.0.5'], device_id=SERVER_ID)
    cloud.add_floating_ip(stack_id, 'master_fip', '192.0.2.50',
                          port_name='master_cp', port_details=False)

    assert heat_stack(cloud, stack_id).cp_server_id('master_fip') == (
        SERVER_ID)


def test_floating_ip_with_a_port_of_another_stack_is_reported(cloud,
                                                              stack_id):
    other_stack_id = cloud.add_stack('elsewhere')
    cloud.add_port(other_stack_id, 'master_cp', ['10.10.0.5'],
                   device_id=SERVER_ID)
    port_id = cloud.resource(other_stack_id,
                             'master_cp').physical_resource_id
    cloud.add_floating_ip(stack_id, 'master_fip', '192.0.2.50')
    cloud.resource(stack_id, 'master_fip').attributes['port_id'] = port_id

    with pytest.raises(exceptions.HeatLookupError,
                       match='port %s, which is not a resource of that '
                             'stack' % port_id):
        heat_stack(cloud, stack_id).cp_server_id('master_fip')


def test_unassociated_floating_ip_has_no_server(cloud, stack_id):
    cloud.add_floating_ip(stack_id, 'master_fip', '192.0.2.50')

    with pytest.raises(exceptions.HeatLookupError,
                       match="'master_fip' of stack %s has no port_id"
                             % stack_id):
        heat_stack(cloud, stack_id).cp_server_id('master_fip')


def test_port_without_server_is_reported(cloud, stack_id):
    cloud.add_port(stack_id, 'master_cp', ['10.10.0.5'])

    with pytest.raises(exceptions.HeatLookupError,
                       match="'master_cp' of stack %s has no device_id: is "
                             'the port attached to a server' % stack_id):
        heat_stack(cloud, stack_id).cp_server_id('master_cp')


@pytest.mark.parametrize('device_id', [
    '../../v3/auth/tokens', SERVER_ID + '/action', 'dhcp-agent-1'])
def test_device_id_that_is_not_a_server_id_is_rejected(cloud, stack_id,
                                                       device_id):
    cloud.add_port(stack_id, 'master_cp', ['10.10.0.5'], device_id=device_id)

    with pytest.raises(exceptions.HeatLookupError,
                       match='which is not a Nova server id'):
        heat_stack(cloud, stack_id).cp_server_id('master_cp')
