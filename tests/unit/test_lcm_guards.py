"""Requests of operations the driver does not carry out, refused when
they touch the cluster: which CPs and VDUs are the cluster's, and what
each request is refused for (request.lcm_guards)."""

import types

import pytest

from kubernetes_mgmt_pv.doors import tacker_v1
from kubernetes_mgmt_pv import exceptions
from kubernetes_mgmt_pv import mgmt_driver
from kubernetes_mgmt_pv.request import lcm_guards
from kubernetes_mgmt_pv.request import param_model
from tests.unit import v2_dicts as v2

ROOT = v2.install_params()
# (VDU, CPs) of each VNFC: a Worker with a second port, a VNFC outside
# the cluster.
VNFCS = [('masterNode', ('masterNode_CP1',)),
         ('workerNode', ('workerNode_CP2', 'workerNode_CP3')),
         ('workerNode', ('workerNode_CP2', 'workerNode_CP3')),
         ('storage_server', ('storage_server_CP',)),
         ('probe', ('probe_CP',))]


def with_vip(root):
    return dict(root, master_node=dict(root['master_node'],
                                       cluster_cp_name='vip_CP'))


@pytest.mark.parametrize('root, expected', [
    (ROOT, {'masterNode_CP1', 'workerNode_CP2', 'storage_server_CP'}),
    (with_vip(ROOT), {'masterNode_CP1', 'workerNode_CP2',
                      'storage_server_CP', 'vip_CP'}),
    (dict(ROOT, pv_registration_params=[{'nfs_server_cp': 'nfs_CP'}]),
     {'masterNode_CP1', 'workerNode_CP2', 'storage_server_CP', 'nfs_CP'}),
    ({'master_node': {'ssh_cp_name': 'ssh_CP', 'nic_cp_name': 'nic_CP'}},
     {'ssh_CP', 'nic_CP'}),
    ({'master_node': 'not a mapping', 'pv_registration_params': 'x'},
     set()),
    (None, set()),
    ({}, set()),
])
def test_named_cps(root, expected):
    assert lcm_guards.named_cps(root) == expected


def test_the_cluster_is_every_cp_of_the_vdus_with_a_named_one():
    cps, vdus = lcm_guards.cluster_parts(with_vip(ROOT), VNFCS)
    assert vdus == {'masterNode', 'workerNode', 'storage_server'}
    assert cps == {'masterNode_CP1': 'masterNode',
                   'workerNode_CP2': 'workerNode',
                   'workerNode_CP3': 'workerNode',
                   'storage_server_CP': 'storage_server',
                   'vip_CP': None}


PATH = 'extVirtualLinks[0].extCps[%d].cpdId'


@pytest.mark.parametrize('cps, root, refused', [
    (['workerNode_CP2'], ROOT, [(PATH % 0, 'workerNode_CP2',
                                 'workerNode')]),
    (['probe_CP', 'workerNode_CP3'], ROOT,
     [(PATH % 1, 'workerNode_CP3', 'workerNode')]),
    (['masterNode_CP1', 'storage_server_CP'], ROOT,
     [(PATH % 0, 'masterNode_CP1', 'masterNode'),
      (PATH % 1, 'storage_server_CP', 'storage_server')]),
    (['vip_CP'], with_vip(ROOT), [(PATH % 0, 'vip_CP', None)]),
    (['probe_CP'], ROOT, []),
    (['workerNode_CP2'], None, []),  # the features are off
])
def test_connection_point_problems(cps, root, refused):
    touched = [(PATH % index, cp) for index, cp in enumerate(cps)]
    problems = lcm_guards.connection_point_problems(touched, root, VNFCS)
    assert [path for path, _ in problems] == [path for path, _, _ in refused]
    for (_, reason), (_, cp, vdu) in zip(problems, refused):
        assert reason.startswith(cp + ' ')
        assert ('VDU %s' % vdu in reason) is (vdu is not None)


VDU_PATH = 'additionalParams.vdu_params[%d].vdu_id'


@pytest.mark.parametrize('vdus, root, refused', [
    (['masterNode'], ROOT, [0]),
    (['probe', 'workerNode', 'storage_server'], ROOT, [1, 2]),
    (['probe'], ROOT, []),
    (['workerNode'], None, []),
    ([], ROOT, []),
])
def test_replaced_vdu_problems(vdus, root, refused):
    targets = [(VDU_PATH % index, vdu) for index, vdu in enumerate(vdus)]
    problems = lcm_guards.replaced_vdu_problems(targets, root, VNFCS)
    assert [path for path, _ in problems] == [VDU_PATH % index
                                              for index in refused]
    for (_, reason), index in zip(problems, refused):
        assert 'VDU %s ' % vdus[index] in reason


def test_refuse_names_every_problem_or_nothing():
    lcm_guards.refuse([])
    with pytest.raises(exceptions.RequestRefused) as raised:
        lcm_guards.refuse([('a.b', 'first'), ('c', 'second')])
    assert raised.value.problems == [('a.b', 'first'), ('c', 'second')]
    assert str(raised.value) == \
        'a.b: first; c: second; nothing was changed'


# -- the v1 door ------------------------------------------------------------

def v1_instance(root):
    vnfcs = [types.SimpleNamespace(
        vdu_id=vdu, vnfc_cp_info=[types.SimpleNamespace(cpd_id=cp)
                                  for cp in cps]) for vdu, cps in VNFCS]
    return types.SimpleNamespace(
        instantiated_vnf_info=types.SimpleNamespace(
            additional_params={param_model.ROOT: root} if root else {},
            vnfc_resource_info=vnfcs))


def v1_request(*cps):
    """A v1 ChangeExtConnRequest: one external VL with these CPs."""
    return types.SimpleNamespace(ext_virtual_links=[types.SimpleNamespace(
        id='vl1', ext_cps=[types.SimpleNamespace(cpd_id=cp)
                           for cp in cps])])


def test_v1_change_ext_conn_start_refuses_a_cluster_cp():
    driver = mgmt_driver.KubernetesPvMgmtDriver()
    with pytest.raises(exceptions.RequestRefused) as raised:
        driver.change_external_connectivity_start(
            None, v1_instance(ROOT), v1_request('probe_CP', 'workerNode_CP3'),
            None, None)
    assert [path for path, _ in raised.value.problems] == [PATH % 1]


@pytest.mark.parametrize('root, cps', [(ROOT, ('probe_CP',)),
                                       (None, ('workerNode_CP2',))])
def test_v1_change_ext_conn_start_lets_others_through(root, cps):
    mgmt_driver.KubernetesPvMgmtDriver().change_external_connectivity_start(
        None, v1_instance(root), v1_request(*cps), None, None)


def test_v1_touched_cps_of_an_unset_list():
    class Unset(object):
        @property
        def ext_virtual_links(self):
            raise NotImplementedError('Cannot load ext_virtual_links')
    assert tacker_v1.touched_cps(Unset()) == []
