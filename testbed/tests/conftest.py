"""Fixtures of the testbed's self-tests: a fresh test API server, and
kubectl against it (testbed.tests.kubectl_support)."""

import pytest

from testbed import kubeapi
from testbed.tests.kubectl_support import Kubectl


@pytest.fixture
def server():
    with kubeapi.KubeApiServer() as api:
        yield api


@pytest.fixture
def kubectl(server, tmp_path):
    home = tmp_path / 'home'
    home.mkdir()
    return Kubectl(server, home)
