"""Whether the NFS exports grant every Master and Worker.

An export whose ``export_to`` leaves a node out is accepted by exportfs and
its PersistentVolume still becomes ``Available``, yet the node's kubelet
can never mount it. So before any host is changed the driver compares the
address each node reaches the Storage server from with every export's
client, as exports(5) and the NFS server match them: a network (CIDR or
netmask), an address, a host name forward-resolved on the Storage server,
a wildcard matched against the node address's name there, ``*`` (every
client), or a ``@netgroup``, which cannot be checked from outside.

The facts come from two commands (the node's route, the Storage server's
resolver); the decision (``check``) is a pure function of them.
"""

import collections
import dataclasses
import fnmatch
import ipaddress

from kubernetes_mgmt_pv.remote import facts

EVERYONE = '*'
WILDCARD_CHARACTERS = frozenset('*?[')

# The Storage server's resolver in one command (see
# scripts/export_access_facts.sh).
_RESOLVE = facts.script('export_access_facts.sh')


@dataclasses.dataclass(frozen=True)
class Client(object):
    """A Master or Worker as the NFS server sees it."""
    node: str  # how the error names the node: role, SSH address, name
    address: str  # the address it reaches the Storage server from
    # False: the node could not tell (no route, unreachable); ``address``
    # is then its nic_cp_name address.
    from_route: bool = True


@dataclasses.dataclass(frozen=True)
class Resolution(object):
    """What the Storage server's resolver says.

    ``addresses``: {lower-case host name: addresses} (forward lookups);
    ``names``: {address: lower-case names, canonical first} (reverse).
    A name or address it does not know is absent.
    """
    addresses: dict = dataclasses.field(default_factory=dict)
    names: dict = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class Violation(object):
    """A node that an export directory does not grant."""
    client: Client
    export_dir: str
    export_to: tuple  # every client of that directory
    reasons: tuple  # why each export_to leaves the node out

    def __str__(self):
        source = ('its address towards the Storage server' if
                  self.client.from_route else
                  'its nic_cp_name address: its route to the Storage '
                  'server is unknown')
        return '%s at %s (%s) is not granted %s by export_to %s: %s' % (
            self.client.node, self.client.address, source, self.export_dir,
            ', '.join(repr(target) for target in self.export_to),
            '; '.join(self.reasons))


@dataclasses.dataclass(frozen=True)
class Findings(object):
    violations: tuple = ()
    # (node, address, export_dir, export_to) a netgroup may or may not grant
    unverified: tuple = ()


def client_form(export_to):
    """The exports(5) form of a client: 'everyone', 'netgroup',
    'wildcard', 'address', 'network' or 'hostname'."""
    if export_to == EVERYONE:
        return 'everyone'
    if export_to.startswith('@'):
        return 'netgroup'
    if WILDCARD_CHARACTERS & set(export_to):
        return 'wildcard'
    try:
        ipaddress.ip_address(export_to)
        return 'address'
    except ValueError:
        pass
    try:
        ipaddress.ip_network(export_to, strict=False)
        return 'network'
    except ValueError:
        return 'hostname'


def grants(export_to, address, resolution):
    """(True, '') when export_to grants the client address, (False,
    reason) when not, (None, reason) when it cannot be told (netgroup)."""
    form = client_form(export_to)
    client = ipaddress.ip_address(address)
    if form == 'everyone':
        return True, ''
    if form == 'netgroup':
        return None, 'netgroup %s cannot be checked' % export_to
    if form == 'address':
        if client == ipaddress.ip_address(export_to):
            return True, ''
        return False, '%s is another address' % export_to
    if form == 'network':
        if client in ipaddress.ip_network(export_to, strict=False):
            return True, ''
        return False, '%s is outside %s' % (address, export_to)
    if form == 'wildcard':
        names = resolution.names.get(address, ())
        if any(fnmatch.fnmatchcase(name, export_to.lower())
               for name in names):
            return True, ''
        if not names:
            return False, ('%s has no host name on the Storage server to '
                           'match %s' % (address, export_to))
        return False, '%s (the name of %s) does not match %s' % (
            ', '.join(names), address, export_to)
    resolved = resolution.addresses.get(export_to.lower())
    if resolved is None:
        return False, ('host name %s does not resolve on the Storage server'
                       % export_to)
    if any(ipaddress.ip_address(found) == client for found in resolved):
        return True, ''
    return False, 'host name %s resolves to %s on the Storage server' % (
        export_to, ', '.join(resolved))


def check(exports, clients, resolution):
    """The ``Findings`` of every export directory against every client.

    A directory exported to several clients grants a node when any of them
    does, as the NFS server decides; a node only a netgroup could grant is
    reported as unverified, not refused.
    """
    targets = collections.OrderedDict()
    for export in exports:
        targets.setdefault(export.export_dir, []).append(export.export_to)
    violations, unverified = [], []
    for client in clients:
        for directory, export_to in targets.items():
            verdicts = [grants(target, client.address, resolution)
                        for target in export_to]
            if any(granted for granted, _ in verdicts):
                continue
            maybe = [target for target, (granted, _) in
                     zip(export_to, verdicts) if granted is None]
            if maybe:
                unverified.append((client.node, client.address, directory,
                                   tuple(maybe)))
                continue
            violations.append(Violation(client, directory, tuple(export_to),
                                        tuple(reason for _, reason in
                                              verdicts)))
    return Findings(tuple(violations), tuple(unverified))


def lookups(exports, client_addresses):
    """The Storage server's lookups ``check`` needs: [('forward', host
    name)] for plain host names, [('reverse', address)] of every client
    address when an export is a wildcard."""
    forms = {export.export_to: client_form(export.export_to)
             for export in exports}
    wanted = [('forward', name.lower()) for name, form in forms.items()
              if form == 'hostname']
    if 'wildcard' in forms.values():
        wanted += [('reverse', address) for address in client_addresses]
    return list(dict.fromkeys(wanted))


def parse_resolution(sections):
    """``Resolution`` from the sections of the resolver command; getent's
    exit status 2 means "not found", which leaves the key out."""
    addresses, names = {}, {}
    for key, result in sections.items():
        kind, _, subject = key.partition(' ')
        if not result.ok:
            continue
        rows = [line.split() for line in result.stdout.split('\n')
                if line.split()]
        if kind == 'forward':
            addresses[subject] = tuple(dict.fromkeys(row[0] for row in rows))
        elif kind == 'reverse':
            names[subject] = tuple(dict.fromkeys(
                name.lower() for row in rows for name in row[1:]))
    return Resolution(addresses, names)


def failed_lookups(sections):
    """The lookups getent could not do (any exit status but 0 and 2)."""
    return {key: result for key, result in sections.items()
            if result.exit_status not in (0, 2)}


def resolve(executor, wanted):
    """Run ``wanted`` (see ``lookups``) on the Storage server at once."""
    if not wanted:
        return Resolution()
    sections = facts.gather(
        executor, _RESOLVE, [value for lookup in wanted for value in lookup],
        'getent ahosts, getent hosts')
    for key, failed in failed_lookups(sections).items():
        raise executor.failure('getent %s' % key, failed)
    return parse_resolution(sections)


def parse_route_source(output):
    """The ``src`` address of ``ip -o route get`` output (None: none)."""
    words = output.split()
    for key, value in zip(words, words[1:]):
        if key == 'src':
            try:
                return str(ipaddress.ip_address(value))
            except ValueError:
                return None
    return None


def refusal(violations):
    """The operator's error for ``check``'s violations."""
    return ('NFS export check failed: %d Master/Worker node address(es) '
            'not granted by the exports, whose PersistentVolumes they '
            'could never mount; nothing was changed for the persistent '
            'volumes on any host: %s. Make each export_to grant these '
            'addresses (the network of the nodes\' nic_cp_name ports)' % (
                len({violation.client for violation in violations}),
                '; '.join(str(violation) for violation in violations)))
