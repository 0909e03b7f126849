"""The persistent-volume feature: what each LCM hook does for the Storage
server, the NFS clients and the PersistentVolumes.

The entry-point class only delegates here. Whether the feature is on is
decided here; what a heal or scale request targets is read by
``lcm_requests``, the nodes and their credentials come from
``vnf_topology``, and the steps are ``storage_workflow``. Tacker hashes none
of them, so fixing one never forces operators to rebuild their VNF
packages.
"""

import functools

from oslo_log import log as logging

from kubernetes_mgmt_pv.cluster import cluster_feature
from kubernetes_mgmt_pv.openstack import heat
from kubernetes_mgmt_pv.openstack import vnf_topology
from kubernetes_mgmt_pv.request import lcm_requests
from kubernetes_mgmt_pv.request import param_model
from kubernetes_mgmt_pv.storage import csi_driver
from kubernetes_mgmt_pv.storage import manifests
from kubernetes_mgmt_pv.storage import storage_workflow

LOG = logging.getLogger(__name__)


class StorageFeature(object):
    """The feature's hooks for one driver, whose seams (``vnf_package_dir``,
    ``vim_access_info``) answer the lookups that need Tacker's database."""

    def __init__(self, driver):
        self._driver = driver

    # -- hooks ----------------------------------------------------------------

    def instantiate_end(self, context, vnf_instance, instantiate_vnf_request,
                        grant, grant_request, **kwargs):
        workflow = self.workflow(context, vnf_instance,
                                 instantiate_vnf_request)
        if workflow is not None:
            workflow.deploy()

    def heal_start(self, context, vnf_instance, heal_vnf_request, grant,
                   grant_request, **kwargs):
        """Refuse while a PV is Bound, then delete the PVs, when the heal
        re-creates the Storage VM's volume (a Storage heal that does not
        keep it, or an entire-cluster heal); an entire heal is refused
        first while its VIM is in use."""
        workflow, targets = self._heal_plan(context, vnf_instance,
                                            heal_vnf_request)
        if workflow is None or not targets.recreates_storage:
            if workflow is not None and targets.storage_kept:
                LOG.info('The heal keeps the Storage server\'s volumes: '
                         'the PersistentVolumes and their claims stay')
            return
        skip = lcm_requests.skip_pv_check(
            getattr(heal_vnf_request, 'additional_params', None))
        if targets.entire_cluster:
            self._driver.cluster.refuse_if_vim_in_use(
                context, vnf_instance, cluster_feature.HEAL)
        workflow.release_storage(skip_if_unreachable=skip)

    def heal_end(self, context, vnf_instance, heal_vnf_request, grant,
                 grant_request, **kwargs):
        workflow, targets = self._heal_plan(context, vnf_instance,
                                            heal_vnf_request)
        if workflow is None:
            return
        if targets.entire_cluster:
            workflow.deploy()
            return
        if targets.storage_server:
            workflow.rebuild_storage(volumes_kept=targets.storage_kept)
        if targets.servers:
            workflow.install_clients(
                workflow.topology.healed(targets.servers))

    def scale_end(self, context, vnf_instance, scale_vnf_request, grant,
                  grant_request, **kwargs):
        """NFS client on the new Masters/Workers of a scale-out."""
        if scale_vnf_request.type != 'SCALE_OUT':
            return
        workflow = self.workflow(context, vnf_instance,
                                 lcm_request=scale_vnf_request)
        if workflow is None:
            return
        lcm_requests.check_scale_aspect(vnf_instance, workflow.params,
                                        scale_vnf_request)
        if lcm_requests.scaled_node_access(workflow.params,
                                           scale_vnf_request) is None:
            LOG.info('Aspect %s is not a Master/Worker aspect: no NFS client '
                     'to install', scale_vnf_request.aspect_id)
            return
        workflow.install_clients(workflow.topology.members(
            scale_vnf_request.aspect_id,
            kwargs.get('scale_out_id_list') or []))

    # -- plumbing -------------------------------------------------------------

    def workflow(self, context, vnf_instance, instantiate_request=None,
                 lcm_request=None):
        """The workflow of this VNF, or None if it has no storage_server.

        ``lcm_request`` is a scale or heal request, whose additionalParams
        may override the nodes' credentials. Parameters, overrides and
        manifests are validated here, before Heat or any VM is contacted.
        """
        params = param_model.parse(lcm_requests.additional_params(
            vnf_instance, instantiate_request))
        if not params.pv_enabled:
            LOG.debug('No storage_server parameter: persistent volumes off')
            return None
        overrides = vnf_topology.credential_overrides(
            getattr(lcm_request, 'additional_params', None))
        package_dir = self._driver.vnf_package_dir(context, vnf_instance)
        loaded = manifests.load(package_dir, params.pv_registrations)
        csi = csi_driver.load(
            package_dir, params.storage.csi_manifests,
            param_model.CSI_MANIFESTS_PATH) \
            if params.storage.storage_classes else None
        stack_id = vnf_instance.instantiated_vnf_info.instance_id
        client = heat.build_heat_client(
            self._driver.vim_access_info(context, vnf_instance))
        return storage_workflow.PvWorkflow(
            params, loaded, heat.HeatStack(client, stack_id), csi=csi,
            credential_overrides=overrides,
            sessions=self._driver.hook_sessions(),
            key_project=functools.partial(self._driver.key_project, context,
                                          vnf_instance))

    def _heal_plan(self, context, vnf_instance, heal_vnf_request):
        workflow = self.workflow(context, vnf_instance,
                                 lcm_request=heal_vnf_request)
        if workflow is None:
            return None, None
        return workflow, lcm_requests.heal_targets(
            vnf_instance, heal_vnf_request, workflow.params)
