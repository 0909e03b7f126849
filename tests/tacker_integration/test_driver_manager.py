"""Tacker loads the driver by its entry-point name and calls every hook
with the keyword arguments its own VnfLcmDriver passes."""

import ast
import inspect
import uuid

import pytest

pytest.importorskip('tacker.objects')

from oslo_config import cfg  # noqa: E402
from tacker.common import driver_manager  # noqa: E402
from tacker import objects  # noqa: E402
from tacker.vnflcm import vnflcm_driver  # noqa: E402
from tacker.vnfm.mgmt_drivers import vnflcm_abstract_driver  # noqa: E402

from kubernetes_mgmt_pv.doors import tacker_compat  # noqa: E402
from kubernetes_mgmt_pv import feature_hooks  # noqa: E402
from kubernetes_mgmt_pv import mgmt_driver  # noqa: E402
from kubernetes_mgmt_pv.request import param_model  # noqa: E402
from tests.tacker_integration.support import MGMT_NAMESPACE  # noqa: E402


def test_configured_name_loads_this_driver(tacker_conf):
    manager = driver_manager.DriverManager(
        MGMT_NAMESPACE, cfg.CONF.tacker.vnflcm_mgmt_driver)
    driver = manager[feature_hooks.DRIVER_NAME]
    assert type(driver) is mgmt_driver.KubernetesPvMgmtDriver
    assert driver.get_type() == feature_hooks.DRIVER_NAME
    assert driver.get_name() == feature_hooks.DRIVER_NAME
    assert 'vnflcm_noop' in manager
    # The real abstract base, not the stand-in used without Tacker.
    assert tacker_compat.TACKER_AVAILABLE
    assert isinstance(driver, vnflcm_abstract_driver.VnflcmMgmtAbstractDriver)


def test_without_the_config_line_tacker_does_not_load_it():
    assert cfg.CONF.tacker.vnflcm_mgmt_driver == ['vnflcm_noop']
    manager = driver_manager.DriverManager(
        MGMT_NAMESPACE, cfg.CONF.tacker.vnflcm_mgmt_driver)
    assert feature_hooks.DRIVER_NAME not in manager


def _invoke_sites():
    """(hook, keyword names) of every `self._mgmt_manager.invoke(...)` in
    Tacker's VnfLcmDriver, read from the installed source."""
    sites = set()
    for node in ast.walk(ast.parse(inspect.getsource(vnflcm_driver))):
        if isinstance(node, ast.Call) and \
                isinstance(node.func, ast.Attribute) and \
                node.func.attr == 'invoke' and \
                getattr(node.func.value, 'attr', None) == '_mgmt_manager':
            sites.add((node.args[1].value,
                       tuple(k.arg for k in node.keywords if k.arg)))
    return sorted(sites)


INVOKE_SITES = _invoke_sites()


def test_every_hook_is_called_somewhere():
    assert {hook for hook, _ in INVOKE_SITES} == set(tacker_compat.HOOKS)


@pytest.mark.parametrize('hook, keywords', INVOKE_SITES)
def test_hook_accepts_tacker_call(tacker_conf, context, hook, keywords):
    """Called through Tacker's manager as VnfLcmDriver calls it, on a VNF
    without storage_server: the hook accepts the arguments and does
    nothing (no Heat, no SSH)."""
    manager = driver_manager.DriverManager(
        MGMT_NAMESPACE, cfg.CONF.tacker.vnflcm_mgmt_driver)
    feature_off = {param_model.ROOT: {}}
    instance_id = str(uuid.uuid4())
    vnf_instance = objects.VnfInstance(
        id=instance_id, vnfd_id=str(uuid.uuid4()),
        instantiated_vnf_info=objects.InstantiatedVnfInfo(
            flavour_id='simple', vnf_instance_id=instance_id,
            instance_id=str(uuid.uuid4()), additional_params=feature_off))
    values = {
        'context': context,
        'vnf_instance': vnf_instance,
        'grant': None,
        'grant_request': None,
        'instantiate_vnf_request': objects.InstantiateVnfRequest(
            flavour_id='simple', additional_params=feature_off),
        'terminate_vnf_request': objects.TerminateVnfRequest(
            termination_type='GRACEFUL'),
        'heal_vnf_request': objects.HealVnfRequest(),
        'scale_vnf_request': objects.ScaleVnfRequest(
            type='SCALE_OUT', aspect_id='worker_instance'),
        'change_ext_conn_request': objects.ChangeExtConnRequest(),
        'modify_vnf_request': None,
    }
    assert manager.invoke(feature_hooks.DRIVER_NAME, hook,
                          **{k: values[k] for k in keywords}) is None
