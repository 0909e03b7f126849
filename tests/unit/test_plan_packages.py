"""Package installation decided from dpkg's statuses, as a table."""

import pytest

from kubernetes_mgmt_pv.remote import dpkg
from kubernetes_mgmt_pv.remote import facts

INSTALLED = 'install ok installed'


@pytest.mark.parametrize('status, stderr, parsed', [
    (0, 'install ok installed', INSTALLED),
    (0, 'deinstall ok config-files', 'deinstall ok config-files'),
    (0, 'install reinstreq half-installed',
     'install reinstreq half-installed'),
    (0, 'unknown ok not-installed', 'unknown ok not-installed'),
    # dpkg has never heard of the package.
    (1, 'dpkg-query: no packages found matching nfs-common',
     'unknown ok not-installed'),
    # Anything else is a failure of the query itself.
    (2, 'dpkg-query: error: parsing file /var/lib/dpkg/status', None),
])
def test_dpkg_status(status, stderr, parsed):
    stdout, stderr = (stderr, '') if status == 0 else ('', stderr)
    result = facts.CommandResult(status, stdout.encode(), stderr.encode())
    assert dpkg.parse_dpkg_status(result) == parsed


@pytest.mark.parametrize('statuses, missing', [
    ({'nfs-common': INSTALLED}, []),
    ({'nfs-common': 'unknown ok not-installed'}, ['nfs-common']),
    ({'nfs-common': 'deinstall ok config-files'}, ['nfs-common']),
    ({'nfs-common': 'install reinstreq half-installed'}, ['nfs-common']),
    ({'nfs-common': 'install ok unpacked'}, ['nfs-common']),
    ({}, ['nfs-common']),
])
def test_install_list(statuses, missing):
    assert dpkg.missing_packages(['nfs-common'], statuses) == missing


def test_install_keeps_changed_configuration_files():
    assert dpkg.install_command(['nfs-common', 'rpcbind']) == [
        'apt-get', '-y', '-q', '-o', 'DPkg::Lock::Timeout=300',
        '-o', 'Dpkg::Options::=--force-confdef',
        '-o', 'Dpkg::Options::=--force-confold', 'install', 'nfs-common',
        'rpcbind']
