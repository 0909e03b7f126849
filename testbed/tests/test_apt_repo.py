"""Self-tests of the signed apt repository (testbed/apt_repo): apt trusts
its index only with its own key, and the index describes its packages."""

import hashlib
import os
import shutil
import subprocess

import pytest

from testbed import apt_repo
from testbed import guest_images
from testbed import standins


@pytest.fixture(scope='module')
def key():
    if shutil.which('gpg') is None or shutil.which('gpgv') is None:
        pytest.skip('gpg and gpgv are needed')
    signing = apt_repo.SigningKey()
    yield signing
    signing.close()


def verify(tmp_path, armored, signed):
    """gpgv of an InRelease file against one armored key, as apt runs it
    with signed-by."""
    keyring = tmp_path / 'keyring.gpg'
    subprocess.run(['gpg', '--batch', '--yes', '--dearmor', '--output',
                    str(keyring)], input=armored, check=True,
                   capture_output=True)
    return subprocess.run(['gpgv', '--keyring', str(keyring), str(signed)],
                          capture_output=True).returncode


def test_the_index_is_signed_by_its_key_only(tmp_path, key):
    packages = b'Package: kubeadm\nVersion: 1.35.4-1.1\n'
    (tmp_path / 'Packages').write_bytes(packages)
    release = tmp_path / 'Release'
    apt_repo.write_release(str(release), {'Packages': packages})
    key.sign(str(release))
    text = release.read_text()
    assert ' %s %d Packages\n' % (hashlib.sha256(packages).hexdigest(),
                                  len(packages)) in text
    assert text.startswith('Origin: testbed\n') and '\nDate: ' in text
    assert verify(tmp_path, key.public_armored, tmp_path / 'InRelease') == 0
    other = apt_repo.SigningKey()
    try:
        assert verify(tmp_path, other.public_armored,
                      tmp_path / 'InRelease') != 0
    finally:
        other.close()
    assert not os.path.exists(other.home)


def test_the_kubectl_package_holds_the_binary(tmp_path):
    binary = tmp_path / 'kubectl'
    binary.write_text('#!/bin/sh\necho kubectl\n')
    binary.chmod(0o755)
    deb = apt_repo.build_kubectl(str(tmp_path), '1.35.4-1.1', str(binary))
    fields = subprocess.run(['dpkg-deb', '-f', deb, 'Package', 'Version'],
                            capture_output=True, text=True, check=True)
    assert fields.stdout == 'Package: kubectl\nVersion: 1.35.4-1.1\n'
    listing = subprocess.run(['dpkg-deb', '-c', deb], capture_output=True,
                             text=True, check=True).stdout
    assert './usr/bin/kubectl' in listing


@pytest.mark.parametrize('image, version, config_version, systemd_key', [
    (guest_images.DEBIAN_13, 'v1.7.24', 'version = 2', True),
    (guest_images.UBUNTU_2604, 'v2.2.2', 'version = 3', False),
])
def test_a_guest_images_containerd_prints_its_versions_defaults(
        tmp_path, image, version, config_version, systemd_key):
    """What the repository serves a look-alike for its image's containerd
    (the image's archive): 1.7's default configuration on Debian 13,
    2.x's on Ubuntu 26.04 (no SystemdCgroup key at all)."""
    [deb] = [path for path in standins.build_packages(
        str(tmp_path), containerd_version=image.containerd_version)
        if os.path.basename(path).startswith('containerd_')]
    fields = subprocess.run(['dpkg-deb', '-f', deb, 'Version'],
                            capture_output=True, text=True, check=True)
    assert fields.stdout.strip() == image.containerd_version
    root = tmp_path / 'root'
    subprocess.run(['dpkg-deb', '-x', deb, str(root)], check=True)
    binary = str(root / 'usr' / 'bin' / 'containerd')
    printed = subprocess.run([binary, '--version'], capture_output=True,
                             text=True, check=True).stdout
    assert printed.split()[2] == version
    config = subprocess.run([binary, 'config', 'default'],
                            capture_output=True, text=True,
                            check=True).stdout
    assert config_version in config.splitlines()
    assert ('SystemdCgroup' in config) is systemd_key


def test_each_version_is_served_from_its_minors_repository():
    """The install script's minor everything, the next minor's and the
    other versions asked for kubeadm, kubelet and kubectl, several patch
    releases of one minor side by side."""
    current = standins.k8s_package_version()
    major, minor = (int(part) for part in current.split('.')[:2])
    older = '%d.%d.9-1.1' % (major, minor - 1)
    earlier_patch = '%d.%d.1-1.1' % (major, minor)
    repository = apt_repo.AptRepository(versions=(older, earlier_patch,
                                                  current))
    assert repository._by_minor() == {
        apt_repo.minor_path(current): [None, earlier_patch],
        apt_repo.minor_path(standins.next_minor()): [standins.next_minor()],
        'v%d.%d' % (major, minor - 1): [older]}
