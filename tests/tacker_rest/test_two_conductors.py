"""Two tacker-conductors, as a growing site runs them, on the same MariaDB
and RabbitMQ: two VNFs instantiated at once through the REST API, each
served by one of them.

tacker-server casts to the conductors' topic queue, and RabbitMQ hands
consecutive messages to its consumers (one per conductor) in turn. Each
POST .../instantiate is two casts (the START notification, then the
operation) and each POST /vnf_instances one (the creation notification):
create A, instantiate A, create B, instantiate B puts the two operations
three casts apart, so on different conductors whichever takes the first.
That holds while nothing else is cast meanwhile; the test asserts it, and
that both operations complete. A conductor's log shows what it served:
the Nova ids of the VNF's VMs (the driver checks their host keys; the
other conductor, which may have sent the START notification, never sees
them).
"""

import pytest

from testbed import conductors
from testbed import tacker_lab
from tests.tacker_rest import lifecycle_checks as checks
from tests.tacker_rest import test_lifecycle as simple
from tests.tacker_rest import test_lifecycle_ha as ha


@pytest.fixture(scope='module')
def onboarded_with_two_conductors(lab, tmp_path_factory):
    """The VNF package, onboarded while one conductor runs; then two run.

    Tacker casts a package's extraction to every conductor, and each one
    that finds no other extraction running onboards it: two that finish
    close together both onboard, the second fails on the rows the first
    wrote, and its revert puts the package back to CREATED. Onboarding is
    not what this module tests, so it happens before the second starts.
    """
    # Other modules of the lab onboard the sample v1 package too.
    vnfd_id, zip_path = lab.build_package(
        str(tmp_path_factory.mktemp('package')),
        vnfd_id=tacker_lab.own_vnfd_id())
    assert lab.client.onboard_package(zip_path)['onboardingState'] == \
        'ONBOARDED'
    lab.service.conductors.scale(2)
    yield lab, vnfd_id
    lab.service.conductors.scale(1)


def _request(lab, vim_id, vim_name):
    request = lab.instantiate_request(vim_id)
    request['additionalParams']['k8s_cluster_installation_param'][
        'vim_name'] = vim_name
    return request


def test_two_vnfs_at_once_one_per_conductor(onboarded_with_two_conductors):
    lab, vnfd_id = onboarded_with_two_conductors
    queues = lab.service.conductors.topic_consumers()
    assert queues[conductors.TOPIC] >= 2, queues
    assert len([q for q, n in queues.items()
                if q != conductors.TOPIC and n]) == 2, queues
    vim_id = ha.openstack_vim_id(lab)
    names, ops = {}, {}
    for n in (1, 2):
        instance_id = lab.client.post(
            '/vnflcm/v1/vnf_instances', {'vnfdId': vnfd_id},
            expect=201).body['id']
        names[instance_id] = 'kubernetes_vim_two_%d' % n
        ops[instance_id] = lab.client.op_occ_id(lab.client.post(
            '/vnflcm/v1/vnf_instances/%s/instantiate' % instance_id,
            _request(lab, vim_id, names[instance_id]), expect=202))
    occs = {}
    try:
        for instance_id, op_id in ops.items():
            occs[instance_id] = lab.client.wait_op(
                op_id, tacker_lab.OP_TIMEOUT)
        for instance_id, occ in occs.items():
            simple._completed(occ, 'INSTANTIATE')
            assert lab.instance(instance_id)['instantiationState'] == \
                'INSTANTIATED'
        registered = {v['name'] for v in checks.k8s_vims(lab)}
        assert set(names.values()) <= registered
        marks = {instance_id: [
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
