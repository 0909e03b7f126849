"""The managed block inside /etc/exports and /etc/fstab: the administrator's
bytes outside it are kept exactly, whatever they are."""

import pytest

from kubernetes_mgmt_pv import exceptions
from kubernetes_mgmt_pv.remote import managed_block

BEGIN = managed_block.BEGIN + b'\n'
END = managed_block.END + b'\n'
LINES = ['/v/a 10.0.0.0/24(rw)', '/v/b 10.0.0.0/24(rw)']
BLOCK = BEGIN + b'/v/a 10.0.0.0/24(rw)\n/v/b 10.0.0.0/24(rw)\n' + END
STALE = BEGIN + b'/old 10.9.0.0/24(rw)\n' + END


@pytest.mark.parametrize('before, after', [
    # No block yet: appended after the administrator's lines.
    (b'', BLOCK),
    (b'/srv 192.168.0.0/24(ro)\n', b'/srv 192.168.0.0/24(ro)\n' + BLOCK),
    (b'\n\n', b'\n\n' + BLOCK),
    # CRLF lines keep their CR; the block itself uses LF.
    (b'# admin\r\n/srv x(ro)\r\n', b'# admin\r\n/srv x(ro)\r\n' + BLOCK),
    # Latin-1 (not UTF-8) bytes.
    (b'# r\xe9serv\xe9 \xe0 l\'admin\n', b'# r\xe9serv\xe9 \xe0 l\'admin\n'
     + BLOCK),
    # Characters str.splitlines() takes for line breaks are no line breaks.
    (b'# a\x0cb\x1cc\x1dd\x1ee\x85f\rg\x0bh\n',
     b'# a\x0cb\x1cc\x1dd\x1ee\x85f\rg\x0bh\n' + BLOCK),
    (b'\x0c\n', b'\x0c\n' + BLOCK),
    # A last line without newline gets one, or the block would join it.
    (b'/srv x(ro)', b'/srv x(ro)\n' + BLOCK),
    (b'/srv x(ro)\r', b'/srv x(ro)\r\n' + BLOCK),
    # A block is replaced where it is; lines around it stay as they were,
    # including a missing final newline after it.
    (b'# head\r\n' + STALE + b'/tail x(ro)',
     b'# head\r\n' + BLOCK + b'/tail x(ro)'),
    (STALE + b'\xff\xfe\x0c\n', BLOCK + b'\xff\xfe\x0c\n'),
    (b'# head\n' + BLOCK, b'# head\n' + BLOCK),
    # Markers an editor saved with CRLF are still the markers.
    (b'# head\n' + managed_block.BEGIN + b'\r\n/old y\r\n' +
     managed_block.END + b'\r\n# tail\n', b'# head\n' + BLOCK + b'# tail\n'),
    # The END marker as the last line without newline.
    (b'# head\n' + STALE[:-1], b'# head\n' + BLOCK),
    # A second copy of the block (hand-edited file) is removed.
    (STALE + b'# middle\n' + STALE + b'# tail',
     BLOCK + b'# middle\n' + b'# tail'),
    # An END marker without BEGIN is an administrator's line.
    (END + b'# x\n', END + b'# x\n' + BLOCK),
], ids=lambda value: repr(value)[:40])
def test_only_the_block_changes(before, after):
    assert managed_block.with_block(before, LINES) == after
    # Idempotent: a second run finds nothing to change.
    assert managed_block.with_block(after, LINES) == after


def test_empty_block_keeps_its_markers():
    assert managed_block.with_block(b'', []) == BEGIN + END


@pytest.mark.parametrize('content', [
    BEGIN + b'/a x\n',
    b'# head\n' + BLOCK + BEGIN,
])
def test_unterminated_block_is_refused(content):
    with pytest.raises(ValueError, match='unterminated'):
        managed_block.with_block(content, LINES)


class _FakeExecutor(object):
    """install_file of the remote executor, on a dict."""

    host = '10.0.0.5'

    def __init__(self):
        self.files = {}

    def install_file(self, data, path, **kwargs):
        self.files[path] = data


def test_ensure_block_writes_only_when_the_block_differs():
    executor = _FakeExecutor()
    assert managed_block.ensure_block(executor, '/etc/exports',
                                      b'# admin\r\n\xe9', LINES)
    assert executor.files == {'/etc/exports': b'# admin\r\n\xe9\n' + BLOCK}
    executor.files.clear()
    assert not managed_block.ensure_block(
        executor, '/etc/exports', b'# admin\r\n\xe9\n' + BLOCK, LINES)
    assert executor.files == {}


def test_ensure_block_creates_a_missing_file():
    executor = _FakeExecutor()
    assert managed_block.ensure_block(executor, '/etc/exports', None, LINES)
    assert executor.files['/etc/exports'] == BLOCK


def test_unterminated_block_is_refused_naming_the_file():
    with pytest.raises(exceptions.StorageSetupError,
                       match='^/etc/fstab: unterminated managed block'):
        managed_block.planned_content('/etc/fstab', BEGIN, LINES)
