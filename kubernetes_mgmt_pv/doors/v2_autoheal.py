"""Tacker v2's auto-heal as the door sees it: which heal Tacker started
by itself (its Prometheus plugin), whether the instance wants it
(``vnfConfigurableProperties.isAutohealEnabled``), and its VNFCs by the
ids the plugin's alerts must carry."""

from kubernetes_mgmt_pv.autoheal import monitoring
from kubernetes_mgmt_pv.autoheal import probes
from kubernetes_mgmt_pv import config
from kubernetes_mgmt_pv import exceptions

# The hooks after which the instance has no VMs of the driver's.
FORGET_HOOKS = ('terminate_end', 'instantiate_rollback_start')


def is_automatic(script_dict):
    """Whether Tacker started this operation itself: its grant request
    carries the op occ's isAutomaticInvocation."""
    return (script_dict.get('grant_request') or {}).get(
        'isAutomaticInvocation') is True


def needs_parameters(errors):
    """The one-line refusal of an automatic heal of an instance that
    needs what only a request can give (``errors``: ParameterErrors)."""
    return exceptions.MgmtDriverError(
        'automatic heal refused: Tacker\'s auto-heal request has no '
        'additionalParams, and this instance needs %s, which Tacker v2 '
        'keeps nowhere; heal it with a request that gives them, and '
        'instantiate with ssh_key logins and a proxy without user info '
        'to let it heal by itself' % ', '.join(
            error.path for error in errors.errors))


def vnfcs(vnf_instance):
    """The instance's VNFCs (vnfcInfo id, VDU, Nova server)."""
    info = vnf_instance.get('instantiatedVnfInfo') or {}
    servers = {vnfc.get('id'): (vnfc.get('computeResource') or {}).get(
        'resourceId') for vnfc in info.get('vnfcResourceInfo') or []}
    return [monitoring.Vnfc(vnfc['id'], vnfc.get('vduId'),
                            servers[vnfc.get('vnfcResourceInfoId')])
            for vnfc in info.get('vnfcInfo') or []
            if servers.get(vnfc.get('vnfcResourceInfoId'))]


def enabled(vnf_instance):
    return probes.is_enabled(vnf_instance.get('vnfConfigurableProperties'))


def enabled_after(vnf_instance, modify_request):
    """isAutohealEnabled once a PATCH's vnfConfigurableProperties (a JSON
    merge patch: null removes a key) is applied."""
    properties = dict(vnf_instance.get('vnfConfigurableProperties') or {})
    patch = (modify_request or {}).get('vnfConfigurableProperties')
    if isinstance(patch, dict):
        for key, value in patch.items():
            if value is None:
                properties.pop(key, None)
            else:
                properties[key] = value
    return probes.is_enabled(properties)


def follow_modify(vnf_instance, modify_request):
    """Pause or resume the probes as the PATCH sets isAutohealEnabled."""
    return monitoring.switch(vnf_instance['id'], enabled_after(
        vnf_instance, modify_request), config.options())


def forget(vnf_instance):
    return monitoring.forget(vnf_instance['id'], config.options())
