"""The cluster feature: what each LCM hook does for the Kubernetes cluster
itself and its Tacker VIM.

It is on when ``k8s_cluster_installation_param.script_path`` names the
install script in the VNF package; without it the driver only adds
persistent volumes to a cluster that exists. Like ``storage_feature`` it
takes every decision here, outside the file Tacker hashes.
"""

import functools
import os

from oslo_log import log as logging

from kubernetes_mgmt_pv.cluster import cluster_workflow
from kubernetes_mgmt_pv import config
from kubernetes_mgmt_pv import exceptions
from kubernetes_mgmt_pv.openstack import heat
from kubernetes_mgmt_pv.openstack import vnf_topology
from kubernetes_mgmt_pv.remote import ssh_keys
from kubernetes_mgmt_pv.request import lcm_requests
from kubernetes_mgmt_pv.request import param_model
from kubernetes_mgmt_pv import safe_yaml

LOG = logging.getLogger(__name__)

SCRIPT_MAX_BYTES = 1024 * 1024
# The operations that delete the cluster's VIM, and what each does.
TERMINATE, HEAL = 'terminate', 'heal'
_DELETES_THE_VIM = {
    TERMINATE: 'Terminating the VNF deletes its Kubernetes cluster and',
    HEAL: 'Healing the entire VNF re-creates its Kubernetes cluster and '
          'deletes',
}


class ClusterFeature(object):
    """The feature's hooks for one driver, whose seams answer the lookups
    that need Tacker (package directory, VIM credentials, VIM registry)."""

    def __init__(self, driver):
        self._driver = driver

    # -- hooks ----------------------------------------------------------------

    def instantiate_end(self, context, vnf_instance, instantiate_vnf_request,
                        grant, grant_request, **kwargs):
        params = self._params(vnf_instance, instantiate_vnf_request)
        if params is not None:
            self._install(context, vnf_instance, params)

    def terminate_start(self, context, vnf_instance, terminate_vnf_request,
                        grant, grant_request, **kwargs):
        """Delete the VIM this instance registered while its VMs still
        exist; refused while a v1 or v2 VNF instance uses the VIM, and the
        terminate then stops before Heat deletes anything."""
        params = self._params(vnf_instance)
        if params is not None:
            self.refuse_if_vim_in_use(context, vnf_instance, TERMINATE)
            self._deregister(context, vnf_instance, params)

    def terminate_end(self, context, vnf_instance, terminate_vnf_request,
                      grant, grant_request, **kwargs):
        """Delete the VIM this instance registered, if terminate_start
        did not (a VNFD that routes only terminate_end)."""
        params = self._params(vnf_instance)
        if params is not None:
            self._deregister(context, vnf_instance, params)

    def heal_start(self, context, vnf_instance, heal_vnf_request, grant,
                   grant_request, **kwargs):
        """Entire VNF: the cluster is about to be re-created, so its VIM
        goes first. Masters and Workers: out of the cluster before Heat
        replaces their VMs."""
        params, healed = self._heal_plan(context, vnf_instance,
                                         heal_vnf_request)
        if params is not None and healed is None:
            self.refuse_if_vim_in_use(context, vnf_instance, HEAL)
            # heal_end logs in with these: an unusable key file refuses
            # the heal now, before the VIM is deleted.
            ssh_keys.load_configured(vnf_topology.named_key_files(
                params, vnf_topology.credential_overrides(getattr(
                    heal_vnf_request, 'additional_params', None))),
                config.options(), functools.partial(
                    self._driver.key_project, context, vnf_instance))
            self._deregister(context, vnf_instance, params)
        elif healed:
            workflow, nodes = healed
            workflow.remove(nodes)

    def refuse_if_vim_in_use(self, context, vnf_instance, operation):
        """A terminate and an entire-VNF heal delete the cluster and its
        VIM: refused before anything is deleted (for a heal, the PVs at
        the start of heal_start) while VNF instances use that VIM."""
        params = self._params(vnf_instance)
        if params is None:
            return
        name = vim_name(params, vnf_instance)
        refusal = vim_in_use_refusal(
            name, self._driver.vim_users(context, vnf_instance, name),
            operation)
        if refusal:
            raise exceptions.MgmtDriverError(refusal)

    def heal_end(self, context, vnf_instance, heal_vnf_request, grant,
                 grant_request, **kwargs):
        """Entire VNF: install the new VMs as a new cluster and register
        it. Masters and Workers: the new VMs join the cluster (logging in
        with the request's credentials, if it gives any)."""
        params, healed = self._heal_plan(context, vnf_instance,
                                         heal_vnf_request)
        if params is not None and healed is None:
            self._install(context, vnf_instance, params,
                          lcm_request=heal_vnf_request)
        elif healed:
            workflow, _ = healed
            workflow.install()

    def scale_start(self, context, vnf_instance, scale_vnf_request, grant,
                    grant_request, **kwargs):
        """SCALE_IN, and the rollback of a SCALE_OUT: drain the Workers
        Tacker is about to delete and take them out of the cluster. Tacker
        names them as members of the scaling group: their stacks, or only
        their resource names when it rolls back a scale-out (with the
        scale-out's own request)."""
        params = self._params(vnf_instance)
        rollback = scale_vnf_request.type == 'SCALE_OUT' and \
            'scale_name_list' in kwargs and 'scale_out_id_list' not in kwargs
        if params is None or not (scale_vnf_request.type == 'SCALE_IN' or
                                  rollback) or \
                not self._scales_workers(vnf_instance, params,
                                         scale_vnf_request):
            return
        workflow = self._workflow(context, vnf_instance, params,
                                  scale_vnf_request)
        aspect = scale_vnf_request.aspect_id
        stack_ids = kwargs.get('scale_out_id_list') or \
            workflow.topology.member_stack_ids(
                aspect, kwargs.get('scale_name_list') or [])
        workflow.remove(workflow.topology.members(aspect, stack_ids),
                        scale_in=True)

    def scale_end(self, context, vnf_instance, scale_vnf_request, grant,
                  grant_request, **kwargs):
        """SCALE_OUT: the new Workers join the cluster (all at once)."""
        params = self._params(vnf_instance)
        if params is None or scale_vnf_request.type != 'SCALE_OUT' or \
                not self._scales_workers(vnf_instance, params,
                                         scale_vnf_request):
            return
        workflow = self._workflow(context, vnf_instance, params,
                                  scale_vnf_request)
        # The new Workers log in with the request's credentials, if any.
        workflow.topology.members(scale_vnf_request.aspect_id,
                                  kwargs.get('scale_out_id_list') or [])
        workflow.install()

    # -- plumbing -------------------------------------------------------------

    @staticmethod
    def _params(vnf_instance, instantiate_request=None):
        """The parameters, or None if the cluster feature is off."""
        params = param_model.parse(lcm_requests.additional_params(
            vnf_instance, instantiate_request))
        if params.script_path is None:
            LOG.debug('No script_path parameter: the cluster is not '
                      'installed by this driver')
            return None
        return params

    def _heal_plan(self, context, vnf_instance, heal_vnf_request):
        """(params, None) for an entire-VNF heal; (params, (workflow, the
        healed Masters/Workers)) for VNFCs, empty when it names none of
        them; (None, ()) when the cluster feature is off."""
        params = self._params(vnf_instance)
        if params is None:
            return None, ()
        if lcm_requests.heals_entire_vnf(heal_vnf_request):
            return params, None
        servers = lcm_requests.heal_targets(vnf_instance, heal_vnf_request,
                                            params).servers
        if not servers:
            return params, ()
        workflow = self._workflow(context, vnf_instance, params,
                                  heal_vnf_request)
        return params, (workflow, workflow.topology.healed(servers))

    @staticmethod
    def _scales_workers(vnf_instance, params, scale_vnf_request):
        """True for the Worker aspect; refuses an aspect the VNF does not
        have, and the Master aspect (etcd and the control plane are
        changed by heals, one Master at a time)."""
        lcm_requests.check_scale_aspect(vnf_instance, params,
                                        scale_vnf_request)
        access = lcm_requests.scaled_node_access(params, scale_vnf_request)
        if access is not None and access is params.master:
            raise exceptions.MgmtDriverError(
                'scaling the Master aspect %s is not supported: the number '
                'of Masters is set at instantiation; heal a Master to '
                'replace it' % scale_vnf_request.aspect_id)
        return access is not None

    def _workflow(self, context, vnf_instance, params, lcm_request=None):
        """The cluster workflow of this hook; the parameters, the request's
        credential overrides and the script are checked before Heat or any
        VM is contacted."""
        package_dir = self._driver.vnf_package_dir(context, vnf_instance)
        script = read_package_file(package_dir, params.script_path,
                                   param_model.ROOT + '.script_path')
        node_files = [(node_path, read_package_file(package_dir, relative,
                                                    json_path))
                      for json_path, relative, node_path in
                      params.offline.package_files()]
        overrides = vnf_topology.credential_overrides(
            getattr(lcm_request, 'additional_params', None))
        client = heat.build_heat_client(
            self._driver.vim_access_info(context, vnf_instance))
        return cluster_workflow.ClusterWorkflow(
            params, heat.HeatStack(
                client, vnf_instance.instantiated_vnf_info.instance_id),
            script, credential_overrides=overrides,
            sessions=self._driver.hook_sessions(), node_files=node_files,
            key_project=functools.partial(self._driver.key_project, context,
                                          vnf_instance))

    def upgrade_workflow(self, vnf_instance, params):
        """The workflow of a package change's hooks (the v2 door's
        upgrade), with the package the hook runs from."""
        return self._workflow(None, vnf_instance, params)

    def node_topology(self, context, vnf_instance):
        """The VMs of the cluster as Heat has them now; None when the
        cluster feature is off."""
        params = self._params(vnf_instance)
        if params is None:
            return None
        return self._workflow(context, vnf_instance, params).topology

    def heal_health_facts(self, context, vnf_instance, heal_vnf_request):
        """(``kubectl get nodes -o json`` on a Master, the cluster
        addresses of the Masters/Workers the heal names) for the
        auto-heal guard; None when the cluster feature is off. Masters
        the heal does not name are asked first: the others are likely
        down."""
        params = self._params(vnf_instance)
        if params is None:
            return None
        workflow = self._workflow(context, vnf_instance, params,
                                  heal_vnf_request)
        servers = () if lcm_requests.heals_entire_vnf(heal_vnf_request) \
            else lcm_requests.heal_targets(vnf_instance, heal_vnf_request,
                                           params).servers
        healed = workflow.topology.healed(servers) if servers else []
        masters = sorted(workflow.topology.masters,
                         key=lambda node: node in healed)
        with workflow.sessions() as sessions:
            kubectl = workflow.kubectl_session(sessions, masters,
                                               'auto-heal Node check')
            listing = kubectl.run(['get', 'nodes', '-o', 'json']).stdout
        return listing, {node.fixed_ip for node in healed}

    def _install(self, context, vnf_instance, params, lcm_request=None):
        """Install (or complete) the cluster, then register its VIM."""
        access, _ = self._workflow(context, vnf_instance, params,
                                   lcm_request).install()
        self._driver.register_vim(context, vnf_instance,
                                  vim_name(params, vnf_instance), access)

    def _deregister(self, context, vnf_instance, params):
        if not self._driver.delete_vim(context, vnf_instance,
                                       vim_name(params, vnf_instance)):
            LOG.info('No Kubernetes VIM of VNF instance %s to delete',
                     vnf_instance.id)


def vim_name(params, vnf_instance):
    """The VIM's name: vim_name, else one unique to the VNF instance."""
    return params.vim_name or 'kubernetes_vim_%s' % vnf_instance.id


def vim_in_use_refusal(name, users, operation):
    """Why a terminate or an entire heal (``operation``) is refused when
    the VIM ``name`` has users ({vim id: VNF instance ids}), or None."""
    if not users:
        return None
    return ('%s its Kubernetes VIM %r, which VNF instance(s) still use '
            '(%s). Terminate them first. Nothing was changed.' % (
                _DELETES_THE_VIM[operation], name, '; '.join('VIM %s: %s' % (
                    vim_id, ', '.join(vnfs) or 'see "openstack vnflcm list"')
                    for vim_id, vnfs in sorted(users.items()))))


def read_package_file(package_dir, relative, json_path):
    """The bytes of a file inside the VNF package; a path leaving the
    package, a missing or special file is a ParameterError at json_path."""
    root = os.path.realpath(package_dir)
    path = os.path.realpath(os.path.join(root, relative))
    if os.path.commonpath([root, path]) != root:
        reason = '%r resolves outside the VNF package' % relative
    else:
        try:
            return safe_yaml.read_text(path, SCRIPT_MAX_BYTES,
                                       follow_symlinks=False).encode('utf-8')
        except safe_yaml.LoadError as error:
            reason = '%r %s' % (relative, error)
    raise exceptions.ParameterErrors([exceptions.ParameterError(json_path,
                                                                reason)])
