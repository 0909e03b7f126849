"""The request model the cluster and storage features read.

The features read a VNF instance and an LCM request through a few
attributes only: Tacker's v1 objects have them natively, so the v1 door
hands its objects over as they are; the v2 door (``doors.tacker_v2``)
builds these plain objects from v2's dicts. No Tacker type is needed here.
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class VnfcCp(object):
    cpd_id: str  # the CP descriptor id, e.g. workerNode_CP2


@dataclasses.dataclass(frozen=True)
class ComputeResource(object):
    resource_id: str  # the Nova server id


@dataclasses.dataclass(frozen=True)
class Vnfc(object):
    """One VM: the id a heal request names it by, its server and CPs."""
    id: str
    compute_resource: ComputeResource
    vnfc_cp_info: tuple = ()  # VnfcCp
    volume_ids: tuple = ()  # its Cinder volumes (v2: storageResourceIds)


@dataclasses.dataclass(frozen=True)
class ScaleStatus(object):
    aspect_id: str
    scale_level: int = 0


@dataclasses.dataclass(frozen=True)
class InstantiatedInfo(object):
    """What the features need of an instantiated VNF."""
    instance_id: str  # the top-level Heat stack (id or name)
    additional_params: dict  # the instantiate parameters in effect
    vnfc_resource_info: tuple = ()  # Vnfc
    scale_status: tuple = ()  # ScaleStatus


@dataclasses.dataclass(frozen=True)
class VnfInstance(object):
    id: str
    vnfd_id: str
    instantiated_vnf_info: InstantiatedInfo
    tenant_id: str | None = None  # the project its Kubernetes VIM goes to
    # Kubernetes VIMs of the instance as v1 records them; the v2 door keeps
    # its VIM out of vimConnectionInfo (see doors.tacker_v2).
    vim_connection_info: tuple = ()


@dataclasses.dataclass(frozen=True)
class LcmRequest(object):
    """An instantiate, scale, heal or terminate request: the fields of
    each that the features read (the others stay None)."""
    additional_params: dict = dataclasses.field(default_factory=dict)
    flavour_id: str | None = None
    type: str | None = None  # SCALE_OUT or SCALE_IN
    aspect_id: str | None = None
    number_of_steps: int | None = None
    vnfc_instance_id: tuple | None = None  # heal: None = the entire VNF
    # heal, v2: the volume ids its grant removes (re-creates); None: not
    # known, as in v1, whose heal re-creates a healed VM's volumes.
    removed_storage: tuple | None = None
    termination_type: str | None = None
