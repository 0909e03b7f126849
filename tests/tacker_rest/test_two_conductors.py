"""Two tacker-conductors, as a growing site runs them, on the same MariaDB
and RabbitMQ: two VNFs instantiated at once through the REST API, each
served by one of them.

tacker-server casts each LCM operation to the conductors' topic queue;
RabbitMQ hands consecutive messages on a queue to its consumers in turn,
so two instantiate requests sent back to back, with nothing cast in
between, go one to each conductor. The test asserts that both conductors
consume the topic queue, that both operations complete, and, from each
conductor's log (which mentions the VNF's instance id or the Nova ids of
its VMs, as the driver checks their host keys), that each conductor
served exactly one of the two.
"""

import pytest

from testbed import conductors
from tests.tacker_rest import test_lifecycle as simple
from tests.tacker_rest import test_lifecycle_ha as ha


@pytest.fixture(scope='module')
def two_conductors(lab):
    lab.service.conductors.scale(2)
    yield lab
    lab.service.conductors.scale(1)


def _request(lab, vim_id, vim_name):
    request = lab.instantiate_request(vim_id)
    request['additionalParams']['k8s_cluster_installation_param'][
        'vim_name'] = vim_name
    return request


def test_two_vnfs_at_once_one_per_conductor(two_conductors, tmp_path):
    lab = two_conductors
    queues = lab.service.conductors.topic_consumers()
    assert queues[conductors.TOPIC] >= 2, queues
    assert len([q for q, n in queues.items()
                if q != conductors.TOPIC and n]) == 2, queues
    vim_id = ha.openstack_vim_id(lab)
    vnfd_id, zip_path = lab.build_package(str(tmp_path))
    assert lab.client.onboard_package(zip_path)['onboardingState'] == \
        'ONBOARDED'
    names = {}
    for n in (1, 2):
        instance = lab.client.post('/vnflcm/v1/vnf_instances',
                                   {'vnfdId': vnfd_id}, expect=201).body
        names[instance['id']] = 'kubernetes_vim_two_%d' % n
    # Both casts back to back; then wait for both.
    ops = {instance_id: lab.client.op_occ_id(lab.client.post(
        '/vnflcm/v1/vnf_instances/%s/instantiate' % instance_id,
        _request(lab, vim_id, name), expect=202))
        for instance_id, name in names.items()}
    occs = {}
    try:
        for instance_id, op_id in ops.items():
            occs[instance_id] = lab.client.wait_op(op_id, simple.OP_TIMEOUT)
        for instance_id, occ in occs.items():
            simple._completed(occ, 'INSTANTIATE')
            assert lab.instance(instance_id)['instantiationState'] == \
                'INSTANTIATED'
        registered = {v['name'] for v in simple.k8s_vims(lab)}
        assert set(names.values()) <= registered
        marks = {instance_id: [instance_id] + [
            vnfc['computeResource']['resourceId']
            for vnfc in lab.vnfcs(instance_id)] for instance_id in names}
        served = lab.service.conductors.served(marks)
        assert sorted(served) == ['tacker-conductor', 'tacker-conductor-2']
        assert sorted(sum(served.values(), [])) == sorted(names), served
        assert all(len(ids) == 1 for ids in served.values()), served
    finally:
        for instance_id in names:
            _terminate_and_delete(lab, instance_id)


def _terminate_and_delete(lab, instance_id):
    """Leave the session's lab as it was (best effort after a failure)."""
    if lab.instance(instance_id)['instantiationState'] == 'INSTANTIATED':
        lab.lcm(instance_id, 'terminate', {'terminationType': 'FORCEFUL'})
    lab.client.request('DELETE', '/vnflcm/v1/vnf_instances/%s'
                       % instance_id)
