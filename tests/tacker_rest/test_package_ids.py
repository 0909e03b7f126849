"""The packages an operator builds from one source, onboarded into one
Tacker as `kubernetes-mgmt-pv package` wrote them: the v1 package, the v2
package and the v2 package of the next Kubernetes minor (what a
change_vnfpkg upgrades to). Each onboards under the VNFD id the CLI
printed, a different one for each. A rebuild carries the same id, which
Tacker takes only once: its upload goes back to CREATED and the
conductor logs VnfPackageVnfdIdDuplicate (doc/operator-guide.rst,
troubleshooting).
"""

import pytest

from testbed import lab_upgrade
from testbed import tacker_client

NEXT, _ = lab_upgrade.next_minor()
BUILDS = {'v1': ('v1', None), 'v2': ('v2', None), 'v2-next': ('v2', NEXT)}
PACKAGES = '/vnfpkgm/v1/vnf_packages'


@pytest.fixture(scope='module')
def onboarded():
    """{package id: its VNFD id} of what the module onboarded (they stay:
    the other modules of the lab onboard under ids of their own)."""
    return {}


def _built(lab, tmp_path, name):
    api, version = BUILDS[name]
    return lab.build_package(str(tmp_path / name), api=api,
                             kubernetes_version=version)


def test_v1_v2_and_next_minor_packages_of_one_source_side_by_side(
        lab, onboarded, tmp_path):
    printed = {}
    for name in BUILDS:
        printed[name], zip_path = _built(lab, tmp_path, name)
        package = lab.client.onboard_package(zip_path)
        onboarded[package['id']] = package['vnfdId']
        assert package['onboardingState'] == 'ONBOARDED'
        assert package['vnfdId'] == printed[name]
    assert len(set(printed.values())) == len(BUILDS), printed
    listed = {package['id']: package['vnfdId']
              for package in lab.client.get(PACKAGES)}
    assert {key: listed.get(key) for key in onboarded} == onboarded


def test_a_rebuild_has_the_same_id_which_tacker_takes_once(
        lab, onboarded, tmp_path):
    """The v2 package built again: the same VNFD id as the onboarded
    one, refused by Tacker."""
    if len(onboarded) != len(BUILDS):
        pytest.skip('the packages were not onboarded')
    vnfd_id, zip_path = _built(lab, tmp_path, 'v2')
    assert vnfd_id in onboarded.values()
    logs = lab.service.conductors.logs().values()
    sizes = [_size(path) for path in logs]
    before = {package['id'] for package in lab.client.get(PACKAGES)}
    with pytest.raises(tacker_client.TackerError) as refused:
        lab.client.onboard_package(zip_path)
    created, = [package for package in lab.client.get(PACKAGES)
                if package['id'] not in before]
    onboarded[created['id']] = None
    assert created['onboardingState'] == 'CREATED', refused.value
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
