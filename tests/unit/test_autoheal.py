"""Auto-heal without hosts: the probe targets and their labels, the
file_sd files (look first, change what differs), the guard rails as a
table, and what the v2 door reads of Tacker's dicts."""

import datetime
import json
import os

import pytest

from kubernetes_mgmt_pv.autoheal import guard
from kubernetes_mgmt_pv.autoheal import heal_check
from kubernetes_mgmt_pv.autoheal import monitoring
from kubernetes_mgmt_pv.autoheal import probes
from kubernetes_mgmt_pv.autoheal import targets_file
from kubernetes_mgmt_pv.doors import v2_autoheal
from kubernetes_mgmt_pv import exceptions

INSTANCE = '5e7f5d4f-1b7e-4a5e-9a4c-0d6b7e3c1a10'
VMS = [probes.ProbedVm('workerNode-s2', 'workerNode', 'worker', '10.0.0.22'),
       probes.ProbedVm('masterNode-s1', 'masterNode', 'master', '10.0.0.11'),
       probes.ProbedVm('storage_server-s3', 'storage_server', 'storage',
                       'fd00::3')]
NOW = datetime.datetime(2026, 11, 29, 12, 0, tzinfo=datetime.timezone.utc)


def test_each_vm_is_a_target_with_the_labels_tacker_acts_on():
    groups = probes.groups(INSTANCE, VMS)
    assert [group['targets'] for group in groups] == [
        ['10.0.0.11:10250'], ['[fd00::3]:22'], ['10.0.0.22:10250']]
    assert groups[2]['labels'] == {
        'receiver_type': 'tacker', 'function_type': 'auto_heal',
        'vnf_instance_id': INSTANCE, 'vnfc_info_id': 'workerNode-s2',
        'vdu_id': 'workerNode', 'node_role': 'worker'}
    assert probes.document(INSTANCE, VMS) == \
        probes.document(INSTANCE, list(reversed(VMS)))
    assert json.loads(probes.document(INSTANCE, VMS)) == groups


@pytest.mark.parametrize('field, value', [
    ('vnfc_info_id', 'a\nb'), ('vnfc_info_id', '../x'), ('vdu_id', ''),
    ('vnfc_info_id', 'x' * 300), ('address', 'master-0'),
    ('address', '10.0.0.1:22'),
])
def test_a_value_that_is_no_id_or_address_is_refused(field, value):
    vm = probes.ProbedVm(**dict(VMS[0].__dict__, **{field: value}))
    with pytest.raises(ValueError):
        probes.groups(INSTANCE, [vm])


@pytest.mark.parametrize('properties, enabled', [
    ({'isAutohealEnabled': True}, True), ({'isAutohealEnabled': False}, False),
    ({'isAutohealEnabled': 'true'}, False), ({}, False), (None, False),
])
def test_only_a_true_is_autoheal_enabled_probes(properties, enabled):
    assert probes.is_enabled(properties) is enabled


A, P = INSTANCE + '.json', INSTANCE + '.json.paused'


@pytest.mark.parametrize('present, content, enabled, remove, write', [
    ({}, b'x', True, [], A),
    ({A: b'x'}, b'x', True, [], None),
    ({A: b'old'}, b'x', True, [], A),
    ({A: b'x'}, b'x', False, [A], P),
    ({P: b'x'}, b'x', True, [P], A),
    ({A: b'x', P: b'y'}, b'x', True, [P], None),
    ({A: b'x', P: b'x'}, None, True, [A, P], None),
    ({}, None, False, [], None),
])
def test_the_plan_changes_only_what_differs(present, content, enabled, remove,
                                            write):
    assert targets_file.plan(present, INSTANCE, content, enabled) == \
        (remove, write)


def test_sync_writes_pauses_resumes_and_removes(tmp_path):
    directory = str(tmp_path)
    assert targets_file.sync(directory, INSTANCE, b'[]\n') == ['wrote ' + A]
    assert oct(os.stat(tmp_path / A).st_mode & 0o777) == '0o644'
    assert targets_file.sync(directory, INSTANCE, b'[]\n') == []
    assert targets_file.sync(directory, INSTANCE, b'[]\n', False) == \
        ['wrote ' + P, 'removed ' + A]
    assert targets_file.current(directory, INSTANCE) == b'[]\n'
    assert targets_file.sync(directory, INSTANCE, None) == ['removed ' + P]
    assert sorted(os.listdir(directory)) == []
    assert targets_file.current(directory, INSTANCE) is None


def test_sync_refuses_a_missing_directory_or_a_link_naming_the_option(
        tmp_path):
    (tmp_path / 'real').mkdir()
    os.symlink(tmp_path / 'real', tmp_path / 'link')
    for directory in (tmp_path / 'missing', tmp_path / 'link'):
        with pytest.raises(exceptions.MgmtDriverError) as raised:
            targets_file.sync(str(directory), INSTANCE, b'[]')
        assert targets_file.OPTION in str(raised.value)
    with pytest.raises(ValueError):
        targets_file.sync(str(tmp_path / 'real'), '../etc/x', b'[]')
    # Nothing to remove where there is no directory (terminate).
    assert targets_file.sync(str(tmp_path / 'missing'), INSTANCE, None) == []


class FakeTopology(object):
    def __init__(self, nodes):
        self.nodes = nodes

    def server_id(self, node):
        return 'server-' + node.address


class Node(object):
    def __init__(self, role, address):
        self.role, self.address = role, address


def test_probed_vms_name_each_server_by_its_vnfc():
    topology = FakeTopology([Node('master', '10.0.0.11'),
                             Node('worker', '10.0.0.21')])
    vnfcs = [monitoring.Vnfc('w-1', 'workerNode', 'server-10.0.0.21'),
             monitoring.Vnfc('gone', 'workerNode', 'server-10.0.0.99'),
             monitoring.Vnfc('m-1', 'masterNode', 'server-10.0.0.11')]
    assert monitoring.probed_vms(topology, vnfcs) == [
        probes.ProbedVm('w-1', 'workerNode', 'worker', '10.0.0.21'),
        probes.ProbedVm('m-1', 'masterNode', 'master', '10.0.0.11')]


def _node(name, address, ready=True, master=False, age=3600):
    return guard.NodeHealth(name, address, master, ready,
                            NOW - datetime.timedelta(seconds=age))


M1, M2, M3 = (_node('m%d' % i, '192.168.0.1%d' % i, master=True)
              for i in (1, 2, 3))
W = [_node('w%d' % i, '192.168.0.2%d' % i) for i in range(1, 6)]


def _down(node, **changes):
    return guard.NodeHealth(**dict(node.__dict__, ready=False, **changes))


@pytest.mark.parametrize('nodes, healed, setting, words', [
    # One Worker down of two: healed.
    ([M1, _down(W[0]), W[1]], {W[0].address}, '40%', None),
    # Both Workers down: 40 % of 2 is 0, at least one; refused.
    ([M1, _down(W[0]), _down(W[1])], {W[0].address}, '40%',
     ['2 of 3 Nodes are not Ready', 'w1, w2', guard.OPTION, '(1, of 2']),
    # Two of five Workers down: 40 % of 5 is 2.
    ([M1, _down(W[0]), _down(W[1])] + W[2:], {W[0].address}, '40%', None),
    ([M1, _down(W[0]), _down(W[1]), _down(W[2])] + W[3:], {W[0].address},
     '40%', ['3 of 6 Nodes']),
    # A number instead of a share.
    ([M1, _down(W[0]), _down(W[1])], {W[0].address}, '2', None),
    # A Master of three: the two others keep quorum.
    ([_down(M1), M2, M3] + W[:2], {M1.address}, '40%', None),
    # Two Masters of three down: the heal of one leaves no quorum.
    ([_down(M1), _down(M2), M3] + W[:5], {M1.address}, '40%',
     ['Master m1', '1 of 3 Masters Ready', 'needs 2']),
    # The only Master.
    ([_down(M1)] + W[:2], {M1.address}, '40%', ['0 of 1 Masters']),
    # A Node younger than the start-up grace.
    ([M1, _down(W[0], registered=NOW - datetime.timedelta(seconds=30)),
      W[1]], {W[0].address}, '40%',
     ['w1 registered 30 s ago', guard.GRACE_OPTION, '(600 s)']),
    # Ready again: nothing to heal.
    ([M1] + W[:2], {W[0].address}, '40%', ['w1 is Ready']),
    # The healed VM has no Node any more: healed.
    ([M1, W[1]], {W[0].address}, '40%', None),
    # A Storage server heal names no Node; an outage still stops it.
    ([M1] + W[:2], set(), '40%', None),
    ([M1, _down(W[0]), _down(W[1])], set(), '40%', ['2 of 3']),
])
def test_guard_rails(nodes, healed, setting, words):
    problem = guard.refusal(nodes, healed, setting, 600.0, NOW)
    if words is None:
        assert problem is None
    else:
        assert problem.startswith('automatic heal refused: '), problem
        for word in words:
            assert word in problem


@pytest.mark.parametrize('setting, workers, limit', [
    ('40%', 0, 1), ('40%', 2, 1), ('40%', 5, 2), ('40%', 10, 4),
    ('100%', 3, 3), ('3', 1, 3), ('1', 9, 1),
])
def test_max_unhealthy(setting, workers, limit):
    assert guard.max_unhealthy(setting, workers) == limit


def test_node_health_reads_the_node_list_and_skips_what_is_not_a_node():
    listing = json.dumps({'items': [
        {'metadata': {'name': 'master-0', 'creationTimestamp':
                      '2026-11-29T11:00:00Z', 'labels': {
                          guard.CONTROL_PLANE: ''}},
         'status': {'addresses': [{'type': 'InternalIP',
                                   'address': '192.168.0.11'}],
                    'conditions': [{'type': 'Ready', 'status': 'True'}]}},
        {'metadata': {'name': 'worker-0'},
         'status': {'conditions': [{'type': 'Ready',
                                    'status': 'Unknown'}]}},
        {'metadata': {'name': 'Bad name;rm'}}, 3, {'metadata': []},
        {'metadata': {'name': 'x', 'labels': 'y'}, 'status': 'z'},
        {'metadata': {'name': 'w'}, 'status': {'addresses': [
            {'type': 'InternalIP', 'address': '1.2.3.4; x'}]}},
    ]})
    assert guard.node_health(listing) == [
        guard.NodeHealth('master-0', '192.168.0.11', True, True,
                         datetime.datetime(2026, 11, 29, 11, 0, tzinfo=(
                             datetime.timezone.utc))),
        guard.NodeHealth('worker-0', None, False, False, None),
        guard.NodeHealth('x', None, False, False, None),
        guard.NodeHealth('w', None, False, False, None)]
    with pytest.raises(ValueError):
        guard.node_health('{"kind": "Status"}')


V2_INSTANCE = {
    'id': INSTANCE,
    'vnfConfigurableProperties': {'isAutohealEnabled': True, 'x': 1},
    'instantiatedVnfInfo': {
        'vnfcResourceInfo': [
            {'id': 'r1', 'vduId': 'workerNode',
             'computeResource': {'resourceId': 'server-1'}},
            {'id': 'r2', 'vduId': 'masterNode', 'computeResource': {}}],
        'vnfcInfo': [
            {'id': 'workerNode-r1', 'vduId': 'workerNode',
             'vnfcResourceInfoId': 'r1'},
            {'id': 'masterNode-r2', 'vduId': 'masterNode',
             'vnfcResourceInfoId': 'r2'}]}}


def test_the_v2_door_reads_vnfcs_and_the_switch():
    assert v2_autoheal.vnfcs(V2_INSTANCE) == [
        monitoring.Vnfc('workerNode-r1', 'workerNode', 'server-1')]
    assert v2_autoheal.enabled(V2_INSTANCE)
    for patch, enabled in (({'isAutohealEnabled': False}, False),
                           ({'isAutohealEnabled': None}, False),
                           ({'x': 2}, True), (None, True)):
        assert v2_autoheal.enabled_after(
            V2_INSTANCE, {'vnfConfigurableProperties': patch}) is enabled
    assert not v2_autoheal.enabled_after(
        {'id': INSTANCE}, {'vnfConfigurableProperties': {'x': True}})
    assert v2_autoheal.is_automatic(
        {'grant_request': {'isAutomaticInvocation': True}})
    assert not v2_autoheal.is_automatic(
        {'grant_request': {'isAutomaticInvocation': False}})
    assert not v2_autoheal.is_automatic({'grant_request': None})


def test_an_automatic_heal_that_needs_parameters_says_which_in_one_line():
    error = v2_autoheal.needs_parameters(exceptions.ParameterErrors([
        exceptions.ParameterError('additionalParams.x.worker_node.password',
                                  'required: ...')]))
    message = str(error)
    assert '\n' not in message
    assert message.startswith('automatic heal refused: ')
    assert 'additionalParams.x.worker_node.password' in message
    assert 'ssh_key' in message


class Conf(object):
    def __init__(self, directory):
        self.auto_heal_targets_dir = directory


class Feature(object):
    """A cluster feature whose topology is FakeTopology (None: off)."""

    def __init__(self, topology):
        self.topology = topology

    def node_topology(self, context, vnf_instance):
        return self.topology


class Instance(object):
    id = INSTANCE


def test_refresh_switch_and_forget_keep_one_file_per_instance(tmp_path):
    conf = Conf(str(tmp_path))
    feature = Feature(FakeTopology([Node('worker', '10.0.0.21')]))
    vnfcs = [monitoring.Vnfc('w-1', 'workerNode', 'server-10.0.0.21')]
    assert monitoring.refresh(feature, None, Instance, vnfcs, True,
                              conf) == ['wrote ' + A]
    assert monitoring.refresh(feature, None, Instance, vnfcs, True,
                              conf) == []
    assert json.loads((tmp_path / A).read_text())[0]['targets'] == [
        '10.0.0.21:10250']
    assert monitoring.switch(INSTANCE, False, conf) == [
        'wrote ' + P, 'removed ' + A]
    assert monitoring.switch(INSTANCE, True, conf) == [
        'wrote ' + A, 'removed ' + P]
    assert monitoring.forget(INSTANCE, conf) == ['removed ' + A]
    assert monitoring.switch(INSTANCE, True, conf) == []
    assert monitoring.forget(INSTANCE, conf) == []


def test_without_a_directory_or_the_cluster_feature_nothing_is_written(
        tmp_path):
    vnfcs = [monitoring.Vnfc('w-1', 'workerNode', 'server-10.0.0.21')]
    feature = Feature(FakeTopology([Node('worker', '10.0.0.21')]))
    for conf, feature in ((Conf(None), feature),
                          (Conf(str(tmp_path)), Feature(None))):
        assert monitoring.refresh(feature, None, Instance, vnfcs, True,
                                  conf) == []
        assert monitoring.switch(INSTANCE, False, conf) == []
        assert monitoring.forget(INSTANCE, conf) == []
    assert os.listdir(tmp_path) == []


class HealthFacts(object):
    def __init__(self, facts):
        self.facts = facts

    def heal_health_facts(self, context, vnf_instance, heal_vnf_request):
        return self.facts


class GuardConf(object):
    auto_heal_max_unhealthy = '40%'
    auto_heal_startup_grace = 600.0


def _listing(*ready):
    return json.dumps({'items': [
        {'metadata': {'name': 'w%d' % index,
                      'creationTimestamp': '2026-11-29T10:00:00Z'},
         'status': {'addresses': [{'type': 'InternalIP',
                                   'address': '192.168.0.%d' % index}],
                    'conditions': [{'type': 'Ready',
                                    'status': str(up)}]}}
        for index, up in enumerate(ready)]})


def test_heal_check_refuses_with_the_guards_reason():
    check = heal_check.check
    check(HealthFacts(None), None, None, None, GuardConf(), NOW)
    check(HealthFacts((_listing(False, True), {'192.168.0.0'})), None, None,
          None, GuardConf(), NOW)
    with pytest.raises(exceptions.MgmtDriverError) as raised:
        check(HealthFacts((_listing(False, False, True), {'192.168.0.0'})),
              None, None, None, GuardConf(), NOW)
    assert '2 of 3 Nodes are not Ready' in str(raised.value)
    with pytest.raises(exceptions.MgmtDriverError) as raised:
        check(HealthFacts(('{"items": 3}', set())), None, None, None,
              GuardConf(), NOW)
    assert 'Node list' in str(raised.value)
