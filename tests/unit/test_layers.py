"""Each layer imports only the layers below it."""

import ast
import glob
import os

import pytest

PACKAGE = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), 'kubernetes_mgmt_pv')


def imported(path):
    """The kubernetes_mgmt_pv modules ``path`` imports."""
    with open(path) as stream:
        tree = ast.parse(stream.read())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            found |= {'%s.%s' % (node.module, alias.name)
                      for alias in node.names}
        elif isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
    return {name for name in found if name.startswith('kubernetes_mgmt_pv')}


@pytest.mark.parametrize('files, below', [
    # The package builder and checker: no door.
    ('vnf_package/*.py', ('kubernetes_mgmt_pv.doors',)),
    # The engine knows nothing of Tacker's doors.
    ('cluster/*.py', ('kubernetes_mgmt_pv.doors',)),
    ('storage/*.py', ('kubernetes_mgmt_pv.doors',)),
    ('remote/*.py', ('kubernetes_mgmt_pv.doors',)),
    ('request/*.py', ('kubernetes_mgmt_pv.doors',)),
    ('openstack/*.py', ('kubernetes_mgmt_pv.doors',)),
    ('autoheal/*.py', ('kubernetes_mgmt_pv.doors',)),
    # What both features share: neither feature.
    ('flow.py', ('kubernetes_mgmt_pv.cluster', 'kubernetes_mgmt_pv.storage',
                 'kubernetes_mgmt_pv.doors')),
    ('admin_kubectl.py', ('kubernetes_mgmt_pv.',)),
    ('feature_hooks.py', ('kubernetes_mgmt_pv.',)),
])
def test_layers(files, below):
    paths = glob.glob(os.path.join(PACKAGE, files))
    assert paths
    for path in paths:
        wrong = sorted(name for name in imported(path)
                       if name.startswith(below))
        assert not wrong, (path, wrong)
