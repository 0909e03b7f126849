"""Keep an instance's auto-heal monitoring current: its VMs as Heat has
them, each named by the VNFC id Tacker gives it, in the instance's
file_sd file."""

import dataclasses
import logging

from kubernetes_mgmt_pv.autoheal import probes
from kubernetes_mgmt_pv.autoheal import targets_file

LOG = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class Vnfc(object):
    """A VNFC as Tacker lists it: its id, VDU and Nova server."""
    id: str
    vdu_id: str
    server_id: str


def probed_vms(topology, vnfcs):
    """The ProbedVm of each VNFC whose server is a node of ``topology``
    (one Heat lookup per node: its CP's server)."""
    by_server = {topology.server_id(node): node for node in topology.nodes}
    return [probes.ProbedVm(vnfc.id, vnfc.vdu_id, by_server[
        vnfc.server_id].role, by_server[vnfc.server_id].address)
        for vnfc in vnfcs if vnfc.server_id in by_server]


def refresh(cluster_feature, context, vnf_instance, vnfcs, enabled, conf):
    """Write the instance's targets (paused unless ``enabled``); nothing
    when no directory is configured or the cluster is not the driver's."""
    if not conf.auto_heal_targets_dir:
        return []
    topology = cluster_feature.node_topology(context, vnf_instance)
    if topology is None:
        return []
    changes = targets_file.sync(
        conf.auto_heal_targets_dir, vnf_instance.id, probes.document(
            vnf_instance.id, probed_vms(topology, vnfcs)), enabled)
    LOG.info('auto-heal monitoring of %s: %s', vnf_instance.id,
             ', '.join(changes) or 'unchanged')
    return changes


def switch(instance_id, enabled, conf):
    """Pause or resume the instance's probes (isAutohealEnabled changed)
    with the targets last written."""
    if not conf.auto_heal_targets_dir:
        return []
    present = targets_file.current(conf.auto_heal_targets_dir, instance_id)
    if present is None:
        return []
    return targets_file.sync(conf.auto_heal_targets_dir, instance_id,
                             present, enabled)


def forget(instance_id, conf):
    """No monitoring of the instance left (terminate)."""
    if not conf.auto_heal_targets_dir:
        return []
    return targets_file.sync(conf.auto_heal_targets_dir,
                             probes.check_id(instance_id, 'VNF instance id'),
                             None)
