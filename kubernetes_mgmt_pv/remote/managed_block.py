"""A marked block of lines that the driver owns inside a system file.

/etc/exports and /etc/fstab are shared with the administrator: the driver
rewrites only the lines between its markers, never appends a second copy,
and leaves the file untouched when the block already says the same.

The file is handled as bytes and split on b'\\n' only: the administrator's
lines come back byte for byte, whatever their encoding (Latin-1 comments),
line ending (CRLF) or control characters (form feeds, which
``str.splitlines`` would treat as line breaks).
"""

import re

from kubernetes_mgmt_pv import exceptions

BEGIN = b'# BEGIN kubernetes-mgmt-pv (managed by Tacker, do not edit)'
END = b'# END kubernetes-mgmt-pv'

# One line with its b'\n' (the file's last line may lack it).
_LINE = re.compile(rb'[^\n]*(?:\n|$)')


def _marker(line, marker):
    """True for a marker line, also when an editor gave it a CRLF ending."""
    return line.rstrip(b'\n').rstrip(b'\r') == marker


def _blocks(content):
    """(start, end) byte offsets of each managed block, markers included."""
    blocks = []
    start = None
    for match in _LINE.finditer(content):
        line = match.group()
        if not line:
            break
        if start is None and _marker(line, BEGIN):
            start = match.start()
        elif start is not None and _marker(line, END):
            blocks.append((start, match.end()))
            start = None
    if start is not None:
        raise ValueError('unterminated managed block (missing %r)'
                         % END.decode())
    return blocks


def with_block(content, lines):
    """``content`` (bytes) with the managed block holding ``lines`` (str).

    The first block is replaced in place and any further copy removed;
    without a block, it is appended. Nothing outside the block changes,
    except that an administrator's last line without a newline gets one
    when the block must follow it.
    """
    block = b''.join(line + b'\n' for line in
                     [BEGIN] + [line.encode('utf-8') for line in lines] +
                     [END])
    blocks = _blocks(content)
    if not blocks:
        if content and not content.endswith(b'\n'):
            content += b'\n'
        return content + block
    parts = [content[:blocks[0][0]], block]
    for (_, end), (next_start, _) in zip(blocks, blocks[1:] + [(None, None)]):
        parts.append(content[end:next_start])
    return b''.join(parts)


def planned_content(path, current, lines):
    """The new content of ``path`` (bytes), or None if its block already
    holds ``lines``. ``current`` is the file's content, None if missing."""
    current = current or b''
    try:
        desired = with_block(current, lines)
    except ValueError as error:
        raise exceptions.StorageSetupError(
            '%s: %s; fix the file by hand' % (path, error))
    return None if desired == current else desired


def ensure_block(executor, path, current, lines):
    """Make the managed block of the remote ``path`` hold ``lines``.

    ``current`` is the file's content as gathered (None: missing). The
    file is replaced atomically and keeps its mode, owner and, if it is a
    symlink, its link. Returns True when the file was rewritten.
    """
    desired = planned_content(path, current, lines)
    if desired is None:
        return False
    executor.install_file(desired, path)
    return True
