"""``KubernetesMgmtDriver``: the Tacker-facing base class.

It implements every hook of Tacker's VnflcmMgmtAbstractDriver (as no-ops
where the cluster has nothing to do yet), the seams that need Tacker's
database (the VNF package directory, the VIM credentials) and the hook
boundary that lets only the driver's own errors reach the operator. Tacker
objects are only read through attributes, so plain objects work in tests.
"""

import contextlib
import functools
import threading

from oslo_log import log as logging

from kubernetes_mgmt_pv.cluster import cluster_feature
from kubernetes_mgmt_pv import config
from kubernetes_mgmt_pv.doors import tacker_compat
from kubernetes_mgmt_pv import exceptions
from kubernetes_mgmt_pv import feature_hooks
from kubernetes_mgmt_pv import redaction
from kubernetes_mgmt_pv.remote import capacity
from kubernetes_mgmt_pv.remote import remote
from kubernetes_mgmt_pv.request import lcm_guards
from kubernetes_mgmt_pv.request import lcm_requests
from kubernetes_mgmt_pv.request import param_model

LOG = logging.getLogger(__name__)

# The hook running in this thread (a green thread when Tacker's conductor
# is monkey-patched by eventlet): Tacker may run hooks of several VNFs at
# once on the one driver object.
_current_hook = threading.local()


@contextlib.contextmanager
def _hook_scope(hook, vim_tokens):
    """One SSH session pool for the whole hook call, shared by the cluster
    and the persistent-volume features and closed when the hook returns,
    so each host is logged in to once per hook; the secrets the hook
    learned (the VIM password), which no error or log line may show; and
    the hook's slot among the hooks doing remote work, taken by
    ``hook_sessions`` and given back here, which also learns the bearer
    tokens of the registered Kubernetes VIM (``vim_tokens()``)."""
    if getattr(_current_hook, 'sessions', None) is not None:
        yield  # a hook calling another hook's implementation
        return
    _current_hook.sessions = remote.SessionPool(conf=config.options())
    _current_hook.secrets = []
    _current_hook.name = hook
    _current_hook.slot = None
    _current_hook.vim_tokens = vim_tokens
    try:
        yield
    finally:
        sessions, _current_hook.sessions = _current_hook.sessions, None
        _current_hook.secrets = []
        try:
            sessions.close()
        finally:
            limits, _current_hook.slot = _current_hook.slot, None
            if limits is not None:
                limits.release_hook()


def _hide(*secrets):
    """Keep these values out of the hook's errors, logs and SSH output."""
    secrets = [secret for secret in secrets if secret]
    if getattr(_current_hook, 'sessions', None) is None or not secrets:
        return
    _current_hook.secrets.extend(secrets)
    _current_hook.sessions.hide(*secrets)


def _hook_secrets():
    """The hook's secrets: those of the door and those its sessions
    learned on the way (the VIM's bearer token, the join token)."""
    return list(_current_hook.secrets) + list(_current_hook.sessions.hidden)


def _listed(obj, name):
    """The list obj.name; empty when unset (an unset field of a Tacker
    object raises instead)."""
    try:
        return getattr(obj, name, None) or ()
    except NotImplementedError:
        return ()


def touched_cps(change_ext_conn_request):
    """(JSON path, cpd_id) of each external CP a v1 ChangeExtConnRequest
    sets up anew."""
    return [('extVirtualLinks[%d].extCps[%d].cpdId' % (index, number),
             cp.cpd_id)
            for index, link in enumerate(_listed(change_ext_conn_request,
                                                 'ext_virtual_links'))
            for number, cp in enumerate(_listed(link, 'ext_cps'))]


def _hook_boundary(hook, method):
    """``method`` letting only the driver's own errors out.

    Tacker shows a hook's exception to the operator as the LCM operation
    error, and logs it with its chain. The steps turn every failure they
    foresee into a ``MgmtDriverError`` naming host and step; anything else
    (a paramiko, socket, Unicode or YAML error, or a bug) becomes one
    naming the hook, with its traceback in the log. Last line of defence:
    no secret of the hook nor URL user info leaves in the message, the
    chain or the log.
    """
    @functools.wraps(method)
    def hook_method(self, *args, **kwargs):
        # Tacker v1 names the arguments, v2's door gives them in order.
        target = [kwargs.get(name, args[index] if len(args) > index else None)
                  for index, name in enumerate(('context', 'vnf_instance'))]
        with _hook_scope(hook, functools.partial(self.registered_vim_tokens,
                                                 *target)):
            try:
                return method(self, *args, **kwargs)
            except exceptions.MgmtDriverError as error:
                secrets = _hook_secrets()
                if redaction.safe_cause(error, secrets) is error:
                    raise
                LOG.error('%s failed: %s', hook,
                          redaction.redacted_traceback(error, secrets))
                raise redaction.redacted_error(error, secrets) from None
            except Exception as error:
                secrets = _hook_secrets()
                LOG.error('%s failed unexpectedly: %s', hook,
                          redaction.redacted_traceback(error, secrets))
                raise exceptions.MgmtDriverError(redaction.redact(
                    '%s failed: %s' % (hook, exceptions.failure_reason(error)),
                    secrets)) from redaction.safe_cause(error, secrets)
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

    def __init__(self):
        super().__init__()
        self.cluster = cluster_feature.ClusterFeature(self)

    def get_type(self):
        return feature_hooks.DRIVER_NAME

    def get_name(self):
        return feature_hooks.DRIVER_NAME

    def get_description(self):
        return ('Kubernetes cluster management driver with NFS persistent '
                'volumes')

    # The cluster feature's hooks; the others have nothing to do. The
    # subclass registered as the entry point adds the persistent volumes.

    def instantiate_start(self, context, vnf_instance,
                          instantiate_vnf_request, grant, grant_request,
                          **kwargs):
        pass

    def instantiate_end(self, context, vnf_instance, instantiate_vnf_request,
                        grant, grant_request, **kwargs):
        self.cluster.instantiate_end(
            context, vnf_instance, instantiate_vnf_request, grant,
            grant_request, **kwargs)

    def terminate_start(self, context, vnf_instance, terminate_vnf_request,
                        grant, grant_request, **kwargs):
        self.cluster.terminate_start(
            context, vnf_instance, terminate_vnf_request, grant,
            grant_request, **kwargs)

    def terminate_end(self, context, vnf_instance, terminate_vnf_request,
                      grant, grant_request, **kwargs):
        self.cluster.terminate_end(
            context, vnf_instance, terminate_vnf_request, grant, grant_request,
            **kwargs)

    def scale_start(self, context, vnf_instance, scale_vnf_request, grant,
                    grant_request, **kwargs):
        self.cluster.scale_start(
            context, vnf_instance, scale_vnf_request, grant, grant_request,
            **kwargs)

    def scale_end(self, context, vnf_instance, scale_vnf_request, grant,
                  grant_request, **kwargs):
        self.cluster.scale_end(
            context, vnf_instance, scale_vnf_request, grant, grant_request,
            **kwargs)

    def heal_start(self, context, vnf_instance, heal_vnf_request, grant,
                   grant_request, **kwargs):
        self.cluster.heal_start(
            context, vnf_instance, heal_vnf_request, grant, grant_request,
            **kwargs)

    def heal_end(self, context, vnf_instance, heal_vnf_request, grant,
                 grant_request, **kwargs):
        self.cluster.heal_end(
            context, vnf_instance, heal_vnf_request, grant, grant_request,
            **kwargs)

    def change_external_connectivity_start(
            self, context, vnf_instance, change_ext_conn_request, grant,
            grant_request, **kwargs):
        """Refuse a change of the cluster's connection points, which the
        driver does not follow (request.lcm_guards)."""
        info = vnf_instance.instantiated_vnf_info
        lcm_guards.refuse(lcm_guards.connection_point_problems(
            touched_cps(change_ext_conn_request),
            lcm_requests.additional_params(vnf_instance).get(
                param_model.ROOT),
            [(vnfc.vdu_id, tuple(cp.cpd_id for cp in _listed(
                vnfc, 'vnfc_cp_info'))) for vnfc in _listed(
                    info, 'vnfc_resource_info')]))

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

    @staticmethod
    def hook_sessions():
        """The SSH session pool of the hook running in this thread (None
        outside a hook). The features ask for it before any remote step:
        the first call waits for the hook's slot (max_concurrent_hooks)."""
        sessions = getattr(_current_hook, 'sessions', None)
        if sessions is not None and _current_hook.slot is None:
            limits = capacity.process_limits()
            limits.acquire_hook(_current_hook.name)
            _current_hook.slot = limits
            # Before any remote step: a Master's kubectl may print them.
            _hide(*_current_hook.vim_tokens())
        return sessions

    # -- seams: the lookups that need Tacker's database ---------------------

    def vnf_package_dir(self, context, vnf_instance):
        return tacker_compat.vnf_package_dir(context, vnf_instance)

    def vim_access_info(self, context, vnf_instance):
        """The OpenStack VIM's credentials; its password is hidden from
        the hook's errors, logs and SSH output from now on."""
        access_info = self.openstack_access_info(context, vnf_instance)
        _hide(access_info.get('password'),
              *redaction.url_secrets(access_info.get('auth_url')))
        return access_info

    def openstack_access_info(self, context, vnf_instance):
        """The OpenStack VIM's access_info (auth_url, username, ...)."""
        return tacker_compat.vim_access_info(context, vnf_instance)

    def key_project(self, context, vnf_instance):
        """The project id whose key directory the hook's key files are
        looked up in (ssh_key_per_project): the VNF instance's, else the
        request's."""
        return getattr(vnf_instance, 'tenant_id', None) or getattr(
            context, 'project_id', None)

    def registered_vim_tokens(self, context, vnf_instance):
        """The bearer tokens of the Kubernetes VIM registered for the
        instance, as Tacker keeps it: secrets of every hook, not only of
        the hook that read them from the cluster."""
        return tacker_compat.registered_vim_tokens(context, vnf_instance)

    def register_vim(self, context, vnf_instance, name, access):
        """Register the cluster (cluster_workflow.ClusterAccess) as the
        Kubernetes VIM ``name`` of the instance."""
        return tacker_compat.register_kubernetes_vim(
            context, vnf_instance, name, access.url, access.bearer_token,
            access.ca_cert)

    def delete_vim(self, context, vnf_instance, name):
        """Delete the instance's Kubernetes VIM; False if there is none."""
        return tacker_compat.delete_kubernetes_vim(context, vnf_instance,
                                                   name)

    def vim_users(self, context, vnf_instance, name):
        """{vim id: ids of the VNFs deployed on it} when Tacker would
        refuse to delete the instance's Kubernetes VIM ``name``."""
        return tacker_compat.kubernetes_vim_users(context, vnf_instance,
                                                  name)


# Tacker calls the hooks this class implements (terminate_end ...) on the
# entry-point class directly: they get the hook boundary too.
for _hook in tacker_compat.HOOKS:
    setattr(KubernetesMgmtDriver, _hook,
            _hook_boundary(_hook, vars(KubernetesMgmtDriver)[_hook]))
