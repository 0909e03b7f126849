"""The guard rails of an automatic heal, as Cluster API's
MachineHealthCheck has them: a pure function of the Nodes as the API
server lists them and of the VMs the heal names.

An automatic heal is refused, before anything changes, when
- more Nodes are not Ready than ``auto_heal_max_unhealthy`` allows (an
  outage of the network or the cloud, which replacing VMs makes worse);
- a Master it replaces would leave etcd without quorum;
- a Node it replaces registered within ``auto_heal_startup_grace`` (it
  may still be joining), or is Ready (the alert no longer holds).
An operator's heal passes none of these.
"""

import dataclasses
import datetime
import ipaddress
import json

from kubernetes_mgmt_pv.cluster import node_names

OPTION = '[kubernetes_mgmt_pv] auto_heal_max_unhealthy'
GRACE_OPTION = '[kubernetes_mgmt_pv] auto_heal_startup_grace'
CONTROL_PLANE = 'node-role.kubernetes.io/control-plane'
_NAMED = 5  # Nodes named in a refusal; the others are counted


@dataclasses.dataclass(frozen=True)
class NodeHealth(object):
    name: str
    address: str | None  # its InternalIP
    control_plane: bool
    ready: bool
    registered: datetime.datetime | None


def _registered(metadata):
    try:
        return datetime.datetime.strptime(
            metadata.get('creationTimestamp') or '',
            '%Y-%m-%dT%H:%M:%SZ').replace(tzinfo=datetime.timezone.utc)
    except (TypeError, ValueError):
        return None


def _internal_ip(status):
    for entry in status.get('addresses') or []:
        if isinstance(entry, dict) and entry.get('type') == 'InternalIP':
            try:
                return str(ipaddress.ip_address(entry.get('address')))
            except ValueError:
                return None
    return None


def node_health(listing):
    """The Nodes of ``kubectl get nodes -o json`` output (VM text: names
    that are no host names are left out); ValueError if it is no list."""
    items = json.loads(listing).get('items')
    if not isinstance(items, list):
        raise ValueError('no "items" list')
    nodes = []
    for item in items:
        metadata, status = (_mapping(item, 'metadata'),
                            _mapping(item, 'status'))
        name = metadata.get('name')
        if not isinstance(name, str) or not node_names.is_valid(name):
            continue
        ready = any(condition.get('type') == 'Ready' and
                    condition.get('status') == 'True'
                    for condition in status.get('conditions') or []
                    if isinstance(condition, dict))
        nodes.append(NodeHealth(
            name, _internal_ip(status),
            CONTROL_PLANE in _mapping(metadata, 'labels'), ready,
            _registered(metadata)))
    return nodes


def _mapping(item, key):
    value = item.get(key) if isinstance(item, dict) else None
    return value if isinstance(value, dict) else {}


def max_unhealthy(setting, workers):
    """How many Nodes may be not Ready at once: ``setting`` is a number
    or a percentage of the Workers (rounded down), at least one."""
    if setting.endswith('%'):
        return max(1, workers * int(setting[:-1]) // 100)
    return max(1, int(setting))


def _names(nodes):
    names = [node.name for node in nodes[:_NAMED]]
    if len(nodes) > _NAMED:
        names.append('and %d more' % (len(nodes) - _NAMED))
    return ', '.join(names)


def refusal(nodes, healed_addresses, setting, startup_grace, now):
    """Why the automatic heal of the VMs at ``healed_addresses`` must not
    start, or None. ``nodes``: NodeHealth of every Node."""
    workers = [node for node in nodes if not node.control_plane]
    unhealthy = [node for node in nodes if not node.ready]
    limit = max_unhealthy(setting, len(workers))
    if len(unhealthy) > limit:
        return ('automatic heal refused: %d of %d Nodes are not Ready (%s), '
                'more than %s allows (%d, of %d Workers): that many at once '
                'looks like a network or cloud outage, which replacing VMs '
                'would make worse. Heal them with a request of your own once '
                'the cause is known, or raise the option.'
                % (len(unhealthy), len(nodes), _names(unhealthy), OPTION,
                   limit, len(workers)))
    healed = [node for node in nodes if node.address in healed_addresses]
    return _healed_node_problem(healed, startup_grace, now) or \
        _quorum_problem(nodes, healed)


def _healed_node_problem(healed, startup_grace, now):
    for node in healed:
        if node.ready:
            return ('automatic heal refused: Node %s is Ready, the alert '
                    'no longer holds; nothing is healed' % node.name)
        if node.registered is not None:
            age = (now - node.registered).total_seconds()
            if age < startup_grace:
                return ('automatic heal refused: Node %s registered %d s '
                        'ago, within %s (%d s): it may still be joining'
                        % (node.name, age, GRACE_OPTION, startup_grace))
    return None


def _quorum_problem(nodes, healed):
    healed_masters = [node for node in healed if node.control_plane]
    if not healed_masters:
        return None
    masters = [node for node in nodes if node.control_plane]
    staying = [node for node in masters
               if node.ready and node not in healed_masters]
    quorum = len(masters) // 2 + 1
    if len(staying) < quorum:
        return ('automatic heal refused: replacing Master %s leaves %d of '
                '%d Masters Ready, and etcd needs %d for quorum; restore '
                'the Masters by hand (see "Restore" in the operator guide)'
                % (_names(healed_masters), len(staying), len(masters),
                   quorum))
    return None
