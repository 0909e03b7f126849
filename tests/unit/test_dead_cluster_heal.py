"""The decisions of a heal whose cluster is dead: the PV check that cannot
be done, the flag that lets the heal go on, and the VIM still in use."""

import pytest

from kubernetes_mgmt_pv.cluster import cluster_feature
from kubernetes_mgmt_pv import exceptions
from kubernetes_mgmt_pv.request import lcm_requests
from kubernetes_mgmt_pv.storage import pv

FLAG = 'skip_pv_check_if_unreachable'
PATH = 'additionalParams.' + FLAG


@pytest.mark.parametrize('request_params, expected', [
    (None, False), ({}, False), ({FLAG: None}, False),
    ({FLAG: False}, False), ({FLAG: True}, True),
    ({'worker_node_password': 'x'}, False),
])
def test_the_flag(request_params, expected):
    assert lcm_requests.skip_pv_check(request_params) is expected


@pytest.mark.parametrize('value', ['true', 'True', 1, 0, [], {}])
def test_a_flag_that_is_no_boolean_is_named_by_its_path(value):
    with pytest.raises(exceptions.ParameterErrors) as caught:
        lcm_requests.skip_pv_check({FLAG: value})
    assert [error.path for error in caught.value.errors] == [PATH]
    assert 'boolean' in caught.value.errors[0].reason


NO_MASTER = exceptions.RemoteConnectError(
    'PersistentVolume check failed: no Master node reachable for kubectl: '
    '10.0.0.5: connection refused')
KUBECTL_FAILED = exceptions.StepError(
    'PersistentVolume check', '10.0.0.5', exceptions.RemoteCommandError(
        '10.0.0.5', 'kubectl get persistentvolumes -o json', 1,
        stderr='The connection to the server was refused'))


@pytest.mark.parametrize('error', [NO_MASTER, KUBECTL_FAILED])
def test_an_unchecked_release_is_refused_naming_the_flag(error):
    with pytest.raises(exceptions.PersistentVolumeError) as caught:
        pv.unchecked_release(error, False, PATH)
    message = str(caught.value)
    assert message.startswith(exceptions.failure_reason(error))
    assert '%s to true' % PATH in message
    assert message.endswith('Nothing was changed.')


@pytest.mark.parametrize('error', [NO_MASTER, KUBECTL_FAILED])
def test_the_flag_lets_an_unchecked_release_go_on(error):
    assert pv.unchecked_release(error, True, PATH) == \
        exceptions.failure_reason(error)


@pytest.mark.parametrize('operation', [cluster_feature.HEAL,
                                       cluster_feature.TERMINATE])
@pytest.mark.parametrize('users, refused', [
    ({}, False),
    ({'vim-1': ['cnf-1', 'cnf-2']}, True),
    ({'vim-1': []}, True),  # in use, its VNFs could not be listed
])
def test_a_vim_in_use_refuses_the_entire_heal_and_terminate(
        users, refused, operation):
    refusal = cluster_feature.vim_in_use_refusal('k8s', users, operation)
    assert (refusal is not None) == refused
    if refused:
        assert "VIM 'k8s'" in refusal
        assert 'VIM vim-1: %s' % (', '.join(users['vim-1']) or
                                  'see "openstack vnflcm list"') in refusal
        assert refusal.startswith({cluster_feature.HEAL: 'Healing',
                                   cluster_feature.TERMINATE: 'Terminating'}[
                                       operation])
        assert refusal.endswith('Nothing was changed.')
