"""Constants and helpers shared by the tests that run inside Tacker."""

import os
import zipfile

from kubernetes_mgmt_pv import feature_hooks

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
SAMPLE = os.path.join(ROOT, 'samples', 'kubernetes_pv_vnf')
REQUESTS = os.path.join(ROOT, 'samples', 'requests')
MGMT_NAMESPACE = 'tacker.tacker.mgmt.drivers'
CONFIGURED_DRIVERS = ['vnflcm_noop', feature_hooks.DRIVER_NAME]


def rewrite_zip(source, target, name, change):
    """Copy a zip, passing the bytes of member `name` through change()."""
    with zipfile.ZipFile(source) as original, \
            zipfile.ZipFile(target, 'w') as copy:
        for info in original.infolist():
            data = original.read(info)
            copy.writestr(info, change(data) if info.filename == name
                          else data)
    return target
