"""The guest host names the testbed gives, as Nova and cloud-init would."""

import pytest

from testbed import cloud_init


@pytest.mark.parametrize('display_name, expected', [
    ('workerNode', 'workernode'),  # the sample BaseHOT's group members
    ('masterNode', 'masternode'),
    ('storage_server', 'storage-server'),
    ('my server.example', 'my-server-example'),
    ('-web#1-', 'web1'),
    ('x' * 70, 'x' * 63),
    ('Ça-va', 'ça-va'),  # Latin-1 is kept, as Nova keeps it
    ('日本', 'server'),  # nothing left: the default
])
def test_guest_host_name(display_name, expected):
    assert cloud_init.guest_host_name(display_name) == expected


def test_heat_names_a_server_without_a_name_after_its_stack_and_resource():
    assert cloud_init.server_name({}, 'vnf-group-abc', 'workerNode',
                                  '1a2b') == 'vnf-group-abc-workerNode-1a2b'
    assert cloud_init.server_name({'name': 'workerNode'}, 'vnf', 'w',
                                  '1a2b') == 'workerNode'
