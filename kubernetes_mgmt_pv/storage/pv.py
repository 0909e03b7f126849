"""PersistentVolume registration and removal with kubectl on a Master node.

Every function gets a ``flow.MasterKubectl``: kubectl as root with the
cluster admin's kubeconfig against that Master's own API server, as the
cluster steps run it. Waits use ``kubectl wait`` and ``kubectl delete
--wait``: no sleep loops.
"""

import dataclasses

import yaml

from kubernetes_mgmt_pv import exceptions
from kubernetes_mgmt_pv import safe_yaml

AVAILABLE = 'Available'
BOUND = 'Bound'
# Phases a registered PV may legitimately be in; a re-run leaves them alone.
SETTLED = (AVAILABLE, BOUND, 'Released')


def _phase(volume):
    return (volume.get('status') or {}).get('phase')


def _nfs_source(volume):
    nfs = (volume.get('spec') or {}).get('nfs') or {}
    return nfs.get('server'), nfs.get('path')


def live_volumes(kubectl, names, classes=()):
    """The PersistentVolumes among ``names``, and those of the
    StorageClasses ``classes``, that exist, by name."""
    result = kubectl.run(['get', 'persistentvolumes', '-o', 'json'])
    return parse_volume_list(result.stdout, names, classes)


def parse_volume_list(output, names, classes=()):
    """The PVs among ``names``, or of a StorageClass among ``classes``, in
    ``kubectl get persistentvolumes -o json`` output, by name."""
    try:
        listing = safe_yaml.loads_json(output)
    except ValueError:
        listing = None
    items = listing.get('items') if isinstance(listing, dict) else None
    if not isinstance(items, list) or not all(
            isinstance(item, dict) and isinstance(item.get('metadata'), dict)
            for item in items):
        raise exceptions.PersistentVolumeError(
            'kubectl get persistentvolumes -o json did not return a list of '
            'PersistentVolumes')
    wanted, of_classes = set(names), set(classes)
    return {item['metadata'].get('name'): item for item in items
            if item['metadata'].get('name') in wanted or
            isinstance(item.get('spec'), dict) and
            item['spec'].get('storageClassName') in of_classes}


def refuse_if_bound(live, host=None):
    """Fail, naming them, their claims and the Master ``host`` they were
    read on, if any of the ``live`` PVs is Bound to a claim."""
    bound = [name for name, volume in live.items() if _phase(volume) == BOUND]
    if bound:
        claims = (_claim(live[name]) for name in bound)
        raise exceptions.PersistentVolumeInUseError(
            bound, host, [claim for claim in claims if claim])


def _claim(volume):
    """"<namespace>/<name>" of the claim a PV is bound to, or None."""
    ref = (volume.get('spec') or {}).get('claimRef')
    if not isinstance(ref, dict) or not ref.get('name'):
        return None
    return '%s/%s' % (ref.get('namespace') or 'default', ref['name'])


def unchecked_release(error, skip_flag, flag_path):
    """A heal that re-creates the Storage server when the PVs' state could
    not be read (``error``, e.g. every Master is down): it goes on (the
    reason, to warn with) only if the request sets the flag at
    ``flag_path``; otherwise it is refused, naming that way out."""
    reason = exceptions.failure_reason(error)
    if skip_flag:
        return reason
    raise exceptions.PersistentVolumeError(
        '%s. Whether a PersistentVolume of the VNF package is Bound cannot '
        'be checked, and the heal would delete the Storage server\'s data. '
        'To heal anyway (e.g. when every Master is down), set %s to true '
        'in the heal request. Nothing was changed.' % (reason, flag_path))


def delete_volumes(kubectl, names, timeout, report):
    """Delete the PVs that exist among ``names`` and wait until they are
    gone."""
    present = sorted(live_volumes(kubectl, names))
    if not present:
        report.record(kubectl.host, 'delete PersistentVolumes', False)
        return
    result = kubectl.run(
        ['delete', 'persistentvolumes', '--ignore-not-found',
         '--wait=true', '--timeout=%ds' % timeout] + present,
        timeout=timeout + 60, check=False)
    remaining = sorted(live_volumes(kubectl, present))
    if not result.ok:
        raise kubectl.failure('kubectl delete persistentvolumes %s'
                              % ' '.join(present), result)
    if remaining:
        raise exceptions.PersistentVolumeError(
            'PersistentVolume(s) %s still exist %ds after deletion'
            % (', '.join(remaining), timeout))
    report.record(kubectl.host, 'delete PersistentVolumes', True,
                  ', '.join(present))


@dataclasses.dataclass(frozen=True)
class RegistrationPlan(object):
    """What registering the manifests must do, decided from the live PVs."""
    recreate: tuple = ()  # names
    apply: tuple = ()  # (manifest, document)
    unchanged: tuple = ()  # (name, phase)
    waiting: tuple = ()  # names

    @property
    def changes(self):
        return bool(self.recreate or self.apply)


def plan_registration(manifests, servers, live):
    """Decide, from the ``live`` PVs by name, what registration does.

    ``servers`` maps each nfs_server_cp to its address. A PV whose NFS
    source must change is re-created (the source is immutable) unless it
    is Bound: then registration is refused. A PV is applied when it is
    missing, re-created or lacks a field of its manifest; a live PV that
    is in no settled phase is waited for.
    """
    recreate = tuple(manifest.name for manifest in manifests
                     if _source_changes(manifest, servers, live))
    apply, unchanged = [], []
    for manifest in manifests:
        rendered = manifest.rendered(servers[manifest.nfs_server_cp])
        volume = live.get(manifest.name)
        if manifest.name in recreate or volume is None or \
                not _contains(volume, rendered):
            apply.append((manifest, rendered))
        else:
            unchanged.append((manifest.name, _phase(volume)))
    return RegistrationPlan(
        recreate=recreate, apply=tuple(apply), unchanged=tuple(unchanged),
        waiting=tuple(sorted(name for name, volume in live.items()
                             if name not in recreate and
                             _phase(volume) not in SETTLED)))


def _source_changes(manifest, servers, live):
    """True when the live PV's NFS source differs from the manifest's;
    refused when that PV is Bound."""
    volume = live.get(manifest.name)
    desired = (servers[manifest.nfs_server_cp], manifest.nfs_path)
    if volume is None or _nfs_source(volume) == desired:
        return False
    if _phase(volume) == BOUND:
        raise exceptions.PersistentVolumeError(
            'PersistentVolume %s is Bound but points at %s:%s instead of '
            '%s:%s; release its claim first' % (
                (manifest.name,) + _nfs_source(volume) + desired))
    return True


def register_volumes(kubectl, manifests, servers, timeout, report):
    """Apply the manifests with their real NFS server and wait for Available.

    ``servers`` maps each nfs_server_cp to its address; what to do is
    ``plan_registration``'s decision. PVs created here that do not become
    Available in time are deleted again and named in the error.
    """
    live = live_volumes(kubectl, [manifest.name for manifest in manifests])
    plan = plan_registration(manifests, servers, live)
    if plan.recreate:
        delete_volumes(kubectl, list(plan.recreate), timeout, report)
    for name, phase in plan.unchanged:
        report.record(kubectl.host, 'PersistentVolume %s' % name, False,
                      phase)
    created = _apply(kubectl, plan.apply, report) if plan.apply else []
    waiting = sorted(set(created) | set(plan.waiting))
    if waiting:
        _wait_available(kubectl, waiting, created, timeout)


def _contains(live, desired):
    """True if every field the manifest sets has that value in the live
    object (the API server adds defaults and status, which do not count)."""
    if isinstance(desired, dict):
        return isinstance(live, dict) and all(
            key in live and _contains(live[key], value)
            for key, value in desired.items())
    return live == desired


def _apply(kubectl, outdated, report):
    """kubectl apply (manifest, document) pairs in one call; return the
    names it created.

    The manifests reach kubectl on its standard input, as one multi-document
    YAML stream: nothing is written on the Master.
    """
    stream = yaml.safe_dump_all([document for _, document in outdated],
                                default_flow_style=False, sort_keys=False)
    output = kubectl.run(['apply', '-f', '-'],
                         stdin=stream.encode('utf-8')).stdout
    actions = {}
    for line in output.split('\n'):  # "persistentvolume/<name> <action>"
        resource, _, action = line.strip().partition(' ')
        actions[resource.rpartition('/')[2]] = action.strip()
    for manifest, _ in outdated:
        action = actions.get(manifest.name, '')
        report.record(kubectl.host, 'PersistentVolume %s' % manifest.name,
                      action != 'unchanged', action)
    return [name for name, action in actions.items() if action == 'created']


def _wait_available(kubectl, names, created, timeout):
    result = kubectl.run(
        ['wait', '--for=jsonpath={.status.phase}=%s' % AVAILABLE,
         '--timeout=%ds' % timeout] +
        ['persistentvolume/%s' % name for name in names],
        timeout=timeout + 60, check=False)
    if result.ok:
        return
    live = live_volumes(kubectl, names)
    failed, rollback = plan_rollback(names, created, live)
    if not failed:
        return
    states = ', '.join('%s (%s)' % item for item in sorted(failed.items()))
    if 'timed out waiting' in result.stderr:
        message = ('PersistentVolume(s) did not become Available within '
                   '%ds: %s' % (timeout, states))
    else:  # kubectl itself failed: say why, not "timed out"
        message = '%s; not Available: %s' % (
            kubectl.failure('kubectl wait', result), states)
    if rollback:
        message += '; ' + _roll_back(kubectl, rollback)
    raise exceptions.PersistentVolumeError(message)


def plan_rollback(names, created, live):
    """After a failed wait: ``{name: phase or 'missing'}`` of the PVs that
    are not Available, and the sorted names among them to delete again.

    Only PVs this run created and that still exist are rolled back: a PV
    that existed before belongs to an earlier, successful run.
    """
    failed = {name: _phase(live.get(name, {})) or 'missing'
              for name in names if _phase(live.get(name, {})) != AVAILABLE}
    rollback = sorted(name for name in failed if name in created and
                      name in live)
    return failed, rollback


def _roll_back(kubectl, names):
    """Delete the PVs this run created; say how that went, never raise:
    the error that caused the rollback is the one to report."""
    try:
        kubectl.run(['delete', 'persistentvolumes', '--ignore-not-found',
                     '--wait=false'] + names)
    except exceptions.MgmtDriverError as error:
        return 'rollback of %s failed: %s' % (
            ' '.join(names), exceptions.failure_reason(error, kubectl.host))
    return 'rolled back: %s' % ' '.join(names)
