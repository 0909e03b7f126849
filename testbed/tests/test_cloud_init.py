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


SAMPLE_USER_DATA = '''#cloud-config
system_info:
  default_user:
    name: ubuntu
    lock_passwd: false
    sudo: ALL=(ALL) NOPASSWD:ALL
    shell: /bin/bash
users: [default]
'''
KEY = 'ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIH0 client'


@pytest.mark.parametrize('image, key, user_data, data_format, expected', [
    # A stock guest: the default user gets the key; SSH password logins
    # stay off (sshd restarts to read the image's setting).
    (cloud_init.STOCK, KEY, None, 'RAW',
     (('stock', 'ubuntu', 'ALL=(ALL) NOPASSWD:ALL', '/bin/bash', '', 'true'),
      KEY + '\n\n', True)),
    # The sample's user data: the same default user, no password.
    (cloud_init.STOCK, KEY, SAMPLE_USER_DATA, 'RAW',
     (('stock', 'ubuntu', 'ALL=(ALL) NOPASSWD:ALL', '/bin/bash', '', 'true'),
      KEY + '\n\n', True)),
    # Heat's default format hands the user data to cfn tools, not to
    # cloud-init: unusable cloud-config is not even read.
    (cloud_init.STOCK, None, '#cloud-config\nruncmd: [x]\n',
     'HEAT_CFNTOOLS',
     (('stock', 'ubuntu', 'ALL=(ALL) NOPASSWD:ALL', '/bin/bash', '', 'true'),
      '\n\n', True)),
    # The password route by user data: a password that does not expire,
    # SSH password logins on.
    (cloud_init.STOCK, None, '#cloud-config\npassword: pw\nssh_pwauth: true\n'
     'chpasswd: {expire: false}\n', 'RAW',
     (('stock', 'ubuntu', 'ALL=(ALL) NOPASSWD:ALL', '/bin/bash', 'yes',
       'false'), '\npw\n', False)),
    # The prepared image keeps its password logins: no restart.
    (cloud_init.PREPARED, KEY, SAMPLE_USER_DATA, 'SOFTWARE_CONFIG',
     (('prepared', 'ubuntu', 'ALL=(ALL) NOPASSWD:ALL', '/bin/bash', '',
       'true'), KEY + '\n\n', False)),
    # ... unless the user data turns them off.
    (cloud_init.PREPARED, None, '#cloud-config\nssh_pwauth: false\n', 'RAW',
     (('prepared', 'ubuntu', 'ALL=(ALL) NOPASSWD:ALL', '/bin/bash', 'no',
       'true'), '\n\n', True)),
    # Another default user, without sudo; or none at all ([]).
    (cloud_init.STOCK, KEY, '#cloud-config\nsystem_info:\n  default_user:\n'
     '    name: debian\n    sudo: false\n', 'RAW',
     (('stock', 'debian', '', '/bin/bash', '', 'true'), KEY + '\n\n', True)),
    (cloud_init.STOCK, KEY, '#cloud-config\nusers: []\n', 'RAW',
     (('stock', '', '', '', '', 'true'), KEY + '\n\n', True)),
])
def test_first_boot_plan(image, key, user_data, data_format, expected):
    plan = cloud_init.plan_first_boot(image, key, user_data, data_format)
    assert (plan.argv, plan.stdin, plan.restart_sshd) == expected


@pytest.mark.parametrize('user_data', [
    '#!/bin/sh\necho hi\n',  # not cloud-config
    '#cloud-config\n[1, 2]\n',
    '#cloud-config\nruncmd: [reboot]\n',  # not emulated: fails, not ignored
    '#cloud-config\nusers: [default, {name: other}]\n',
    '#cloud-config\nsystem_info: {distro: ubuntu}\n',
    '#cloud-config\nsystem_info: {default_user: {groups: [adm]}}\n',
    '#cloud-config\nsystem_info: {default_user: {name: "a b"}}\n',
    '#cloud-config\nsystem_info: {default_user: {sudo: "x\\ny"}}\n',
    '#cloud-config\nssh_pwauth: "yes"\n',
    '#cloud-config\npassword: "a\\nb"\n',
    '#cloud-config\nchpasswd: {list: "ubuntu:x"}\n',
])
def test_user_data_the_lab_cannot_run_is_refused(user_data):
    with pytest.raises(cloud_init.UserDataError):
        cloud_init.plan_first_boot(cloud_init.STOCK, KEY, user_data, 'RAW')


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
