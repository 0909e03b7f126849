"""The sample VNFD parses with tosca-parser, the library Tacker uses, with
the ETSI SOL001 types the package carries, and describes what the BaseHOT
and the requests name."""

import json
import os
import types

import pytest
import yaml

pytest.importorskip('tacker.objects')

from tacker.tosca import utils as tosca_utils  # noqa: E402
from toscaparser.tosca_template import ToscaTemplate  # noqa: E402

from kubernetes_mgmt_pv import feature_hooks  # noqa: E402
from tests.tacker_integration.support import SAMPLE  # noqa: E402

TOP_VNFD = os.path.join(SAMPLE, 'Definitions',
                        'sample_kubernetes_top.vnfd.yaml')


@pytest.fixture(scope='module')
def flavours():
    # Tacker passes local_defs mapping the ETSI forge URLs to local copies
    # (missing from the wheel, see test_vnf_package); the sample imports
    # the ETSI types from its own Definitions/, so none is needed.
    tosca = ToscaTemplate(TOP_VNFD, None, True, local_defs={})
    return {tp.tpl['substitution_mappings']['properties']['flavour_id']: tp
            for tp in tosca.nested_tosca_templates_with_topology}


def nodes(topology):
    return {node.name: node for node in topology.nodetemplates}


def test_both_flavours_are_defined(flavours):
    assert sorted(flavours) == ['ha', 'simple']


@pytest.mark.parametrize('flavour', ['simple', 'ha'])
def test_storage_server_with_volume_and_cp(flavours, flavour):
    templates = nodes(flavours[flavour])
    assert templates['storage_server'].type == 'tosca.nodes.nfv.Vdu.Compute'
    assert templates['storage_server'].requirements == [
        {'virtual_storage': 'storage_server_volume'}]
    assert templates['storage_server_volume'].type == \
        'tosca.nodes.nfv.Vdu.VirtualBlockStorage'
    assert templates['storage_server_CP'].type == 'tosca.nodes.nfv.VduCp'
    assert templates['storage_server_CP'].requirements == [
        {'virtual_binding': 'storage_server'}]
    assert templates['masterNode_CP1'].requirements == [
        {'virtual_binding': 'masterNode'}]
    assert templates['workerNode_CP2'].requirements == [
        {'virtual_binding': 'workerNode'}]


@pytest.mark.parametrize('flavour', ['simple', 'ha'])
def test_vnflcm_hooks_point_at_the_driver_artifact(flavours, flavour):
    vnf = nodes(flavours[flavour])['VNF']
    hooks = {i.name: i.implementation for i in vnf.interfaces
             if i.type == 'Vnflcm'}
    assert hooks == dict.fromkeys(
        ['instantiate_end', 'terminate_start', 'terminate_end',
         'scale_start', 'scale_end', 'heal_start', 'heal_end',
         # Tacker v2's rollbacks; their interface type derives SOL001's.
         'instantiate_rollback_start', 'scale_rollback_start',
         'change_external_connectivity_start', 'modify_information_start',
         'change_current_package_start',
         # Tacker v2's ChangeCurrentVnfPackage: the minor upgrade.
         'change_current_package_end',
         'change_current_package_rollback_start'],
        feature_hooks.DRIVER_NAME)
    assert vnf.entity_tpl['artifacts'][feature_hooks.DRIVER_NAME] == {
        'description': 'Management driver for Kubernetes clusters with '
                       'PersistentVolumes',
        'type': 'tosca.artifacts.Implementation.Python',
        'file': 'Scripts/mgmt_driver.py'}


@pytest.mark.parametrize('flavour, masters', [('simple', 1), ('ha', 3)])
def test_scaling_aspects_and_initial_sizes(flavours, flavour, masters):
    policies = {p.name: p for p in flavours[flavour].policies}
    aspects = policies['scaling_aspects'].properties['aspects']
    # Tacker counts a group's VNFCs through its aspect; the Masters' one
    # has no scale level to reach (the driver never scales Masters).
    assert sorted(aspects) == ['master_instance', 'worker_instance']
    assert aspects['master_instance']['max_scale_level'] == 0
    initial = {p.targets[0]: p.properties['initial_delta'][
        'number_of_instances'] for p in policies.values()
        if p.type == 'tosca.policies.nfv.VduInitialDelta'}
    assert initial == {'masterNode': masters, 'workerNode': 2,
                       'storage_server': 1}
    deltas = {p.properties['aspect']: p.targets for p in policies.values()
              if p.type == 'tosca.policies.nfv.VduScalingAspectDeltas'}
    assert deltas == {'master_instance': ['masterNode'],
                      'worker_instance': ['workerNode']}
    levels = {p.targets[0]: {level['number_of_instances'] for level in
                             p.properties['levels'].values()}
              for p in policies.values()
              if p.type == 'tosca.policies.nfv.VduInstantiationLevels'}
    assert levels['masterNode'] == {masters}  # one count at every level
    profile = nodes(flavours[flavour])['masterNode'].get_property_value(
        'vdu_profile')
    assert (profile['min_number_of_instances'],
            profile['max_number_of_instances']) == (masters, masters)


@pytest.mark.parametrize('flavour, masters', [('simple', 1), ('ha', 3)])
@pytest.mark.parametrize('level, workers, worker_level', [
    (None, 2, 0), ('instantiation_level_1', 2, 0),
    ('instantiation_level_2', 4, 2)])
def test_tacker_never_resizes_the_master_group(
        flavour, masters, level, workers, worker_level):
    """Tacker's own reading of the flavour and its BaseHOT at instantiate:
    the Master group keeps the BaseHOT's size at every instantiation level,
    at scale level 0 of at most 0, so Tacker refuses to scale it."""
    path = os.path.join(SAMPLE, 'Definitions',
                        'sample_kubernetes_df_%s.yaml' % flavour)
    with open(path) as stream:
        vnfd = yaml.safe_load(stream)
    with open(os.path.join(SAMPLE, 'BaseHOT', flavour,
                           '%s_hot_top.yaml' % flavour)) as stream:
        hot = yaml.safe_load(stream)
    groups = {name: name for name, resource in hot['resources'].items()
              if resource['type'] == 'OS::Heat::AutoScalingGroup'}
    assert sorted(groups) == ['master_instance', 'worker_instance']
    vnf = {'attributes': {'scaling_group_names': json.dumps(groups)}}
    request = types.SimpleNamespace(instantiation_level_id=level)
    scale = tosca_utils.get_scale_group(vnf, vnfd, request)['scaleGroupDict']
    assert sorted(scale) == ['master_instance', 'worker_instance']
    assert (scale['master_instance']['default'],
            scale['master_instance']['initialLevel'],
            scale['master_instance']['maxLevel']) == (masters, 0, 0)
    assert (scale['worker_instance']['default'],
            scale['worker_instance']['initialLevel']) == (workers,
                                                          worker_level)
    master_group = hot['resources']['master_instance']['properties']
    assert {master_group[key] for key in (
        'min_size', 'max_size', 'desired_capacity')} == {masters}
    assert not any(resource['type'] == 'OS::Heat::ScalingPolicy'
                   and resource['properties']['auto_scaling_group_id'] ==
                   {'get_resource': 'master_instance'}
                   for resource in hot['resources'].values())
