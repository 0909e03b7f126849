"""PersistentVolume registration and removal with kubectl on a Master node.

kubectl runs as the login user of the Master (its ~/.kube/config). Waits
use ``kubectl wait`` and ``kubectl delete --wait``: no sleep loops.
"""

import json
import shlex

import yaml

from kubernetes_mgmt_pv import exceptions

AVAILABLE = 'Available'
BOUND = 'Bound'
# Phases a registered PV may legitimately be in; a re-run leaves them alone.
SETTLED = (AVAILABLE, BOUND, 'Released')


def _phase(volume):
    return (volume.get('status') or {}).get('phase')


def _nfs_source(volume):
    nfs = (volume.get('spec') or {}).get('nfs') or {}
    return nfs.get('server'), nfs.get('path')


def live_volumes(executor, names):
    """The PersistentVolumes among ``names`` that exist, by name."""
    result = executor.run(['kubectl', 'get', 'persistentvolumes', '-o',
                           'json'])
    try:
        items = json.loads(result.stdout).get('items') or []
    except ValueError:
        raise exceptions.PersistentVolumeError(
            '%s: kubectl get persistentvolumes did not return JSON'
            % executor.host)
    wanted = set(names)
    return {item['metadata']['name']: item for item in items
            if item.get('metadata', {}).get('name') in wanted}


def ensure_not_bound(executor, names):
    """Fail, naming them, if any of the PVs is Bound to a claim."""
    live = live_volumes(executor, names)
    bound = [name for name, volume in live.items() if _phase(volume) == BOUND]
    if bound:
        raise exceptions.PersistentVolumeInUseError(bound)
    return live


def delete_volumes(executor, names, timeout, report):
    """Delete the PVs that exist among ``names`` and wait until they are gone."""
    present = sorted(live_volumes(executor, names))
    if not present:
        report.record(executor.host, 'delete PersistentVolumes', False)
        return
    result = executor.run(
        ['kubectl', 'delete', 'persistentvolumes', '--ignore-not-found',
         '--wait=true', '--timeout=%ds' % timeout] + present,
        timeout=timeout + 60, check=False)
    remaining = sorted(live_volumes(executor, present))
    if remaining or not result.ok:
        raise exceptions.PersistentVolumeError(
            '%s: PersistentVolume(s) %s still exist %ds after deletion: %s' % (
                executor.host, ', '.join(remaining or present), timeout,
                (result.stderr or result.stdout).strip()))
    report.record(executor.host, 'delete PersistentVolumes', True,
                  ', '.join(present))


def register_volumes(executor, manifests, servers, timeout, report):
    """Apply the manifests with their real NFS server and wait for Available.

    ``servers`` maps each nfs_server_cp to its address. A PV whose NFS
    source must change is re-created (the source is immutable) unless it is
    Bound. PVs created here that do not become Available in time are
    deleted again and named in the error.
    """
    live = live_volumes(executor, [m.name for m in manifests])
    stale = []
    for manifest in manifests:
        volume = live.get(manifest.name)
        desired = (servers[manifest.nfs_server_cp], manifest.nfs_path)
        if volume is not None and _nfs_source(volume) != desired:
            if _phase(volume) == BOUND:
                raise exceptions.PersistentVolumeError(
                    '%s: PersistentVolume %s is Bound but points at %s:%s '
                    'instead of %s:%s; release its claim first' % (
                        (executor.host, manifest.name) + _nfs_source(volume)
                        + desired))
            stale.append(manifest.name)
    if stale:
        delete_volumes(executor, stale, timeout, report)
    outdated = []
    for manifest in manifests:
        rendered = manifest.rendered(servers[manifest.nfs_server_cp])
        volume = live.get(manifest.name)
        if manifest.name in stale or volume is None or \
                not _contains(volume, rendered):
            outdated.append((manifest, rendered))
        else:
            report.record(executor.host, 'PersistentVolume %s'
                          % manifest.name, False, _phase(volume))
    created = _apply(executor, outdated, report) if outdated else []
    waiting = sorted(set(created) | {
        name for name, volume in live.items()
        if name not in stale and _phase(volume) not in SETTLED})
    if waiting:
        _wait_available(executor, waiting, created, timeout)


def _contains(live, desired):
    """True if every field the manifest sets has that value in the live
    object (the API server adds defaults and status, which do not count)."""
    if isinstance(desired, dict):
        return isinstance(live, dict) and all(
            key in live and _contains(live[key], value)
            for key, value in desired.items())
    return live == desired


def _apply(executor, outdated, report):
    """kubectl apply (manifest, document) pairs in one call; return the
    names it created.

    The manifests go to a private temporary directory on the Master, which
    is removed whatever happens.
    """
    staging = executor.make_private_dir()
    try:
        for manifest, document in outdated:
            text = yaml.safe_dump(document, default_flow_style=False,
                                  sort_keys=False)
            executor.upload(text.encode('utf-8'),
                            '%s/%s.yaml' % (staging, manifest.name))
        output = executor.run(['kubectl', 'apply', '-f', staging]).stdout
    finally:
        executor.run(['rm', '-rf', '--', staging], check=False)
    actions = {}
    for line in output.splitlines():  # "persistentvolume/<name> <action>"
        resource, _, action = line.strip().partition(' ')
        actions[resource.rpartition('/')[2]] = action.strip()
    for manifest, _ in outdated:
        action = actions.get(manifest.name, '')
        report.record(executor.host, 'PersistentVolume %s' % manifest.name,
                      action != 'unchanged', action)
    return [name for name, action in actions.items() if action == 'created']


def _wait_available(executor, names, created, timeout):
    result = executor.run(
        ['kubectl', 'wait', '--for=jsonpath={.status.phase}=%s' % AVAILABLE,
         '--timeout=%ds' % timeout] +
        ['persistentvolume/%s' % name for name in names],
        timeout=timeout + 60, check=False)
    if result.ok:
        return
    live = live_volumes(executor, names)
    failed = {name: _phase(live.get(name, {})) or 'missing'
              for name in names if _phase(live.get(name, {})) != AVAILABLE}
    if not failed:
        return
    rollback = sorted(name for name in failed if name in created and
                      name in live)
    if rollback:
        executor.run(['kubectl', 'delete', 'persistentvolumes',
                      '--ignore-not-found', '--wait=false'] + rollback,
                     check=False)
    raise exceptions.PersistentVolumeError(
        '%s: PersistentVolume(s) did not become Available within %ds: %s%s' % (
            executor.host, timeout,
            ', '.join('%s (%s)' % item for item in sorted(failed.items())),
            '; rolled back: %s' % ' '.join(map(shlex.quote, rollback))
            if rollback else ''))
