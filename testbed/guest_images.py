"""Look-alikes of today's guest images: Ubuntu 26.04 LTS and Debian 13.

A test host is an overlay of the runner's Debian 12, so a look-alike
changes only what the driver and the install script read of an image:

* ``/etc/os-release`` (the driver's OS check, the kubelet stand-in's
  ``osImage``), as the image's base-files writes it;
* no ``apt-key``: apt 2.9 and later (Debian 13's apt 3.0, Ubuntu 26.04's
  apt 3.1) no longer ship it, so a script that still calls it fails here
  as on the image (exit 127). The runner's apt 2.6 itself still verifies
  signatures through ``apt-key verify``: only that call gets through;
* the containerd the image's archive installs: Debian 13's 1.7.24, whose
  ``containerd config default`` is a version 2 configuration, and
  Ubuntu 26.04's 2.2.2 (source containerd-app), whose default is a
  version 3 configuration without a ``SystemdCgroup`` key. The testbed's
  apt repository (testbed.apt_repo) serves it as a stand-in package
  (testbed/standins/containerd.py) in place of the image's archive.

Both images are cgroup v2 only (systemd 257 and later cannot boot with
cgroup v1); the kernel modules and sysctls the script sets are stood in
for on every fresh host (testbed.fresh_nodes).
"""

import dataclasses


@dataclasses.dataclass(frozen=True)
class GuestImage(object):
    name: str
    os_release: str
    containerd_version: str  # of the image's containerd package
    pretty_name: str  # PRETTY_NAME, what a Node's osImage shows


UBUNTU_2604 = GuestImage(
    'ubuntu-26.04', '''PRETTY_NAME="Ubuntu 26.04 LTS"
NAME="Ubuntu"
VERSION_ID="26.04"
VERSION="26.04 LTS (Resolute Raccoon)"
VERSION_CODENAME=resolute
ID=ubuntu
ID_LIKE=debian
HOME_URL="https://www.ubuntu.com/"
SUPPORT_URL="https://help.ubuntu.com/"
BUG_REPORT_URL="https://bugs.launchpad.net/ubuntu/"
UBUNTU_CODENAME=resolute
''', '2.2.2-0ubuntu1', 'Ubuntu 26.04 LTS')

DEBIAN_13 = GuestImage(
    'debian-13', '''PRETTY_NAME="Debian GNU/Linux 13 (trixie)"
NAME="Debian GNU/Linux"
VERSION_ID="13"
VERSION="13 (trixie)"
VERSION_CODENAME=trixie
ID=debian
HOME_URL="https://www.debian.org/"
SUPPORT_URL="https://www.debian.org/support"
BUG_REPORT_URL="https://bugs.debian.org/"
''', '1.7.24~ds1-6', 'Debian GNU/Linux 13 (trixie)')

IMAGES = {image.name: image for image in (UBUNTU_2604, DEBIAN_13)}


APT_KEY = '/usr/bin/apt-key'
# Where the runner's apt-key goes, for its own apt's `apt-key verify`.
APT_KEY_FOR_APT = '/usr/lib/testbed/apt-key-for-apt'
NO_APT_KEY = f"""#!/bin/sh
# testbed look-alike (testbed/guest_images.py): apt 3 has no apt-key.
for arg; do
    [ "$arg" != verify ] || exec {APT_KEY_FOR_APT} "$@"
done
echo "$0: not found (no apt-key on this image)" >&2
exit 127
"""


def make(host, image):
    """Make a booted test host look like a VM of ``image``."""
    host.write_file('/etc/os-release', image.os_release)
    host.run(f'mkdir -p {APT_KEY_FOR_APT.rsplit("/", 1)[0]} && '
             f'mv {APT_KEY} {APT_KEY_FOR_APT}')
    host.write_file(APT_KEY, NO_APT_KEY)
    host.run(f'chmod 755 {APT_KEY}')
