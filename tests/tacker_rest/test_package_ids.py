"""The packages an operator builds from one source, onboarded into one
Tacker as `kubernetes-mgmt-pv package` wrote them: the v1 package, the v2
package and the v2 package of the next Kubernetes minor (what a
change_vnfpkg upgrades to). Each onboards under the VNFD id the CLI
printed, a different one for each. A rebuild carries the same id, which
Tacker takes only once: its upload goes back to CREATED and the
conductor logs VnfPackageVnfdIdDuplicate (doc/operator-guide.rst,
troubleshooting).
"""

import re
import subprocess

import pytest

from testbed import lab_upgrade
from testbed import tacker_client
from testbed import tacker_lab

NEXT, _ = lab_upgrade.next_minor()
BUILDS = {'v1': ('v1', None), 'v2': ('v2', None), 'v2-next': ('v2', NEXT)}
PACKAGES = '/vnfpkgm/v1/vnf_packages'
PRINTED = re.compile(r'^VNFD id: (\S+)$', re.M)


@pytest.fixture(scope='module')
def onboarded():
    """{package id: its VNFD id} of what the module onboarded (they stay:
    the other modules of the lab onboard under ids of their own)."""
    return {}


def _built(lab, tmp_path, name):
    """`kubernetes-mgmt-pv package` of the sample for the build ``name``,
    run as the operator runs it (not through the lab's helpers): (the
    VNFD id it printed or None, zip file)."""
    api, version = BUILDS[name]
    output = str(tmp_path / ('%s.zip' % name))
    result = subprocess.run(
        [lab.service.bin('kubernetes-mgmt-pv'), 'package', '--source',
         tacker_lab.SAMPLE, '--output', output, '--api', api] +
        (['--kubernetes-version', version] if version else []),
        capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    printed = PRINTED.findall(result.stdout)
    return (printed[0] if len(printed) == 1 else None), output


def _onboarded(lab, zip_path):
    """The package once ONBOARDED, or the one Tacker put back to CREATED."""
    before = {package['id'] for package in lab.client.get(PACKAGES)}
    try:
        return lab.client.onboard_package(zip_path)
    except tacker_client.TackerError:
        created, = [package for package in lab.client.get(PACKAGES)
                    if package['id'] not in before]
        return created


def test_v1_v2_and_next_minor_packages_of_one_source_side_by_side(
        lab, onboarded, tmp_path):
    printed, packages = {}, {}
    for name in BUILDS:
        printed[name], zip_path = _built(lab, tmp_path, name)
        packages[name] = _onboarded(lab, zip_path)
        onboarded[packages[name]['id']] = packages[name].get('vnfdId')
    assert {name: package['onboardingState']
            for name, package in packages.items()} == dict.fromkeys(
                BUILDS, 'ONBOARDED')
    assert {name: package['vnfdId'] for name, package in
            packages.items()} == printed
    assert len(set(printed.values())) == len(BUILDS), printed
    listed = {package['id']: package['vnfdId']
              for package in lab.client.get(PACKAGES)}
    assert {key: listed.get(key) for key in onboarded} == onboarded


def test_a_rebuild_has_the_same_id_which_tacker_takes_once(
        lab, onboarded, tmp_path):
    """The v2 package built again: the same VNFD id as the onboarded
    one, refused by Tacker."""
    if len(onboarded) != len(BUILDS) or None in onboarded.values():
        pytest.skip('the packages were not onboarded')
    vnfd_id, zip_path = _built(lab, tmp_path, 'v2')
    assert vnfd_id in onboarded.values()
    logs = lab.service.conductors.logs().values()
    sizes = [_size(path) for path in logs]
    created = _onboarded(lab, zip_path)
    onboarded[created['id']] = None
    assert created['onboardingState'] == 'CREATED'
    logged = ''.join(_tail(path, size) for path, size in zip(logs, sizes))
    assert 'VnfPackageVnfdIdDuplicate' in logged
    assert vnfd_id in logged


def _size(path):
    with open(path, 'rb') as stream:
        return stream.seek(0, 2)


def _tail(path, offset):
    with open(path, 'rb') as stream:
        stream.seek(offset)
        return stream.read().decode('utf-8', 'replace')
