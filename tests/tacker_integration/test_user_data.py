"""The sample's UserData, loaded and called as Tacker's OpenStack infra
driver does, gives Heat every parameter the BaseHOT of each flavour reads."""

import importlib
import json
import os
import sys
import types

import pytest
import yaml

pytest.importorskip('tacker.objects')

from tacker.common import utils as tacker_utils  # noqa: E402
from tacker.extensions import vnfm  # noqa: E402
from tacker import objects  # noqa: E402
from tacker.vnflcm import utils as vnflcm_utils  # noqa: E402

from tests.tacker_integration.support import REQUESTS  # noqa: E402

IMAGE = 'ubuntu-22.04-server-cloudimg-amd64'
NETWORK = 'f0c82461-36b5-4d86-8322-b0bc19cda65f'


def instantiate_request(name, context, change=None):
    """The request file as Tacker's API turns it into an object."""
    with open(os.path.join(REQUESTS, name)) as stream:
        body = json.load(stream)
    if change:
        change(body)
    return objects.InstantiateVnfRequest.obj_from_primitive(
        tacker_utils.convert_camelcase_to_snakecase(body), context)


@pytest.fixture
def user_data_class():
    """Import the package's UserData module the way Tacker does (package
    on sys.path, module path from lcm-operation-user-data), then forget it
    so the next package's module is imported afresh."""
    loaded = []

    def load(package_path, additional_params):
        module_name = os.path.splitext(additional_params[
            'lcm-operation-user-data'].lstrip('./'))[0].replace('/', '.')
        sys.path.append(package_path)
        try:
            module = importlib.import_module(module_name)
        finally:
            sys.path.remove(package_path)
        loaded.append(module_name)
        return getattr(module, additional_params[
            'lcm-operation-user-data-class'])
    yield load
    for name in list(sys.modules):
        if any(name == m or m.startswith(name + '.') for m in loaded):
            del sys.modules[name]


def run_user_data(context, onboard, built_package, user_data_class, flavour,
                  request):
    vnf_instance = onboard(built_package)
    base_hot, nested = vnflcm_utils.get_base_nest_hot_dict(
        context, flavour, vnf_instance.vnfd_id)
    vnfd = vnflcm_utils.get_vnfd_dict(context, vnf_instance.vnfd_id, flavour)
    klass = user_data_class(
        vnflcm_utils._get_vnf_package_path(context, vnf_instance.vnfd_id),
        request.additional_params)
    return klass.instantiate(dict(nested, heat_template=base_hot), vnfd,
                             request, None)


@pytest.mark.parametrize('flavour', ['simple', 'ha'])
def test_every_basehot_parameter_gets_a_value(
        tacker_conf, context, onboard, built_package, user_data_class,
        flavour):
    request = instantiate_request('instantiate_%s.json' % flavour, context)
    node = {'flavor': 'm1.medium', 'image': IMAGE,
            'key_name': 'cluster-nodes'}
    storage = dict(node, key_name='storage-server')
    assert run_user_data(context, onboard, built_package, user_data_class,
                         flavour, request) == {'nfv': {
                             'VDU': {'masterNode': node, 'workerNode': node,
                                     'storage_server': storage},
                             'CP': {'masterNode_CP1': {'network': NETWORK},
                                    'workerNode_CP2': {'network': NETWORK},
                                    'storage_server_CP': {
                                        'network': NETWORK}},
                             'keypairs': {'masterNode': 'cluster-nodes',
                                          'workerNode': 'cluster-nodes',
                                          'storage_server': 'storage-server'},
                             'management_cidr': '192.0.2.0/24'}}


def test_a_request_without_the_management_cidr_is_reported(
        tacker_conf, context, onboard, built_package, user_data_class):
    def drop_cidr(body):
        del body['additionalParams']['nfv']['management_cidr']
    request = instantiate_request('instantiate_ha.json', context, drop_cidr)
    with pytest.raises(vnfm.LCMUserDataFailed,
                       match='additionalParams.nfv.management_cidr'):
        run_user_data(context, onboard, built_package, user_data_class,
                      'ha', request)


def drop_storage_link(body):
    body['extVirtualLinks'] = [link for link in body['extVirtualLinks']
                               if link['id'] != 'net0_storage']


def drop_worker_keypair(body):
    del body['additionalParams']['nfv']['VDU']['workerNode']


@pytest.mark.parametrize('change, parameter', [
    (drop_storage_link, 'nfv.CP.storage_server_CP.network'),
    # The BaseHOT boots every VM with the keypair the request names.
    (drop_worker_keypair, 'nfv.keypairs.workerNode has no value: set '
                          'additionalParams.nfv.VDU.workerNode.key_name')])
def test_a_parameter_without_a_value_is_reported(
        tacker_conf, context, onboard, built_package, user_data_class,
        change, parameter):
    request = instantiate_request('instantiate_simple.json', context,
                                  change)
    with pytest.raises(vnfm.LCMUserDataFailed, match=parameter):
        run_user_data(context, onboard, built_package, user_data_class,
                      'simple', request)


def test_a_v1_heal_keeps_every_vms_keypair(
        tacker_conf, context, onboard, built_package, user_data_class):
    """Tacker v1 heals with the stack parameters of the instantiate, the
    healed VDU's nfv.VDU entry rebuilt from the VNFD (flavor and image
    only): the keypairs, outside it, reach the healed Worker too."""
    request = instantiate_request('instantiate_simple.json', context)
    params = run_user_data(context, onboard, built_package, user_data_class,
                           'simple', request)
    vnf_instance = onboard(built_package)
    vnfd = vnflcm_utils.get_vnfd_dict(context, vnf_instance.vnfd_id,
                                      'simple')
    vnf_dict = {'vnfd_id': vnf_instance.vnfd_id,
                'attributes': {'stack_param': str(params)},
                'vnfd': {'attributes': {'vnfd_simple': yaml.safe_dump(vnfd)}}}
    worker = types.SimpleNamespace(id='vnfc-worker', vdu_id='workerNode')
    healed = vnflcm_utils.get_stack_param(
        context, vnf_dict,
        objects.HealVnfRequest(vnfc_instance_id=['vnfc-worker']),
        types.SimpleNamespace(flavour_id='simple',
                              vnfc_resource_info=[worker]))
    assert 'key_name' not in healed['nfv']['VDU']['workerNode']
    assert healed['nfv']['keypairs'] == params['nfv']['keypairs']
