"""The file Tacker hashes holds no logic of its own.

Tacker compares mgmt_driver.py with the copy in every VNF package on each
hook call; a fix that touched it would force every operator to rebuild and
re-upload their packages. So it may only delegate, in a fixed order.
"""

import ast
import inspect

import pytest

from kubernetes_mgmt_pv.doors import tacker_v1
from kubernetes_mgmt_pv import feature_hooks
from kubernetes_mgmt_pv import mgmt_driver
from kubernetes_mgmt_pv.storage import storage_feature

# The hashed file adds the persistent volumes to the cluster's hooks, so it
# defines exactly the hooks that feature acts at.
HOOKS = feature_hooks.PERSISTENT_VOLUME
# The order of the two features in each hook: cluster first on *_end hooks,
# persistent volumes first on *_start hooks (they undo before the cluster
# changes).
ORDER = {hook: ['storage', 'cluster'] if hook.endswith('_start')
         else ['cluster', 'storage'] for hook in HOOKS}
DECISIONS = (ast.If, ast.IfExp, ast.For, ast.AsyncFor, ast.While, ast.Try,
             ast.With, ast.BoolOp, ast.Compare, ast.comprehension, ast.Match,
             ast.Lambda, ast.Raise, ast.Return, ast.Subscript)


def tree():
    return ast.parse(inspect.getsource(mgmt_driver))


def test_the_hashed_file_holds_no_decision():
    found = [(type(node).__name__, node.lineno) for node in ast.walk(tree())
             if isinstance(node, DECISIONS)]
    assert found == []


def test_every_hook_is_a_sequence_of_delegating_calls():
    driver_class = next(node for node in tree().body
                        if isinstance(node, ast.ClassDef))
    methods = {node.name: node for node in driver_class.body
               if isinstance(node, ast.FunctionDef)}
    assert set(methods) == set(HOOKS) | {'__init__'}
    for hook in HOOKS:
        body = methods[hook].body
        assert len(body) == 2, hook
        for statement in body:
            assert isinstance(statement, ast.Expr), hook
            assert isinstance(statement.value, ast.Call), hook


def test_the_package_contract_has_a_version():
    assert isinstance(mgmt_driver.PACKAGE_CONTRACT_VERSION, int)


@pytest.mark.parametrize('hook, order', sorted(ORDER.items()))
def test_cluster_first_on_end_hooks_storage_first_on_start_hooks(
        monkeypatch, hook, order):
    calls = []
    monkeypatch.setattr(tacker_v1.KubernetesMgmtDriver, hook,
                        lambda *args, **kwargs: calls.append('cluster'))
    monkeypatch.setattr(storage_feature.StorageFeature, hook,
                        lambda *args, **kwargs: calls.append('storage'))
    getattr(mgmt_driver.KubernetesPvMgmtDriver(), hook)(
        None, None, None, None, None)
    assert calls == order
