"""Offline checks of the LCM request bodies that are not Instantiate ones:
scale, heal, terminate, create and change_vnfpkg.

A body's kind is told by its keys (``kind_of``) or given with
``validate --kind``. Each body is checked against the package where the
package decides (a scale's aspect and steps, a heal's VNFC id shape for
the package's API, a create's VNFD id), and each check that needs the VNF
instance ends in a ``note`` saying what only Tacker can check.
"""

import re

from kubernetes_mgmt_pv.request import lcm_requests
from kubernetes_mgmt_pv.request import param_checks
from kubernetes_mgmt_pv.request import param_model
from kubernetes_mgmt_pv.vnf_package import request_checks
from kubernetes_mgmt_pv.vnf_package import vnfd

KINDS = ('instantiate', 'scale', 'heal', 'terminate', 'create',
         'change_vnfpkg')
# The keys that only one kind of body has (SOL003's request types).
_KEYS = {
    'instantiate': ('flavourId', 'instantiationLevelId'),
    'scale': ('type', 'aspectId', 'numberOfSteps'),
    'heal': ('vnfcInstanceId', 'cause', 'healScript'),
    'terminate': ('terminationType', 'gracefulTerminationTimeout'),
}
# change_vnfpkg names the new package's vnfdId, with what create lacks.
_CHANGE_KEYS = ('additionalParams', 'extVirtualLinks', 'vimConnectionInfo',
                'extManagedVirtualLinks')
# Heal additionalParams the driver or Tacker v2 read; the flat
# ``<role>_<key>`` logins of Tacker's sample driver.
HEAL_FLAGS = ('all', lcm_requests.SKIP_PV_CHECK)
_LOGIN_KEYS = tuple('%s_%s' % (role, key) for role in (
    'master_node', 'worker_node', 'storage_server')
    for key in ('username', 'password', 'ssh_key'))
_UUID = re.compile(r'[0-9a-fA-F]{8}-(?:[0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}')
PLACEHOLDER_UUID = '00000000-0000-0000-0000-000000000000'


def kind_of(request):
    """The kind of ``request`` by its keys; None when no key tells, or
    keys of several kinds are mixed."""
    kinds = {kind for kind, keys in _KEYS.items()
             if any(key in request for key in keys)}
    if 'vnfdId' in request:
        kinds.add('change_vnfpkg' if any(key in request for key in
                                         _CHANGE_KEYS) else 'create')
    flags = request.get('additionalParams')
    if not kinds and isinstance(flags, dict) and any(
            flag in flags for flag in HEAL_FLAGS):
        kinds.add('heal')
    return kinds.pop() if len(kinds) == 1 else None


def unknown_kind(request, found):
    keys = ', '.join(sorted(str(key) for key in request)) or 'none'
    found.error('request-kind-unknown', '$',
                'cannot tell which LCM request this is from its keys (%s): '
                'give validate --kind {%s}' % (keys[:200], ','.join(KINDS)))


def check(package_dir, kind, request, found, key_dir=None):
    """Findings of a body of ``kind`` (not instantiate) on the package;
    with ``key_dir`` (on the conductor host), of the key files a scale's
    or heal's logins name."""
    loaded = vnfd.templates(package_dir, found)
    {'scale': _check_scale, 'heal': _check_heal,
     'terminate': _check_terminate, 'create': _check_vnfd_id,
     'change_vnfpkg': _check_vnfd_id}[kind](loaded, request, found)
    if key_dir is not None and kind in ('scale', 'heal'):
        request_checks.body_key_files(request.get('additionalParams'),
                                      key_dir, found)


def _note(found, where, message):
    found.note('unchecked-offline', where, message)


# -- scale --------------------------------------------------------------------

def _check_scale(loaded, request, found):
    if request.get('type') not in ('SCALE_OUT', 'SCALE_IN'):
        found.error('scale-invalid', 'type',
                    'must be "SCALE_OUT" or "SCALE_IN"')
    steps = request.get('numberOfSteps', 1)
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        found.error('scale-invalid', 'numberOfSteps',
                    'must be a positive integer (default 1)')
        steps = None
    aspect_id = request.get('aspectId')
    known = vnfd.aspects(loaded)
    if not isinstance(aspect_id, str) or aspect_id not in known:
        found.error('scale-aspect-unknown', 'aspectId',
                    '%s is not a scaling aspect of the package (%s)' % (
                        param_checks.shown(aspect_id),
                        ', '.join(sorted(map(str, known))) or 'none'))
        return
    if steps is not None:
        _check_steps(known[aspect_id], aspect_id, steps, found)
    rooms = '; '.join('out %s step(s) and in %s in flavour %s' % (
        _room(aspect, 'SCALE_OUT'), _room(aspect, 'SCALE_IN'),
        aspect.flavour) for aspect in known[aspect_id])
    _note(found, 'numberOfSteps', 'the instance\'s current scale level, '
          'which bounds the steps, is known only to Tacker; from the '
          'default instantiation level %s can scale %s' % (aspect_id, rooms))
    _logins_note(request.get('additionalParams'), found)


def _room(aspect, scale_type):
    """The steps left from the default instantiation level ('?' when the
    VNFD gives no max_scale_level)."""
    top = aspect.max_scale_level
    if not isinstance(top, int) or isinstance(top, bool):
        return '?'
    return (max(top - aspect.default_scale_level, 0)
            if scale_type == 'SCALE_OUT' else aspect.default_scale_level)


def _check_steps(aspects, aspect_id, steps, found):
    """Steps beyond the aspect's max_scale_level fail in Tacker whatever
    the instance's level: an error when they do in every flavour that
    defines the aspect, a warning when only in some."""
    over = [aspect for aspect in aspects
            if isinstance(aspect.max_scale_level, int)
            and steps > aspect.max_scale_level]
    if not over:
        return
    report = found.error if len(over) == len(aspects) else found.warning
    fixed = all(aspect.max_scale_level == 0 for aspect in over)
    report('scale-aspect-fixed' if fixed else 'scale-steps-exceed',
           'aspectId' if fixed else 'numberOfSteps',
           '%s of %s: %s' % (
               'cannot be scaled' if fixed else '%d step(s) exceed the '
               'range' % steps, aspect_id, '; '.join(
                   'max_scale_level %s in flavour %s (%s)' % (
                       aspect.max_scale_level, aspect.flavour, aspect.where)
                   for aspect in over)))


# -- heal ---------------------------------------------------------------------

def _check_heal(loaded, request, found):
    api = vnfd.api(loaded)
    ids = request.get('vnfcInstanceId')
    if ids is not None and not (isinstance(ids, list) and all(
            isinstance(vnfc, str) for vnfc in ids)):
        found.error('heal-invalid', 'vnfcInstanceId',
                    'must be a list of VNFC instance ids')
    elif not ids:
        _note(found, 'vnfcInstanceId', 'none given: the entire VNF is '
              'healed (every VM re-created, the cluster rebuilt); whether '
              'the instance can be healed is known only to Tacker')
    else:
        vdus = vnfd.vdu_names(loaded)
        for index, vnfc in enumerate(ids):
            _check_vnfc_id('vnfcInstanceId[%d]' % index, vnfc, api, vdus,
                           found)
        _note(found, 'vnfcInstanceId', 'whether these are VNFCs of the '
              'instance is known only to Tacker (GET the VNF instance: '
              'instantiatedVnfInfo.%s)' % (
                  'vnfcInfo[].id' if api == 'v2' else
                  'vnfcResourceInfo[].id'))
    if 'cause' in request and not isinstance(request['cause'], str):
        found.error('heal-invalid', 'cause', 'must be a string')
    _check_heal_params(request.get('additionalParams'), api, found)


def _check_vnfc_id(where, vnfc, api, vdus, found):
    """v1 names a VNFC by its vnfcResourceInfo id (a UUID); v2 by its
    vnfcInfo id, by default "<VDU>-<vnfcResourceInfo id>"."""
    if PLACEHOLDER_UUID in vnfc:
        found.warning('vnfc-placeholder', where,
                      'still the sample\'s placeholder: put the id of the '
                      'VNFC to heal')
    if api == 'v1' and not _UUID.fullmatch(vnfc):
        found.error('vnfc-id-shape', where,
                    'Tacker v1 names a VNFC by its vnfcResourceInfo id, a '
                    'UUID; got %s' % param_checks.shown(vnfc))
    elif api == 'v2' and not any(vnfc.startswith(vdu + '-') for vdu in vdus):
        found.warning('vnfc-id-shape', where,
                      'Tacker v2 names a VNFC by its vnfcInfo id, '
                      '"<VDU>-<id>" unless the instance\'s metadata '
                      'VDU_VNFc_mapping renames it; the package\'s VDUs are '
                      '%s; got %s' % (', '.join(vdus) or 'none',
                                      param_checks.shown(vnfc)))


def _check_heal_params(params, api, found):
    if params is None:
        return
    if not isinstance(params, dict):
        found.error('heal-invalid', 'additionalParams', 'must be an object')
        return
    for flag in HEAL_FLAGS:
        value = params.get(flag)
        if value is not None and not isinstance(value, bool):
            found.error('heal-invalid', 'additionalParams.' + flag,
                        'must be a boolean')
    if 'all' in params and api == 'v1':
        found.warning('heal-param-ignored', 'additionalParams.all',
                      'only Tacker v2 reads it; Tacker v1 re-creates the '
                      'healed VNFCs\' volumes anyway')
    known = HEAL_FLAGS + _LOGIN_KEYS + (param_model.ROOT,)
    for key in sorted(str(key) for key in params if key not in known):
        found.warning('heal-param-unknown', 'additionalParams.' + key,
                      'neither the driver nor Tacker\'s heal reads it (they '
                      'read %s)' % ', '.join(HEAL_FLAGS + (param_model.ROOT,
                                                           '<role>_<key>')))
    _logins_note(params, found)


def _logins_note(params, found):
    if isinstance(params, dict) and param_model.ROOT in params:
        _note(found, 'additionalParams.' + param_model.ROOT,
              'whether these logins work on the VMs, and (Tacker v2) whether '
              'the other keys equal the instantiate parameters saved with '
              'the instance, is known only there')


# -- terminate, create, change_vnfpkg -----------------------------------------

def _check_terminate(loaded, request, found):
    kind = request.get('terminationType')
    if kind not in ('FORCEFUL', 'GRACEFUL'):
        found.error('terminate-invalid', 'terminationType',
                    'must be "FORCEFUL" or "GRACEFUL"')
    timeout = request.get('gracefulTerminationTimeout')
    if timeout is not None and (isinstance(timeout, bool) or
                                not isinstance(timeout, int) or timeout < 0):
        found.error('terminate-invalid', 'gracefulTerminationTimeout',
                    'must be a number of seconds')
    elif timeout is not None and kind == 'FORCEFUL':
        found.warning('graceful-timeout-unused',
                      'gracefulTerminationTimeout',
                      'only a GRACEFUL termination waits')
    _note(found, 'terminationType', 'terminate deletes the cluster\'s '
          'Kubernetes VIM and the VNF\'s resources; nothing else about '
          'the instance is checked offline')


def _check_vnfd_id(loaded, request, found):
    ids = vnfd.vnfd_ids(loaded)
    given = request.get('vnfdId')
    package_ids = ', '.join('%s (%s)' % item for item in sorted(ids.items()))
    if not isinstance(given, str):
        found.error('vnfd-id-invalid', 'vnfdId', 'must be the package\'s '
                    'VNFD id, a string: %s' % (package_ids or 'none found'))
    elif ids and given not in ids:
        found.error('vnfd-id-mismatch', 'vnfdId',
                    '%s is not the VNFD id of this package: %s' % (
                        param_checks.shown(given), package_ids))
    _note(found, 'vnfdId', 'whether Tacker has this package onboarded '
          '(GET /vnfpkgm/v1/vnf_packages?filter=(eq,vnfdId,<id>)) is known '
          'only to Tacker')
