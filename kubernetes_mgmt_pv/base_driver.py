"""``KubernetesMgmtDriver``: the Tacker-facing base class.

It implements every hook of Tacker's VnflcmMgmtAbstractDriver (as no-ops
where this driver has nothing to do) and the plumbing the hooks share:
reading additionalParams from the Tacker objects, the VNF package and VIM
lookups, and building the Heat-backed persistent-volume workflow. Tacker
objects are only read through attributes, so plain objects work in tests.
"""

import dataclasses
import functools

from oslo_log import log as logging

from kubernetes_mgmt_pv import exceptions
from kubernetes_mgmt_pv import heat
from kubernetes_mgmt_pv import manifests
from kubernetes_mgmt_pv import params as params_mod
from kubernetes_mgmt_pv import tacker_compat
from kubernetes_mgmt_pv import workflows

LOG = logging.getLogger(__name__)

DRIVER_NAME = 'mgmt-drivers-kubernetes'


@dataclasses.dataclass
class HealTargets(object):
    """What a heal request asks for, as far as persistent volumes care."""
    entire_cluster: bool = False
    storage_server: bool = False
    nodes: list = dataclasses.field(default_factory=list)  # (access, server)


def _hook_boundary(hook, method):
    """``method`` letting only the driver's own errors out.

    Tacker shows a hook's exception to the operator as the LCM operation
    error. The steps turn every failure they foresee into a
    ``MgmtDriverError`` naming host and step; anything else (a paramiko,
    socket, Unicode or YAML error, or a bug) becomes one naming the hook,
    with its traceback in the log.
    """
    @functools.wraps(method)
    def hook_method(self, *args, **kwargs):
        try:
            return method(self, *args, **kwargs)
        except exceptions.MgmtDriverError:
            raise
        except Exception as error:
            LOG.exception('%s failed unexpectedly', hook)
            raise exceptions.MgmtDriverError('%s failed: %s' % (
                hook, exceptions.failure_reason(error))) from error
    return hook_method


class KubernetesMgmtDriver(tacker_compat.VnflcmMgmtAbstractDriver):
    """Kubernetes cluster management driver: hooks and shared plumbing.

    The hooks a subclass defines are wrapped by ``_hook_boundary``.
    """

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        for hook in tacker_compat.HOOKS:
            if hook in vars(cls):
                setattr(cls, hook, _hook_boundary(hook, vars(cls)[hook]))

    def get_type(self):
        return DRIVER_NAME

    def get_name(self):
        return DRIVER_NAME

    def get_description(self):
        return 'Kubernetes cluster management driver with NFS persistent volumes'

    # Hooks this class has nothing to do in. The subclass registered as the
    # entry point extends the ones the persistent-volume feature needs.

    def instantiate_start(self, context, vnf_instance,
                          instantiate_vnf_request, grant, grant_request,
                          **kwargs):
        pass

    def instantiate_end(self, context, vnf_instance, instantiate_vnf_request,
                        grant, grant_request, **kwargs):
        pass

    def terminate_start(self, context, vnf_instance, terminate_vnf_request,
                        grant, grant_request, **kwargs):
        pass

    def terminate_end(self, context, vnf_instance, terminate_vnf_request,
                      grant, grant_request, **kwargs):
        pass

    def scale_start(self, context, vnf_instance, scale_vnf_request, grant,
                    grant_request, **kwargs):
        pass

    def scale_end(self, context, vnf_instance, scale_vnf_request, grant,
                  grant_request, **kwargs):
        pass

    def heal_start(self, context, vnf_instance, heal_vnf_request, grant,
                   grant_request, **kwargs):
        pass

    def heal_end(self, context, vnf_instance, heal_vnf_request, grant,
                 grant_request, **kwargs):
        pass

    def change_external_connectivity_start(
            self, context, vnf_instance, change_ext_conn_request, grant,
            grant_request, **kwargs):
        pass

    def change_external_connectivity_end(
            self, context, vnf_instance, change_ext_conn_request, grant,
            grant_request, **kwargs):
        pass

    def modify_information_start(self, context, vnf_instance,
                                 modify_vnf_request, **kwargs):
        pass

    def modify_information_end(self, context, vnf_instance,
                               modify_vnf_request, **kwargs):
        pass

    # -- seams: the lookups that need Tacker's database ---------------------

    def vnf_package_dir(self, context, vnf_instance):
        return tacker_compat.vnf_package_dir(context, vnf_instance)

    def vim_access_info(self, context, vnf_instance):
        return tacker_compat.vim_access_info(context, vnf_instance)

    # -- shared plumbing ----------------------------------------------------

    @staticmethod
    def additional_params(vnf_instance, request=None):
        """additionalParams of the instantiate request.

        instantiate_end gets them with the request; later hooks read the
        copy Tacker stored in the instance's InstantiatedVnfInfo.
        """
        from_request = getattr(request, 'additional_params', None)
        if from_request and params_mod.ROOT in from_request:
            return from_request
        info = getattr(vnf_instance, 'instantiated_vnf_info', None)
        return getattr(info, 'additional_params', None) or {}

    def pv_workflow(self, context, vnf_instance, request=None):
        """The workflow of this VNF, or None if it has no storage_server.

        Parameters and manifests are validated here, before Heat or any VM
        is contacted.
        """
        params = params_mod.parse(self.additional_params(vnf_instance,
                                                         request))
        if not params.pv_enabled:
            LOG.debug('No storage_server parameter: persistent volumes off')
            return None
        loaded = manifests.load(self.vnf_package_dir(context, vnf_instance),
                                params.pv_registrations)
        stack_id = vnf_instance.instantiated_vnf_info.instance_id
        client = heat.build_heat_client(self.vim_access_info(context,
                                                             vnf_instance))
        return workflows.PvWorkflow(params, loaded,
                                    heat.HeatStack(client, stack_id))

    @staticmethod
    def heal_targets(vnf_instance, heal_vnf_request, params):
        """Classify the VNFCs of a heal request by their CP descriptor ids.

        No vnfcInstanceId means the entire cluster (SOL003).
        """
        wanted = set(getattr(heal_vnf_request, 'vnfc_instance_id', None) or [])
        targets = HealTargets(entire_cluster=not wanted)
        info = vnf_instance.instantiated_vnf_info
        for vnfc in getattr(info, 'vnfc_resource_info', None) or []:
            if vnfc.id not in wanted:
                continue
            cpds = {cp.cpd_id for cp in vnfc.vnfc_cp_info or []}
            server_id = vnfc.compute_resource.resource_id
            if params.storage.nic_cp_name in cpds:
                targets.storage_server = True
            for access in (params.master, params.worker):
                if access is not None and access.nic_cp_name in cpds:
                    targets.nodes.append((access, server_id))
        return targets

    @staticmethod
    def healed_node_addresses(workflow, nodes):
        """(address, access) of healed nodes, found by their Nova server id."""
        aspects = [access.aspect_id for access in
                   (workflow.params.master, workflow.params.worker)
                   if access is not None and access.aspect_id]
        found = []
        for access, server_id in nodes:
            stack_id = workflow.heat.find_member_stack_of_server(server_id,
                                                                 aspects)
            if stack_id is None:
                raise exceptions.HeatLookupError(
                    'no Heat stack holds the healed server %s' % server_id)
            found.append(workflow.node_in_stack(access, stack_id))
        return found

    @staticmethod
    def scaled_node_access(params, scale_vnf_request):
        """Access of the nodes of the scaled aspect, with the credential
        overrides a scale request may carry (``worker_node_username`` ...)."""
        overrides = getattr(scale_vnf_request, 'additional_params', None) or {}
        for role, access in (('master_node', params.master),
                             ('worker_node', params.worker)):
            if access is None or \
                    access.aspect_id != scale_vnf_request.aspect_id:
                continue
            return dataclasses.replace(
                access,
                username=overrides.get(role + '_username') or access.username,
                password=overrides.get(role + '_password') or access.password)
        return None
