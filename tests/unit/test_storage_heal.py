"""A heal of the Storage server: whether it keeps the Cinder volume (and
the data of the bound claims), decided from the request and its grant as
the door gathers them, and what heal_start and heal_end then do."""

import copy
import types

import pytest

from kubernetes_mgmt_pv.doors import v2_mapping
from kubernetes_mgmt_pv import exceptions
from kubernetes_mgmt_pv import mgmt_driver
from kubernetes_mgmt_pv.request import lcm_requests
from kubernetes_mgmt_pv.request import param_model
from kubernetes_mgmt_pv.storage import pv
from kubernetes_mgmt_pv.storage import server_steps
from tests.unit import v2_dicts as v2

VOLUME = 'c0ffee00-0000-4000-8000-000000000001'
OTHER_VOLUME = 'c0ffee00-0000-4000-8000-000000000002'
STORAGE = v2.VNFCS[3][0]
WORKER = v2.VNFCS[1][0]


@pytest.mark.parametrize(
    'removed_storage, all_requested, entire_vnf, storage_volumes, kept', [
        # v1: the door does not know; Tacker v1 re-creates the volumes.
        (None, False, False, (VOLUME,), False),
        (None, False, False, (), False),
        # v2 without all: only the server is marked unhealthy.
        ((), False, False, (VOLUME,), True),
        ((), False, False, (), True),
        # v2 with all: the VNFC's volumes are in the grant, re-created.
        ((VOLUME,), True, False, (VOLUME,), False),
        ((), True, False, (), False),
        # A grant removing the Storage server's volume, whatever the flag.
        ((VOLUME,), False, False, (VOLUME,), False),
        # Another VNFC's volume removed: the Storage server's stays.
        ((OTHER_VOLUME,), False, False, (VOLUME,), True),
        # Its volumes unknown: any removed volume may be its own.
        ((OTHER_VOLUME,), False, False, (), False),
        # The entire VNF: the cluster and its claims are rebuilt anyway.
        ((), False, True, (VOLUME,), False),
        ((), True, True, (VOLUME,), False),
    ])
def test_keeps_storage_volumes(removed_storage, all_requested, entire_vnf,
                               storage_volumes, kept):
    assert lcm_requests.keeps_storage_volumes(
        removed_storage, all_requested, entire_vnf, storage_volumes) is kept


def v2_instance():
    """The v2 instance dict, its Storage VNFC with its Cinder volume."""
    inst = v2.vnf_instance()
    info = inst['instantiatedVnfInfo']
    storage, = [vnfc for vnfc in info['vnfcResourceInfo']
                if vnfc['id'] == STORAGE]
    storage['storageResourceIds'] = ['storage-res-1']
    info['virtualStorageResourceInfo'] = [{
        'id': 'storage-res-1', 'virtualStorageDescId': 'storage_server_volume',
        'storageResource': {'vimConnectionId': 'vim1', 'resourceId': VOLUME,
                            'vimLevelResourceType': 'OS::Cinder::Volume'}}]
    return inst


def grant_request(*storage_ids):
    """A v2 heal grant request: the Storage server's COMPUTE, and the
    STORAGE resources of ``storage_ids``."""
    removed = [{'id': 'rm-1', 'type': 'COMPUTE',
                'resourceTemplateId': 'storage_server',
                'resource': {'vimConnectionId': 'vim1',
                             'resourceId': STORAGE}}]
    removed += [{'id': 'rm-%s' % volume, 'type': 'STORAGE',
                 'resourceTemplateId': 'storage_server_volume',
                 'resource': {'vimConnectionId': 'vim1',
                              'resourceId': volume}}
                for volume in storage_ids]
    return {'operation': 'HEAL', 'removeResources': removed}


def v2_heal(grant, **request_params):
    """(instance, heal request) models of a v2 heal of the Storage VNFC."""
    inst = v2_instance()
    body = {'vnfcInstanceId': [v2.vnfc_info_id(STORAGE)],
            'additionalParams': request_params}
    return (v2_mapping.instance(inst, v2.install_params()),
            v2_mapping.request('heal_start', body, None, grant))


@pytest.mark.parametrize('grant, request_params, kept', [
    (grant_request(), {}, True),
    (grant_request(), {'all': False}, True),
    (grant_request(VOLUME), {'all': True}, False),
    # Tacker reads "all" by truth value.
    (grant_request(VOLUME), {'all': 'yes'}, False),
    (grant_request(VOLUME), {}, False),
    # No grant request: nothing says the volume stays.
    (None, {}, False),
])
def test_v2_heal_targets_say_whether_the_volume_stays(grant, request_params,
                                                      kept):
    params = param_model.parse({param_model.ROOT: v2.install_params()})
    inst, request = v2_heal(grant, **request_params)
    assert inst.instantiated_vnf_info.vnfc_resource_info[3].volume_ids == (
        VOLUME,)
    targets = lcm_requests.heal_targets(inst, request, params)
    assert targets.storage_server
    assert targets.storage_kept is kept
    assert targets.recreates_storage is not kept


def test_removed_volumes_of_a_grant_request():
    assert v2_mapping.removed_volumes(grant_request()) == ()
    assert v2_mapping.removed_volumes(grant_request(VOLUME)) == (VOLUME,)
    assert v2_mapping.removed_volumes(None) is None
    # Only a heal's request carries them.
    body = {'type': 'SCALE_IN', 'aspectId': 'worker_instance'}
    assert v2_mapping.request('scale_start', body, None,
                              grant_request(VOLUME)).removed_storage is None


def test_a_v1_heal_request_never_keeps_the_volume():
    params = param_model.parse({param_model.ROOT: v2.install_params()})
    inst, _ = v2_heal(grant_request())
    request = types.SimpleNamespace(
        vnfc_instance_id=[v2.vnfc_info_id(STORAGE)], additional_params={})
    targets = lcm_requests.heal_targets(inst, request, params)
    assert targets.storage_server and not targets.storage_kept


def test_a_worker_heal_keeps_no_storage():
    params = param_model.parse({param_model.ROOT: v2.install_params()})
    inst = v2_mapping.instance(v2_instance(), v2.install_params())
    request = v2_mapping.request('heal_start', {
        'vnfcInstanceId': [v2.vnfc_info_id(WORKER)]}, None, grant_request())
    targets = lcm_requests.heal_targets(inst, request, params)
    assert not targets.storage_server and not targets.storage_kept
    assert not targets.recreates_storage


# -- the hooks ---------------------------------------------------------------

def recording_driver(calls):
    """The entry-point driver, its storage workflow recording the calls;
    the cluster part has nothing to do for a Storage heal."""
    workflow = types.SimpleNamespace(
        params=param_model.parse({param_model.ROOT: v2.install_params()}),
        release_storage=lambda skip_if_unreachable: calls.append(
            'release_storage'),
        rebuild_storage=lambda volumes_kept: calls.append(
            'rebuild_storage kept=%s' % volumes_kept),
        install_clients=lambda nodes: calls.append('install_clients'))
    cluster = types.SimpleNamespace(topology=types.SimpleNamespace(
        healed=lambda servers: []))
    driver = mgmt_driver.KubernetesPvMgmtDriver()
    driver.storage.workflow = lambda *args, **kwargs: workflow
    driver.cluster._workflow = lambda *args: cluster
    return driver


@pytest.mark.parametrize('grant, request_params, start, end', [
    # Kept: no PV check or deletion; the existing filesystem is
    # exported again, the PVs left as they are.
    (grant_request(), {}, [], ['rebuild_storage kept=True']),
    # Re-created: the refusal while Bound, the PVs registered again.
    (grant_request(VOLUME), {'all': True}, ['release_storage'],
     ['rebuild_storage kept=False']),
])
def test_storage_heal_hooks(grant, request_params, start, end):
    inst, request = v2_heal(grant, **request_params)
    calls = []
    recording_driver(calls).heal_start(None, inst, request, None, grant)
    assert calls == start
    calls.clear()
    recording_driver(calls).heal_end(None, inst, request, None, grant)
    assert calls == end


def test_the_hooks_see_the_grant_through_the_v2_door():
    """v2_hook hands the script dict's grant_request to the request model:
    a Storage heal without all goes ahead while a claim is Bound."""
    from kubernetes_mgmt_pv.doors import v2_hook
    calls = []
    inst = copy.deepcopy(v2_instance())
    inst['metadata'] = {v2_mapping.STATE_KEY: {
        'contractVersion': mgmt_driver.PACKAGE_CONTRACT_VERSION,
        'params': v2_mapping.saved_params(v2.install_params())}}
    script = {'operation': 'heal_start', 'vnf_instance': inst,
              'request': {'vnfcInstanceId': [v2.vnfc_info_id(STORAGE)],
                          'additionalParams': v2.logins()},
              'grant_request': grant_request(), 'grant_response': {},
              'tmp_csar_dir': '/nonexistent'}

    def factory(script_dict, state):
        driver = recording_driver(calls)
        driver.cluster.heal_start = lambda *args, **kwargs: None
        driver.registered, driver.deleted = None, False  # V2Driver's
        return driver
    v2_hook.run(script, [], {}, driver_factory=factory)
    assert calls == []
    script['grant_request'] = grant_request(VOLUME)
    script['request']['additionalParams']['all'] = True
    v2_hook.run(script, [], {}, driver_factory=factory)
    assert calls == ['release_storage']


@pytest.mark.parametrize('probe, plan', [
    # A kept volume's filesystem is mounted as it is.
    ({'TYPE': 'ext4', 'UUID': 'u1'}, None),
    # A blank kept volume is not the one whose data the claims hold.
    ({}, 'is blank, but the heal kept this volume'),
])
def test_a_kept_volume_is_never_formatted(probe, plan):
    zeros = {'first': 'zero', 'last': 'zero'}
    if plan is None:
        assert server_steps.plan_filesystem('/dev/vdb', probe, zeros,
                                            kept=True) is None
    else:
        with pytest.raises(exceptions.StorageSetupError) as refused:
            server_steps.plan_filesystem('/dev/vdb', probe, zeros, kept=True)
        assert str(refused.value).startswith('/dev/vdb ' + plan)


def test_the_refusal_names_the_bound_volumes_and_their_claims():
    live = {
        'nfs-pv1': {'status': {'phase': 'Bound'}, 'spec': {'claimRef': {
            'kind': 'PersistentVolumeClaim', 'namespace': 'apps',
            'name': 'data'}}},
        'nfs-pv2': {'status': {'phase': 'Available'}, 'spec': {}},
        'nfs-pv3': {'status': {'phase': 'Bound'}, 'spec': {}},
    }
    with pytest.raises(exceptions.PersistentVolumeInUseError) as refused:
        pv.refuse_if_bound(live, '10.0.0.5')
    assert refused.value.names == ['nfs-pv1', 'nfs-pv3']
    assert refused.value.claims == ['apps/data']
    assert refused.value.host == '10.0.0.5'
    assert str(refused.value).startswith(
        'PersistentVolume(s) nfs-pv1, nfs-pv3 are Bound to a '
        'PersistentVolumeClaim (apps/data); ')
