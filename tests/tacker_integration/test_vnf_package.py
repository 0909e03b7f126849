"""Tacker accepts the built package: at upload (CSAR processing and
TOSCA.meta hashes) and at every hook (VnfLcmDriver's interface loading and
management-driver hash check); it rejects a package whose copy of the
driver was altered."""

import pytest

pytest.importorskip('tacker.objects')

from oslo_config import cfg  # noqa: E402
from tacker.common import csar_utils  # noqa: E402
from tacker.common import driver_manager  # noqa: E402
from tacker.common import exceptions  # noqa: E402
from tacker.tosca import utils as toscautils  # noqa: E402
from tacker.vnflcm import utils as vnflcm_utils  # noqa: E402
from tacker.vnflcm import vnflcm_driver  # noqa: E402

from kubernetes_mgmt_pv import feature_hooks  # noqa: E402
from kubernetes_mgmt_pv.vnf_package import csar  # noqa: E402
from tests.tacker_integration.support import MGMT_NAMESPACE  # noqa: E402
from tests.tacker_integration.support import rewrite_zip  # noqa: E402

HOOKS_IN_VNFD = ('instantiate_end', 'terminate_start', 'terminate_end',
                 'scale_start', 'scale_end', 'heal_start', 'heal_end',
                 'change_external_connectivity_start')


def lcm_driver():
    """Tacker's VnfLcmDriver with its management-driver state built by its
    own code from CONF. __init__ is skipped: it also starts an RPC client
    and loads the VNFM plugin, which need a message bus and a database."""
    driver = object.__new__(vnflcm_driver.VnfLcmDriver)
    driver._mgmt_manager = driver_manager.DriverManager(
        MGMT_NAMESPACE, cfg.CONF.tacker.vnflcm_mgmt_driver)
    driver._mgmt_driver_hash = driver._init_mgmt_driver_hash()
    return driver


def altered_driver(built_package, tmp_path):
    return rewrite_zip(built_package, tmp_path / 'altered.zip',
                       csar.DRIVER_PATH,
                       lambda data: data + b'# edited after packaging\n')


@pytest.fixture
def no_remote_etsi_definitions(monkeypatch):
    """The tacker wheel lacks the etc/etsi-nfv copies that
    tosca_tmpl_local_defs() maps the ETSI forge URLs to, and logs that with
    a broken format string, which fails a test. The sample VNFD imports the
    ETSI types from its own Definitions/, so no URL needs mapping."""
    monkeypatch.setattr(toscautils, 'tosca_tmpl_local_defs', dict)


def test_upload_processing_accepts_the_package(tacker_conf, context,
                                               no_remote_etsi_definitions,
                                               built_package):
    vnf_data, flavours, artifacts = csar_utils.load_csar_data(
        context, 'sample-package', str(built_package))
    assert vnf_data['provider'] == 'Company'
    assert sorted(f['flavour_id'] for f in flavours) == ['ha', 'simple']
    listed = {a['Source']: a['Hash'] for a in artifacts}
    assert listed[csar.DRIVER_PATH] == csar.file_hash(
        csar.installed_driver_file())
    assert 'Files/kubernetes/nfs-pv3.yaml' in listed


def test_upload_processing_rejects_an_altered_file(
        tacker_conf, context, no_remote_etsi_definitions, built_package,
        tmp_path):
    with pytest.raises(exceptions.InvalidCSAR, match='mgmt_driver.py'):
        csar_utils.load_csar_data(context, 'altered-package', str(
            altered_driver(built_package, tmp_path)))


@pytest.mark.parametrize('flavour', ['simple', 'ha'])
def test_every_vnfd_hook_resolves_to_this_driver(tacker_conf, context,
                                                 onboard, built_package,
                                                 flavour):
    driver = lcm_driver()
    vnf_instance = onboard(built_package)
    vnfd = vnflcm_utils.get_vnfd_dict(context, vnf_instance.vnfd_id, flavour)
    for hook in HOOKS_IN_VNFD:
        assert driver._load_vnf_interface(context, hook, vnf_instance,
                                          vnfd) == feature_hooks.DRIVER_NAME
    # A hook the VNFD does not list runs Tacker's no-op driver.
    assert driver._load_vnf_interface(context, 'instantiate_start',
                                      vnf_instance, vnfd) == 'vnflcm_noop'


def test_altered_driver_copy_fails_the_hash_check(tacker_conf, context,
                                                  onboard, built_package,
                                                  tmp_path):
    driver = lcm_driver()
    vnf_instance = onboard(altered_driver(built_package, tmp_path))
    vnfd = vnflcm_utils.get_vnfd_dict(context, vnf_instance.vnfd_id,
                                      'simple')
    with pytest.raises(exceptions.MgmtDriverHashMatchFailure):
        driver._load_vnf_interface(context, 'instantiate_end', vnf_instance,
                                   vnfd)


def test_driver_missing_from_the_configuration_is_inconsistent(
        tacker_conf, context, onboard, built_package):
    tacker_conf.set_override('vnflcm_mgmt_driver', ['vnflcm_noop'],
                             group='tacker')
    driver = lcm_driver()
    vnf_instance = onboard(built_package)
    vnfd = vnflcm_utils.get_vnfd_dict(context, vnf_instance.vnfd_id,
                                      'simple')
    with pytest.raises(exceptions.MgmtDriverInconsistent):
        driver._load_vnf_interface(context, 'heal_start', vnf_instance, vnfd)
