"""Hostile additionalParams: param_model.parse ends every one of them in
ParameterErrors naming the JSON path, fast, and never raises anything
else."""

import time

import pytest

from kubernetes_mgmt_pv import exceptions
from kubernetes_mgmt_pv.request import param_checks
from kubernetes_mgmt_pv.request import param_model
from tests.unit import test_params

ROOT = param_model.ROOT
STORAGE = ROOT + '.storage_server'


def deeply_nested(depth=20000, inner=None):
    value = inner
    for _ in range(depth):
        value = [value]
    return value


DEEP_LIST = deeply_nested()
DEEP_OBJECT = {}
for _ in range(20000):
    DEEP_OBJECT = {'a': DEEP_OBJECT}


def failures(value):
    """{path: reason} of parse(value), which must raise ParameterErrors."""
    with pytest.raises(exceptions.ParameterErrors) as caught:
        param_model.parse(value)
    found = {}
    for error in caught.value.errors:
        found.setdefault(error.path, error.reason)
    # The message must be printable and sendable as it is.
    str(caught.value).encode('utf-8')
    return found


def mutated(change):
    value = test_params.sample()
    change(value[ROOT])
    return value


def storage(change):
    return lambda root: change(root['storage_server'])


def volume(key, value):
    return storage(lambda s: s['cinder_volume_setup_params'][0].update(
        {key: value}))


def export(key, value):
    return storage(lambda s: s['nfs_server_setup_params'][0].update(
        {key: value}))


# (mutation of the cluster parameters, the JSON path it must be named by)
HOSTILE = [
    (lambda r: r['proxy'].update(http_proxy='http://[::1'),
     ROOT + '.proxy.http_proxy'),
    (lambda r: r['proxy'].update(https_proxy='https://host:99999'),
     ROOT + '.proxy.https_proxy'),
    (lambda r: r['proxy'].update(http_proxy='http://host:0'),
     ROOT + '.proxy.http_proxy'),
    (lambda r: r['proxy'].update(http_proxy='http://u:p"w@host:3128'),
     ROOT + '.proxy.http_proxy'),
    (lambda r: r['proxy'].update(http_proxy='http://host:3128/\n'),
     ROOT + '.proxy.http_proxy'),
    (lambda r: r['proxy'].update(http_proxy='http://h\u00f6st:3128'),
     ROOT + '.proxy.http_proxy'),
    (lambda r: r['proxy'].update(no_proxy='a,\x00b'),
     ROOT + '.proxy.no_proxy'),
    (lambda r: r['master_node'].update(username='ubu\ud800ntu'),
     ROOT + '.master_node.username'),
    (lambda r: r['worker_node'].update(password='pass\x00word'),
     ROOT + '.worker_node.password'),
    (lambda r: r['master_node'].update(ssh_cp_name='\udcff'),
     ROOT + '.master_node.ssh_cp_name'),
    (storage(lambda s: s.update(password='\x1b[2J')), STORAGE + '.password'),
    (storage(lambda s: s.update(username=42)), STORAGE + '.username'),
    (storage(lambda s: s.update(password=['ubuntu'])), STORAGE + '.password'),
    (storage(lambda s: s.update(password='x' * 5000)), STORAGE + '.password'),
    (storage(lambda s: s.update(ssh_cp_name='../../../../v3/auth/tokens')),
     STORAGE + '.ssh_cp_name'),
    (storage(lambda s: s.update(nic_cp_name='a/b')), STORAGE + '.nic_cp_name'),
    (volume('volume_resource_id', 'vol ume'),
     STORAGE + '.cinder_volume_setup_params[0].volume_resource_id'),
    (volume('mount_to', '/volume\x00'),
     STORAGE + '.cinder_volume_setup_params[0].mount_to'),
    (volume('mount_to', '/var/lib'),
     STORAGE + '.cinder_volume_setup_params[0].mount_to'),
    (export('export_dir', '/home/ubuntu'),
     STORAGE + '.nfs_server_setup_params[0].export_dir'),
    # Allowed by name, but outside every mount_to (/volume).
    (export('export_dir', '/srv/nfs'),
     STORAGE + '.nfs_server_setup_params[0].export_dir'),
    (export('export_to', '10.0.0.0/24\n'),
     STORAGE + '.nfs_server_setup_params[0].export_to'),
    (lambda r: r['pv_registration_params'][0].update(
        nfs_server_cp='storage_server_CP/../x'),
     ROOT + '.pv_registration_params[0].nfs_server_cp'),
    (lambda r: r['pv_registration_params'][0].update(
        pv_manifest_file_path='Files/\ud800.yaml'),
     ROOT + '.pv_registration_params[0].pv_manifest_file_path'),
    (lambda r: r['worker_node'].update(aspect_id='worker instance'),
     ROOT + '.worker_node.aspect_id'),
    # Deep nesting in a known key, an unknown key and a key parse ignores.
    (storage(lambda s: s.update(password=DEEP_LIST)), STORAGE + '.password'),
    (storage(lambda s: s.update(junk=DEEP_LIST)), STORAGE + '.junk'),
    (lambda r: r['master_node'].update(pod_cidr=DEEP_OBJECT),
     # The member at the depth limit: pod_cidr is the third level.
     ROOT + '.master_node.pod_cidr' + '.a' * (param_checks.MAX_DEPTH - 3)),
    (storage(lambda s: s['nfs_server_setup_params'].append(DEEP_LIST)),
     STORAGE + '.nfs_server_setup_params'),
    # Odd keys are named in an escaped, printable form.
    (storage(lambda s: s.update({'\ud800': 1})), STORAGE + '["\\ud800"]'),
    (storage(lambda s: s.update({1: 1, 'a b': 2})), STORAGE + '[1]'),
    (storage(lambda s: s.update({1: 1, 'a b': 2})), STORAGE + '["a b"]'),
]


@pytest.mark.parametrize('change, path', HOSTILE)
def test_hostile_value_is_named_by_its_json_path(change, path):
    assert path in failures(mutated(change))


def test_deep_nesting_outside_the_cluster_parameters_is_named():
    value = test_params.sample()
    value['lcm-operation-user-data'] = DEEP_LIST
    assert failures(value) == {
        'lcm-operation-user-data': 'is nested deeper than %d levels'
        % param_checks.MAX_DEPTH}


def test_a_value_nested_to_the_limit_is_still_accepted():
    # master_node tolerates keys this driver does not use (with a warning).
    value = test_params.sample()
    value[ROOT]['master_node']['unused'] = deeply_nested(
        param_checks.MAX_DEPTH - 3, 'x')
    param_model.parse(value)


@pytest.mark.parametrize('value', [
    None, [], 'text', 0, DEEP_LIST, {ROOT: DEEP_LIST}, {ROOT: 'x'}])
def test_top_level_of_any_type_is_a_finding(value):
    assert failures(value)


def test_problems_beyond_the_limit_are_counted_not_listed():
    value = test_params.sample()
    value[ROOT]['storage_server'].update(
        ('unknown%d' % n, n) for n in range(1000))
    found = failures(value)
    assert len(found) == param_model.MAX_REPORTED + 1
    assert found['additionalParams'] == '%d more problems are not listed' % (
        1000 - param_model.MAX_REPORTED)


# -- every string field against every value no string field may have --------

STRING_FIELDS = [
    ('', 'script_path'), ('', 'vim_name'),
    ('master_node', 'pod_cidr'), ('master_node', 'cluster_cidr'),
    ('master_node', 'cluster_cp_name'), ('master_node', 'cluster_fip_name'),
    ('proxy', 'k8s_node_cidr'),
    ('master_node', 'ssh_cp_name'), ('master_node', 'nic_cp_name'),
    ('master_node', 'username'), ('master_node', 'password'),
    ('master_node', 'aspect_id'),
    ('worker_node', 'ssh_cp_name'), ('worker_node', 'nic_cp_name'),
    ('worker_node', 'username'), ('worker_node', 'password'),
    ('worker_node', 'aspect_id'),
    ('storage_server', 'ssh_cp_name'), ('storage_server', 'nic_cp_name'),
    ('storage_server', 'username'), ('storage_server', 'password'),
    ('storage_server.cinder_volume_setup_params[0]', 'volume_resource_id'),
    ('storage_server.cinder_volume_setup_params[0]', 'mount_to'),
    ('storage_server.nfs_server_setup_params[0]', 'export_dir'),
    ('storage_server.nfs_server_setup_params[0]', 'export_to'),
    ('pv_registration_params[0]', 'pv_manifest_file_path'),
    ('pv_registration_params[0]', 'nfs_server_cp'),
    ('proxy', 'http_proxy'), ('proxy', 'https_proxy'), ('proxy', 'no_proxy'),
]

NEVER_VALID = (
    ['', ' ', '\t', '\x00', 'a\x00', '\x00/volume', '\x7f', '\x85', '\x9f',
     '\x1b[31m', 'a\nb', 'a\rb', 'a\x0bb', '\ud800', 'a\udfff', '\udc80b',
     '/volume/\ud83d', 'x' * (param_checks.MAX_TEXT_LENGTH + 1),
     0, 1.5, float('nan'), True, False, [], ['a'], {}, {'a': 'b'},
     DEEP_LIST, DEEP_OBJECT, b'bytes', object()] +
    # Every C0 and C1 control character, inside otherwise valid text.
    ['ok%cok' % code for code in list(range(0x20)) + list(range(0x7f, 0xa0))])


def container(value, dotted):
    for part in filter(None, dotted.replace('[', '.[').split('.')):
        value = value[int(part[1:-1])] if part.startswith('[') else \
            value[part]
    return value


@pytest.mark.parametrize('parent, key', STRING_FIELDS)
def test_no_string_field_accepts_a_hostile_value(parent, key):
    path = '.'.join(filter(None, (ROOT, parent, key)))
    started = time.process_time()
    for hostile in NEVER_VALID:
        value = test_params.sample()
        container(value[ROOT], parent)[key] = hostile
        found = failures(value)
        assert path in found, (hostile, found)
    assert time.process_time() - started < 2


NAME_FIELDS = [field for field in STRING_FIELDS if field[1] in (
    'ssh_cp_name', 'nic_cp_name', 'aspect_id', 'volume_resource_id',
    'nfs_server_cp', 'cluster_cp_name', 'cluster_fip_name', 'vim_name')]


@pytest.mark.parametrize('parent, key', NAME_FIELDS)
@pytest.mark.parametrize('name', [
    '../../../../v3/auth/tokens', 'a/b', '/abs', 'a b', '-lead', '.hidden',
    '_lead', 'x' * 256, 'n\u00e4me', 'a%2Fb', 'a?b', 'a#b', 'a;b', 'a:b'])
def test_heat_resource_names_are_refused_outside_their_characters(
        parent, key, name):
    value = test_params.sample()
    container(value[ROOT], parent)[key] = name
    assert '.'.join(filter(None, (ROOT, parent, key))) in failures(value)
