"""Neutron's security groups and port security, enforced on the testbed
bridge with iptables, as Neutron's hybrid iptables firewall does.

A port with port security (the default) takes only what its groups'
ingress rules allow, plus the replies of connections it is part of
(stateful, conntrack); a port without ``security_groups`` is in the
project's ``default`` group, which lets in only its own members; egress
is open but spoofed: a port sends only from its fixed IP and the
addresses of its ``allowed_address_pairs``. A group that is a rule's
``remote_group_id`` means every address of its members' ports, allowed
address pairs included, as Neutron computes it.

Where the packets are caught: traffic between VMs is bridged, so it goes
through the runner's FORWARD chain with the bridge ports known (physdev,
br_netfilter); traffic the runner (Tacker's host) sends to a VM leaves
through OUTPUT before the bridge picks a port, so there a port is known by
its addresses; a VM's traffic to the runner meets INPUT. Every rule lives
in four chains of this testbed's own (``<prefix>-sg-*``), rebuilt at once
(``iptables-restore --noflush``) whenever a port, a group or a VM changes.
Only IPv4 is filtered: the testbed has no IPv6 traffic between hosts.
"""

import dataclasses
import ipaddress
import shlex
import shutil
import subprocess

DEFAULT_GROUP = 'default'
# Protocol names Neutron takes, as iptables' numbers or names.
_PROTOCOLS = {'tcp': 'tcp', 'udp': 'udp', 'icmp': 'icmp', 'vrrp': '112',
              'ipip': '4', 'sctp': 'sctp'}
_WITH_PORTS = ('tcp', 'udp', 'sctp')


class RuleError(ValueError):
    """A rule Neutron would refuse or the lab cannot enforce."""


@dataclasses.dataclass(frozen=True)
class Rule:
    """One ingress rule: protocol None is any, ports only for tcp/udp;
    ``remote_ip_prefix`` or ``remote_group_id`` (neither: any source)."""

    protocol: str = None
    port_range_min: int = None
    port_range_max: int = None
    remote_ip_prefix: str = None
    remote_group_id: str = None


@dataclasses.dataclass(frozen=True)
class Port:
    """A Neutron port as the filter sees it; ``device`` is the bridge side
    of its VM's NIC, None while no VM uses it."""

    addresses: tuple
    groups: tuple = (DEFAULT_GROUP,)
    port_security: bool = True
    device: str = None


DEFAULT_RULES = (Rule(remote_group_id=DEFAULT_GROUP),)


def rule_of(spec, own_group):
    """A Rule of an ``OS::Neutron::SecurityGroup`` rules item, as Heat
    reads it: ``remote_mode: remote_group_id`` without a group means the
    group itself; egress rules are refused (the lab leaves egress open, as
    Neutron's default egress rules do)."""
    spec = dict(spec or {})
    if spec.get('direction', 'ingress') != 'ingress':
        raise RuleError('egress rules are not enforced by the testbed: '
                        'only ingress rules (%r)' % (spec,))
    if spec.get('ethertype', 'IPv4') != 'IPv4':
        raise RuleError('only IPv4 rules are enforced by the testbed (%r)'
                        % (spec,))
    protocol = spec.get('protocol')
    if protocol is not None:
        protocol = str(protocol).lower()
        protocol = _PROTOCOLS.get(protocol, protocol)
        if protocol not in _PROTOCOLS.values() and not (
                protocol.isdigit() and int(protocol) < 256):
            raise RuleError('unknown protocol %r' % spec.get('protocol'))
    low, high = spec.get('port_range_min'), spec.get('port_range_max')
    if (low is not None or high is not None) and protocol not in _WITH_PORTS:
        raise RuleError('a port range needs protocol tcp, udp or sctp (%r)'
                        % (spec,))
    prefix = spec.get('remote_ip_prefix')
    if prefix is not None:
        try:
            prefix = str(ipaddress.ip_network(str(prefix), strict=False))
        except ValueError:
            raise RuleError('remote_ip_prefix %r is not a CIDR' % (prefix,))
    group = spec.get('remote_group_id')
    if spec.get('remote_mode') == 'remote_group_id':
        group = group or own_group
    elif group is not None:
        raise RuleError('remote_group_id needs remote_mode '
                        'remote_group_id (%r)' % (spec,))
    if low is None or high is None:  # one end given: a single port
        low = high = low if high is None else high
    return Rule(protocol=protocol,
                port_range_min=None if low is None else int(low),
                port_range_max=None if high is None else int(high),
                remote_ip_prefix=prefix,
                remote_group_id=group)


def _match(rule, members):
    """The iptables matches of one rule: one per source it admits."""
    base = []
    if rule.protocol is not None:
        base += ['-p', rule.protocol]
        if rule.port_range_min is not None:
            base += ['--dport', '%d:%d' % (rule.port_range_min,
                                           rule.port_range_max)]
    if rule.remote_group_id is not None:
        return [['-s', _cidr(address)] + base for address in
                members.get(rule.remote_group_id, ())]
    if rule.remote_ip_prefix is not None:
        return [['-s', rule.remote_ip_prefix] + base]
    return [base]


def _members(ports):
    """{group id: every address of its members' ports}."""
    members = {}
    for port in ports:
        for group in port.groups if port.port_security else ():
            members.setdefault(group, [])
            members[group] += [a for a in port.addresses
                               if a not in members[group]]
    return members


def _cidr(address):
    """An address, or an allowed address pair's CIDR, as iptables takes
    it."""
    return address if '/' in address else address + '/32'


def chains(prefix):
    return {name: '%s-sg-%s' % (prefix, name)
            for name in ('fwd', 'out', 'in', 'spoof')}


def render(prefix, ports, groups):
    """The iptables-restore text of a testbed's chains: ``ports`` (Port),
    ``groups`` ({group id: [Rule]}, the default group's rules added)."""
    groups = dict({DEFAULT_GROUP: DEFAULT_RULES}, **groups)
    names = chains(prefix)
    members = _members(ports)
    lines = ['*filter'] + [':%s - [0:0]' % name for name in names.values()]
    established = ['-m', 'conntrack', '--ctstate', 'RELATED,ESTABLISHED',
                   '-j', 'ACCEPT']
    lines += ['-A %s -j %s' % (names['in'], names['spoof']),
              '-A %s -m physdev --physdev-is-bridged -j %s'
              % (names['fwd'], names['spoof']),
              ' '.join(['-A', names['fwd']] + established),
              ' '.join(['-A', names['out']] + established)]
    for port in ports:
        if not port.port_security or port.device is None:
            continue
        came_from = ['-m', 'physdev', '--physdev-in', port.device]
        lines += [' '.join(['-A', names['spoof']] + came_from +
                           ['-s', _cidr(address), '-j', 'RETURN'])
                  for address in port.addresses]
        lines.append(' '.join(['-A', names['spoof']] + came_from +
                              ['-j', 'DROP']))
        goes_to = ['-m', 'physdev', '--physdev-out', port.device,
                   '--physdev-is-bridged']
        to_runner = [['-d', _cidr(address)] for address in port.addresses]
        for group in port.groups:
            if group not in groups:
                raise RuleError('port in unknown security group %s' % group)
            for rule in groups[group]:
                for match in _match(rule, members):
                    lines.append(' '.join(['-A', names['fwd']] + goes_to +
                                          match + ['-j', 'ACCEPT']))
                    lines += [' '.join(['-A', names['out']] + to + match +
                                       ['-j', 'ACCEPT']) for to in to_runner]
        lines.append(' '.join(['-A', names['fwd']] + goes_to + ['-j',
                                                                'DROP']))
        lines += [' '.join(['-A', names['out']] + to + ['-j', 'DROP'])
                  for to in to_runner]
    return '\n'.join(lines + ['COMMIT', ''])


class BridgeFilter(object):
    """The iptables chains of one testbed bridge: ``start()`` hooks them
    into FORWARD, OUTPUT and INPUT for this bridge only, ``apply()``
    rebuilds them, ``stop()`` removes them."""

    def __init__(self, prefix, bridge):
        self.prefix = prefix
        self.bridge = bridge
        self.names = chains(prefix)
        self.applied = None  # the last iptables-restore text

    @staticmethod
    def unavailable():
        """Why this machine cannot filter (a skip reason), or None."""
        for tool in ('iptables', 'iptables-restore'):
            if shutil.which(tool) is None:
                return ('security groups need %s (run testbed/install-deps.sh)'
                        % tool)
        return None

    def _hooks(self):
        return (('FORWARD', '-o', self.names['fwd']),
                ('OUTPUT', '-o', self.names['out']),
                ('INPUT', '-i', self.names['in']))

    def start(self):
        reason = self.unavailable()
        if reason:
            raise RuntimeError(reason)
        # Bridged IPv4 through iptables whatever the global sysctl says.
        _iptables(['ip', 'link', 'set', self.bridge, 'type', 'bridge',
                   'nf_call_iptables', '1'])
        self.apply('*filter\n%s\nCOMMIT\n' % '\n'.join(
            ':%s - [0:0]' % name for name in self.names.values()))
        for chain, direction, target in self._hooks():
            _iptables(['iptables', '-w', '-I', chain, '1', direction,
                       self.bridge, '-j', target])

    def apply(self, text):
        _iptables(['iptables-restore', '-w', '--noflush'], text)
        self.applied = text

    def stop(self):
        """Unhook and delete the chains; what is already gone is fine."""
        for chain, direction, target in self._hooks():
            _iptables(['iptables', '-w', '-D', chain, direction, self.bridge,
                       '-j', target], check=False)
        for name in self.names.values():
            _iptables(['iptables', '-w', '-F', name], check=False)
        for name in self.names.values():
            _iptables(['iptables', '-w', '-X', name], check=False)


def _iptables(args, text=None, check=True):
    result = subprocess.run(args, input=text, capture_output=True, text=True,
                            timeout=60)
    if check and result.returncode:
        raise RuntimeError('%s failed (%s): %s' % (
            ' '.join(args[:3]), result.returncode, result.stderr.strip()))
    return result


_CONNECT = '''import socket, sys
address, port, source, timeout = sys.argv[1:]
socket.create_connection((address, int(port)), float(timeout), (source, 0))
'''


def connects(host, address, port, source='0.0.0.0', timeout=1.0):
    """True when a TCP connection from a testbed host (from ``source``, an
    address it holds) to address:port opens within ``timeout`` seconds."""
    args = [address, str(port), source, str(timeout)]
    return host.run('python3 -c %s %s' % (
        shlex.quote(_CONNECT), ' '.join(shlex.quote(a) for a in args)),
        check=False).returncode == 0
