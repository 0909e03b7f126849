"""The PV hooks called with Tacker's real objects, as VnfLcmDriver calls
them, against the testbed (real SSH hosts, fake Heat, test Kubernetes API).

The testbed's own functional tests pass plain attribute objects; this
proves the driver reads Tacker's versioned objects the same way (unset
fields, defaults, nested objects)."""

import json
import os
import uuid

import pytest

pytest.importorskip('tacker.objects')

from tacker import objects  # noqa: E402

from kubernetes_mgmt_pv import exceptions  # noqa: E402
from kubernetes_mgmt_pv import mgmt_driver  # noqa: E402
from testbed import openstack_api  # noqa: E402
from testbed import virtual_vnf  # noqa: E402
from tests.tacker_integration.support import REQUESTS  # noqa: E402
from tests.tacker_integration.support import SAMPLE  # noqa: E402

VDU_OF_CP = {virtual_vnf.STORAGE_CP: 'storage_server',
             virtual_vnf.MASTER_CP: 'masterNode',
             virtual_vnf.WORKER_CP: 'workerNode'}


def vnf_instance(cluster):
    """The VnfInstance Tacker keeps for the cluster, built from its VMs."""
    instance_id = str(uuid.uuid4())
    vnfcs = [objects.VnfcResourceInfo(
        id=vnfc.vnfc_id, vdu_id=VDU_OF_CP[vnfc.cp_name],
        compute_resource=objects.ResourceHandle(
            resource_id=vnfc.server_id,
            vim_level_resource_type='OS::Nova::Server'),
        vnfc_cp_info=[objects.VnfcCpInfo(id=str(uuid.uuid4()),
                                         cpd_id=vnfc.cp_name)])
        for vnfc in cluster.vnfcs.values()]
    return objects.VnfInstance(
        id=instance_id, vnfd_id=str(uuid.uuid4()), vim_connection_info=[],
        instantiated_vnf_info=objects.InstantiatedVnfInfo(
            flavour_id='simple', vnf_instance_id=instance_id,
            instance_id=cluster.stack_id, vnfc_resource_info=vnfcs,
            additional_params=cluster.additional_params()))


def instantiate_end(cluster, driver, context):
    driver.instantiate_end(
        context=context, vnf_instance=vnf_instance(cluster),
        instantiate_vnf_request=objects.InstantiateVnfRequest(
            flavour_id='simple',
            additional_params=cluster.additional_params()),
        grant=None, grant_request=None, vnf={})


def assert_pvs_available_on(cluster, storage_ip):
    volumes = virtual_vnf.persistent_volumes(cluster.nodes('master')[0])
    assert sorted(volumes) == ['nfs-pv1', 'nfs-pv2', 'nfs-pv3']
    for name, volume in volumes.items():
        assert volume['status']['phase'] == 'Available', name
        assert volume['spec']['nfs']['server'] == storage_ip, name


def test_instantiate_then_heal_the_storage_server(cluster, context):
    driver = cluster.driver()
    instantiate_end(cluster, driver, context)
    assert_pvs_available_on(cluster, cluster.host('storage').ip)

    heal = objects.HealVnfRequest(
        vnfc_instance_id=[cluster.vnfcs['storage'].vnfc_id],
        cause='Heal the Storage server VM')
    driver.heal_start(context=context, vnf_instance=vnf_instance(cluster),
                      heal_vnf_request=heal, grant=None, grant_request=None)
    assert virtual_vnf.persistent_volumes(cluster.nodes('master')[0]) == {}

    cluster.replace_host('storage')
    driver.heal_end(context=context, vnf_instance=vnf_instance(cluster),
                    heal_vnf_request=heal, grant=None, grant_request=None,
                    vnf={})
    assert_pvs_available_on(cluster, cluster.host('storage').ip)


def test_scale_out_installs_the_nfs_client_on_the_new_worker(cluster,
                                                             context):
    driver = cluster.driver()
    instantiate_end(cluster, driver, context)
    new = cluster.add_node('worker')
    assert not virtual_vnf.installed(new, 'nfs-common')

    driver.scale_end(
        context=context, vnf_instance=vnf_instance(cluster),
        scale_vnf_request=objects.ScaleVnfRequest(
            type='SCALE_OUT', aspect_id=virtual_vnf.WORKER_ASPECT,
            number_of_steps=1),
        grant=None, grant_request=None,
        scale_out_id_list=[cluster.vnfcs[new.name].member_stack_id], vnf={})
    assert virtual_vnf.installed(new, 'nfs-common')


# -- requests naming what the instance does not have ------------------------

@pytest.fixture
def refusing():
    """The entry-point driver on the sample package, its OpenStack VIM a
    fake that records every request; no VM."""
    with openstack_api.FakeOpenStack() as cloud:
        class Driver(mgmt_driver.KubernetesPvMgmtDriver):
            def vnf_package_dir(self, context, vnf_instance):
                return SAMPLE

            def vim_access_info(self, context, vnf_instance):
                return cloud.access_info()

        yield Driver(), cloud


def sample_instance(**info):
    """A VnfInstance with the sample instantiate request's parameters."""
    with open(os.path.join(REQUESTS, 'instantiate_simple.json')) as stream:
        params = json.load(stream)['additionalParams']
    instance_id = str(uuid.uuid4())
    return objects.VnfInstance(
        id=instance_id, vnfd_id=str(uuid.uuid4()), vim_connection_info=[],
        instantiated_vnf_info=objects.InstantiatedVnfInfo(
            flavour_id='simple', vnf_instance_id=instance_id,
            instance_id=str(uuid.uuid4()), additional_params=params, **info))


@pytest.mark.parametrize('hook', ['heal_start', 'heal_end'])
def test_a_heal_of_an_unknown_vnfc_is_refused_before_heat_is_asked(
        refusing, context, hook):
    driver, cloud = refusing
    worker = objects.VnfcResourceInfo(
        id=str(uuid.uuid4()), vdu_id='workerNode',
        compute_resource=objects.ResourceHandle(
            resource_id=str(uuid.uuid4()),
            vim_level_resource_type='OS::Nova::Server'),
        vnfc_cp_info=[objects.VnfcCpInfo(id=str(uuid.uuid4()),
                                         cpd_id=virtual_vnf.WORKER_CP)])
    heal = objects.HealVnfRequest(vnfc_instance_id=[worker.id, 'abc'])
    with pytest.raises(exceptions.UnknownTargetError) as refused:
        getattr(driver, hook)(
            context=context,
            vnf_instance=sample_instance(vnfc_resource_info=[worker]),
            heal_vnf_request=heal, grant=None, grant_request=None)
    assert refused.value.unknown == [('vnfcInstanceId[1]', 'abc')]
    assert refused.value.known == [worker.id]
    assert cloud.requests == []


@pytest.mark.parametrize('hook, kind, kwargs', [
    ('scale_start', 'SCALE_IN', {'scale_out_id_list': ['s1'],
                                 'scale_name_list': ['r1']}),
    ('scale_start', 'SCALE_OUT', {'scale_name_list': ['r1']}),  # rollback
    ('scale_end', 'SCALE_OUT', {'scale_out_id_list': ['s1']}),
])
def test_a_scale_of_an_unknown_aspect_is_refused_before_heat_is_asked(
        refusing, context, hook, kind, kwargs):
    driver, cloud = refusing
    instance = sample_instance(scale_status=[
        objects.ScaleInfo(aspect_id=aspect, scale_level=0)
        for aspect in ('master_instance', 'worker_instance')])
    with pytest.raises(exceptions.UnknownTargetError) as refused:
        getattr(driver, hook)(
            context=context, vnf_instance=instance,
            scale_vnf_request=objects.ScaleVnfRequest(
                type=kind, aspect_id='workers', number_of_steps=1),
            grant=None, grant_request=None, **kwargs)
    assert refused.value.unknown == [('aspectId', 'workers')]
    assert refused.value.known == ['master_instance', 'worker_instance']
    assert cloud.requests == []
