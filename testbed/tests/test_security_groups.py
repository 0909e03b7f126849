"""How the lab reads a HOT's security group rules and what it filters
(no hosts: the rules as text; tests/functional/test_remote.py and
tests/tacker_rest/test_heat_engine.py put them on a bridge)."""

import pytest

from testbed import security_groups as sg

GROUP = 'group-id'


@pytest.mark.parametrize('spec, rule', [
    # remote_mode remote_group_id without a group: the group itself.
    ({'protocol': 'tcp', 'port_range_min': 2379, 'port_range_max': 2380,
      'remote_mode': 'remote_group_id'},
     sg.Rule('tcp', 2379, 2380, None, GROUP)),
    ({'protocol': 'tcp', 'port_range_min': 22, 'port_range_max': 22,
      'remote_ip_prefix': '10.0.0.5/32'},
     sg.Rule('tcp', 22, 22, '10.0.0.5/32')),
    # Host bits are dropped, as Neutron normalises the prefix.
    ({'protocol': 'tcp', 'port_range_min': 22, 'remote_ip_prefix':
      '10.0.0.5/24'}, sg.Rule('tcp', 22, 22, '10.0.0.0/24')),
    ({'protocol': 'vrrp', 'remote_mode': 'remote_group_id',
      'remote_group_id': 'other'}, sg.Rule('112', None, None, None,
                                           'other')),
    ({'protocol': '4'}, sg.Rule('4')),
    ({}, sg.Rule()),
])
def test_heat_rules_are_read_as_heat_does(spec, rule):
    assert sg.rule_of(spec, GROUP) == rule


@pytest.mark.parametrize('spec, named', [
    ({'direction': 'egress'}, 'egress'),
    ({'ethertype': 'IPv6'}, 'IPv4'),
    ({'protocol': 'bogus'}, 'protocol'),
    ({'protocol': '4', 'port_range_min': 1}, 'port range'),
    ({'remote_ip_prefix': ''}, 'remote_ip_prefix'),
    ({'remote_ip_prefix': '10.0.0.0/33'}, 'remote_ip_prefix'),
    ({'remote_group_id': 'other'}, 'remote_mode'),
])
def test_rules_the_lab_cannot_enforce_are_refused(spec, named):
    with pytest.raises(sg.RuleError, match=named):
        sg.rule_of(spec, GROUP)


def test_ports_take_what_their_groups_allow_from_members_addresses():
    master = sg.Port(('10.0.0.11', '10.0.0.250'), ('nodes',), device='v1')
    worker = sg.Port(('10.0.0.12',), ('nodes',), device='v2')
    lone = sg.Port(('10.0.0.13',), device='v3')  # the default group
    unsecured = sg.Port(('10.0.0.14',), port_security=False, device='v4')
    text = sg.render('tb', [master, worker, lone, unsecured], {'nodes': [
        sg.Rule('tcp', 10250, 10250, None, 'nodes')]})
    lines = text.splitlines()
    to_worker = [line for line in lines if '--physdev-out v2 ' in line]
    # From every address of the group's ports, the pair's included.
    assert [line.split(' -s ')[1].split()[0] for line in to_worker
            if 'ACCEPT' in line] == ['10.0.0.11/32', '10.0.0.250/32',
                                     '10.0.0.12/32']
    assert to_worker[-1].endswith('-j DROP')
    # A port sends from its own addresses only.
    assert [line for line in lines if '--physdev-in v1 ' in line] == [
        '-A tb-sg-spoof -m physdev --physdev-in v1 -s %s -j %s'
        % (source, verdict) for source, verdict in (
            ('10.0.0.11/32', 'RETURN'), ('10.0.0.250/32', 'RETURN'))] + [
        '-A tb-sg-spoof -m physdev --physdev-in v1 -j DROP']
    # The default group takes in its own members only; no port security:
    # no rule at all.
    assert '-A tb-sg-out -d 10.0.0.13/32 -s 10.0.0.13/32 -j ACCEPT' in lines
    assert not [line for line in lines if 'v4' in line or '10.0.0.14' in
                line]
    # The runner reaches a port by its addresses, replies always pass.
    assert '-A tb-sg-out -d 10.0.0.250/32 -j DROP' in lines
    assert lines.index('-A tb-sg-out -m conntrack --ctstate '
                       'RELATED,ESTABLISHED -j ACCEPT') < lines.index(
        '-A tb-sg-out -d 10.0.0.11/32 -j DROP')


def test_a_port_in_an_unknown_group_is_refused():
    with pytest.raises(sg.RuleError, match='unknown security group'):
        sg.render('tb', [sg.Port(('10.0.0.11',), ('gone',), device='v1')],
                  {})
