"""LCM requests naming targets the VNF instance does not have are refused
with the request field's JSON path and the known values, before a hook
changes anything."""

import types

import pytest

from kubernetes_mgmt_pv import exceptions
from kubernetes_mgmt_pv import mgmt_driver
from kubernetes_mgmt_pv.request import lcm_requests
from kubernetes_mgmt_pv.request import param_model
from tests.unit.test_driver import cluster_only
from tests.unit.test_driver import heal_request
from tests.unit.test_driver import instance
from tests.unit.test_params import sample

VNFCS = ['v-master', 'v-storage', 'v-worker']  # of test_driver.instance()


# -- the decisions ------------------------------------------------------------

@pytest.mark.parametrize('vnfc_ids, unknown', [
    ((), []),  # the entire VNF
    (('v-storage', 'v-worker'), []),
    (('v-worker', 'v-worker'), []),
    (('v-worker', 'abc'), [('vnfcInstanceId[1]', 'abc')]),
    (('x', 'v-master', 'y'), [('vnfcInstanceId[0]', 'x'),
                              ('vnfcInstanceId[2]', 'y')]),
    (('V-WORKER',), [('vnfcInstanceId[0]', 'V-WORKER')]),
])
def test_heal_targets_refuse_vnfcs_the_instance_does_not_have(
        vnfc_ids, unknown):
    parsed = param_model.parse(sample())
    request = heal_request(*vnfc_ids)
    if not unknown:
        lcm_requests.heal_targets(instance(), request, parsed)
        return
    with pytest.raises(exceptions.UnknownTargetError) as refused:
        lcm_requests.heal_targets(instance(), request, parsed)
    assert refused.value.unknown == unknown
    assert refused.value.known == VNFCS


def test_a_heal_of_an_instance_without_vnfcs_names_none_known():
    empty = types.SimpleNamespace(instantiated_vnf_info=types.SimpleNamespace(
        vnfc_resource_info=None))
    with pytest.raises(exceptions.UnknownTargetError) as refused:
        lcm_requests.heal_targets(empty, heal_request('v-worker'),
                                  param_model.parse(sample()))
    assert refused.value.known == []


class UnsetScaleStatus(object):
    """An InstantiatedVnfInfo whose scale_status was never set: Tacker's
    objects raise on reading it."""

    @property
    def scale_status(self):
        raise NotImplementedError('Cannot load scale_status')


def with_scale_status(*aspects):
    info = types.SimpleNamespace(scale_status=[
        types.SimpleNamespace(aspect_id=aspect, scale_level=0)
        for aspect in aspects])
    return types.SimpleNamespace(instantiated_vnf_info=info)


@pytest.mark.parametrize('vnf_instance, aspect, known', [
    # The parameters' Master and Worker aspects, and the VNFD's others.
    (with_scale_status('worker_instance', 'master_instance', 'db'),
     'db', None),
    (with_scale_status('worker_instance', 'master_instance', 'db'),
     'worker_instance', None),
    (with_scale_status(), 'worker_instance', None),
    (types.SimpleNamespace(instantiated_vnf_info=UnsetScaleStatus()),
     'master_instance', None),
    (with_scale_status('worker_instance', 'master_instance', 'db'),
     'dB', ['db', 'master_instance', 'worker_instance']),
    (with_scale_status(), 'other', ['master_instance', 'worker_instance']),
    (types.SimpleNamespace(instantiated_vnf_info=UnsetScaleStatus()),
     '', ['master_instance', 'worker_instance']),
    (types.SimpleNamespace(), None, ['master_instance', 'worker_instance']),
])
def test_a_scale_of_an_aspect_the_vnf_does_not_have_is_refused(
        vnf_instance, aspect, known):
    request = types.SimpleNamespace(aspect_id=aspect)
    parsed = param_model.parse(sample())
    if known is None:
        lcm_requests.check_scale_aspect(vnf_instance, parsed, request)
        return
    with pytest.raises(exceptions.UnknownTargetError) as refused:
        lcm_requests.check_scale_aspect(vnf_instance, parsed, request)
    assert refused.value.unknown == [('aspectId', aspect)]
    assert refused.value.known == known


@pytest.mark.parametrize('entries, known, unknown', [
    ([], [], []),
    ([('a[0]', 'x')], ['x', 'y'], []),
    ([('a[0]', 'x'), ('a[1]', 'z')], ['x', 'y'], [('a[1]', 'z')]),
    ([('a[0]', None)], ['x'], [('a[0]', None)]),
    ([('a[0]', ['x'])], ['x'], [('a[0]', ['x'])]),  # not hashable
])
def test_check_known_keeps_the_json_path_of_each_unknown_value(
        entries, known, unknown):
    if not unknown:
        exceptions.check_known(entries, known, 'known')
        return
    with pytest.raises(exceptions.UnknownTargetError) as refused:
        exceptions.check_known(entries, known, 'known')
    assert refused.value.unknown == unknown


def test_the_error_names_path_value_and_known_values():
    error = exceptions.UnknownTargetError(
        [('vnfcInstanceId[1]', 'abc')], 'a VNFC of this VNF instance',
        ['v-1', 'v-2'])
    assert str(error).startswith(
        "vnfcInstanceId[1]: 'abc' is not a VNFC of this VNF instance")
    assert "'v-1', 'v-2'" in str(error)
    long_value = 'x' * 500
    shown = str(exceptions.UnknownTargetError([('p', long_value)], 'it', []))
    assert long_value not in shown and len(shown) < 200
    assert exceptions.indexed('f', ['a', 'b']) == [('f[0]', 'a'),
                                                   ('f[1]', 'b')]


# -- the hooks: refused before anything changes -----------------------------

class Recorder(object):
    """A driver whose workflows, VIM seam and Heat record what a hook asks
    of them; the lookups of the request targets are the real ones."""

    def __init__(self):
        self.calls = []
        calls = self.calls
        cluster = types.SimpleNamespace(
            topology=types.SimpleNamespace(
                healed=lambda servers: calls.append('healed') or [],
                members=lambda aspect, ids: calls.append('members') or [],
                member_stack_ids=lambda aspect, names: calls.append(
                    'member_stack_ids') or []),
            remove=lambda nodes, scale_in=False: calls.append('remove'),
            install=lambda: calls.append('install'))
        storage = types.SimpleNamespace(
            params=param_model.parse(sample()),
            release_storage=lambda: calls.append('release_storage'),
            rebuild_storage=lambda: calls.append('rebuild_storage'),
            install_clients=lambda nodes: calls.append('install_clients'),
            topology=cluster.topology)

        class Driver(mgmt_driver.KubernetesPvMgmtDriver):
            def delete_vim(self, context, vnf_instance, name):
                calls.append('delete_vim')
                return True

            def vim_users(self, context, vnf_instance, name):
                calls.append('vim_users')
                return {}

        self.driver = Driver()
        self.driver.cluster._workflow = lambda *args: calls.append(
            'cluster workflow') or cluster
        self.driver.storage.workflow = lambda *args, **kwargs: storage


@pytest.mark.parametrize('hook', ['heal_start', 'heal_end'])
@pytest.mark.parametrize('vnfc_ids', [('abc',), ('v-storage', 'abc'),
                                      ('v-worker', 'abc')])
def test_a_heal_naming_an_unknown_vnfc_changes_nothing(hook, vnfc_ids):
    recorder = Recorder()
    with pytest.raises(exceptions.UnknownTargetError) as refused:
        getattr(recorder.driver, hook)(
            None, instance(sample()), heal_request(*vnfc_ids), None, None)
    assert refused.value.unknown == [
        ('vnfcInstanceId[%d]' % (len(vnfc_ids) - 1), 'abc')]
    assert recorder.calls == []


@pytest.mark.parametrize('hook, kind, extra', [
    ('scale_start', 'SCALE_IN', {'scale_out_id_list': ['s1'],
                                 'scale_name_list': ['r1']}),
    ('scale_start', 'SCALE_OUT', {'scale_name_list': ['r1']}),  # rollback
    ('scale_end', 'SCALE_OUT', {'scale_out_id_list': ['s1']}),
])
@pytest.mark.parametrize('value', [sample(), cluster_only()])
def test_a_scale_of_an_unknown_aspect_changes_nothing(hook, kind, extra,
                                                      value):
    recorder = Recorder()
    request = types.SimpleNamespace(type=kind, aspect_id='workers',
                                    additional_params={})
    with pytest.raises(exceptions.UnknownTargetError) as refused:
        getattr(recorder.driver, hook)(None, instance(value), request, None,
                                       None, **extra)
    assert refused.value.unknown == [('aspectId', 'workers')]
    assert recorder.calls == []


def test_the_pv_feature_alone_refuses_an_unknown_aspect_too():
    value = sample()
    del value[param_model.ROOT]['script_path']
    recorder = Recorder()
    with pytest.raises(exceptions.UnknownTargetError):
        recorder.driver.scale_end(
            None, instance(value), types.SimpleNamespace(
                type='SCALE_OUT', aspect_id='workers', additional_params={}),
            None, None, scale_out_id_list=['s1'])
    assert recorder.calls == []


@pytest.mark.parametrize('hook, calls', [
    ('terminate_start', ['vim_users', 'delete_vim']),
    ('terminate_end', ['delete_vim']),
])
def test_terminate_hooks_delete_the_vim_and_contact_no_vm(hook, calls):
    recorder = Recorder()
    getattr(recorder.driver, hook)(None, instance(sample()), None, None,
                                   None)
    assert recorder.calls == calls
