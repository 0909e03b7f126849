"""The driver artifact of a VNF package's VNFD, which tells the Tacker API
the package is for: the hashed driver file (v1), which must be
byte-identical to the driver installed with tacker-conductor, or a script
Tacker v2 runs, which must run this driver's v2 door."""

import os

from kubernetes_mgmt_pv import feature_hooks
from kubernetes_mgmt_pv import safe_yaml
from kubernetes_mgmt_pv.vnf_package import csar


def check(package_dir, where, artifact, found):
    """The package's API, by what its driver artifact is: the hashed
    driver file (v1) or another Python file, a script Tacker v2 runs."""
    where = '%s.artifacts.%s' % (where, feature_hooks.DRIVER_NAME)
    if not artifact:
        found.error('artifact-missing', where,
                    'the Vnflcm interfaces name artifact %s, which the VNF '
                    'node does not define' % feature_hooks.DRIVER_NAME)
        return None
    relative = artifact.get('file')
    if not isinstance(relative, str):
        relative = None
    if api_of(artifact) == 'v2':
        _check_v2_script(package_dir, where, relative, found)
        return 'v2'
    # Tacker joins the artifact file to the package root, not to the VNFD.
    path = os.path.join(package_dir, relative or '')
    if relative is None or not os.path.isfile(path):
        found.error('artifact-file-missing', where,
                    'file %r is not in the package; `kubernetes-mgmt-pv '
                    'package` adds the installed driver as %s'
                    % (relative, csar.DRIVER_PATH))
        return 'v1'
    installed = csar.installed_driver_file()
    try:
        packaged = csar.file_hash(path)
    except OSError as error:
        found.error('artifact-file-missing', where, 'file %r cannot be '
                    'read: %s' % (relative, error.strerror))
        return 'v1'
    if packaged != csar.file_hash(installed):
        found.error('driver-mismatch', where,
                    '%s differs from the driver installed here (%s): Tacker '
                    'raises MgmtDriverHashMatchFailure on every hook unless '
                    'it is byte-identical to the driver installed with '
                    'tacker-conductor; rebuild with `kubernetes-mgmt-pv '
                    'package`' % (relative, installed))
    return 'v1'


def api_of(artifact):
    """The API a driver artifact is for: 'v2' when it names a file that is
    not the hashed driver file (a script Tacker v2 runs), else 'v1'."""
    relative = artifact.get('file')
    return 'v2' if isinstance(relative, str) and \
        relative != csar.DRIVER_PATH else 'v1'


def _check_v2_script(package_dir, where, relative, found):
    """Tacker v2 joins the artifact file to Definitions/ and runs it with
    the conductor's interpreter: it must be a file of the package that
    runs this driver's v2 door."""
    root = os.path.realpath(package_dir)
    path = os.path.realpath(os.path.join(root, 'Definitions', relative))
    if not (csar.within(path, root) and os.path.isfile(path)):
        found.error('artifact-file-missing', where,
                    'file %r (relative to Definitions/, as Tacker v2 reads '
                    'it) is not in the package; `kubernetes-mgmt-pv package '
                    '--api v2` adds %s' % (relative, csar.V2_SCRIPT_PATH))
        return
    try:
        text = safe_yaml.read_text(path, 1024 * 1024)
    except safe_yaml.LoadError as error:
        found.error('artifact-file-missing', where,
                    '%r %s' % (relative, error))
        return
    if 'kubernetes_mgmt_pv.doors' not in text:
        found.warning('script-not-door', where,
                      '%r does not run kubernetes_mgmt_pv.doors.tacker_v2: '
                      'the driver is not called by it' % relative)
