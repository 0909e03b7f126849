"""What an LCM request asks of the driver: its additionalParams, what a
heal request targets, which nodes a scale request is about. Shared by the
cluster and the persistent-volume features.
"""

import dataclasses
import re

from kubernetes_mgmt_pv import exceptions
from kubernetes_mgmt_pv.openstack import vnf_topology
from kubernetes_mgmt_pv.request import param_model


@dataclasses.dataclass(frozen=True)
class HealTargets(object):
    """What a heal request targets: the entire VNF, the Storage server,
    Master and Worker servers; whether the Storage server's volumes stay."""
    entire_cluster: bool = False
    storage_server: bool = False
    servers: tuple = ()  # vnf_topology.HealedServer: Masters and Workers
    storage_kept: bool = False  # a Storage heal keeps its volumes

    @property
    def recreates_storage(self):
        """The Storage VM and its volume are re-created (their data lost)."""
        return self.entire_cluster or (self.storage_server and
                                       not self.storage_kept)


def keeps_storage_volumes(removed_storage, all_requested, entire_vnf,
                          storage_volumes):
    """Whether a heal of the Storage server keeps its Cinder volumes, with
    their data, attached to the new server.

    ``removed_storage``: the volume ids the heal's grant removes (v2), None
    when the door does not know them (v1, whose heal re-creates a healed
    VM's volumes). Tacker v2 marks only the servers unhealthy unless
    ``additionalParams.all`` is set, which re-creates the VNFC's volumes
    (and, for the entire VNF, the whole stack). An entire-VNF heal counts
    as re-creating: the cluster is rebuilt, its claims with it.
    ``storage_volumes``: the volume ids of the healed Storage VNFC (none
    known: any removed volume may be its own).
    """
    if removed_storage is None or all_requested or entire_vnf:
        return False
    removed = set(removed_storage)
    if storage_volumes:
        return not removed & set(storage_volumes)
    return not removed


def additional_params(vnf_instance, request=None):
    """additionalParams of the instantiate request.

    instantiate_end gets them with the request; later hooks read the copy
    Tacker stored in the instance's InstantiatedVnfInfo.
    """
    from_request = getattr(request, 'additional_params', None)
    if from_request and param_model.ROOT in from_request:
        return from_request
    info = getattr(vnf_instance, 'instantiated_vnf_info', None)
    return getattr(info, 'additional_params', None) or {}


def heals_entire_vnf(heal_vnf_request):
    """No vnfcInstanceId means the entire VNF (SOL003)."""
    return not getattr(heal_vnf_request, 'vnfc_instance_id', None)


def heal_targets(vnf_instance, heal_vnf_request, params):
    """Classify the VNFCs of a heal request by their CP descriptor ids.

    An id the instance does not have is refused, not skipped.
    """
    requested = list(getattr(heal_vnf_request, 'vnfc_instance_id', None)
                     or [])
    info = vnf_instance.instantiated_vnf_info
    vnfcs = getattr(info, 'vnfc_resource_info', None) or []
    exceptions.check_known(exceptions.indexed('vnfcInstanceId', requested),
                           [vnfc.id for vnfc in vnfcs],
                           'a VNFC of this VNF instance')
    wanted = set(requested)
    storage_server, servers, volumes = False, [], []
    for vnfc in vnfcs:
        if vnfc.id not in wanted:
            continue
        cpds = {cp.cpd_id for cp in vnfc.vnfc_cp_info or []}
        server_id = vnfc.compute_resource.resource_id
        if params.storage is not None and params.storage.nic_cp_name in cpds:
            storage_server = True
            volumes += list(getattr(vnfc, 'volume_ids', None) or ())
        for role, access in ((vnf_topology.MASTER, params.master),
                             (vnf_topology.WORKER, params.worker)):
            if access is not None and access.nic_cp_name in cpds:
                servers.append(vnf_topology.HealedServer(role, server_id))
    entire = heals_entire_vnf(heal_vnf_request)
    request_params = getattr(heal_vnf_request, 'additional_params', None)
    kept = storage_server and keeps_storage_volumes(
        getattr(heal_vnf_request, 'removed_storage', None),
        # Tacker v2 reads "all" by truth value.
        bool(request_params.get('all'))
        if isinstance(request_params, dict) else False,
        entire, volumes)
    return HealTargets(entire_cluster=entire, storage_server=storage_server,
                       servers=tuple(servers), storage_kept=kept)


def scaled_node_access(params, scale_vnf_request):
    """Access of the nodes of the scaled aspect (None: not a Master or
    Worker aspect), as the instantiate parameters give it."""
    for access in (params.master, params.worker):
        if access is not None and (
                access.aspect_id == scale_vnf_request.aspect_id):
            return access
    return None


def check_scale_aspect(vnf_instance, params, scale_vnf_request):
    """Refuse an aspectId that is neither in the instance's scaleStatus
    (the VNFD's aspects) nor a Master/Worker aspect of the parameters."""
    info = getattr(vnf_instance, 'instantiated_vnf_info', None)
    known = [scale.aspect_id for scale in _field(info, 'scale_status') or []]
    known += [access.aspect_id for access in (params.master, params.worker)
              if access is not None and access.aspect_id is not None]
    exceptions.check_known([('aspectId', scale_vnf_request.aspect_id)],
                           known, 'a scaling aspect of this VNF instance')


def _field(obj, name):
    """obj.name, None when unset (an unset field of a Tacker object
    raises instead)."""
    try:
        return getattr(obj, name, None)
    except NotImplementedError:
        return None


# The heal request's additionalParams flag that lets an entire-VNF or
# Storage heal go on when the PersistentVolumes cannot be checked.
SKIP_PV_CHECK = 'skip_pv_check_if_unreachable'


def skip_pv_check(request_params):
    """Whether the request sets SKIP_PV_CHECK (a boolean; unset or null:
    false)."""
    value = request_params.get(SKIP_PV_CHECK) \
        if isinstance(request_params, dict) else None
    if value is None:
        return False
    if not isinstance(value, bool):
        raise exceptions.ParameterErrors([exceptions.ParameterError(
            'additionalParams.' + SKIP_PV_CHECK,
            'must be a boolean, got %s' % type(value).__name__)])
    return value


# The change_vnfpkg request's additionalParams key: how many Workers the
# upgrade drains and upgrades at once.
MAX_UNAVAILABLE = 'upgrade_max_unavailable'
_MAX_UNAVAILABLE = re.compile(r'^([1-9][0-9]{0,5})(%?)$')


def max_unavailable(value, where):
    """A count (int, at least 1) or a percentage of the Workers ('25%',
    1 to 100) as the upgrade takes it (``upgrade_plan.wave_size``); a
    count may come as a JSON number or a string. ``where`` names the
    value in the error (its JSON path, or the option)."""
    plain = isinstance(value, (int, str)) and not isinstance(value, bool)
    text = str(value).strip() if plain else ''
    match = _MAX_UNAVAILABLE.match(text)
    if match and not (match[2] and int(match[1]) > 100):
        return text if match[2] else int(match[1])
    raise exceptions.ParameterErrors([exceptions.ParameterError(
        where, 'must be a number of Workers (at least 1) or a percentage '
        'of them ("25%%", from 1%% to 100%%), got %s' % (
            repr(value)[:40] if plain else type(value).__name__))])


def request_max_unavailable(request_params):
    """The request's additionalParams.upgrade_max_unavailable, or None
    (unset or null: the driver's option)."""
    value = request_params.get(MAX_UNAVAILABLE) \
        if isinstance(request_params, dict) else None
    if value is None:
        return None
    return max_unavailable(value, 'additionalParams.' + MAX_UNAVAILABLE)
