"""``feature_hooks`` is the one list of the hooks each feature acts at: the
feature classes, the operator guide's table and the sample VNFDs must
agree with it (package_check and the hashed-file test read it directly);
the guide's example and the sample VNFDs route its guard hooks too."""

import os
import re
import textwrap

import pytest

from kubernetes_mgmt_pv.cluster import cluster_feature
from kubernetes_mgmt_pv.doors import tacker_compat
from kubernetes_mgmt_pv import feature_hooks
from kubernetes_mgmt_pv import safe_yaml
from kubernetes_mgmt_pv.storage import storage_feature

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
GUIDE = os.path.join(ROOT, 'doc', 'operator-guide.rst')
DEFINITIONS = os.path.join(ROOT, 'samples', 'kubernetes_pv_vnf',
                           'Definitions')
FEATURES = {'Cluster': feature_hooks.CLUSTER,
            'Persistent volumes': feature_hooks.PERSISTENT_VOLUME}
ALL = set(feature_hooks.CLUSTER) | set(feature_hooks.PERSISTENT_VOLUME) | \
    set(feature_hooks.GUARDS)


def guide_lines():
    with open(GUIDE, encoding='utf-8') as guide:
        return guide.read().splitlines()


@pytest.mark.parametrize('feature, declared', [
    (cluster_feature.ClusterFeature, feature_hooks.CLUSTER),
    (storage_feature.StorageFeature, feature_hooks.PERSISTENT_VOLUME),
])
def test_the_declaration_is_the_hooks_each_feature_defines(
        feature, declared):
    defined = {name for name in vars(feature) if name in tacker_compat.HOOKS}
    assert defined == set(declared)
    assert len(declared) == len(set(declared))


def test_the_guide_table_lists_each_features_hooks():
    lines = guide_lines()
    header = lines.index(next(line for line in lines
                              if re.match(r'Hook +Cluster +Persistent', line)))
    columns = [match.span() for match in re.finditer('=+', lines[header - 1])]
    names = [lines[header][start:end].strip() for start, end in columns]
    rows = lines[header + 2:lines.index(lines[header - 1], header + 2)]
    table = {name: set() for name in names[1:]}
    for row in rows:
        cells = [row[start:end].strip() for start, end in columns]
        for name, cell in zip(names[1:], cells[1:]):
            assert cell in ('yes', ''), row
            if cell:
                table[name].add(cells[0])
    assert table == {name: set(declared)
                     for name, declared in FEATURES.items()}


def test_the_guide_vnfd_example_routes_every_hook():
    lines = guide_lines()
    start = lines.index('Route all of them to it::') + 2
    end = next(index for index in range(start, len(lines))
               if lines[index] and not lines[index].startswith(' '))
    example = safe_yaml.loads(textwrap.dedent('\n'.join(lines[start:end])),
                              safe_yaml.DEFINITION_LIMITS)
    routed = example['node_templates']['VNF']['interfaces']['Vnflcm']
    assert set(routed) == ALL
    assert {operation['implementation'] for operation in routed.values()} \
        == {feature_hooks.DRIVER_NAME}


@pytest.mark.parametrize('name', ['sample_kubernetes_df_simple.yaml',
                                  'sample_kubernetes_df_ha.yaml'])
def test_the_sample_vnfds_route_every_hook_to_the_driver(name):
    template = safe_yaml.load(os.path.join(DEFINITIONS, name),
                              safe_yaml.DEFINITION_LIMITS)
    vnf = template['topology_template']['node_templates']['VNF']
    routed = vnf['interfaces']['Vnflcm']
    # The same VNFD serves both APIs: Tacker v1 never calls the rollbacks.
    assert set(routed) == ALL | set(feature_hooks.CLUSTER_V2_ROLLBACK) | \
        set(feature_hooks.CLUSTER_V2_UPGRADE)
    assert {operation['implementation'] for operation in routed.values()} \
        == {feature_hooks.DRIVER_NAME}
