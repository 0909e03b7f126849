"""One Tacker v2 hook: the v2 dicts mapped onto the request model, the
features' hook run by the entry-point driver class (the v1 door's), and
what Tacker v2 gets back.

The driver's seams answer from the script dict instead of Tacker's
database: the package is ``tmp_csar_dir``, the OpenStack VIM comes from
``vimConnectionInfo``. The cluster's Kubernetes VIM goes to Tacker's VIM
registry, in the project that owns the OpenStack VIM, and is kept out of
the instance's vimConnectionInfo (v2 would pick any of two entries for the
VNF's own operations); its id is saved in ``metadata.kubernetesMgmtPv.vim``
for CNF instantiate requests (``"vimConnectionInfo": {"vim1": {"vimId":
...}}``).
"""

import logging
import types

from kubernetes_mgmt_pv.autoheal import heal_check
from kubernetes_mgmt_pv.autoheal import monitoring
from kubernetes_mgmt_pv import config
from kubernetes_mgmt_pv.doors import tacker_compat
from kubernetes_mgmt_pv.doors import v2_autoheal
from kubernetes_mgmt_pv.doors import v2_guards
from kubernetes_mgmt_pv.doors import v2_mapping
from kubernetes_mgmt_pv.doors import v2_upgrade
from kubernetes_mgmt_pv import exceptions
from kubernetes_mgmt_pv import mgmt_driver
from kubernetes_mgmt_pv.openstack import heat

LOG = logging.getLogger(__name__)


class V2Driver(mgmt_driver.KubernetesPvMgmtDriver):
    """The entry-point driver with its Tacker lookups answered from one
    v2 script dict."""

    def __init__(self, script_dict, state):
        super().__init__()
        self._script = script_dict
        self._state = state
        self._context = None
        self.registered = None  # {'id', 'name', 'endpoint'} of this hook
        self.deleted = False

    def vnf_package_dir(self, context, vnf_instance):
        return self._script['tmp_csar_dir']

    def openstack_access_info(self, context, vnf_instance):
        return v2_mapping.heat_access_info(
            v2_mapping.openstack_vim(self._script['vnf_instance']),
            tacker_compat.v2_heat_cert_verify())

    def openstack_vim_id(self):
        """The registry id of the instance's OpenStack VIM (terminate_end
        has no vimConnectionInfo left: then the one saved)."""
        entries = self._script['vnf_instance'].get('vimConnectionInfo')
        if entries:
            return v2_mapping.openstack_vim(
                self._script['vnf_instance']).get('vimId')
        return self._state.get('openstackVimId')

    def _tacker_context(self):
        if self._context is None:
            vim_id = self.openstack_vim_id()
            if not vim_id:
                raise exceptions.MgmtDriverError(
                    'the OpenStack VIM of the VNF instance has no vimId: the '
                    'Kubernetes VIM is registered in the project of a VIM '
                    'of Tacker\'s VIM registry; instantiate with '
                    '"vimConnectionInfo": {"vim1": {"vimId": ...}}')
            self._context = tacker_compat.project_context(vim_id)
        return self._context

    def key_project(self, context, vnf_instance):
        """v2 scripts get no project: the one that owns the instance's
        OpenStack VIM, as for the Kubernetes VIM."""
        return self._tacker_context().project_id

    def check_vim_registry(self):
        """Refuse, before any step, an OpenStack VIM the Kubernetes VIM
        could not be registered next to (no vimId, or not in Tacker's VIM
        registry): otherwise only found after the whole install."""
        self._tacker_context()

    def registered_vim_tokens(self, context, vnf_instance):
        """The token of the VIM an earlier hook registered (saved in the
        instance's metadata), as Tacker's VIM registry keeps it."""
        vim_id = (self._state.get('vim') or {}).get('id')
        if not vim_id:
            return []
        try:
            return tacker_compat.vim_tokens(self._tacker_context(), [vim_id])
        except exceptions.MgmtDriverError as error:  # no VIM registry
            tacker_compat.token_unreadable(vim_id, error)
            return []

    def register_vim(self, context, vnf_instance, name, access):
        vim_id = tacker_compat.register_kubernetes_vim(
            self._tacker_context(), vnf_instance, name, access.url,
            access.bearer_token, access.ca_cert, record=False)
        self.registered = {'id': vim_id, 'name': name,
                           'endpoint': access.url}
        return vim_id

    def delete_vim(self, context, vnf_instance, name):
        self.deleted = tacker_compat.delete_kubernetes_vim(
            self._tacker_context(), vnf_instance, name) or self.deleted
        return self.deleted

    def vim_users(self, context, vnf_instance, name):
        return tacker_compat.kubernetes_vim_users(self._tacker_context(),
                                                  vnf_instance, name)

    def package_dir_of(self, vnfd_id):
        """The extracted package of ``vnfd_id`` in Tacker's package store
        (a package change's old package: its hooks run the new one's)."""
        return tacker_compat.vnf_package_dir(
            self._tacker_context(), types.SimpleNamespace(vnfd_id=vnfd_id))

    # -- auto-heal: v2 only (Tacker v1 has none) ---------------------------

    def heal_start(self, context, vnf_instance, heal_vnf_request, grant,
                   grant_request, **kwargs):
        """An automatic heal passes the guard rails first."""
        if v2_autoheal.is_automatic(self._script):
            heal_check.check(self.cluster, context, vnf_instance,
                             heal_vnf_request, config.options())
        super().heal_start(context, vnf_instance, heal_vnf_request, grant,
                           grant_request, **kwargs)

    def instantiate_end(self, context, vnf_instance, *args, **kwargs):
        super().instantiate_end(context, vnf_instance, *args, **kwargs)
        self._refresh_monitoring(context, vnf_instance)

    def scale_end(self, context, vnf_instance, *args, **kwargs):
        super().scale_end(context, vnf_instance, *args, **kwargs)
        self._refresh_monitoring(context, vnf_instance)

    def heal_end(self, context, vnf_instance, *args, **kwargs):
        super().heal_end(context, vnf_instance, *args, **kwargs)
        self._refresh_monitoring(context, vnf_instance)

    def _refresh_monitoring(self, context, vnf_instance):
        """The probes of the instance's VMs, by the VNFC ids Tacker gives
        them now (a healed VM has a new one)."""
        inst = self._script['vnf_instance']
        monitoring.refresh(self.cluster, context, vnf_instance,
                           v2_autoheal.vnfcs(inst), v2_autoheal.enabled(inst),
                           config.options())

    def group_members(self, aspect_id):
        """(resource name, member stack id) of the members of the scaling
        group ``aspect_id`` as Heat has them now."""
        inst = self._script['vnf_instance']
        return heat.HeatStack(
            heat.build_heat_client(self.openstack_access_info(None, inst)),
            v2_mapping.stack_id(inst)).group_members(aspect_id)


def run(script_dict, secrets, progress, driver_factory=V2Driver):
    """Run the hook of ``script_dict``; the dict to hand back to Tacker.

    ``secrets`` gets every password of the request as soon as it is known
    (for the log's redaction); ``progress`` (this operation's entry in
    user_script_err_handling_data) records the hooks done, so a retry of a
    failed operation skips a ``_start`` hook that already did its part;
    the VIM a failed hook registered (``registeredVim``): Tacker keeps
    only user_script_err_handling_data of a failed hook; and the hook that
    refused the request's parameters before any step (``refused``).
    """
    operation = script_dict['operation']
    if _skipped(operation, progress):
        return {}
    inst = script_dict['vnf_instance']
    req = script_dict.get('request') or {}
    state = dict(v2_mapping.state_of(inst))
    request_params = req.get('additionalParams') or {}
    secrets.extend(v2_mapping.secret_values(request_params, inst))
    v2_guards.check_state_kept(operation, inst)
    if operation in v2_autoheal.FORGET_HOOKS:
        v2_autoheal.forget(inst)
    if operation in v2_mapping.GUARD_HOOKS:
        v2_guards.check(operation, req, inst)
        if operation == 'modify_information_start':
            v2_autoheal.follow_modify(inst, req)
        if operation not in v2_upgrade.HOOKS:
            progress.setdefault('done', []).append(operation)
            return {}
    try:
        root = v2_mapping.params_in_effect(operation, request_params, state)
    except exceptions.ParameterErrors as errors:
        progress['refused'] = operation
        if v2_autoheal.is_automatic(script_dict):
            raise v2_autoheal.needs_parameters(errors) from None
        raise
    if operation == 'terminate_end' and 'vim' not in state:
        LOG.info('terminate_end: terminate_start deleted the Kubernetes VIM')
        return {'vnf_instance': v2_mapping.with_state(inst, None)}
    if operation in v2_mapping.ROLLBACK_HOOKS and (
            root is None or not _rollback_needed(operation, req, root)):
        LOG.info('%s: nothing of this driver to roll back', operation)
        return {}
    if operation in v2_upgrade.HOOKS:
        return _package_change(script_dict, state, root, progress,
                               driver_factory)
    return _feature_hook(script_dict, state, root, progress, driver_factory)


def _skipped(operation, progress):
    """Whether the hook has nothing to do, before its input is read: not
    a hook of this driver, a ``_start`` hook done before this retry, or
    the rollback of parameters refused before any change."""
    if not v2_mapping.runs(operation):
        LOG.info('%s: not a hook of this driver, nothing to do', operation)
        return True
    if operation.endswith('_start') and operation in progress.get('done', ()):
        LOG.info('%s: done before this retry, skipped', operation)
        return True
    if operation in v2_mapping.ROLLBACK_HOOKS and progress.get('refused'):
        # Its parameters would be refused again: the rollback could never
        # end, with nothing of the driver's to undo.
        LOG.info('%s: %s refused the parameters before any change, nothing '
                 'to roll back', operation, progress['refused'])
        return True
    return False


def _feature_hook(script_dict, state, root, progress, driver_factory):
    """The features' hook of ``script_dict`` run by the driver."""
    operation, inst = script_dict['operation'], script_dict['vnf_instance']
    req = script_dict.get('request') or {}
    aliases, kwargs = _hook_arguments(script_dict, root, progress)
    driver = driver_factory(script_dict, state)
    if operation == 'scale_rollback_start':
        kwargs['scale_name_list'] = v2_mapping.rolled_back_members(
            inst, driver.group_members(req['aspectId']))
        if not kwargs['scale_name_list']:
            LOG.info('%s: Heat has no member the scale-out added',
                     operation)
            return {}
        LOG.info('%s: taking %s out of the cluster before Heat deletes '
                 'them', operation, ', '.join(kwargs['scale_name_list']))
    if v2_mapping.registers_vim(operation, root):
        driver.check_vim_registry()
    try:
        getattr(driver, v2_mapping.ROLLBACK_HOOKS.get(operation, operation))(
            None, v2_mapping.instance(inst, root, aliases),
            v2_mapping.request(operation, req, root,
                               script_dict.get('grant_request')),
            script_dict.get('grant_response'),
            script_dict.get('grant_request'), **kwargs)
    except Exception:
        if driver.registered:
            # What the failed hook did, for a rollback or the operator.
            progress['registeredVim'] = driver.registered
        raise
    progress.setdefault('done', []).append(operation)
    return {'vnf_instance': v2_mapping.with_state(
        inst, _next_state(operation, state, root, driver, inst))}


def _hook_arguments(script_dict, root, progress):
    """(aliases of the healed VNFCs, the hook's keyword arguments): what
    v2's dicts tell of a heal's or scale's VMs, as v1 hands them."""
    operation, inst = script_dict['operation'], script_dict['vnf_instance']
    req = script_dict.get('request') or {}
    aliases, kwargs = None, {}
    if operation == 'heal_start' and req.get('vnfcInstanceId'):
        progress['healing'] = v2_mapping.healed_vnfcs(inst, req)
    elif operation == 'heal_end':
        aliases = v2_mapping.healed_aliases(inst, progress.get('healing'))
    elif operation == 'scale_start' and req.get('type') == 'SCALE_IN':
        kwargs['scale_out_id_list'] = v2_mapping.removed_member_stacks(
            inst, script_dict.get('grant_request'))
    elif (operation == 'scale_end' and req.get('type') == 'SCALE_OUT' and
          root is not None):
        kwargs['scale_out_id_list'] = v2_mapping.aspect_member_stacks(
            inst, root, req.get('aspectId'))
    return aliases, kwargs


def _package_change(script_dict, state, root, progress, driver_factory):
    """A hook of ChangeCurrentVnfPackage: the cluster's upgrade."""
    operation, inst = script_dict['operation'], script_dict['vnf_instance']
    if root is None:
        LOG.info('%s: the cluster is not this driver\'s, nothing to do',
                 operation)
        return {}
    driver = driver_factory(script_dict, state)
    v2_upgrade.run(operation, driver, script_dict,
                   v2_mapping.instance(inst, root), root, progress)
    progress.setdefault('done', []).append(operation)
    return {'vnf_instance': v2_mapping.with_state(
        inst, _next_state(operation, state, root, driver, inst))}


def _rollback_needed(operation, req, root):
    """Whether a rollback hook may have anything to undo: the VIM an
    instantiate registered; the Workers a scale-out of their aspect
    joined (Tacker rolls back no scale-in)."""
    if operation == 'instantiate_rollback_start':
        return True
    return req.get('type') == 'SCALE_OUT' and \
        v2_mapping.is_worker_aspect(root, req.get('aspectId'))


def _next_state(operation, state, root, driver, inst):
    if operation in ('terminate_end', 'instantiate_rollback_start'):
        return None
    if operation == 'instantiate_end':
        # Saved even with the features off: a later hook that finds no
        # state knows it was erased (v2_guards.check_state_kept).
        state = {'contractVersion': mgmt_driver.PACKAGE_CONTRACT_VERSION}
        if root is not None:
            state.update(params=v2_mapping.saved_params(root),
                         openstackVimId=driver.openstack_vim_id())
    if driver.deleted:
        state.pop('vim', None)
    if driver.registered:
        state['vim'] = driver.registered
    return state
