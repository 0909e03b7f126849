"""The Tacker v2 package and dicts as Tacker 16's own v2 code reads them:
the VNFD routes every hook of the driver to the script, the v2 BaseHOT
asks only for nfv keys v2's default UserData fills, and the test dicts of
the v2 door have the shapes of Tacker's v2 objects."""

import json
import os
import zipfile

import pytest

from kubernetes_mgmt_pv import feature_hooks
from kubernetes_mgmt_pv.vnf_package import csar
from tests.tacker_integration import support
from tests.unit import v2_dicts as v2

# What tacker.sol_refactored.infra_drivers.openstack.userdata_default
# gives a value to.
DEFAULT_USERDATA_KEYS = {
    'VDU': {'computeFlavourId', 'vcImageId', 'desired_capacity',
            'locationConstraints'},
    'CP': {'network', 'fixed_ips'}}


@pytest.fixture(scope='module')
def v2_vnfd(tmp_path_factory):
    from tacker.sol_refactored.common import vnfd_utils
    directory = tmp_path_factory.mktemp('v2-package')
    archive = directory / 'package.zip'
    csar.build(support.SAMPLE, str(archive), api='v2')
    with zipfile.ZipFile(archive) as opened:
        opened.extractall(directory / 'csar')
    vnfd = vnfd_utils.Vnfd('sample')
    vnfd.init_from_csar_dir(str(directory / 'csar'))
    return vnfd


@pytest.mark.parametrize('flavour', ['simple', 'ha'])
def test_every_hook_runs_the_script(v2_vnfd, flavour):
    hooks = set(feature_hooks.CLUSTER) | set(
        feature_hooks.PERSISTENT_VOLUME) | set(
        feature_hooks.CLUSTER_V2_ROLLBACK)
    for hook in hooks:
        assert v2_vnfd.get_interface_script(flavour, hook) == \
            csar.V2_ARTIFACT_FILE
    for undeclared in ('instantiate_start', 'scale_rollback_end',
                       'modify_information_end'):
        assert v2_vnfd.get_interface_script(flavour, undeclared) is None


@pytest.mark.parametrize('flavour', ['simple', 'ha'])
def test_the_v2_basehot_needs_only_default_userdata_keys(v2_vnfd, flavour):
    """Or keys the sample request gives in additionalParams.nfv, which
    the default UserData merges into the stack's nfv (the keypairs)."""
    from tacker.sol_refactored.common import common_script_utils
    nfv = common_script_utils.init_nfv_dict(
        v2_vnfd.get_base_hot(flavour)['template'])
    with open(os.path.join(REQUESTS_V2, 'instantiate_%s.json' % flavour)) \
            as handle:
        given = json.load(handle)['additionalParams']['nfv']
    for kind, entries in nfv.items():
        for name, keys in entries.items():
            extra = set(keys) - DEFAULT_USERDATA_KEYS[kind]
            assert extra <= set(given.get(kind, {}).get(name, {})), (
                kind, name)
    assert 'desired_capacity' in nfv['VDU']['workerNode']


def test_the_door_test_dicts_have_tackers_v2_shapes():
    from tacker.sol_refactored import objects
    objects.register_all()
    inst = v2.vnf_instance(metadata={'kubernetesMgmtPv': {'params': {}}})
    assert objects.VnfInstanceV2.from_dict(inst).to_dict() == inst
    grant = v2.grant_request('SCALE', [v2.VNFCS[1][0]])
    assert objects.GrantRequestV1.from_dict(grant).to_dict() == grant
    request = v2.instantiate_request()
    assert objects.InstantiateVnfRequest.from_dict(request).to_dict() == \
        request


REQUESTS_V2 = os.path.join(support.ROOT, 'samples', 'requests-v2')
V2_SCHEMAS = {
    'instantiate_simple.json': 'InstantiateVnfRequest_V200',
    'instantiate_ha.json': 'InstantiateVnfRequest_V200',
    'heal_storage_server.json': 'HealVnfRequest_V200',
    'heal_entire_cluster.json': 'HealVnfRequest_V200',
    'scale_out_worker.json': 'ScaleVnfRequest_V200',
    'scale_in_worker.json': 'ScaleVnfRequest_V200',
    'change_vnfpkg.json': 'ChangeCurrentVnfPkgRequest_V200',
}


def test_every_v2_sample_request_is_checked():
    assert sorted(os.listdir(REQUESTS_V2)) == sorted(V2_SCHEMAS)


@pytest.mark.parametrize('name', sorted(V2_SCHEMAS))
def test_v2_request_passes_the_v2_api_schema(name):
    from tacker.sol_refactored.api.schemas import vnflcm_v2
    from tacker.sol_refactored.api import validator
    with open(os.path.join(REQUESTS_V2, name)) as stream:
        body = json.load(stream)
    validator.SolSchemaValidator(
        getattr(vnflcm_v2, V2_SCHEMAS[name])).validate(body)
