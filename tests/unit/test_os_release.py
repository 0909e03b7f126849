"""/etc/os-release as the guests write it, and as they might."""

import pytest

from kubernetes_mgmt_pv.remote import dpkg
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
