"""/etc/os-release as the guests write it, and as they might."""

from oslo_config import cfg
import pytest

from kubernetes_mgmt_pv import config
from kubernetes_mgmt_pv import exceptions
from kubernetes_mgmt_pv.remote import dpkg
from testbed import guest_images
from testbed import virtual_vnf

UBUNTU_2204 = virtual_vnf.UBUNTU_OS_RELEASE  # what the test guests carry


@pytest.mark.parametrize('text, expected', [
    (UBUNTU_2204, ('ubuntu', '22.04')),
    ('ID=debian\nVERSION_ID="12"\n', ('debian', '12')),
    ("ID='ubuntu'\r\nVERSION_ID='24.04'\r\n", ('ubuntu', '24.04')),
    ('ID="ub\\"untu"\nVERSION_ID=20.04', ('ub"untu', '20.04')),
    # A stray quote elsewhere in the file does not break the parse.
    ('PRETTY_NAME="Ubuntu\nID=ubuntu\nVERSION_ID="22.04"\n',
     ('ubuntu', '22.04')),
    ('VERSION_ID="22.04\nID=ubuntu\n', ('ubuntu', '"22.04')),
    ('# comment\n\n  ID=ubuntu  \nVERSION_ID=\n', ('ubuntu', '')),
    ('ID=caf\udce9\n', ('caf\udce9', '')),  # undecodable byte kept
    ('', ('', '')),
])
def test_id_and_version(text, expected):
    assert dpkg.parse_os_release(text) == expected


def _default_supported():
    conf = cfg.ConfigOpts()
    config.register_opts(conf)
    conf([])
    return config.options(conf).supported_os


DEFAULT_SUPPORTED = _default_supported()


@pytest.mark.parametrize('text, expected', [
    (guest_images.UBUNTU_2604.os_release, ('ubuntu', '26.04')),
    (guest_images.DEBIAN_13.os_release, ('debian', '13')),
    (UBUNTU_2204, ('ubuntu', '22.04')),
    ('ID=ubuntu\nVERSION_ID="20.04"\n', ('ubuntu', '20.04')),
    ('ID=ubuntu\nVERSION_ID="24.04"\n', ('ubuntu', '24.04')),
    ('ID=debian\nVERSION_ID="11"\n', ('debian', '11')),
    ('ID=debian\nVERSION_ID="12"\n', ('debian', '12')),
])
def test_todays_and_earlier_images_are_accepted_by_default(text, expected):
    assert dpkg.check_os_release('10.0.0.5', text,
                                 DEFAULT_SUPPORTED) == expected


@pytest.mark.parametrize('text, os_id, version', [
    # Releases between or after the LTS/stable ones the driver knows.
    ('ID=ubuntu\nVERSION_ID="25.10"\n', 'ubuntu', '25.10'),
    ('ID=ubuntu\nVERSION_ID="26.10"\n', 'ubuntu', '26.10'),
    ('ID=debian\nVERSION_ID="14"\n', 'debian', '14'),
    # Debian testing/unstable have no VERSION_ID.
    ('ID=debian\nVERSION_CODENAME=forky\n', 'debian', ''),
    # A derivative is not its base (ID_LIKE is not enough).
    ('ID=linuxmint\nID_LIKE="ubuntu debian"\nVERSION_ID="22"\n',
     'linuxmint', '22'),
    ('ID=centos\nVERSION_ID="7"\n', 'centos', '7'),
    ('', 'unknown', ''),
])
def test_other_systems_are_refused_naming_the_host_and_values(text, os_id,
                                                              version):
    with pytest.raises(exceptions.UnsupportedOSError) as caught:
        dpkg.check_os_release('10.0.0.5', text, DEFAULT_SUPPORTED)
    message = str(caught.value)
    assert message.startswith('10.0.0.5: ')
    assert ' %s %s ' % (os_id, version) in message
    assert 'ubuntu:26.04' in message and 'debian:13' in message


def test_the_operator_list_replaces_the_default():
    assert dpkg.check_os_release(
        'h', 'ID=rocky\nVERSION_ID="9"\n', ['rocky:9']) == ('rocky', '9')
    with pytest.raises(exceptions.UnsupportedOSError):
        dpkg.check_os_release('h', guest_images.DEBIAN_13.os_release,
                              ['debian:12'])
