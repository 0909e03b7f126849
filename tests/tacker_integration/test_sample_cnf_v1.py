"""The sample CNF (samples/cnf_with_pv) and its v1 requests (samples/
requests-cnf-v1) as Tacker v1 reads them, offline: its API schemas and
objects, the VNFD keys its conductor reads, and its Kubernetes infra
driver's objects made from the manifests (what broke with the kubernetes
client 37). The whole v1 CNF runs in tests/tacker_rest/test_lifecycle.py.
"""

import json
import os

import pytest

pytest.importorskip('tacker.objects')

from tacker.api.schemas import vnf_lcm  # noqa: E402
from tacker.api.validation import validators  # noqa: E402
from tacker.common import utils as tacker_utils  # noqa: E402
from tacker import objects  # noqa: E402
from tacker.tosca import utils as toscautils  # noqa: E402
from tacker.vnflcm import utils as vnflcm_utils  # noqa: E402
from tacker.vnfm.infra_drivers.kubernetes.k8s import \
    translate_outputs  # noqa: E402
from tacker.vnfm.infra_drivers.kubernetes import \
    kubernetes_driver  # noqa: E402

from tests.tacker_integration.support import ROOT  # noqa: E402

CNF = os.path.join(ROOT, 'samples', 'cnf_with_pv')
REQUESTS = os.path.join(ROOT, 'samples', 'requests-cnf-v1')
SCHEMAS = {'create.json': vnf_lcm.create,
           'instantiate.json': vnf_lcm.instantiate,
           'instantiate_dynamic.json': vnf_lcm.instantiate,
           'scale_out_dynamic.json': vnf_lcm.scale,
           'terminate.json': vnf_lcm.terminate}


def load(name):
    with open(os.path.join(REQUESTS, name)) as stream:
        return json.load(stream)


def test_every_v1_cnf_request_is_checked():
    assert sorted(os.listdir(REQUESTS)) == sorted(SCHEMAS)


@pytest.mark.parametrize('name', sorted(SCHEMAS))
def test_v1_cnf_request_passes_the_api_schema(name):
    validators._SchemaValidator(SCHEMAS[name]).validate(load(name))


def test_instantiate_names_a_kubernetes_vim_and_the_manifests(context):
    request = objects.InstantiateVnfRequest.obj_from_primitive(
        tacker_utils.convert_camelcase_to_snakecase(load('instantiate.json')),
        context)
    vim, = request.vim_connection_info
    assert (vim.vim_type, vim.id) == ('kubernetes', 'vim1')
    assert request.additional_params[
        kubernetes_driver.CNF_TARGET_FILES_KEY] == [
        'Files/kubernetes/pvc.yaml', 'Files/kubernetes/deployment.yaml']


@pytest.mark.parametrize('request_name, vdu', [
    ('instantiate.json', 'web'), ('instantiate_dynamic.json', 'db')])
def test_the_conductor_reads_the_vnfd_of_the_flavour(monkeypatch,
                                                     request_name, vdu):
    """_get_vnfd_dict pops substitution_mappings.requirements and the
    instance's VNFCs are counted from the instantiation levels'
    scale_info: without either key the v1 instantiate fails at once.
    (The tacker wheel lacks the ETSI definitions tosca_tmpl_local_defs
    maps; the sample carries its own: see test_vnf_package.py.)"""
    monkeypatch.setattr(toscautils, 'tosca_tmpl_local_defs', dict)
    vnfd = vnflcm_utils._get_flavour_based_vnfd(
        CNF, load(request_name)['flavourId'])
    mappings = vnfd['topology_template']['substitution_mappings']
    assert mappings.pop('requirements') == {}
    assert vnflcm_utils._convert_desired_capacity(None, vnfd, vdu) == 1


def test_the_driver_makes_client_objects_of_the_manifests():
    """Tacker v1 builds each manifest's object with the kubernetes
    client's models before sending it; the client 37 refuses that
    ("Failed to init resource")."""
    objs = translate_outputs.Transformer(
        None, None, None, None).get_k8s_objs_from_yaml(
        load('instantiate.json')['additionalParams'][
            kubernetes_driver.CNF_TARGET_FILES_KEY], CNF, 'default')
    made = {obj['object'].kind: obj['object'] for obj in objs}
    assert sorted(made) == ['Deployment', 'PersistentVolumeClaim']
    assert made['PersistentVolumeClaim'].spec.volume_name == 'nfs-pv1'
    volume, = made['Deployment'].spec.template.spec.volumes
    assert volume.persistent_volume_claim.claim_name == 'web-data'
