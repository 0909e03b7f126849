"""Which Node is a VM's, decided from facts that one VM cannot forge for
another.

The driver finds a VM's Node by the InternalIP the Node reports, and that
address is the word of the Node's kubelet: with its own credentials, a
compromised VM can make its own Node report any other VM's address.
Before the driver names a VM after the Node it found at its address
(and writes that name into every node's /etc/hosts), or drains, deletes,
upgrades or waits on that Node:

* an address two Nodes report is refused: neither is known to be the
  VM's (``check_addresses``);
* the Node's name must be the host name the VM itself reports over SSH,
  under which kubelet registered it (``check_own_node``);
* a VM that cannot be asked (a heal of a dead VM, a scale-in of an
  unreachable one) has no word of its own, so the Node at its address
  must not be one that another VM of the VNF names as its own
  (``check_not_taken``). Any other Node found there is the VM's own, or
  that of a kubelet lying about its address, whose removal harms nobody
  else. The driver keeps no record of the Node names it joined, and
  Nova's server name is not the Node's name of a VM it renamed, so
  neither can vouch for a dead VM's Node.
"""

import collections

from kubernetes_mgmt_pv import exceptions
from kubernetes_mgmt_pv.request import param_checks

# Why the driver refuses, and the way out.
WHY = ('a kubelet may report another VM\'s address, so the driver does not '
       'act on that Node (delete the Node that is not the VM\'s with '
       'kubectl delete node, or stop the VM that lies, and run the '
       'operation again)')
REFUSED = 'nothing was changed'


def _vm(node):
    """'VM 10.0.0.21', with its InternalIP when that is another address."""
    if node.fixed_ip == node.address:
        return 'VM %s' % node.address
    return 'VM %s (InternalIP %s)' % (node.address, node.fixed_ip)


def check_addresses(api_nodes):
    """Refuse an InternalIP that several Nodes report, naming the Nodes
    and the address (``api_nodes``: {Node name: InternalIP or None})."""
    claims = collections.defaultdict(list)
    for name, address in api_nodes.items():
        if isinstance(address, str):
            claims[address].append(name)
    clashes = ['Nodes %s report the same InternalIP %s' % (
        ' and '.join(sorted(names)), param_checks.shown(address))
        for address, names in sorted(claims.items()) if len(names) > 1]
    if clashes:
        raise exceptions.ClusterInstallError('%s: %s; %s' % (
            '; '.join(clashes), WHY, REFUSED))


def own_node_refusal(node, name, hostname):
    """Why the Node ``name`` at ``node``'s address is not that VM's: its
    own ``hostname`` (None: it reported none) is another; None when it
    is the VM's."""
    if isinstance(hostname, str) and hostname.lower() == name:
        return None
    return '%s reports host name %s, but Node %s reports its address: %s' % (
        _vm(node), param_checks.shown(hostname) if hostname else 'none',
        name, WHY)


def check_own_node(node, name, hostname):
    """Refuse to act on the Node ``name`` as ``node``'s when the VM's own
    ``hostname`` is another name."""
    refusal = own_node_refusal(node, name, hostname)
    if refusal:
        raise exceptions.ClusterInstallError('%s; %s' % (refusal, REFUSED))


def check_not_taken(node, name, others):
    """Refuse to act on the Node ``name`` found at ``node``'s address when
    another VM names it as its own (``others``: {address: the host name
    that VM reported})."""
    for address, hostname in sorted(others.items()):
        if address != node.address and isinstance(hostname, str) and \
                hostname.lower() == name:
            raise exceptions.ClusterInstallError(
                'Node %s reports the address of %s, but it is the Node of '
                'VM %s (host name %s): %s; %s' % (
                    name, _vm(node), address, param_checks.shown(hostname),
                    WHY, REFUSED))
