"""The file_sd files of the auto-heal monitoring, one per VNF instance in
``[kubernetes_mgmt_pv] auto_heal_targets_dir``: looked at first, changed
only where they differ (each change reported), replaced atomically so
that Prometheus never reads half a file.

``<instance id>.json`` is probed; ``<instance id>.json.paused`` holds the
same targets while the instance's isAutohealEnabled is not true (a job
reading ``*.json`` skips it), so a pause and a resume need no lookup.
"""

import os
import stat
import tempfile

from kubernetes_mgmt_pv.autoheal import probes
from kubernetes_mgmt_pv import exceptions

OPTION = '[kubernetes_mgmt_pv] auto_heal_targets_dir'
ACTIVE, PAUSED = '.json', '.json.paused'
# A file_sd file of a large VNF is a few KiB; anything bigger is not ours.
_READ_LIMIT = 1024 * 1024


def file_names(instance_id):
    return {suffix: instance_id + suffix for suffix in (ACTIVE, PAUSED)}


def plan(present, instance_id, content, enabled):
    """(names to remove, name to write or None) that turn ``present``
    ({file name: bytes} of this instance's files) into ``content`` under
    the name ``enabled`` selects; ``content`` None: no file at all."""
    names = file_names(instance_id)
    wanted = None
    if content is not None:
        wanted = names[ACTIVE if enabled else PAUSED]
    remove = sorted(name for name in present if name != wanted)
    write = wanted if wanted and present.get(wanted) != content else None
    return remove, write


def sync(directory, instance_id, content, enabled=True):
    """Bring the instance's file in ``directory`` to ``content`` (None:
    remove it); the changes made, e.g. ["wrote x.json"], [] if none. A
    directory that does not exist holds nothing to remove."""
    if content is None and not os.path.lexists(directory):
        return []
    _check_directory(directory)
    probes.check_id(instance_id, 'VNF instance id')
    present = {}
    for name in file_names(instance_id).values():
        current = _read(os.path.join(directory, name))
        if current is not None:
            present[name] = current
    remove, write = plan(present, instance_id, content, enabled)
    changes = []
    if write:
        _replace(directory, write, content)
        changes.append('wrote ' + write)
    for name in remove:
        os.unlink(os.path.join(directory, name))
        changes.append('removed ' + name)
    return changes


def current(directory, instance_id):
    """The instance's targets, active or paused; None if it has none."""
    _check_directory(directory)
    probes.check_id(instance_id, 'VNF instance id')
    for name in file_names(instance_id).values():
        content = _read(os.path.join(directory, name))
        if content is not None:
            return content
    return None


def _check_directory(directory):
    try:
        mode = os.lstat(directory).st_mode
    except OSError as error:
        raise exceptions.MgmtDriverError(
            '%s %s: %s' % (OPTION, directory, error.strerror))
    if not stat.S_ISDIR(mode):
        raise exceptions.MgmtDriverError(
            '%s %s is not a directory (a symbolic link is refused)'
            % (OPTION, directory))


def _read(path):
    try:
        with open(path, 'rb') as stream:
            return stream.read(_READ_LIMIT)
    except FileNotFoundError:
        return None


def _replace(directory, name, content):
    """Write ``content`` to a new file and rename it over ``name``."""
    handle, temporary = tempfile.mkstemp(dir=directory, prefix='.' + name,
                                         suffix='.tmp')
    try:
        with os.fdopen(handle, 'wb') as stream:
            stream.write(content)
            stream.flush()
            os.fchmod(stream.fileno(), 0o644)  # Prometheus reads it
            os.fsync(stream.fileno())
        os.replace(temporary, os.path.join(directory, name))
    except BaseException:
        try:
            os.unlink(temporary)
        except FileNotFoundError:
            pass
        raise
