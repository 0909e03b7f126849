import pytest

from kubernetes_mgmt_pv import managed_block

ADMIN = '/srv/admin 192.168.0.0/24(ro)\n'


def test_block_is_appended_once_and_then_replaced():
    first = managed_block.with_block(ADMIN, ['/a 10.0.0.0/24(rw)'])
    assert first.startswith(ADMIN)
    assert first.count(managed_block.BEGIN) == 1
    assert managed_block.with_block(first, ['/a 10.0.0.0/24(rw)']) == first
    second = managed_block.with_block(first, ['/b 10.0.0.0/24(rw)'])
    assert '/a ' not in second and '/b 10.0.0.0/24(rw)' in second
    assert second.count(managed_block.BEGIN) == 1
    assert second.startswith(ADMIN)


def test_lines_after_the_block_are_kept_in_place():
    text = managed_block.with_block(ADMIN, ['/a x(rw)']) + '/later y(ro)\n'
    updated = managed_block.with_block(text, ['/b x(rw)'])
    assert updated.splitlines() == [
        ADMIN.strip(), managed_block.BEGIN, '/b x(rw)', managed_block.END,
        '/later y(ro)']


def test_empty_file_gets_just_the_block():
    assert managed_block.with_block('', []) == '%s\n%s\n' % (
        managed_block.BEGIN, managed_block.END)


def test_unterminated_block_is_refused():
    with pytest.raises(ValueError):
        managed_block.with_block(managed_block.BEGIN + '\n/a x\n', [])
