"""The PV hooks called with Tacker's real objects, as VnfLcmDriver calls
them, against the testbed (real SSH hosts, fake Heat, test Kubernetes API).

The testbed's own functional tests pass plain attribute objects; this
proves the driver reads Tacker's versioned objects the same way (unset
fields, defaults, nested objects)."""

import uuid

import pytest

pytest.importorskip('tacker.objects')

from tacker import objects  # noqa: E402

from testbed import cluster as cluster_mod  # noqa: E402

VDU_OF_CP = {cluster_mod.STORAGE_CP: 'storage_server',
             cluster_mod.MASTER_CP: 'masterNode',
             cluster_mod.WORKER_CP: 'workerNode'}


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
    volumes = cluster_mod.persistent_volumes(cluster.nodes('master')[0])
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
    assert cluster_mod.persistent_volumes(cluster.nodes('master')[0]) == {}

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
    assert not cluster_mod.installed(new, 'nfs-common')

    driver.scale_end(
        context=context, vnf_instance=vnf_instance(cluster),
        scale_vnf_request=objects.ScaleVnfRequest(
            type='SCALE_OUT', aspect_id=cluster_mod.WORKER_ASPECT,
            number_of_steps=1),
        grant=None, grant_request=None,
        scale_out_id_list=[cluster.vnfcs[new.name].member_stack_id], vnf={})
    assert cluster_mod.installed(new, 'nfs-common')
