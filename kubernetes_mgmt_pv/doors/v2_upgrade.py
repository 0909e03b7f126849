"""Tacker v2's ChangeCurrentVnfPackage as the cluster's Kubernetes minor
upgrade (``cluster.upgrade``).

What Tacker 16 does (conductor_v2 and vnflcm_driver_v2): for
CHANGE_VNFPKG the conductor loads the NEW package's VNFD (the request's
``vnfdId``), so every hook of the operation runs the new package's
script with ``tmp_csar_dir`` the new package: ``change_current_package_
start``, then the infra driver's change_vnfpkg (OpenStack: a stack update
with the new package's HOT and parameters; servers are replaced only for
the ``vdu_params`` VDUs, which v2_guards refuses for the cluster's), then
``change_current_package_end``. The pickled dict holds the request
(``vnfdId``, ``additionalParams``), the instance (``vnfdId`` the old
package at _start, the new one at _end, set by change_vnfpkg_process) and
no old VNFD: the old package is read from Tacker's package store by the
instance's ``vnfdId``. A rollback (``change_current_package_rollback_
start``/``_end``, the new package's script again, the request and the
failed operation's user_script_err_handling_data) comes before and after
Tacker's stack update back to the old package; the instance is then
still on the old ``vnfdId`` (Tacker saved nothing of the failed
operation).

So: _start checks (guards, the upgrade's refusals without change, the
PVs the new package keeps); _end upgrades the nodes, then refreshes the
Kubernetes VIM's CA and token if they changed; the rollback changes no
node (kubeadm has no downgrade) and says which version they stay at.
Without the cluster feature (no ``script_path``: the driver only adds
PVs to a cluster it did not install) there is nothing to upgrade: _start
and _end check the new package's PV manifests, which later heals use.
"""

import logging

from kubernetes_mgmt_pv.cluster import cluster_feature
from kubernetes_mgmt_pv.cluster import upgrade
from kubernetes_mgmt_pv.cluster import upgrade_plan
from kubernetes_mgmt_pv import exceptions
from kubernetes_mgmt_pv.request import lcm_requests
from kubernetes_mgmt_pv.request import param_model
from kubernetes_mgmt_pv.storage import manifests
from kubernetes_mgmt_pv.storage import package_change
from kubernetes_mgmt_pv.storage import pv

LOG = logging.getLogger(__name__)

START = 'change_current_package_start'
END = 'change_current_package_end'
ROLLBACK = 'change_current_package_rollback_start'
HOOKS = (START, END, ROLLBACK)
# The door's record of the upgrade in user_script_err_handling_data.
UPGRADE_KEY = 'upgrade'
PV_STEP = 'PersistentVolume check'
# What a hook of the package change does (hook_action).
CHECK, UPGRADE, ROLL_BACK = 'check', 'upgrade', 'roll back'
CHECK_VOLUMES, NOTHING = 'check volumes', 'nothing'


def hook_action(operation, root):
    """What the hook ``operation`` does with the parameters in effect
    ``root``: the cluster's upgrade needs its install script
    (``script_path``); without it, only the new package's PV manifests
    are checked, and a rollback has nothing to undo."""
    cluster = isinstance(root, dict) and root.get('script_path') is not None
    if operation == ROLLBACK:
        return ROLL_BACK if cluster else NOTHING
    if not cluster:
        return CHECK_VOLUMES
    return CHECK if operation == START else UPGRADE


def rollback_note(target):
    """What a rollback of the package change does to the nodes."""
    return ('a rollback puts the VNF instance back on its old package; '
            'the nodes already upgraded stay at %s (kubeadm does not '
            'downgrade a cluster), and a Worker the upgrade cordoned (Node '
            'annotation %s) stays cordoned; a new change_vnfpkg to this '
            'package completes the upgrade and uncordons it' % (
                target, upgrade_plan.CORDON_ANNOTATION))


def drain_force(request_dict):
    """The request's ``additionalParams.drain_force``, or None (the
    driver's option)."""
    params = (request_dict or {}).get('additionalParams') or {}
    value = params.get('drain_force')
    if value is not None and not isinstance(value, bool):
        raise exceptions.ParameterErrors([exceptions.ParameterError(
            'additionalParams.drain_force', 'must be true or false')])
    return value


def run(operation, driver, script_dict, model_instance, root, progress):
    """The hook ``operation`` of a package change; returns the upgrade
    plan (None for the rollback)."""
    request_dict = script_dict.get('request') or {}
    action = hook_action(operation, root)
    if action in (ROLL_BACK, NOTHING):
        _roll_back(script_dict, progress, action)
        return None
    params = param_model.parse({param_model.ROOT: root})
    if action == CHECK_VOLUMES:
        _check_new_volumes(operation, script_dict, params)
        return None
    workflow = driver.cluster.upgrade_workflow(model_instance, params)
    new_script = cluster_feature.read_package_file(
        driver.vnf_package_dir(None, model_instance), params.script_path,
        upgrade.SCRIPT_PATH_PARAM)
    force = drain_force(request_dict)
    waves = lcm_requests.request_max_unavailable(
        request_dict.get('additionalParams'))
    target = upgrade_plan.script_package_version(new_script)
    progress[UPGRADE_KEY] = {'to': target, 'rollback': rollback_note(
        upgrade_plan.shown(upgrade_plan.parse_version(target))
        if target else 'the new version')}
    if action == CHECK:
        plan, _ = upgrade.upgrade_cluster(workflow, new_script, force,
                                          check_only=True,
                                          max_unavailable=waves)
        _check_volumes(driver, workflow, script_dict, params)
    else:
        plan = _upgrade(workflow, new_script, force, waves, progress)
        driver.register_vim(None, model_instance, cluster_feature.vim_name(
            params, model_instance), workflow.vim_access())
    progress[UPGRADE_KEY]['from'] = upgrade_plan.shown(plan.cluster_version)
    return plan


def _upgrade(workflow, new_script, force, waves, progress):
    """The upgrade's plan; a failure after the etcd snapshot was taken
    leaves where it is in the record (userScriptErrHandlingData)."""
    try:
        return upgrade.upgrade_cluster(workflow, new_script, force,
                                       max_unavailable=waves)[0]
    except exceptions.MgmtDriverError as error:
        snapshot = getattr(error, 'etcd_snapshot', None)
        if snapshot is not None:
            progress[UPGRADE_KEY]['etcdSnapshot'] = snapshot.fields()
        raise


def _check_volumes(driver, workflow, script_dict, params):
    """Refuse a new package that drops or moves a PV a claim is bound
    to; before any change."""
    if not params.pv_registrations:
        return
    new = manifests.load(script_dict['tmp_csar_dir'],
                         params.pv_registrations)
    old_dir = driver.package_dir_of(script_dict['vnf_instance'].get(
        'vnfdId'))
    old = manifests.load(old_dir, params.pv_registrations)
    with workflow.sessions() as sessions:
        kubectl = workflow.kubectl_session(
            sessions, workflow.topology.masters, PV_STEP)
        live = pv.live_volumes(kubectl, [manifest.name for manifest in old])
    problem = package_change.refusal(
        package_change.orphaned_claims(old, new, live))
    if problem:
        raise exceptions.StepError(PV_STEP, kubectl.host,
                                   exceptions.MgmtDriverError(problem))


def _check_new_volumes(operation, script_dict, params):
    """No cluster feature: the new package's PV manifests, read as the PV
    feature reads them (ParameterErrors naming each bad one); no node is
    upgraded."""
    loaded = manifests.load(script_dict['tmp_csar_dir'],
                            params.pv_registrations)
    LOG.info('%s of VNF instance %s: nothing upgraded (no script_path: the '
             'driver did not install the cluster); the new package\'s %d '
             'PersistentVolume manifest(s) are valid', operation,
             (script_dict.get('vnf_instance') or {}).get('id'), len(loaded))


def _roll_back(script_dict, progress, action):
    """Nothing on the nodes: log what stays as it is."""
    instance_id = (script_dict.get('vnf_instance') or {}).get('id')
    if action == NOTHING:
        LOG.info('change_current_package rollback of VNF instance %s: the '
                 'driver upgraded nothing (no script_path), nothing to roll '
                 'back', instance_id)
        return
    record = progress.get(UPGRADE_KEY) or {}
    LOG.warning(
        'change_current_package rollback of VNF instance %s: no node is '
        'changed; %s (the cluster was at %s before)', instance_id,
        record.get('rollback') or rollback_note('the new version'),
        record.get('from') or 'the old version')
