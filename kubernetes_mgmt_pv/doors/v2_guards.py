"""What the v2 door refuses, from Tacker v2's script dicts: a PATCH of
the instance that would change or remove the driver's state in
``metadata`` (v2_mapping.STATE_KEY), a hook that finds that state gone,
and the operations the driver does not carry out when they touch the
cluster (request.lcm_guards).

Pure functions of the dicts: no Tacker, no host.
"""

import copy

from kubernetes_mgmt_pv.doors import v2_mapping
from kubernetes_mgmt_pv import exceptions
from kubernetes_mgmt_pv.request import lcm_guards

STATE_KEY = v2_mapping.STATE_KEY
STATE_PATH = 'metadata.' + STATE_KEY


# -- the state in metadata -------------------------------------------------

def check_state_kept(operation, vnf_instance):
    """Fail when the instance lacks the state instantiate_end always saves:
    without it the hooks would skip the cluster without a word (new VMs
    never join, terminate leaves the Kubernetes VIM behind). Hooks of an
    instantiate run before it is saved; modify_information_start lets a
    PATCH put it back."""
    if operation.startswith('instantiate_') or \
            operation == 'modify_information_start':
        return
    if STATE_KEY in (vnf_instance.get('metadata') or {}):
        return
    raise exceptions.MgmtDriverError(
        '%s of VNF instance %s is missing: instantiate_end saved the '
        'driver\'s state there (the cluster\'s parameters and Kubernetes '
        'VIM) and only the driver\'s hooks may change it; %s refused, as it '
        'would leave the cluster out. Put it back with a PATCH of the '
        'instance (the operator guide, "The state in metadata")'
        % (STATE_PATH, vnf_instance.get('id'), operation))


def check_metadata_patch(request, vnf_instance):
    """Refuse a PATCH (a merge patch: null removes a key) that would change
    or remove the saved state. When the instance has none, a PATCH may
    put it back."""
    patch = request.get('metadata')
    saved = vnf_instance.get('metadata') or {}
    if not isinstance(patch, dict) or STATE_KEY not in patch or \
            STATE_KEY not in saved:
        return
    problems = _changes(saved[STATE_KEY], patch[STATE_KEY], STATE_PATH)
    if problems:
        raise exceptions.RequestRefused(problems)


def _changes(saved, patch, path):
    """(path, reason) of each value ``patch`` would change in ``saved``."""
    if patch is None:
        return [(path, 'would be removed: it is the driver\'s state, which '
                       'scale, heal and terminate need; only the driver\'s '
                       'hooks change it')]
    if isinstance(patch, dict) and isinstance(saved, dict):
        problems = []
        for key, value in patch.items():
            here = '%s.%s' % (path, key)
            if key in saved:
                problems += _changes(saved[key], value, here)
            elif value is not None:
                problems.append((here, 'would be added to the driver\'s '
                                       'state: only the driver\'s hooks '
                                       'change it'))
        return problems
    if merge_patch(copy.deepcopy(saved), patch) == saved:
        return []
    return [(path, 'would be changed: it is the driver\'s state, which '
                   'only the driver\'s hooks change')]


def merge_patch(target, patch):
    """``target`` with the JSON merge patch (RFC 7396) ``patch`` applied,
    as Tacker applies a PATCH of metadata."""
    if not isinstance(patch, dict):
        return patch
    target = target if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        else:
            target[key] = merge_patch(target.get(key), value)
    return target


# -- operations the driver does not carry out --------------------------------

def touched_cps(request):
    """(JSON path, cpdId) of each external CP a ChangeExtVnfConnectivity
    or ChangeCurrentVnfPkg request sets up anew: Tacker replaces the port
    of that CP on every VNFC that has it."""
    links = request.get('extVirtualLinks')
    return [('extVirtualLinks[%d].extCps[%d].cpdId' % (index, number),
             cp.get('cpdId'))
            for index, link in enumerate(links if isinstance(links, list)
                                         else ())
            for number, cp in enumerate((link or {}).get('extCps') or ())
            if isinstance(cp, dict)]


def replaced_vdus(request):
    """(JSON path, vdu_id) of the VDUs whose servers a ChangeCurrentVnfPkg
    request (RollingUpdate) replaces."""
    params = request.get('additionalParams') or {}
    vdu_params = params.get('vdu_params') if isinstance(params, dict) \
        else None
    return [('additionalParams.vdu_params[%d].vdu_id' % index,
             item.get('vdu_id'))
            for index, item in enumerate(vdu_params if isinstance(
                vdu_params, list) else ())
            if isinstance(item, dict)]


def vnfc_cps(vnf_instance):
    """(VDU id, CP descriptor ids) of each VNFC of the instance."""
    info = vnf_instance.get('instantiatedVnfInfo') or {}
    return [(vnfc.get('vduId'), tuple(cp.get('cpdId') for cp in
                                      vnfc.get('vnfcCpInfo') or ()))
            for vnfc in info.get('vnfcResourceInfo') or ()]


def check(operation, request, vnf_instance):
    """Refuse the request of a guard hook (feature_hooks.GUARDS) that would
    change the cluster under the driver."""
    request = request or {}
    if operation == 'modify_information_start':
        check_metadata_patch(request, vnf_instance)
        return
    state = (vnf_instance.get('metadata') or {}).get(STATE_KEY)
    root = state.get('params') if isinstance(state, dict) else None
    vnfcs = vnfc_cps(vnf_instance)
    problems = lcm_guards.connection_point_problems(
        touched_cps(request), root, vnfcs)
    if operation == 'change_current_package_start':
        problems += lcm_guards.replaced_vdu_problems(
            replaced_vdus(request), root, vnfcs)
    lcm_guards.refuse(problems)
