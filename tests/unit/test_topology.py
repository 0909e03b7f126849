"""The VNF's nodes from Heat, and the targets of heals and scale-outs.

Heat is the Keystone/Heat HTTP fake with the real heatclient; no host is
contacted.
"""

import types

import pytest

from kubernetes_mgmt_pv import exceptions
from kubernetes_mgmt_pv import mgmt_driver
from kubernetes_mgmt_pv.openstack import heat
from kubernetes_mgmt_pv.openstack import vnf_topology
from kubernetes_mgmt_pv.request import lcm_requests
from kubernetes_mgmt_pv.request import param_model
from kubernetes_mgmt_pv.storage import storage_feature
from testbed import openstack_api
from tests.unit.test_params import sample

STORAGE_SERVER = '5a0b6c1d-0000-4000-8000-00000000000a'
MASTER_SERVER = '5a0b6c1d-0000-4000-8000-00000000000b'
WORKER_SERVERS = ['5a0b6c1d-0000-4000-8000-00000000000c',
                  '5a0b6c1d-0000-4000-8000-00000000000d']


def without_pvs():
    """The sample parameters without PV manifests to read."""
    value = sample()
    del value[param_model.ROOT]['pv_registration_params']
    return value


class Vnf(object):
    """A stack as the user guide's VNF package makes it: a storage server
    at the top, one Master and two Workers in scaling groups."""

    def __init__(self, cloud):
        self.cloud = cloud
        self.stack_id = cloud.add_stack('vnf-k8s')
        cloud.add_server(self.stack_id, 'storage_server',
                         server_id=STORAGE_SERVER)
        cloud.add_port(self.stack_id, 'storage_server_CP', ['10.10.0.4'],
                       device_id=STORAGE_SERVER)
        self.masters = self._group('master_instance', 'masterNode_CP1',
                                   [('10.10.0.5', MASTER_SERVER)])
        self.workers = self._group(
            'worker_instance', 'workerNode_CP2',
            [('10.10.0.21', WORKER_SERVERS[0]),
             ('10.10.0.22', WORKER_SERVERS[1])])

    def _group(self, aspect_id, cp_name, members):
        group = self.cloud.add_scaling_group(self.stack_id, aspect_id)
        member_ids = []
        for index, (address, server_id) in enumerate(members):
            member = self.cloud.add_group_member(group, name='m%d' % index)
            self.cloud.add_server(member, 'vdu', server_id=server_id)
            self.cloud.add_port(member, cp_name, [address],
                                device_id=server_id)
            member_ids.append(member)
        return member_ids

    def heat(self):
        return heat.HeatStack(
            heat.build_heat_client(self.cloud.access_info()), self.stack_id)


@pytest.fixture
def vnf():
    with openstack_api.FakeOpenStack() as cloud:
        yield Vnf(cloud)


def resolve(vnf, overrides=None):
    return vnf_topology.Topology.resolve(
        vnf.heat(), param_model.parse(sample()), overrides)


def test_every_node_is_resolved_with_its_role_address_and_credentials(vnf):
    parsed = param_model.parse(sample())
    nodes = vnf_topology.Topology.resolve(vnf.heat(), parsed).nodes
    assert [(n.role, n.name, n.address, n.fixed_ip, n.stack_id)
            for n in nodes] == [
        ('storage', 'storage_server_CP', '10.10.0.4', '10.10.0.4', None),
        ('master', 'master_instance/' + vnf.masters[0], '10.10.0.5',
         '10.10.0.5', vnf.masters[0]),
        ('worker', 'worker_instance/' + vnf.workers[0], '10.10.0.21',
         '10.10.0.21', vnf.workers[0]),
        ('worker', 'worker_instance/' + vnf.workers[1], '10.10.0.22',
         '10.10.0.22', vnf.workers[1])]
    assert [n.access for n in nodes] == [
        parsed.storage, parsed.master, parsed.worker, parsed.worker]
    assert 'password' not in repr(nodes[1])


def test_topology_selects_by_role_and_address(vnf):
    found = resolve(vnf)
    assert found.storage.address == '10.10.0.4'
    assert [n.address for n in found.masters] == ['10.10.0.5']
    assert [n.role for n in found.cluster_nodes] == [
        'master', 'worker', 'worker']
    assert found.at_address('10.10.0.22').stack_id == vnf.workers[1]


def test_nova_server_id_is_looked_up_only_when_asked(vnf):
    found = resolve(vnf)
    shown = len(vnf.cloud.heat_requests())
    worker = found.at_address('10.10.0.22')
    assert found.server_id(worker) == WORKER_SERVERS[1]
    assert found.server_id(found.storage) == STORAGE_SERVER
    assert len(vnf.cloud.heat_requests()) > shown


def test_nodes_outside_a_scaling_group_are_in_the_top_stack(vnf):
    value = sample()
    del value[param_model.ROOT]['master_node']['aspect_id']
    vnf.cloud.add_port(vnf.stack_id, 'masterNode_CP1', ['10.10.0.9'])
    found = vnf_topology.Topology.resolve(vnf.heat(), param_model.parse(value))
    master, = found.masters
    assert (master.name, master.address, master.stack_id) == (
        'masterNode_CP1', '10.10.0.9', None)


# -- heal -------------------------------------------------------------------

def vnfc(vnfc_id, cpd_id, server_id):
    return types.SimpleNamespace(
        id=vnfc_id,
        compute_resource=types.SimpleNamespace(resource_id=server_id),
        vnfc_cp_info=[types.SimpleNamespace(cpd_id=cpd_id)])


def instance(additional_params=None):
    info = types.SimpleNamespace(
        instance_id=None, additional_params=additional_params,
        vnfc_resource_info=[
            vnfc('v-storage', 'storage_server_CP', STORAGE_SERVER),
            vnfc('v-master', 'masterNode_CP1', MASTER_SERVER),
            vnfc('v-worker0', 'workerNode_CP2', WORKER_SERVERS[0]),
            vnfc('v-worker1', 'workerNode_CP2', WORKER_SERVERS[1])])
    return types.SimpleNamespace(instantiated_vnf_info=info)


def heal(*vnfc_ids, **additional_params):
    return types.SimpleNamespace(vnfc_instance_id=list(vnfc_ids),
                                 additional_params=additional_params)


@pytest.mark.parametrize('vnfc_ids, storage, entire, servers', [
    (('v-storage',), True, False, []),
    (('v-master',), False, False, [('master', MASTER_SERVER)]),
    (('v-worker1',), False, False, [('worker', WORKER_SERVERS[1])]),
    ((), False, True, []),
])
def test_heal_request_is_classified_by_cp_descriptor(
        vnfc_ids, storage, entire, servers):
    targets = lcm_requests.heal_targets(
        instance(), heal(*vnfc_ids), param_model.parse(sample()))
    assert (targets.storage_server, targets.entire_cluster) == (storage,
                                                                entire)
    assert targets.recreates_storage == (storage or entire)
    assert targets.servers == tuple(
        vnf_topology.HealedServer(*s) for s in servers)


@pytest.mark.parametrize('healed, address', [
    (vnf_topology.HealedServer('master', MASTER_SERVER), '10.10.0.5'),
    (vnf_topology.HealedServer('worker', WORKER_SERVERS[1]), '10.10.0.22'),
])
def test_healed_nodes_are_found_by_their_server(vnf, healed, address):
    node, = resolve(vnf).healed([healed])
    assert (node.role, node.address) == (healed.role, address)


def test_healed_server_that_no_stack_holds_is_reported(vnf):
    with pytest.raises(exceptions.HeatLookupError,
                       match='no Heat stack holds the healed server x-1'):
        resolve(vnf).healed([vnf_topology.HealedServer('worker', 'x-1')])


def test_healed_server_of_another_role_is_not_taken_for_this_one(vnf):
    with pytest.raises(exceptions.HeatLookupError):
        resolve(vnf).healed(
            [vnf_topology.HealedServer('worker', MASTER_SERVER)])


# -- scale-out --------------------------------------------------------------

def test_scale_out_selects_the_new_members_in_tackers_order(vnf):
    found = resolve(vnf).members('worker_instance', vnf.workers[::-1])
    assert [n.address for n in found] == ['10.10.0.22', '10.10.0.21']
    assert resolve(vnf).members('worker_instance', []) == []


def test_scale_out_member_unknown_to_heat_is_reported(vnf):
    with pytest.raises(exceptions.HeatLookupError,
                       match="'worker_instance' .* no member stack gone-1"):
        resolve(vnf).members('worker_instance', ['gone-1'])


def test_rollback_names_members_by_resource_name(vnf):
    assert resolve(vnf).member_stack_ids('worker_instance', ['m1', 'm0']) \
        == vnf.workers[::-1]


def test_rollback_naming_a_member_unknown_to_heat_removes_nothing(vnf):
    """Tacker's scale-out rollback names its victims only by resource
    name: one Heat does not know is refused, not skipped."""
    removed = []
    driver = mgmt_driver.KubernetesPvMgmtDriver()
    driver.cluster._workflow = lambda *args: types.SimpleNamespace(
        topology=resolve(vnf),
        remove=lambda nodes, scale_in=False: removed.append(nodes))
    value = sample()
    del value[param_model.ROOT]['storage_server']
    del value[param_model.ROOT]['pv_registration_params']
    with pytest.raises(exceptions.UnknownTargetError) as refused:
        driver.scale_start(
            None, instance(value), types.SimpleNamespace(
                type='SCALE_OUT', aspect_id='worker_instance',
                additional_params={}),
            None, None, scale_name_list=['m1', 'gone'])
    assert refused.value.unknown == [('scale_name_list[1]', 'gone')]
    assert refused.value.known == ['m0', 'm1']
    assert removed == []


def test_scaled_aspect_is_a_master_or_worker_aspect():
    parsed = param_model.parse(sample())
    assert lcm_requests.scaled_node_access(parsed, types.SimpleNamespace(
        aspect_id='worker_instance')) == parsed.worker
    assert lcm_requests.scaled_node_access(parsed, types.SimpleNamespace(
        aspect_id='other')) is None


# -- credential overrides of scale and heal requests ------------------------

def test_overrides_apply_to_the_requests_nodes_only(vnf):
    found = resolve(vnf, vnf_topology.credential_overrides(
        {'worker_node_username': 'admin', 'worker_node_password': 'rotated',
         'unrelated': 1}))
    assert {(n.role, n.access.username, n.access.password)
            for n in found.nodes} == {
        ('storage', 'ubuntu', 'ubuntu'), ('master', 'ubuntu', 'ubuntu'),
        ('worker', 'ubuntu', 'ubuntu')}
    new, = found.members('worker_instance', vnf.workers[1:])
    assert (new.access.username, new.access.password) == ('admin', 'rotated')
    # The topology knows the new login of that node, and only of that one.
    assert [(n.address, n.access.password) for n in found.of_role('worker')] \
        == [(found.of_role('worker')[0].address, 'ubuntu'),
            (new.address, 'rotated')]
    assert 'rotated' in found.passwords()  # so logs redact it


@pytest.mark.parametrize('value', ['pw\x00; reboot', '', 42, 'x' * 5000,
                                   '\ud800'])
def test_hostile_override_is_refused_without_echoing_it(value):
    with pytest.raises(exceptions.ParameterErrors) as caught:
        vnf_topology.credential_overrides({'master_node_password': value,
                                           'worker_node_username': 'ok'})
    assert [error.path for error in caught.value.errors] == [
        'additionalParams.master_node_password']
    if isinstance(value, str) and value:
        assert value not in str(caught.value)


def test_request_without_overrides_changes_nothing():
    assert vnf_topology.credential_overrides(None) == {}
    assert vnf_topology.credential_overrides([]) == {}
    with pytest.raises(exceptions.ParameterErrors):
        vnf_topology.credential_overrides(['master_node_password'])


class Driver(object):
    """The seams StorageFeature needs, answered by the fake cloud."""

    def __init__(self, cloud):
        self.cloud = cloud

    def vnf_package_dir(self, context, vnf_instance):
        return '/nonexistent'  # no manifest is read

    def vim_access_info(self, context, vnf_instance):
        return self.cloud.access_info()

    @staticmethod
    def hook_sessions():
        return None  # outside a hook: the flow opens its own sessions

    @staticmethod
    def key_project(context, vnf_instance):
        return getattr(vnf_instance, "tenant_id", None)


def feature_workflow(vnf, request):
    vnf_instance = instance(without_pvs())
    vnf_instance.instantiated_vnf_info.instance_id = vnf.stack_id
    return storage_feature.StorageFeature(Driver(vnf.cloud)).workflow(
        None, vnf_instance, lcm_request=request)


def test_heal_request_overrides_the_credentials_of_healed_nodes(vnf):
    workflow = feature_workflow(vnf, heal(
        'v-worker0', worker_node_password='new-image-pw'))
    targets = lcm_requests.heal_targets(
        instance(), heal('v-worker0'), workflow.params)
    node, = workflow.topology.healed(targets.servers)
    assert (node.address, node.access.password) == ('10.10.0.21',
                                                    'new-image-pw')
    assert workflow.topology.masters[0].access.password == 'ubuntu'


def test_scale_request_overrides_the_credentials_of_new_nodes(vnf):
    request = types.SimpleNamespace(
        type='SCALE_OUT', aspect_id='worker_instance',
        additional_params={'worker_node_username': 'admin',
                           'worker_node_password': 'rotated'})
    workflow = feature_workflow(vnf, request)
    node, = workflow.topology.members('worker_instance', vnf.workers[1:])
    assert (node.access.username, node.access.password) == ('admin',
                                                            'rotated')


def test_hostile_override_fails_before_heat_is_contacted(vnf):
    with pytest.raises(exceptions.ParameterErrors) as caught:
        feature_workflow(vnf, heal('v-worker0',
                                   worker_node_password='a\nb'))
    assert 'additionalParams.worker_node_password' in str(caught.value)
    assert vnf.cloud.requests == []
