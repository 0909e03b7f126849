"""Whether a new VNF package keeps the PersistentVolumes that Bound
claims use (Tacker v2's ChangeCurrentVnfPackage): the old package's PVs
are in the cluster; a claim bound to one that the new package drops, or
points at another NFS export, would lose its data on the next heal or
scale that registers the new package's PVs.

Pure functions of the manifests (``manifests.PvManifest``) and the
cluster's ``kubectl get persistentvolumes -o json`` items.
"""

BOUND = 'Bound'


def orphaned_claims(old_manifests, new_manifests, live):
    """(PV name, claim, reason) of each Bound claim the new package would
    orphan, sorted by PV name.

    ``old_manifests``/``new_manifests``: the PvManifests of the old and the
    new package; ``live``: the cluster's PVs by name. Only the old
    package's PVs count: a PV the driver did not register is no package's
    concern.
    """
    new = {manifest.name: manifest for manifest in new_manifests}
    found = []
    for old in sorted(old_manifests, key=lambda manifest: manifest.name):
        volume = live.get(old.name)
        if volume is None or (volume.get('status') or {}).get(
                'phase') != BOUND:
            continue
        claim = _claim(volume)
        kept = new.get(old.name)
        if kept is None:
            found.append((old.name, claim, 'the new package has no '
                          'PersistentVolume %s' % old.name))
        elif (kept.nfs_path, kept.nfs_server_cp) != \
                (old.nfs_path, old.nfs_server_cp):
            found.append((old.name, claim, 'the new package moves it from '
                          '%s:%s to %s:%s' % (
                              old.nfs_server_cp, old.nfs_path,
                              kept.nfs_server_cp, kept.nfs_path)))
    return found


def _claim(volume):
    ref = (volume.get('spec') or {}).get('claimRef') or {}
    return '%s/%s' % (ref.get('namespace') or 'default',
                      ref.get('name') or '?')


def refusal(orphaned):
    """The error message refusing a package change, or None."""
    if not orphaned:
        return None
    return ('the new VNF package would orphan Bound claims: %s; nothing '
            'was changed' % '; '.join(
                'PersistentVolume %s (bound to %s): %s' % item
                for item in orphaned))
