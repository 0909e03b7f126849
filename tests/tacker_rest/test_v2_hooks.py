"""What Tacker's v2 conductor hands a management script, for real.

A v2 package of the sample (``kubernetes-mgmt-pv package --api v2``)
whose every ``Vnflcm`` hook runs testbed/v2_hook_recorder.py (it only
records the pickled dict it gets) is driven through ``/vnflcm/v2``:
create, instantiate (vimConnectionInfo inline: the fake Keystone), scale
out and in, heal of a Worker, terminate and delete, with the Heat engine
booting the VMs. Each step checks the REST answers, the Heat stack
``vnf-<id>`` and the dicts recorded for its hooks (the contract the v2
door is written against).

``TACKER_V2_FIXTURES=DIR`` also writes the recorded dicts, redacted, as
JSON files into DIR (fixtures for the v2 door's unit tests).
"""

import os

import pytest

from testbed import tacker_lab
from testbed import tacker_v2

SCRIPT_KEYS = {'operation', 'request', 'vnf_instance', 'grant_request',
               'grant_response', 'tmp_csar_dir',
               'user_script_err_handling_data'}


class Flow(object):
    def __init__(self):
        self.done = set()
        self.instance_id = None
        self.seen = 0  # recorded calls already checked

    def need(self, *steps):
        missing = [step for step in steps if step not in self.done]
        if missing:
            pytest.skip('needs the earlier step(s) %s' % ', '.join(missing))


@pytest.fixture(scope='module')
def flow():
    return Flow()


@pytest.fixture(scope='module')
def v2(lab):
    return tacker_v2.V2Api(lab.service.api_url, log=lab.log)


@pytest.fixture(scope='module')
def record_dir(lab):
    path = os.path.join(lab.workdir, 'v2-hook-records')
    os.makedirs(path, mode=0o700, exist_ok=True)
    return path


def _new_calls(flow, record_dir):
    calls = tacker_v2.recorded_calls(record_dir)
    new, flow.seen = calls[flow.seen:], len(calls)
    return new


def _check_calls(calls, operations, instance_id):
    assert [call['operation'] for call in calls] == list(operations)
    for call in calls:
        assert set(call) == SCRIPT_KEYS, call['operation']
        assert call['vnf_instance']['id'] == instance_id
        assert call['user_script_err_handling_data'] == {}


def test_instantiate(lab, v2, flow, record_dir, tmp_path_factory):
    # Other modules of the lab onboard the sample v2 package too.
    vnfd_id, package = lab.build_package(
        str(tmp_path_factory.mktemp('v2pkg')), api='v2',
        transform=tacker_v2.recorder_transform(record_dir),
        vnfd_id=tacker_lab.own_vnfd_id())
    lab.client.onboard_package(package)
    instance = v2.create(vnfd_id, 'v2-recorder')
    flow.instance_id = instance['id']
    assert instance['instantiationState'] == 'NOT_INSTANTIATED'
    # vimConnectionInfo inline (no VIM registration): the fake Keystone.
    request = lab.instantiate_request(None, api='v2')
    request['vimConnectionInfo'] = tacker_v2.vim_connection_info(lab.cloud)
    occ = v2.lcm(flow.instance_id, 'instantiate', request)
    assert occ['operationState'] == 'COMPLETED', occ.get('error')

    stack = lab.cloud.find_stack(tacker_v2.stack_name(flow.instance_id))
    assert stack is not None and stack.status == 'CREATE_COMPLETE'
    info = v2.instance(flow.instance_id)['instantiatedVnfInfo']
    vdus = sorted(vnfc['vduId'] for vnfc in info['vnfcResourceInfo'])
    assert vdus == ['masterNode', 'storage_server', 'workerNode',
                    'workerNode']
    assert info['metadata']['stack_id'] == stack.id

    calls = _new_calls(flow, record_dir)
    _check_calls(calls, ('instantiate_start', 'instantiate_end'),
                 flow.instance_id)
    start, end = calls
    assert start['request']['flavourId'] == 'simple'
    assert 'k8s_cluster_installation_param' in start['request'][
        'additionalParams']
    added = [res for res in start['grant_request']['addResources']
             if res['type'] == 'COMPUTE']
    assert len(added) == 4
    vim = end['vnf_instance']['vimConnectionInfo'][tacker_v2.VIM_KEY]
    assert vim['interfaceInfo']['endpoint'] == lab.cloud.auth_url
    assert vim['accessInfo']['password'] == lab.cloud.password
    servers = {vnfc['computeResource']['resourceId'] for vnfc in
               end['vnf_instance']['instantiatedVnfInfo'][
                   'vnfcResourceInfo']}
    # The servers Heat booted for this stack (another module's VNF may
    # still be up).
    assert len(servers) == 4 and servers <= set(lab.engine.hosts)
    flow.done.add('instantiate')


def _worker_ids(v2, instance_id):
    return tacker_v2.vnfcs(v2.instance(instance_id), 'workerNode')


def test_scale_out_and_in(lab, v2, flow, record_dir):
    flow.need('instantiate')
    before = _worker_ids(v2, flow.instance_id)
    occ = v2.lcm(flow.instance_id, 'scale',
                 lab.sample_request('scale_out_worker.json', 'v2'))
    assert occ['operationState'] == 'COMPLETED', occ.get('error')
    after_out = _worker_ids(v2, flow.instance_id)
    assert len(after_out) == len(before) + 1
    calls = _new_calls(flow, record_dir)
    _check_calls(calls, ('scale_start', 'scale_end'), flow.instance_id)
    assert calls[0]['request']['type'] == 'SCALE_OUT'
    new_ids = {v['computeResource']['resourceId'] for v in after_out} - {
        v['computeResource']['resourceId'] for v in before}
    assert len(new_ids) == 1

    occ = v2.lcm(flow.instance_id, 'scale',
                 lab.sample_request('scale_in_worker.json', 'v2'))
    assert occ['operationState'] == 'COMPLETED', occ.get('error')
    after_in = _worker_ids(v2, flow.instance_id)
    assert len(after_in) == len(before)
    calls = _new_calls(flow, record_dir)
    _check_calls(calls, ('scale_start', 'scale_end'), flow.instance_id)
    removed = [res['resource']['resourceId']
               for res in calls[0]['grant_request']['removeResources']
               if res['type'] == 'COMPUTE']
    # Tacker picks the newest Worker; Heat removes exactly that one.
    assert removed == sorted(new_ids)
    assert not set(removed) & {
        v['computeResource']['resourceId'] for v in after_in}
    flow.done.add('scale')


def test_heal_worker(lab, v2, flow, record_dir):
    flow.need('instantiate')
    worker = _worker_ids(v2, flow.instance_id)[0]
    occ = v2.lcm(flow.instance_id, 'heal',
                 {'vnfcInstanceId': [worker['vnfcInfoId']]})
    assert occ['operationState'] == 'COMPLETED', occ.get('error')
    calls = _new_calls(flow, record_dir)
    _check_calls(calls, ('heal_start', 'heal_end'), flow.instance_id)
    removed = [res['resource']['resourceId']
               for res in calls[0]['grant_request']['removeResources']
               if res['type'] == 'COMPUTE']
    assert removed == [worker['computeResource']['resourceId']]
    assert worker['computeResource']['resourceId'] not in lab.engine.hosts


def test_terminate_and_delete(lab, v2, flow, record_dir):
    flow.need('instantiate')
    occ = v2.lcm(flow.instance_id, 'terminate',
                 {'terminationType': 'FORCEFUL'})
    assert occ['operationState'] == 'COMPLETED', occ.get('error')
    assert lab.cloud.find_stack(
        tacker_v2.stack_name(flow.instance_id)) is None
    calls = _new_calls(flow, record_dir)
    _check_calls(calls, ('terminate_start', 'terminate_end'),
                 flow.instance_id)
    assert v2.instance(flow.instance_id)['instantiationState'] == \
        'NOT_INSTANTIATED'
    v2.delete(flow.instance_id)
    assert v2.client.request('GET', '/vnflcm/v2/vnf_instances/%s'
                             % flow.instance_id).status == 404
    fixtures = os.environ.get('TACKER_V2_FIXTURES')
    if fixtures:
        tacker_v2.save_fixtures(tacker_v2.recorded_calls(record_dir),
                                fixtures)
