"""upgrade_cluster's refusals that need no host."""

import types

import pytest

from kubernetes_mgmt_pv.cluster import upgrade
from kubernetes_mgmt_pv import exceptions


class NoHosts(object):
    """A workflow that fails the test if anything is looked up."""

    conf = types.SimpleNamespace(drain_force=False)

    def __getattr__(self, name):
        pytest.fail('the workflow was used: %s' % name)


def test_a_script_without_its_version_is_refused_before_any_login():
    with pytest.raises(exceptions.ParameterErrors) as raised:
        upgrade.upgrade_cluster(NoHosts(), b'#!/bin/bash\necho hi\n')
    assert [error.path for error in raised.value.errors] == [
        upgrade.SCRIPT_PATH_PARAM]
    assert 'K8S_PACKAGE_VERSION' in str(raised.value)
