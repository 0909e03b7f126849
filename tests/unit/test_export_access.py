"""Whether the exports grant every node: facts in, violations out, as
tables for every client form of exports(5). No host."""

import pytest

from kubernetes_mgmt_pv.remote import facts
from kubernetes_mgmt_pv.request import param_model
from kubernetes_mgmt_pv.storage import export_access
from kubernetes_mgmt_pv.storage import server_steps

RESOLVED = export_access.Resolution(
    addresses={'worker1': ('10.1.2.12',),
               'nfs-clients.example.org': ('10.1.2.12', '10.1.2.13')},
    names={'10.1.2.12': ('worker1.example.org', 'worker1'),
           '10.1.2.13': ('Master1.Example.ORG'.lower(),)})
WORKER = export_access.Client('worker 192.0.2.12 (worker/1)', '10.1.2.12')


@pytest.mark.parametrize('export_to, address, granted', [
    # CIDR and netmask networks
    ('10.1.2.0/24', '10.1.2.12', True),
    ('10.10.0.0/24', '10.1.2.12', False),   # the user guide's value
    ('10.1.2.0/255.255.255.0', '10.1.2.12', True),
    ('10.1.2.0/255.255.255.128', '10.1.2.200', False),
    ('10.1.2.5/24', '10.1.2.12', True),     # host bits: the network counts
    ('fd00::/64', '10.1.2.12', False),
    # a single address
    ('10.1.2.12', '10.1.2.12', True),
    ('10.1.2.13', '10.1.2.12', False),
    # host names, forward-resolved on the Storage server
    ('worker1', '10.1.2.12', True),
    ('WORKER1', '10.1.2.12', True),
    ('nfs-clients.example.org', '10.1.2.13', True),
    ('worker1', '10.1.2.13', False),        # resolves to another address
    ('unknown.example.org', '10.1.2.12', False),   # does not resolve
    # wildcards against the address's names there
    ('*.example.org', '10.1.2.12', True),
    ('*.EXAMPLE.org', '10.1.2.13', True),
    ('worker?', '10.1.2.12', True),         # an alias matches too
    ('worker[0-9].example.org', '10.1.2.12', True),
    ('*.example.com', '10.1.2.12', False),
    ('*.example.org', '10.1.2.14', False),  # the address has no name
    # everyone, netgroups
    ('*', '10.1.2.12', True),
    ('*', '10.99.0.1', True),
    ('@nfs-clients', '10.1.2.12', None),
])
def test_export_to_grants(export_to, address, granted):
    verdict, reason = export_access.grants(export_to, address, RESOLVED)
    assert verdict is granted
    assert bool(reason) == (granted is not True)


@pytest.mark.parametrize('export_to, form', [
    ('*', 'everyone'), ('@group', 'netgroup'), ('*.example.org', 'wildcard'),
    ('node?', 'wildcard'), ('node[12]', 'wildcard'), ('10.0.0.1', 'address'),
    ('10.0.0.0/24', 'network'), ('10.0.0.0/255.255.255.0', 'network'),
    ('nfs.example.org', 'hostname'),
])
def test_client_form(export_to, form):
    assert export_access.client_form(export_to) == form


def exports(*pairs):
    return [param_model.NfsExport(directory, target)
            for directory, target in pairs]


@pytest.mark.parametrize('wanted, clients, violations, unverified', [
    # every node inside: nothing to say
    (exports(('/v/a', '10.1.2.0/24'), ('/v/b', '10.1.2.0/24')),
     [WORKER], [], []),
    # one directory leaves the node out
    (exports(('/v/a', '10.1.2.0/24'), ('/v/b', '10.10.0.0/24')),
     [WORKER], [('/v/b', ('10.10.0.0/24',))], []),
    # a directory with several clients grants when one of them does
    (exports(('/v/a', '10.10.0.0/24'), ('/v/a', 'worker1')),
     [WORKER], [], []),
    # a netgroup that might grant: a warning, not a refusal
    (exports(('/v/a', '10.10.0.0/24'), ('/v/a', '@clients')),
     [WORKER], [], [('/v/a', ('@clients',))]),
    # an unresolved name refuses
    (exports(('/v/a', 'gone.example.org')),
     [WORKER], [('/v/a', ('gone.example.org',))], []),
])
def test_check(wanted, clients, violations, unverified):
    findings = export_access.check(wanted, clients, RESOLVED)
    assert [(v.export_dir, v.export_to) for v in findings.violations] == \
        violations
    assert [(directory, targets) for _, _, directory, targets in
            findings.unverified] == unverified


def test_refusal_names_node_address_directory_and_export_to():
    fallback = export_access.Client('master 192.0.2.5 (master/1)',
                                    '10.1.2.5', from_route=False)
    findings = export_access.check(
        exports(('/v/a', '10.10.0.0/24'), ('/v/b', '10.10.0.0/24')),
        [WORKER, fallback], RESOLVED)
    message = export_access.refusal(findings.violations)
    for text in ('worker 192.0.2.12 (worker/1) at 10.1.2.12',
                 'master 192.0.2.5 (master/1) at 10.1.2.5',
                 "/v/a by export_to '10.10.0.0/24'",
                 "/v/b by export_to '10.10.0.0/24'",
                 'its nic_cp_name address', '2 Master/Worker node',
                 'nothing was changed'):
        assert text in message, message


@pytest.mark.parametrize('wanted, addresses, lookups', [
    (exports(('/v/a', '10.0.0.0/24')), ['10.0.0.5'], []),
    (exports(('/v/a', '*'), ('/v/b', '@g')), ['10.0.0.5'], []),
    (exports(('/v/a', 'NFS.example.org'), ('/v/b', 'nfs.example.org')),
     ['10.0.0.5'], [('forward', 'nfs.example.org')]),
    (exports(('/v/a', '*.example.org')), ['10.0.0.5', '10.0.0.6'],
     [('reverse', '10.0.0.5'), ('reverse', '10.0.0.6')]),
])
def test_only_names_and_wildcards_need_the_storage_servers_resolver(
        wanted, addresses, lookups):
    assert export_access.lookups(wanted, addresses) == lookups


def section(status, stdout=b''):
    return facts.CommandResult(status, stdout, b'')


def test_resolution_from_getent():
    resolution = export_access.parse_resolution({
        'forward nfs.example.org': section(
            0, b'10.0.0.7        STREAM nfs.example.org\n'
               b'10.0.0.7        DGRAM  \n10.0.0.8        STREAM\n'),
        'forward gone.example.org': section(2),
        'reverse 10.0.0.5': section(0, b'10.0.0.5        Worker1 w1\n'),
        'reverse 10.0.0.6': section(2),
    })
    assert resolution.addresses == {
        'nfs.example.org': ('10.0.0.7', '10.0.0.8')}
    assert resolution.names == {'10.0.0.5': ('worker1', 'w1')}


@pytest.mark.parametrize('output, source', [
    ('10.1.2.5 dev eth0 src 10.1.2.12 uid 0 \\    cache ', '10.1.2.12'),
    ('10.1.2.5 via 10.1.3.1 dev eth1 src 10.1.3.12 uid 1000', '10.1.3.12'),
    ('local 127.0.0.1 dev lo src 127.0.0.1 uid 0', '127.0.0.1'),
    ('', None),
    ('10.1.2.5 dev eth0 src', None),
    ('10.1.2.5 dev eth0 src eth0', None),
])
def test_route_source(output, source):
    assert export_access.parse_route_source(output) == source


@pytest.mark.parametrize('export_to, listed, missing', [
    ('*', '<world>', False),
    ('10.1.2.0/255.255.255.0', '10.1.2.0/24', False),
    ('10.1.2.0/24', '10.1.2.0/255.255.255.0', False),
    ('*.Example.org', '*.example.org', False),
    ('10.1.2.0/24', '10.1.3.0/24', True),
])
def test_exportfs_listing_of_every_client_form(export_to, listed, missing):
    listing = '/v/a\t%s(rw,sync)\n' % listed
    assert server_steps.missing_exports(exports(('/v/a', export_to)),
                                        listing) == (
        [('/v/a', export_to)] if missing else [])
