"""The VNF's nodes as Heat describes them, resolved once per hook.

A hook resolves every Master, Worker and Storage node from Heat in one
place, with the credentials it logs in with (the instantiate parameters,
overridden by the scale or heal request), and picks the targets of a heal
or a scale-out from that list, so no step looks a node up on its own.
"""

from __future__ import annotations

import dataclasses

from kubernetes_mgmt_pv import exceptions
from kubernetes_mgmt_pv.remote import ssh_keys
from kubernetes_mgmt_pv.request import param_checks
from kubernetes_mgmt_pv.request import param_model

MASTER = 'master'
WORKER = 'worker'
STORAGE = 'storage'

# The request keys Tacker's sample Kubernetes driver reads to log in to
# new or re-created nodes with other credentials than at instantiation.
_OVERRIDABLE = {MASTER: 'master_node', WORKER: 'worker_node'}
_CREDENTIALS = ('username', 'password', 'ssh_key')
# A login given replaces the instantiated one of the other form.
_OTHER_LOGIN = {'password': 'ssh_key', 'ssh_key': 'password'}


@dataclasses.dataclass(frozen=True)
class Node(object):
    """One VM of the VNF and how to log in to it."""
    role: str  # MASTER, WORKER or STORAGE
    name: str  # the CP, or "<aspect id>/<member stack id>" in a group
    address: str  # for SSH: the floating IP of ssh_cp_name, else its fixed IP
    # The address inside the cluster: the fixed IP of nic_cp_name (Masters
    # and Workers, as Tacker's sample driver uses it), else of ssh_cp_name.
    fixed_ip: str
    cp_name: str  # the SSH CP, which also leads Heat to the Nova server
    stack_id: str | None  # the group member stack; None: the top stack
    # The login: params.NodeAccess (Masters, Workers, with the request's
    # overrides) or params.StorageServer.
    access: object = dataclasses.field(repr=False)


@dataclasses.dataclass(frozen=True)
class HealedServer(object):
    """A Master or Worker VM a heal request names."""
    role: str
    server_id: str


def credential_overrides(request_params):
    """{role: {'username'|'password'|'ssh_key': value}} from a scale or
    heal request's additionalParams (``worker_node_password``,
    ``worker_node_ssh_key`` ...).

    The values go to a host as they are, so they are checked like the
    instantiate parameters; an error never echoes them.
    """
    request_params = request_params or {}
    if not isinstance(request_params, dict):
        raise exceptions.ParameterErrors([exceptions.ParameterError(
            'additionalParams', 'must be an object, got %s'
            % type(request_params).__name__)])
    overrides, errors = {}, []
    for role, prefix in _OVERRIDABLE.items():
        for field in _CREDENTIALS:
            key = '%s_%s' % (prefix, field)
            value = request_params.get(key)
            if value is None:
                continue
            if not param_checks.is_sendable_text(value):
                errors.append(exceptions.ParameterError(
                    'additionalParams.' + key,
                    'must be a non-empty string of at most %d characters '
                    'without control characters'
                    % param_checks.MAX_TEXT_LENGTH))
                continue
            if field == 'ssh_key' and not ssh_keys.KEY_NAME.fullmatch(value):
                errors.append(exceptions.ParameterError(
                    'additionalParams.' + key,
                    'must be a file name in ssh_key_dir (a letter or digit, '
                    'then up to 127 letters, digits and _ . -)'))
                continue
            given = overrides.setdefault(role, {})
            other = _OTHER_LOGIN.get(field)
            if other is not None and given.get(other) is not None:
                errors.append(exceptions.ParameterError(
                    'additionalParams.' + key, 'give either %s_ssh_key or '
                    '%s_password, not both' % (prefix, prefix)))
                continue
            given[field] = value
            if other is not None:
                given[other] = None
    if errors:
        raise exceptions.ParameterErrors(errors)
    return overrides


def named_key_files(params, overrides=None):
    """(JSON path, file name) of every key file the logins of ``params``
    and a request's ``overrides`` (credential_overrides) name."""
    named = [('additionalParams.%s.ssh_key' % path, access.ssh_key)
             for path, access in (
                 (param_model.MASTER_PATH, params.master),
                 (param_model.WORKER_PATH, params.worker),
                 (param_model.STORAGE_PATH, params.storage))
             if access is not None and access.ssh_key]
    for role, prefix in _OVERRIDABLE.items():
        name = (overrides or {}).get(role, {}).get('ssh_key')
        if name:
            named.append(('additionalParams.%s_ssh_key' % prefix, name))
    return named


class Topology(object):
    """The nodes of one VNF, and the Heat lookups that select among them."""

    def __init__(self, heat, nodes, overrides=None):
        self._heat = heat
        self.nodes = tuple(nodes)
        self._overrides = overrides or {}

    @classmethod
    def resolve(cls, heat, params, overrides=None):
        """Every node of the VNF, from Heat: the Storage server, then the
        Masters and the Workers (group members in Heat's order).

        ``overrides`` (credential_overrides of a scale or heal request)
        apply to the nodes of that request only, once ``members`` or
        ``healed`` has picked them: the other VMs keep the logins they
        were instantiated with.
        """
        nodes = []
        if params.storage is not None:
            nodes.append(_node(heat, STORAGE, params.storage, None,
                               params.storage.ssh_cp_name))
        for role, access in ((MASTER, params.master),
                             (WORKER, params.worker)):
            if access is None:
                continue
            if access.aspect_id is None:
                nodes.append(_node(heat, role, access, None,
                                   access.ssh_cp_name))
                continue
            for member in heat.group_member_stack_ids(access.aspect_id):
                nodes.append(_node(heat, role, access, member, '%s/%s' % (
                    access.aspect_id, member)))
        return cls(heat, nodes, overrides)

    def _with_request_logins(self, nodes):
        """``nodes`` with the request's credential overrides, which from
        now on are the logins of these nodes in the topology too."""
        changed = {node: dataclasses.replace(node, access=dataclasses.replace(
            node.access, **self._overrides.get(node.role, {})))
            for node in nodes}
        self.nodes = tuple(changed.get(node, node) for node in self.nodes)
        return [changed[node] for node in nodes]

    def of_role(self, *roles):
        return [node for node in self.nodes if node.role in roles]

    @property
    def storage(self):
        """The Storage server node (the VNF has one when PVs are on)."""
        storage, = self.of_role(STORAGE)
        return storage

    @property
    def masters(self):
        return self.of_role(MASTER)

    @property
    def cluster_nodes(self):
        """Masters and Workers: the NFS clients."""
        return self.of_role(MASTER, WORKER)

    def passwords(self):
        return [node.access.password for node in self.nodes
                if node.access.password]

    def at_address(self, address):
        for node in self.nodes:
            if node.address == address:
                return node
        raise KeyError(address)

    def member_stack_ids(self, aspect_id, member_names):
        """Member stack ids of the group members Tacker names by resource
        name (its scale-out rollback passes only the names); a name that
        is no member is refused, not skipped."""
        by_name = dict(self._heat.group_members(aspect_id))
        exceptions.check_known(
            exceptions.indexed('scale_name_list', member_names), by_name,
            'a member of scaling group %r' % aspect_id)
        return [by_name[name] for name in member_names]

    def server_id(self, node):
        """Nova id of the node's server, looked up only when asked: only
        the console host key policy needs it."""
        return self._heat.cp_server_id(node.cp_name, node.stack_id)

    def healed(self, servers):
        """The nodes of the healed Master/Worker servers, found by the
        stack that holds each server."""
        found = []
        for server in servers:
            candidates = self.of_role(server.role)
            aspects = sorted({node.access.aspect_id for node in candidates
                              if node.access.aspect_id})
            holder = self._heat.find_member_stack_of_server(
                server.server_id, aspects)
            match = [node for node in candidates if holder is not None and
                     (node.stack_id or self._heat.stack_id) == holder]
            if not match:
                raise exceptions.HeatLookupError(
                    'no Heat stack holds the healed server %s'
                    % server.server_id)
            found.append(match[0])
        return self._with_request_logins(found)

    def members(self, aspect_id, member_stack_ids):
        """The nodes of the scaling group aspect_id in the member stacks
        Tacker names (the ones a scale-out added or a scale-in removes)."""
        members = {node.stack_id: node for node in self.cluster_nodes
                   if node.access.aspect_id == aspect_id}
        missing = [stack_id for stack_id in member_stack_ids
                   if stack_id not in members]
        if missing:
            raise exceptions.HeatLookupError(
                'scaling group %r of stack %s has no member stack %s'
                % (aspect_id, self._heat.stack_id, ', '.join(missing)))
        return self._with_request_logins(
            [members[stack_id] for stack_id in member_stack_ids])


def _node(heat, role, access, stack_id, name):
    address = heat.cp_address(access.ssh_cp_name, stack_id=stack_id)
    fixed_ip = address.fixed_ip
    if role != STORAGE and access.nic_cp_name != access.ssh_cp_name:
        # The SSH CP may be a floating IP or a management network.
        fixed_ip = heat.cp_address(access.nic_cp_name,
                                   stack_id=stack_id).fixed_ip
    return Node(role=role, name=name, address=address.ssh_host,
                fixed_ip=fixed_ip, cp_name=access.ssh_cp_name,
                stack_id=stack_id, access=access)
