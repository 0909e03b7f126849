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

The second conductor runs as on a host of its own (testbed/conductors.py),
set up as the operator guide's "Several conductors" says: until the
OpenStack VIM's key file is copied to it, its operation fails naming the
VIM; the VNFs' locks are in the coordination backend all hosts reach.
"""

import pytest

from testbed import conductors
from testbed import polling
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


def _instantiate(lab, instance_id, vim_id, vim_name):
    """POST instantiate (key logins: each conductor host has its own copy
    of the key files); returns the operation's id."""
    request = lab.instantiate_request(vim_id, login='key')
    request['additionalParams']['k8s_cluster_installation_param'][
        'vim_name'] = vim_name
    return lab.client.op_occ_id(lab.client.post(
        '/vnflcm/v1/vnf_instances/%s/instantiate' % instance_id, request,
        expect=202))


def test_two_vnfs_at_once_one_per_conductor(onboarded_with_two_conductors):
    """The second conductor's host lacks the OpenStack VIM's key file
    until the guide's step copies it: its operation fails naming the
    VIM, and the instantiate sent again after the copy completes (the
    first conductor, on tacker-server's host, has the file). Both
    operations hold their VNF's lock in the coordination backend every
    host reaches."""
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
        ops[instance_id] = _instantiate(lab, instance_id, vim_id,
                                        names[instance_id])
    locked = set()
    try:
        occs = _wait_ops(lab, ops, locked, ('FAILED_TEMP',))
        failed = [i for i, occ in occs.items()
                  if occ['operationState'] == 'FAILED_TEMP']
        assert len(failed) == 1, occs
        assert vim_id in occs[failed[0]]['error']['detail']
        # Tacker leaves the instance INSTANTIATING (it fails reading the
        # VIM again while recording the failure): no retry, but fail and
        # instantiate again.
        lab.service.conductors.distribute_vim_keys(1)
        lab.op_action(ops[failed[0]], 'fail')
        ops[failed[0]] = _instantiate(lab, failed[0], vim_id,
                                      names[failed[0]])
        occs = _wait_ops(lab, ops, locked)
        for instance_id, occ in occs.items():
            simple._completed(occ, 'INSTANTIATE')
            assert lab.instance(instance_id)['instantiationState'] == \
                'INSTANTIATED'
        assert locked == set(names)
        _check_served(lab, names)
    finally:
        for instance_id in names:
            _terminate_and_delete(lab, instance_id)


def _check_served(lab, names):
    """Each VNF's VIM is registered, and its VMs are in the log of the
    conductor that ran its instantiate (the first one, at least)."""
    registered = {v['name'] for v in checks.k8s_vims(lab)}
    assert set(names.values()) <= registered
    marks = {instance_id: [
        vnfc['computeResource']['resourceId']
        for vnfc in lab.vnfcs(instance_id)] for instance_id in names}
    served = lab.service.conductors.served(marks)
    assert sorted(sum(served.values(), [])) == sorted(names), served
    assert served['tacker-conductor'], served


def _wait_ops(lab, ops, locked, any_of=()):
    """Wait for the operations ({instance id: op id}) to end, or one to
    reach a state of ``any_of``: {instance id: occurrence}. Adds to
    ``locked`` each instance whose lock ``tacker-<id>`` was seen taken in
    the MariaDB every host reaches (tooz's ``GET_LOCK``)."""
    final = ('COMPLETED', 'FAILED_TEMP', 'FAILED', 'ROLLED_BACK')
    occs = {}

    def ended():
        _see_locks(lab, sorted(set(ops) - locked), locked)
        for instance_id, op_id in ops.items():
            occs[instance_id] = lab.client.get(
                '/vnflcm/v1/vnf_lcm_op_occs/%s' % op_id)
        states = [occ['operationState'] for occ in occs.values()]
        return set(states) & set(any_of) or set(states) <= set(final)
    polling.wait_until(ended, 'the operations %s' % sorted(ops.values()),
                       tacker_lab.OP_TIMEOUT, first_delay=0.5, max_delay=2)
    return occs


def _see_locks(lab, instance_ids, locked):
    if instance_ids:
        result = lab.service.mariadb.sql('SELECT %s;' % ', '.join(
            "IS_USED_LOCK('tacker-%s') IS NOT NULL" % i
            for i in instance_ids))
        assert result.returncode == 0, result.stderr
        row = result.stdout.splitlines()[-1].split()
        locked.update(i for i, used in zip(instance_ids, row) if used == '1')


def _terminate_and_delete(lab, instance_id):
    """Leave the session's lab as it was (best effort after a failure)."""
    if lab.instance(instance_id)['instantiationState'] == 'INSTANTIATED':
        lab.lcm(instance_id, 'terminate', {'terminationType': 'FORCEFUL'})
    lab.client.request('DELETE', '/vnflcm/v1/vnf_instances/%s'
                       % instance_id)
