"""The guest host names and console logs the testbed gives, as Nova and
cloud-init would."""

import pytest

from kubernetes_mgmt_pv.remote import host_keys
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


def test_a_booting_vms_console_shows_sshd_then_its_host_keys():
    log = cloud_init.CONSOLE_LOG.format(
        name='vm', rule='#' * 61,
        fingerprint='256 SHA256:%s root@vm (ED25519)' % ('A' * 43),
        public_key='ssh-ed25519 AAAAC3NzaC1lZDI1NTE5 root@vm')
    booting = cloud_init.console_so_far(log, sshd_started=False)
    sshd = cloud_init.console_so_far(log, sshd_started=True)
    assert log.startswith(sshd) and sshd.startswith(booting)
    assert 'Secure Shell' not in booting and 'Secure Shell' in sshd
    # The driver finds no host keys on either, until the whole log.
    assert host_keys.parse_console_fingerprints(booting) is None
    assert host_keys.parse_console_fingerprints(sshd) is None
    assert 'SHA256:' + 'A' * 43 in host_keys.parse_console_fingerprints(log)
