"""PersistentVolume registration decided from the live PVs, as tables."""

import json

import pytest

from kubernetes_mgmt_pv import exceptions
from kubernetes_mgmt_pv.storage import manifests
from kubernetes_mgmt_pv.storage import pv

SERVERS = {'storage_cp': '10.0.0.5'}


def manifest(name='nfs-pv1', path='/volume1/nfs/pv1', capacity='1Gi'):
    return manifests.PvManifest(name, path, 'storage_cp', {
        'apiVersion': 'v1', 'kind': 'PersistentVolume',
        'metadata': {'name': name},
        'spec': {'capacity': {'storage': capacity},
                 'accessModes': ['ReadWriteOnce'],
                 'nfs': {'server': None, 'path': path}}})


def live(name='nfs-pv1', phase='Available', server='10.0.0.5',
         path='/volume1/nfs/pv1', capacity='1Gi'):
    """A PV as the API server returns it: defaults and status added."""
    return {'apiVersion': 'v1', 'kind': 'PersistentVolume',
            'metadata': {'name': name, 'uid': 'a1b2'},
            'spec': {'capacity': {'storage': capacity},
                     'accessModes': ['ReadWriteOnce'],
                     'persistentVolumeReclaimPolicy': 'Retain',
                     'nfs': {'server': server, 'path': path}},
            'status': {'phase': phase}}


@pytest.mark.parametrize('existing, recreate, applied, unchanged, waiting', [
    # Missing: apply.
    ({}, [], ['nfs-pv1'], [], []),
    # Unchanged, in any settled phase: nothing.
    ({'nfs-pv1': live()}, [], [], [('nfs-pv1', 'Available')], []),
    ({'nfs-pv1': live(phase='Bound')}, [], [], [('nfs-pv1', 'Bound')], []),
    ({'nfs-pv1': live(phase='Released')}, [], [], [('nfs-pv1', 'Released')],
     []),
    # Unchanged but not settled yet: wait for it.
    ({'nfs-pv1': live(phase='Pending')}, [], [], [('nfs-pv1', 'Pending')],
     ['nfs-pv1']),
    # Outdated (a field of the manifest differs): apply.
    ({'nfs-pv1': live(capacity='2Gi')}, [], ['nfs-pv1'], [], []),
    ({'nfs-pv1': live(capacity='2Gi', phase='Bound')}, [], ['nfs-pv1'], [],
     []),
    # NFS source changed and not Bound: delete and create again.
    ({'nfs-pv1': live(server='10.0.0.9')}, ['nfs-pv1'], ['nfs-pv1'], [], []),
    ({'nfs-pv1': live(path='/old', phase='Pending')}, ['nfs-pv1'],
     ['nfs-pv1'], [], []),
])
def test_registration_plan(existing, recreate, applied, unchanged, waiting):
    plan = pv.plan_registration([manifest()], SERVERS, existing)
    assert plan.recreate == tuple(recreate)
    assert [m.name for m, _ in plan.apply] == applied
    assert plan.unchanged == tuple(unchanged)
    assert plan.waiting == tuple(waiting)
    assert plan.changes == bool(recreate or applied)
    for _, document in plan.apply:
        assert document['spec']['nfs'] == {'server': '10.0.0.5',
                                           'path': '/volume1/nfs/pv1'}


@pytest.mark.parametrize('existing', [
    live(server='10.0.0.9', phase='Bound'),
    live(path='/volume1/nfs/other', phase='Bound'),
])
def test_nfs_source_changed_and_bound_is_refused(existing):
    with pytest.raises(exceptions.PersistentVolumeError,
                       match='PersistentVolume nfs-pv1 is Bound but points '
                             'at .* instead of 10.0.0.5:/volume1/nfs/pv1; '
                             'release its claim first'):
        pv.plan_registration([manifest()], SERVERS, {'nfs-pv1': existing})


@pytest.mark.parametrize('names, created, existing, failed, rollback', [
    # All Available in the end (kubectl wait itself failed): nothing.
    (['a'], ['a'], {'a': live('a')}, {}, []),
    # Created now and never Available: rolled back.
    (['a', 'b'], ['a', 'b'], {'a': live('a', 'Pending'), 'b': live('b')},
     {'a': 'Pending'}, ['a']),
    # Existed before this run: kept, only named.
    (['a'], [], {'a': live('a', 'Pending')}, {'a': 'Pending'}, []),
    # Gone already: nothing to delete.
    (['a'], ['a'], {}, {'a': 'missing'}, []),
])
def test_rollback_plan(names, created, existing, failed, rollback):
    assert pv.plan_rollback(names, created, existing) == (failed, rollback)


@pytest.mark.parametrize('output, found', [
    (json.dumps({'items': [live('nfs-pv1'), live('other')]}),
     ['nfs-pv1']),
    (json.dumps({'items': []}), []),
    ('not json', 'did not return a list of PersistentVolumes'),
    (json.dumps({'items': [{'metadata': 'x'}]}),
     'did not return a list of PersistentVolumes'),
])
def test_live_volume_listing(output, found):
    if isinstance(found, str):
        with pytest.raises(exceptions.PersistentVolumeError, match=found):
            pv.parse_volume_list(output, ['nfs-pv1'])
    else:
        assert sorted(pv.parse_volume_list(output, ['nfs-pv1'])) == found


def of_class(name, storage_class):
    volume = live(name, 'Bound')
    volume['spec']['storageClassName'] = storage_class
    return volume


def test_live_volumes_of_storage_classes():
    """A heal that re-creates the volume also checks the PVs csi-driver-nfs
    provisioned for the storage classes."""
    output = json.dumps({'items': [
        live('nfs-pv1'), of_class('pvc-1', 'nfs-dynamic'),
        of_class('pvc-2', 'other'), live('spare')]})
    assert sorted(pv.parse_volume_list(output, ['nfs-pv1'],
                                       ['nfs-dynamic'])) == [
        'nfs-pv1', 'pvc-1']
    assert sorted(pv.parse_volume_list(output, [], ['nfs-dynamic'])) == [
        'pvc-1']
