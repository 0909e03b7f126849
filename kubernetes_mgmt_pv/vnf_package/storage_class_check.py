"""``validate``'s checks of dynamic provisioning: the csi-driver-nfs
manifests the request names load from the package as the hooks load
them (``csi_driver.load``), and what the classes need of the request."""

from kubernetes_mgmt_pv import exceptions
from kubernetes_mgmt_pv.request import param_model
from kubernetes_mgmt_pv.storage import csi_driver


def check(package_dir, params, found):
    """Add the findings of ``params``' storage classes (a parsed, maybe
    partial, request) against the extracted package."""
    storage = params.storage
    if storage is None or not storage.storage_classes or \
            not storage.csi_manifests:
        return
    try:
        csi_driver.load(package_dir, storage.csi_manifests,
                        param_model.CSI_MANIFESTS_PATH)
    except exceptions.ParameterErrors as errors:
        for error in errors.errors:
            found.error('csi-manifest-invalid', error.path, error.reason)
