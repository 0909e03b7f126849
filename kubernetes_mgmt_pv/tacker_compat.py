"""The only module that imports Tacker.

Tacker is not a requirement of this package: without it, a stand-in
abstract base with the same hook names lets the core and the driver
classes run (and be tested) anywhere. The two lookups that need Tacker's
database, the VNF package directory and the VIM credentials, live here too;
tests replace them through the driver's own seam methods.
"""

import abc

from kubernetes_mgmt_pv import exceptions

HOOKS = (
    'instantiate_start', 'instantiate_end',
    'terminate_start', 'terminate_end',
    'scale_start', 'scale_end',
    'heal_start', 'heal_end',
    'change_external_connectivity_start', 'change_external_connectivity_end',
    'modify_information_start', 'modify_information_end',
)

try:
    from tacker.vnfm.mgmt_drivers.vnflcm_abstract_driver import \
        VnflcmMgmtAbstractDriver
    TACKER_AVAILABLE = True
except ImportError:
    TACKER_AVAILABLE = False

    def _abstract(name):
        def method(self, *args, **kwargs):
            raise NotImplementedError(name)
        method.__name__ = name
        return abc.abstractmethod(method)

    VnflcmMgmtAbstractDriver = abc.ABCMeta(
        'VnflcmMgmtAbstractDriver', (object,),
        {name: _abstract(name) for name in
         ('get_type', 'get_name', 'get_description') + HOOKS})


def _vnflcm_utils():
    if not TACKER_AVAILABLE:
        raise exceptions.MgmtDriverError(
            'Tacker is not installed: the VNF package and VIM lookups need '
            'it (outside Tacker, override the driver\'s vnf_package_dir and '
            'vim_access_info)')
    from tacker.vnflcm import utils
    return utils


def vnf_package_dir(context, vnf_instance):
    """Directory of the extracted VNF package (CSAR) of the instance."""
    return _vnflcm_utils()._get_vnf_package_path(context,
                                                 vnf_instance.vnfd_id)


def vim_access_info(context, vnf_instance):
    """Decrypted OpenStack VIM credentials (auth_url, username, ... region)."""
    utils = _vnflcm_utils()
    return utils._get_vim(context,
                          vnf_instance.vim_connection_info)['access_info']
