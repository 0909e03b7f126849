"""What Nova and cloud-init make of a server on a real cloud: the guest's
host name and its console log.

Host names, as on the first real cloud (Nova + cloud-init):

* Heat gives Nova the server's ``name`` property as the display name; a
  server without one is named ``<stack name>-<resource name>-<short id>``.
  Every member of a scaling group is built from one template, so all of
  them share the name (the sample's ``masterNode``, ``workerNode``).
* Nova's metadata ``hostname`` is the display name made a host name the
  way Nova's ``utils.sanitize_hostname`` does it: characters outside
  Latin-1 dropped, at most 63 characters, spaces, underscores and dots
  turned into ``-``, anything but letters, digits, ``_``, ``.`` and ``-``
  dropped, lower-cased, leading and trailing ``.`` and ``-`` stripped, and
  a default name when nothing is left. The domain Nova appends
  (``[api] dhcp_domain``) is not part of the host name.
* cloud-init sets that as the guest's host name (``set_hostname``), so
  both Workers of the sample boot as ``workernode``.
"""

import re

# A Nova console log of an Ubuntu VM, as cloud-init's keys_to_console leaves
# it: boot noise, the fingerprints block through logger (syslog header and
# its "ec2" tag), then the public keys; serial lines end in CRLF.
CONSOLE_LOG = """\
[    0.000000] Linux version 5.15.0-91-generic (buildd@lcy02-amd64-045)
[    2.315424] EXT4-fs (vda1): mounted filesystem with ordered data mode.
[  OK  ] Started OpenBSD Secure Shell server.
[   11.204915] cloud-init[812]: Cloud-init v. 23.3.3-0ubuntu0~22.04.1 \
running 'modules:final' at Mon, 08 Jan 2024 10:11:10 +0000. Up 11.05 seconds.
ci-info: no authorized SSH keys fingerprints found for user ubuntu.
<14>Jan  8 10:11:12 ec2:
<14>Jan  8 10:11:12 ec2: {rule}
<14>Jan  8 10:11:12 ec2: -----BEGIN SSH HOST KEY FINGERPRINTS-----
<14>Jan  8 10:11:12 ec2: {fingerprint}
<14>Jan  8 10:11:12 ec2: -----END SSH HOST KEY FINGERPRINTS-----
<14>Jan  8 10:11:12 ec2: {rule}
-----BEGIN SSH HOST KEY KEYS-----
{public_key}
-----END SSH HOST KEY KEYS-----
[   12.001234] cloud-init[905]: Cloud-init v. 23.3.3-0ubuntu0~22.04.1 \
finished at Mon, 08 Jan 2024 10:11:12 +0000. Up 12.00 seconds

Ubuntu 22.04.3 LTS {name} ttyS0

{name} login: """
KEYS_BEGIN = '-----BEGIN SSH HOST KEY KEYS-----'


def console_so_far(log, sshd_started):
    """The part of a CONSOLE_LOG that a VM still booting has printed: its
    kernel's first lines, up to the lines before keys_to_console's once
    its sshd has started (the host keys come last)."""
    marker = '<14>' if sshd_started else '[  OK  ] Started OpenBSD'
    return log[:log.index(marker)]


def server_name(props, stack_name, resource_name, short_id):
    """The Nova display name Heat gives an OS::Nova::Server."""
    return props.get('name') or '%s-%s-%s' % (stack_name, resource_name,
                                              short_id)


def guest_host_name(display_name, default='server'):
    """The host name cloud-init sets from Nova's metadata for a server
    with this display name (see the module docstring)."""
    name = display_name.encode('latin-1', 'ignore').decode('latin-1')[:63]
    name = re.sub(r'[ _.]', '-', name)
    name = re.sub(r'[^\w.-]+', '', name).lower().strip('.-')
    return name or default
