"""The sample request bodies pass Tacker's API schemas, become Tacker's
objects as its API makes them, and select what the operator guide says."""

import json
import os
import uuid

import pytest

pytest.importorskip('tacker.objects')

from tacker.api.schemas import vnf_lcm  # noqa: E402
from tacker.api.validation import validators  # noqa: E402
from tacker.common import utils as tacker_utils  # noqa: E402
from tacker import objects  # noqa: E402

from kubernetes_mgmt_pv.request import lcm_requests  # noqa: E402
from kubernetes_mgmt_pv.request import param_model  # noqa: E402
from tests.tacker_integration.support import REQUESTS  # noqa: E402

SCHEMAS = {
    'instantiate_simple.json': vnf_lcm.instantiate,
    'instantiate_ha.json': vnf_lcm.instantiate,
    'instantiate_offline.json': vnf_lcm.instantiate,
    'instantiate_proxy.json': vnf_lcm.instantiate,
    'heal_storage_server.json': vnf_lcm.heal,
    'heal_entire_cluster.json': vnf_lcm.heal,
    'scale_out_worker.json': vnf_lcm.scale,
    'scale_in_worker.json': vnf_lcm.scale,
}


def load(name):
    with open(os.path.join(REQUESTS, name)) as stream:
        return json.load(stream)


def snake(name):
    """The body as Tacker's v1 API controller converts it."""
    return tacker_utils.convert_camelcase_to_snakecase(load(name))


def test_every_sample_request_is_checked():
    assert sorted(os.listdir(REQUESTS)) == sorted(SCHEMAS)


@pytest.mark.parametrize('name', sorted(SCHEMAS))
def test_request_passes_the_api_schema(name):
    validators._SchemaValidator(SCHEMAS[name]).validate(load(name))


@pytest.fixture
def cluster_params():
    return param_model.parse(
        load('instantiate_simple.json')['additionalParams'])


def instance_with_storage_vnfc(vnfc_id):
    instance_id = str(uuid.uuid4())
    storage = objects.VnfcResourceInfo(
        id=vnfc_id, vdu_id='storage_server',
        compute_resource=objects.ResourceHandle(resource_id='server-1'),
        vnfc_cp_info=[objects.VnfcCpInfo(id='cp-1',
                                         cpd_id='storage_server_CP')])
    return objects.VnfInstance(
        id=instance_id, vnfd_id=str(uuid.uuid4()),
        instantiated_vnf_info=objects.InstantiatedVnfInfo(
            flavour_id='simple', vnf_instance_id=instance_id,
            vnfc_resource_info=[storage]))


def test_sol002_heal_selects_the_storage_server(context, cluster_params):
    heal = objects.HealVnfRequest(context=context,
                                  **snake('heal_storage_server.json'))
    # The operator replaces the placeholder with the Storage server's
    # vnfcResourceInfo id; here it is that id.
    instance = instance_with_storage_vnfc(heal.vnfc_instance_id[0])
    targets = lcm_requests.heal_targets(
        instance, heal, cluster_params)
    assert (targets.storage_server, targets.entire_cluster) == (True, False)


def test_sol003_heal_is_the_entire_cluster(context, cluster_params):
    heal = objects.HealVnfRequest(context=context,
                                  **snake('heal_entire_cluster.json'))
    targets = lcm_requests.heal_targets(
        instance_with_storage_vnfc(str(uuid.uuid4())), heal, cluster_params)
    assert (targets.storage_server, targets.entire_cluster) == (False, True)


@pytest.mark.parametrize('name, kind', [('scale_out_worker.json', 'SCALE_OUT'),
                                        ('scale_in_worker.json', 'SCALE_IN')])
def test_scale_requests_scale_the_workers(context, cluster_params, name,
                                          kind):
    scale = objects.ScaleVnfRequest.obj_from_primitive(snake(name), context)
    assert (scale.type, scale.number_of_steps) == (kind, 1)
    assert lcm_requests.scaled_node_access(
        cluster_params, scale) == cluster_params.worker
