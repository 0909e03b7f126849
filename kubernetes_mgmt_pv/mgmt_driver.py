"""Entry point ``mgmt-drivers-kubernetes``: the Kubernetes driver with
persistent volumes.

Tacker hashes the file that defines the registered class and compares it
with the copy in the VNF package on every hook call, so this module stays
small: the steps themselves live in the rest of the package.
"""

from oslo_log import log as logging

from kubernetes_mgmt_pv import base_driver

LOG = logging.getLogger(__name__)


class KubernetesPvMgmtDriver(base_driver.KubernetesMgmtDriver):
    """Adds the Storage server, NFS clients and PersistentVolumes."""

    def instantiate_end(self, context, vnf_instance, instantiate_vnf_request,
                        grant, grant_request, **kwargs):
        super().instantiate_end(context, vnf_instance,
                                instantiate_vnf_request, grant, grant_request,
                                **kwargs)
        workflow = self.pv_workflow(context, vnf_instance,
                                    instantiate_vnf_request)
        if workflow is not None:
            workflow.deploy()

    def heal_start(self, context, vnf_instance, heal_vnf_request, grant,
                   grant_request, **kwargs):
        super().heal_start(context, vnf_instance, heal_vnf_request, grant,
                           grant_request, **kwargs)
        workflow, targets = self._heal_plan(context, vnf_instance,
                                            heal_vnf_request)
        # An entire-cluster heal re-creates the storage server and its
        # volume too: the same refusal while a PV is Bound applies.
        if workflow is not None and (targets.storage_server or
                                     targets.entire_cluster):
            workflow.release_storage()

    def heal_end(self, context, vnf_instance, heal_vnf_request, grant,
                 grant_request, **kwargs):
        super().heal_end(context, vnf_instance, heal_vnf_request, grant,
                         grant_request, **kwargs)
        workflow, targets = self._heal_plan(context, vnf_instance,
                                            heal_vnf_request)
        if workflow is None:
            return
        if targets.entire_cluster:
            workflow.deploy()
            return
        if targets.storage_server:
            workflow.rebuild_storage()
        if targets.nodes:
            workflow.install_clients(
                self.healed_node_addresses(workflow, targets.nodes))

    def _heal_plan(self, context, vnf_instance, heal_vnf_request):
        workflow = self.pv_workflow(context, vnf_instance)
        if workflow is None:
            return None, None
        return workflow, self.heal_targets(vnf_instance, heal_vnf_request,
                                           workflow.params)

    def scale_end(self, context, vnf_instance, scale_vnf_request, grant,
                  grant_request, **kwargs):
        super().scale_end(context, vnf_instance, scale_vnf_request, grant,
                          grant_request, **kwargs)
        if scale_vnf_request.type != 'SCALE_OUT':
            return
        workflow = self.pv_workflow(context, vnf_instance)
        if workflow is None:
            return
        access = self.scaled_node_access(workflow.params, scale_vnf_request)
        if access is None:
            LOG.info('Aspect %s is not a Master/Worker aspect: no NFS client '
                     'to install', scale_vnf_request.aspect_id)
            return
        workflow.install_clients(workflow.member_nodes(
            access, kwargs.get('scale_out_id_list') or []))
