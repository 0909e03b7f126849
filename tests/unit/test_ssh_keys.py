"""Logins by key file: the acceptance decision from a key file's facts,
reading it from ssh_key_dir, and the login parameters that name it."""

import io
import os

import paramiko
import pytest

from kubernetes_mgmt_pv.doors import v2_mapping
from kubernetes_mgmt_pv import exceptions
from kubernetes_mgmt_pv.openstack import vnf_topology
from kubernetes_mgmt_pv.remote import ssh_keys
from kubernetes_mgmt_pv.request import param_model
from tests.unit import test_params

ROOT = param_model.ROOT
ME = os.geteuid()
Facts = ssh_keys.KeyFileFacts


# -- the decision -----------------------------------------------------------

@pytest.mark.parametrize('facts, problem', [
    (Facts(True, 0o600, ME), None),
    (Facts(True, 0o400, ME), None),
    (Facts(True, 0o700, ME), None),  # the owner's own bits do not matter
    (Facts(True, 0o640, ME), 'has mode 0640'),
    (Facts(True, 0o604, ME), 'has mode 0604'),
    (Facts(True, 0o610, ME), 'has mode 0610'),
    (Facts(True, 0o602, ME), 'has mode 0602'),
    (Facts(True, 0o600, ME + 1), 'is owned by uid %d' % (ME + 1)),
    (Facts(False, 0o600, ME), 'is not a regular file'),
    # The first reason is enough: the file is refused either way.
    (Facts(False, 0o644, ME + 1), 'is not a regular file'),
    (Facts(True, 0o644, ME + 1), 'is owned by uid %d' % (ME + 1)),
])
def test_which_key_files_are_accepted(facts, problem):
    found = ssh_keys.key_file_problem(facts, ME)
    if problem is None:
        assert found is None
    else:
        assert found.startswith(problem)


# -- reading the file -------------------------------------------------------

def _private_key_text(key):
    out = io.StringIO()
    key.write_private_key(out)
    return out.getvalue()


@pytest.fixture(scope='module')
def key_texts():
    return {'rsa': _private_key_text(paramiko.RSAKey.generate(2048)),
            'ecdsa': _private_key_text(paramiko.ECDSAKey.generate())}


def _write(directory, name, text, mode=0o600):
    path = os.path.join(directory, name)
    with open(path, 'w' if isinstance(text, str) else 'wb') as handle:
        handle.write(text)
    os.chmod(path, mode)
    return path


@pytest.mark.parametrize('kind', ['rsa', 'ecdsa'])
def test_a_private_key_file_is_loaded(tmp_path, key_texts, kind):
    _write(tmp_path, 'nodes', key_texts[kind])
    key = ssh_keys.load(str(tmp_path), 'nodes')
    assert key.can_sign()


def test_an_openssh_ed25519_key_is_loaded(tmp_path):
    path = str(tmp_path / 'nodes')
    os.system('ssh-keygen -q -t ed25519 -N "" -f %s' % path)
    assert isinstance(ssh_keys.load(str(tmp_path), 'nodes'),
                      paramiko.Ed25519Key)


def _refusal(directory, name):
    with pytest.raises(ssh_keys.KeyFileError) as caught:
        ssh_keys.load(str(directory), name)
    return str(caught.value)


@pytest.mark.parametrize('name', [
    '../nodes', 'keys/nodes', '/etc/ssh/ssh_host_rsa_key', '.nodes', '..',
    'nodes\n', 'no des', '', 'x' * 129, None])
def test_only_a_plain_file_name_is_looked_up(tmp_path, key_texts, name):
    _write(tmp_path, 'nodes', key_texts['rsa'])
    assert 'must be a file name in ssh_key_dir' in _refusal(tmp_path, name)


def test_a_symbolic_link_is_refused(tmp_path, key_texts):
    target = _write(tmp_path, 'real', key_texts['rsa'])
    os.symlink(target, str(tmp_path / 'nodes'))
    assert 'symbolic link' in _refusal(tmp_path, 'nodes')


def test_a_readable_key_is_refused_without_showing_it(tmp_path, key_texts):
    _write(tmp_path, 'nodes', key_texts['rsa'], mode=0o644)
    reason = _refusal(tmp_path, 'nodes')
    assert 'has mode 0644' in reason
    assert key_texts['rsa'].splitlines()[1][:20] not in reason


def test_a_key_of_another_user_is_refused(tmp_path, key_texts):
    path = _write(tmp_path, 'nodes', key_texts['rsa'])
    if ME != 0:
        pytest.skip('only root can give a file away')
    os.chown(path, 4242, -1)
    assert 'is owned by uid 4242' in _refusal(tmp_path, 'nodes')


def test_a_directory_is_refused(tmp_path):
    os.mkdir(str(tmp_path / 'nodes'), 0o700)
    assert 'is not a regular file' in _refusal(tmp_path, 'nodes')


def test_a_missing_file_is_named(tmp_path):
    assert _refusal(tmp_path, 'nodes').startswith('no key file nodes')


@pytest.mark.parametrize('content', [
    b'', b'\xff\xfe', b'not a key',
    b'-----BEGIN OPENSSH PRIVATE KEY-----\nAAAA\n'
    b'-----END OPENSSH PRIVATE KEY-----\n',
    b'x' * (ssh_keys.MAX_KEY_BYTES + 1)])
def test_what_is_no_private_key_is_refused(tmp_path, content):
    _write(tmp_path, 'nodes', content)
    reason = _refusal(tmp_path, 'nodes')
    assert 'cannot be parsed' in reason or 'larger than' in reason
    assert 'AAAA' not in reason


def test_an_encrypted_key_is_refused(tmp_path):
    out = io.StringIO()
    paramiko.RSAKey.generate(2048).write_private_key(out, password='pw')
    _write(tmp_path, 'nodes', out.getvalue())
    assert 'encrypted with a passphrase' in _refusal(tmp_path, 'nodes')


def test_every_unusable_key_is_named_by_its_json_path(tmp_path, key_texts):
    _write(tmp_path, 'good', key_texts['rsa'])
    _write(tmp_path, 'open', key_texts['rsa'], mode=0o644)
    with pytest.raises(exceptions.ParameterErrors) as caught:
        ssh_keys.load_all([('a.master_node.ssh_key', 'good'),
                           ('a.worker_node.ssh_key', 'open'),
                           ('a.storage_server.ssh_key', 'gone')],
                          str(tmp_path))
    assert [error.path for error in caught.value.errors] == [
        'a.worker_node.ssh_key', 'a.storage_server.ssh_key']
    assert set(ssh_keys.load_all([('p', 'good'), ('q', 'good')],
                                 str(tmp_path))) == {'good'}


# -- the parameters ---------------------------------------------------------

def _with_logins(**logins):
    """The user guide's parameters, each role's login replaced."""
    value = test_params.sample()
    for role, login in logins.items():
        node = value[ROOT][role]
        node.pop('password')
        node.update(login)
    return value


@pytest.mark.parametrize('login, error', [
    ({'ssh_key': 'nodes'}, None),
    ({'password': 'pw'}, None),
    ({'ssh_key': 'nodes', 'password': 'pw'}, 'give either'),
    ({}, 'required'),
    ({'ssh_key': None, 'password': None}, 'required'),
    ({'ssh_key': '../../etc/ssh/ssh_host_rsa_key'}, 'must be a file name'),
    ({'ssh_key': 'a/b'}, 'must be a file name'),
    ({'ssh_key': '.hidden'}, 'must be a file name'),
    ({'ssh_key': 'nodes\n'}, 'control characters'),
    ({'ssh_key': 7}, 'must be a string'),
])
@pytest.mark.parametrize('role', ['master_node', 'worker_node',
                                  'storage_server'])
def test_each_login_is_a_key_file_or_a_password(role, login, error):
    result = param_model.parse_partially(_with_logins(**{role: login}))
    found = {e.path: e.reason for e in result.errors}
    path = '%s.%s.ssh_key' % (ROOT, role)
    if error is None:
        assert found == {}
        access = getattr(result.params, {
            'master_node': 'master', 'worker_node': 'worker',
            'storage_server': 'storage'}[role])
        assert (access.ssh_key, access.password) == (
            login.get('ssh_key'), login.get('password'))
    else:
        assert list(found) == [path] and error in found[path], found


def test_password_logins_are_listed_for_validate():
    params = param_model.parse(_with_logins(
        master_node={'ssh_key': 'a'}, storage_server={'ssh_key': 'b'}))
    assert param_model.password_logins(params) == [
        param_model.WORKER_PATH + '.password']
    params = param_model.parse(_with_logins(
        master_node={'ssh_key': 'a'}, worker_node={'ssh_key': 'a'},
        storage_server={'ssh_key': 'b'}))
    assert param_model.password_logins(params) == []


def test_the_key_files_of_params_and_overrides_are_named_by_json_path():
    params = param_model.parse(_with_logins(
        master_node={'ssh_key': 'masters'}, storage_server={'ssh_key': 'nfs'}))
    overrides = vnf_topology.credential_overrides(
        {'worker_node_ssh_key': 'new-workers'})
    assert vnf_topology.named_key_files(params, overrides) == [
        ('additionalParams.%s.master_node.ssh_key' % ROOT, 'masters'),
        ('additionalParams.%s.storage_server.ssh_key' % ROOT, 'nfs'),
        ('additionalParams.worker_node_ssh_key', 'new-workers')]


@pytest.mark.parametrize('request_params, overrides, error', [
    ({'worker_node_ssh_key': 'k'},
     {'worker': {'ssh_key': 'k', 'password': None}}, None),
    ({'worker_node_password': 'p'},
     {'worker': {'password': 'p', 'ssh_key': None}}, None),
    ({'master_node_username': 'u'}, {'master': {'username': 'u'}}, None),
    ({'worker_node_ssh_key': 'k', 'worker_node_password': 'p'}, None,
     'additionalParams.worker_node_ssh_key'),
    ({'worker_node_ssh_key': '../k'}, None,
     'additionalParams.worker_node_ssh_key'),
])
def test_a_request_overrides_the_login_of_its_nodes(request_params,
                                                    overrides, error):
    if error is None:
        assert vnf_topology.credential_overrides(request_params) == overrides
        return
    with pytest.raises(exceptions.ParameterErrors) as caught:
        vnf_topology.credential_overrides(request_params)
    assert [e.path for e in caught.value.errors] == [error]


# -- Tacker v2: the key file names are kept ---------------------------------

def _v2_saved(**logins):
    root = _with_logins(**logins)[ROOT]
    del root['proxy']  # its URLs with user info must be given again
    return v2_mapping.saved_params(root)


@pytest.mark.parametrize('operation', ['scale_start', 'scale_end',
                                       'heal_start', 'heal_end',
                                       'terminate_start'])
def test_v2_needs_no_login_again_for_a_key_file(operation):
    saved = _v2_saved(master_node={'ssh_key': 'm'}, worker_node={
        'ssh_key': 'w'}, storage_server={'ssh_key': 's'})
    assert saved['worker_node']['ssh_key'] == 'w'
    merged = v2_mapping.params_in_effect(operation, {}, {'params': saved})
    assert merged['worker_node']['ssh_key'] == 'w'
    assert 'password' not in merged['worker_node']
    assert param_model.parse({ROOT: merged}).worker.ssh_key == 'w'


def test_v2_still_needs_a_password_given_again():
    saved = _v2_saved(master_node={'ssh_key': 'm'},
                      storage_server={'ssh_key': 's'})
    with pytest.raises(exceptions.ParameterErrors) as caught:
        v2_mapping.params_in_effect('scale_end', {}, {'params': saved})
    assert [e.path for e in caught.value.errors] == [
        'additionalParams.%s.worker_node.password' % ROOT]


@pytest.mark.parametrize('given, expected', [
    # A request's password replaces the saved key file...
    ({'worker_node': {'password': 'p'}}, {'password': 'p'}),
    ({'worker_node_password': 'p'}, {'password': 'p'}),
    # ...and its key file the saved one.
    ({'worker_node': {'ssh_key': 'other'}}, {'ssh_key': 'other'}),
    ({}, {'ssh_key': 'w'}),
])
def test_v2_a_request_may_give_another_login(given, expected):
    saved = _v2_saved(master_node={'ssh_key': 'm'}, worker_node={
        'ssh_key': 'w'}, storage_server={'ssh_key': 's'})
    request = {key: value for key, value in given.items()
               if not key.endswith('_node')}
    if 'worker_node' in given:
        request[ROOT] = {'worker_node': given['worker_node']}
    merged = v2_mapping.params_in_effect('heal_end', request,
                                         {'params': saved})
    login = {key: merged['worker_node'][key] for key in ('password',
                                                         'ssh_key')
             if key in merged['worker_node']}
    assert login == expected
