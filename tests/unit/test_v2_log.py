"""The Tacker v2 hook log: where it goes, and which files are refused."""

import os
import stat

import pytest

from kubernetes_mgmt_pv.doors import tacker_v2

OTHER_UID = 65534  # nobody


@pytest.mark.parametrize('configured, log_dir, state_path, expected', [
    ('/srv/v2.log', '/var/log/tacker', '/var/lib/tacker', '/srv/v2.log'),
    (None, '/var/log/tacker', '/opt/stack/data/tacker',
     '/var/log/tacker/kubernetes-mgmt-pv-v2.log'),
    ('', None, '/opt/stack/data/tacker',
     '/opt/stack/data/tacker/kubernetes-mgmt-pv-v2.log'),
    (None, None, None, '/var/lib/tacker/kubernetes-mgmt-pv-v2.log'),
])
def test_log_path(configured, log_dir, state_path, expected):
    assert tacker_v2.log_path(configured, log_dir, state_path) == expected


def test_a_new_log_and_its_directories_are_private(tmp_path):
    path = tmp_path / 'a' / 'b' / 'v2.log'
    os.close(tacker_v2.open_log(str(path)))
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    for directory in (tmp_path / 'a', tmp_path / 'a' / 'b'):
        assert stat.S_IMODE(directory.stat().st_mode) == 0o700


def test_an_existing_log_is_made_private_and_appended_to(tmp_path):
    path = tmp_path / 'v2.log'
    path.write_text('earlier\n')
    path.chmod(0o644)
    fd = tacker_v2.open_log(str(path))
    os.write(fd, b'later\n')
    os.close(fd)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert path.read_text() == 'earlier\nlater\n'


def _symlink(tmp_path):
    target = tmp_path / 'target'
    target.write_text('')
    (tmp_path / 'v2.log').symlink_to(target)


def _fifo(tmp_path):
    os.mkfifo(str(tmp_path / 'v2.log'))


def _directory(tmp_path):
    (tmp_path / 'v2.log').mkdir()


def _other_users(tmp_path):
    if os.geteuid() != 0:
        pytest.skip('chown to another user needs root')
    path = tmp_path / 'v2.log'
    path.write_text('')
    os.chown(str(path), OTHER_UID, OTHER_UID)


@pytest.mark.parametrize('make, reason', [
    (_symlink, 'it is a symbolic link'),
    (_fifo, 'it is not a regular file'),
    (_directory, 'Is a directory'),
    (_other_users, 'it belongs to uid %d' % OTHER_UID),
])
def test_refused_logs(tmp_path, make, reason):
    make(tmp_path)
    path = str(tmp_path / 'v2.log')
    before = os.lstat(path)
    with pytest.raises(tacker_v2.LogFileError) as caught:
        os.close(tacker_v2.open_log(path))
    assert str(caught.value).startswith(
        'the log file %s cannot be written: %s' % (path, reason))
    assert 'v2_log_file' in str(caught.value)
    after = os.lstat(path)
    assert (after.st_mode, after.st_uid) == (before.st_mode, before.st_uid)
    assert tacker_v2.log_problem(path) is not None
    if make is _symlink:
        assert (tmp_path / 'target').read_text() == ''


def test_log_problem_changes_nothing(tmp_path):
    assert tacker_v2.log_problem(str(tmp_path / 'new' / 'v2.log')) is None
    assert not (tmp_path / 'new').exists()
    (tmp_path / 'file').write_text('')
    assert tacker_v2.log_problem(str(tmp_path / 'file' / 'v2.log')) \
        is not None
    (tmp_path / 'ok.log').write_text('')
    assert tacker_v2.log_problem(str(tmp_path / 'ok.log')) is None
