"""The decisions of cluster/etcd_snapshot.py, without hosts."""

import datetime

from oslo_config import cfg
import pytest

from kubernetes_mgmt_pv.cluster import etcd_snapshot
from kubernetes_mgmt_pv import config
from kubernetes_mgmt_pv import exceptions
from kubernetes_mgmt_pv.request import param_model


def snap(day, reason='upgrade'):
    return 'etcd-202611%02dT120000Z-%s.db' % (day, reason)


@pytest.mark.parametrize('names, keep, removed', [
    # Fewer than kept: nothing.
    ([], 3, []),
    ([snap(1), snap(2)], 3, []),
    ([snap(1), snap(2), snap(3)], 3, []),
    # The oldest go, by their time, whatever the listing's order.
    ([snap(4), snap(1), snap(3), snap(2)], 3, [snap(1)]),
    ([snap(5), snap(1), snap(3), snap(2), snap(4)], 2,
     [snap(1), snap(2), snap(3)]),
    # Reasons share one count.
    ([snap(1, 'member-removal'), snap(2), snap(3, 'member-removal'),
      snap(4)], 3, [snap(1, 'member-removal')]),
    # Files of other names are never removed, nor counted.
    (['notes.txt', snap(1), '.%s.part' % snap(9), snap(2), 'etcd.db',
      'etcd-2026T1Z-upgrade.db', snap(3) + '.bak', snap(4)], 2, [snap(1)]),
    # At least one stays.
    ([snap(1), snap(2)], 0, [snap(1)]),
    ([snap(1), snap(2)], 1, [snap(1)]),
])
def test_expired(names, keep, removed):
    assert etcd_snapshot.expired(names, keep) == removed


@pytest.mark.parametrize('names, keep, taken, removed', [
    ([snap(1), snap(2), snap(3)], 3, snap(3), []),
    ([snap(1), snap(2), snap(3), snap(4)], 3, snap(4), [snap(1)]),
    ([snap(4), snap(1)], 1, snap(4), [snap(1)]),
    # Others named later than the one just taken (a clock once ahead):
    # it stays all the same, the oldest others go.
    ([snap(1), snap(9), snap(8), snap(2)], 2, snap(2), [snap(1), snap(8)]),
    ([snap(9), snap(2)], 1, snap(2), [snap(9)]),
])
def test_expired_keeps_the_snapshot_just_taken(names, keep, taken, removed):
    assert etcd_snapshot.expired(names, keep, taken) == removed


def test_file_name_carries_the_utc_time_and_the_reason():
    now = datetime.datetime(2026, 11, 28, 23, 25, 1, 999,
                            tzinfo=datetime.timezone.utc)
    name = etcd_snapshot.file_name(now, etcd_snapshot.MEMBER_REMOVAL)
    assert name == 'etcd-20261128T232501Z-member-removal.db'
    assert etcd_snapshot.expired([name], 1) == []
    assert etcd_snapshot.expired([name, snap(1)], 1) == [snap(1)]


def test_parse_saved():
    digest = 'ab' * 32
    assert etcd_snapshot.parse_saved('%s\n%s\nnotes.txt\n' % (
        digest, snap(1))) == (digest, [snap(1), 'notes.txt'])


@pytest.mark.parametrize('output', [
    '', 'Error: context deadline exceeded\n', 'AB' * 32 + '\n',
    'ab' * 31 + '\n', 'ab' * 32 + ' /var/backups/x\n'])
def test_parse_saved_refuses_what_is_no_digest(output):
    with pytest.raises(exceptions.ClusterInstallError, match='SHA-256'):
        etcd_snapshot.parse_saved(output)


def storage(mounts, exports):
    return param_model.StorageServer(
        'storage_cp', 'storage_cp', 'ubuntu',
        volumes=tuple(param_model.VolumeSetup('volume%d' % n, mount)
                      for n, mount in enumerate(mounts)),
        exports=tuple(param_model.NfsExport(export, '10.0.0.0/24')
                      for export in exports))


@pytest.mark.parametrize('mounts, exports, place', [
    # The sample: exports below the volume's top.
    (['/volume'], ['/volume/nfs/pv1', '/volume/nfs/pv2'],
     ('/volume', '/volume/.etcd-snapshots')),
    (['/volume/'], ['/volume/nfs'], ('/volume', '/volume/.etcd-snapshots')),
    # A volume exported whole is passed over.
    (['/v1', '/v2'], ['/v1', '/v2/pv'], ('/v2', '/v2/.etcd-snapshots')),
    (['/v1', '/v2'], ['/v1/', '/v2'], None),
    # An export of the very place, or inside it.
    (['/v1'], ['/v1/.etcd-snapshots'], None),
    (['/v1'], ['/v1/.etcd-snapshots/pv'], None),
    # A similar name is not inside.
    (['/v1'], ['/v1/.etcd-snapshots-pv', '/v10'],
     ('/v1', '/v1/.etcd-snapshots')),
    # No exports yet.
    (['/v1'], [], ('/v1', '/v1/.etcd-snapshots')),
])
def test_storage_directory(mounts, exports, place):
    assert etcd_snapshot.storage_directory(storage(mounts, exports)) == \
        place


SNAPSHOT = etcd_snapshot.Snapshot(
    '10.0.0.11', '/var/backups/etcd-snapshots/' + snap(1), '10.0.0.5',
    '/volume/.etcd-snapshots/' + snap(1))


class Holder(object):
    etcd_snapshot = None


@pytest.mark.parametrize('error', [
    exceptions.StepError('kubeadm upgrade node', '10.0.0.12',
                         exceptions.MgmtDriverError('exit 1')),
    exceptions.NodeStepError('drain', {'10.0.0.13': 'budget'}),
    exceptions.RemoteConnectError('10.0.0.12: no route'),
])
def test_a_failure_after_the_snapshot_names_it(error):
    holder = Holder()
    holder.etcd_snapshot = SNAPSHOT
    with pytest.raises(type(error)) as raised:
        with etcd_snapshot.named_in_errors(holder):
            raise error
    found = exceptions.failure_of(raised.value)
    for text in (str(raised.value), found.reason):
        assert ('etcd snapshot taken before the change: '
                '10.0.0.11:/var/backups/etcd-snapshots/%s, '
                '10.0.0.5:/volume/.etcd-snapshots/%s' % (snap(1), snap(1))
                in text), text
    assert raised.value.etcd_snapshot is SNAPSHOT
    assert SNAPSHOT.fields() == {
        'host': '10.0.0.11', 'path': SNAPSHOT.path, 'copyHost': '10.0.0.5',
        'copyPath': SNAPSHOT.copy_path}


def test_a_failure_before_any_snapshot_is_left_as_it_is():
    error = exceptions.StepError('upgrade check', '10.0.0.11',
                                 exceptions.MgmtDriverError('refused'))
    with pytest.raises(exceptions.StepError) as raised:
        with etcd_snapshot.named_in_errors(Holder()):
            raise error
    assert 'snapshot' not in str(raised.value)
    assert not hasattr(raised.value, 'etcd_snapshot')


def test_three_are_kept_by_default_and_at_least_one():
    conf = cfg.ConfigOpts()
    config.register_opts(conf)
    conf([])
    assert config.options(conf).etcd_snapshot_keep == 3
    with pytest.raises(ValueError):
        conf.set_override('etcd_snapshot_keep', 0, config.GROUP_NAME)
