"""A marked block of lines that the driver owns inside a system file.

/etc/exports and /etc/fstab are shared with the administrator: the driver
rewrites only the lines between its markers, never appends a second copy,
and leaves the file untouched when the block already says the same.
"""

from kubernetes_mgmt_pv import exceptions

BEGIN = '# BEGIN kubernetes-mgmt-pv (managed by Tacker, do not edit)'
END = '# END kubernetes-mgmt-pv'


def with_block(text, lines):
    """``text`` with the managed block replaced by (or extended with) lines."""
    kept = []
    inside = False
    insert_at = None
    for line in text.splitlines():
        if line == BEGIN:
            inside = True
            insert_at = len(kept)
        elif line == END and inside:
            inside = False
        elif not inside:
            kept.append(line)
    if inside:
        raise ValueError('unterminated managed block (missing %r)' % END)
    block = [BEGIN] + list(lines) + [END]
    if insert_at is None:
        insert_at = len(kept)
    result = kept[:insert_at] + block + kept[insert_at:]
    return '\n'.join(result) + '\n'


def ensure_block(executor, path, lines):
    """Make the managed block of the remote ``path`` hold ``lines``.

    Returns True when the file was rewritten.
    """
    current = executor.read_file(path, sudo=True) or ''
    try:
        desired = with_block(current, lines)
    except ValueError as error:
        raise exceptions.StorageSetupError(
            '%s: %s: %s; fix the file by hand' % (executor.host, path, error))
    if desired == current:
        return False
    executor.install_file(desired.encode('utf-8'), path)
    return True
