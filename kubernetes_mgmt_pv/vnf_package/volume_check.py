"""``validate``'s checks of the volumes a request asks for against the
package: the PersistentVolume manifests and the exports they use, and
the csi-driver-nfs manifests of the storage classes, loaded as the hooks
load them (``manifests.load``, ``csi_driver.load``)."""

from kubernetes_mgmt_pv import exceptions
from kubernetes_mgmt_pv.request import param_model
from kubernetes_mgmt_pv.storage import csi_driver
from kubernetes_mgmt_pv.storage import manifests
from kubernetes_mgmt_pv.vnf_package import csar


def check_manifests(package_dir, model, found):
    """The package's PV manifests load as the hooks load them; every
    export is used and every PV exported."""
    registrations = [r for r in model.pv_registrations if r.manifest_path]
    try:
        loaded = manifests.load(package_dir, registrations)
    except exceptions.ParameterErrors as errors:
        for error in errors.errors:
            found.error('manifest-invalid', error.path, error.reason)
        return
    exports = [(export.json_path + '.export_dir', export.export_dir)
               for export in (model.storage.exports if model.storage else ())
               if export.export_dir]
    # An export outside every mount_to is a parameter error
    # (param_model.parse).
    classes = model.storage.storage_classes if model.storage else ()
    for where, directory in exports:
        if not any(csar.within(pv.nfs_path, directory) for pv in loaded) \
                and directory not in {c.export_dir for c in classes}:
            found.warning('export-unused', where,
                          '%s is exported but no PersistentVolume of '
                          'pv_registration_params or storage class uses it'
                          % directory)
    for registration, pv in zip(registrations, loaded):
        if not any(csar.within(pv.nfs_path, d) for _, d in exports):
            found.warning('pv-not-exported',
                          registration.json_path + '.pv_manifest_file_path',
                          'spec.nfs.path %s of PersistentVolume %s is not in '
                          'any export_dir: Pods using it cannot mount it'
                          % (pv.nfs_path, pv.name))


def check_storage_classes(package_dir, params, found):
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
