"""Logins by key file: the acceptance decision from a key file's facts,
reading it from ssh_key_dir, and the login parameters that name it."""

import io
import os
import shutil
import types

import paramiko
import pytest

from kubernetes_mgmt_pv import config
from kubernetes_mgmt_pv.doors import tacker_compat
from kubernetes_mgmt_pv.doors import v2_hook
from kubernetes_mgmt_pv.doors import v2_mapping
from kubernetes_mgmt_pv import exceptions
from kubernetes_mgmt_pv import mgmt_driver
from kubernetes_mgmt_pv.openstack import vnf_topology
from kubernetes_mgmt_pv.remote import ssh_keys
from kubernetes_mgmt_pv.request import param_model
from tests.unit import test_params
from tests.unit import v2_dicts as v2

ROOT = param_model.ROOT
ME = os.geteuid()
Facts = ssh_keys.KeyFileFacts
DirectoryFacts = ssh_keys.DirectoryFacts


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
    # A key directory: others may look into it, not write it.
    *[(DirectoryFacts(True, mode, ME), None)
      for mode in (0o700, 0o755, 0o711, 0o500)],
    *[(DirectoryFacts(True, mode, ME), 'has mode %04o' % mode)
      for mode in (0o770, 0o720, 0o702, 0o1777)],
    (DirectoryFacts(True, 0o700, ME + 1), 'is owned by uid %d' % (ME + 1)),
    (DirectoryFacts(False, 0o700, ME), 'is not a directory'),
    (DirectoryFacts(False, 0o777, ME + 1), 'is not a directory'),
])
def test_which_key_files_and_directories_are_accepted(facts, problem):
    judge = ssh_keys.directory_problem if isinstance(
        facts, DirectoryFacts) else ssh_keys.key_file_problem
    found = judge(facts, ME)
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


def _refusal(directory, name, project=None, user_uid=None):
    """(what the caller is told, what the log is told) of a refused key."""
    with pytest.raises(ssh_keys.KeyFileError) as caught:
        ssh_keys.load(str(directory), name, project, user_uid)
    return str(caught.value), caught.value.detail


@pytest.mark.parametrize('name', [
    '../nodes', 'keys/nodes', '/etc/ssh/ssh_host_rsa_key', '.nodes', '..',
    'nodes\n', 'no des', '', 'x' * 129, None])
def test_only_a_plain_file_name_is_looked_up(tmp_path, key_texts, name):
    _write(tmp_path, 'nodes', key_texts['rsa'])
    reason, _ = _refusal(tmp_path, name)
    assert 'must be a file name in ssh_key_dir' in reason


def _spoil_mode(mode):
    return lambda path: os.chmod(path, mode)


def _give_away(path):
    os.chown(path, 4242, -1)


def _replace_by_symlink(path):
    os.rename(path, path + '.real')
    os.symlink(path + '.real', path)


def _replace_by_directory(path):
    os.unlink(path)
    os.mkdir(path, 0o700)


# The key file "nodes" spoiled: the class the caller reads, the details
# only the log has.
@pytest.mark.parametrize('spoil, reason, detail', [
    (_spoil_mode(0o644), 'unsafe key file', 'has mode 0644'),
    (_spoil_mode(0o640), 'unsafe key file', 'has mode 0640'),
    (_give_away, 'unsafe key file', 'is owned by uid 4242'),
    (_replace_by_symlink, 'unsafe key file', 'symbolic link'),
    (_replace_by_directory, 'unsafe key file',
     'is not a regular file'),
    (os.unlink, 'no such key', 'no key file'),
    (lambda path: os.truncate(path, 20), 'unusable key',
     'cannot be parsed'),
])
def test_an_unusable_key_file_is_refused_without_details(
        tmp_path, key_texts, spoil, reason, detail):
    path = _write(tmp_path, 'nodes', key_texts['rsa'])
    spoil(path)
    told, logged = _refusal(tmp_path, 'nodes')
    assert told.startswith(reason)
    assert detail in logged and str(tmp_path) in logged


def _group_writable(directory):
    os.chmod(directory, 0o770)


def _other_writable(directory):
    os.chmod(directory, 0o1777)  # sticky or not: others write it


def _symlinked(directory):
    os.rename(directory, directory + '.real')
    os.symlink(directory + '.real', directory)


def _not_a_directory(directory):
    shutil.rmtree(directory)
    with open(directory, 'w'):
        pass


# The key directory (ssh_key_dir, then the project's) spoiled.
@pytest.mark.parametrize('spoil, reason, detail', [
    (_group_writable, 'unsafe key directory', 'has mode 0770'),
    (_other_writable, 'unsafe key directory', 'has mode 1777'),
    (_give_away, 'unsafe key directory', 'is owned by uid 4242'),
    (_symlinked, 'unsafe key directory', 'symbolic link'),
    (_not_a_directory, 'unsafe key directory', 'cannot be opened'),
    (shutil.rmtree, 'no such key', 'does not exist'),
])
@pytest.mark.parametrize('project, spoiled', [
    (None, ''), ('project-a', ''), ('project-a', 'project-a')])
def test_an_unsafe_key_directory_is_refused_without_details(
        tmp_path, key_texts, spoil, reason, detail, project, spoiled):
    root = tmp_path / 'keys'
    directory = root / project if project else root
    os.makedirs(str(directory), 0o700)
    _write(directory, 'nodes', key_texts['rsa'])
    assert ssh_keys.load(str(root), 'nodes', project).can_sign()
    spoil(str(root / spoiled) if spoiled else str(root))
    told, logged = _refusal(root, 'nodes', project)
    assert told == reason
    assert detail in logged and str(root / spoiled) in logged


@pytest.mark.parametrize('mode', [0o700, 0o755, 0o711, 0o500])
def test_a_key_directory_only_its_owner_writes_is_used(
        tmp_path, key_texts, mode):
    _write(tmp_path, 'nodes', key_texts['rsa'])
    os.chmod(str(tmp_path), mode)
    try:
        assert ssh_keys.load(str(tmp_path), 'nodes').can_sign()
    finally:
        os.chmod(str(tmp_path), 0o700)


def test_the_owner_is_the_user_the_driver_runs_as(tmp_path, key_texts):
    """Given away to uid 4242, everything is refused, unless the driver
    runs as 4242."""
    path = _write(tmp_path, 'nodes', key_texts['rsa'])
    for owned in (str(tmp_path), path):
        os.chown(owned, 4242, -1)
    assert _refusal(tmp_path, 'nodes')[0] == 'unsafe key directory'
    assert ssh_keys.load(str(tmp_path), 'nodes', user_uid=4242).can_sign()
    os.chown(path, ME, -1)
    assert _refusal(tmp_path, 'nodes', user_uid=4242) == (
        'unsafe key file', '%s is owned by uid %d, not by the user '
        'the driver runs as (uid 4242)' % (path, ME))


@pytest.mark.parametrize('project', ['..', '.', 'a/b', '', 'a' * 65,
                                     '../keys'])
def test_a_project_id_is_a_plain_directory_name(tmp_path, key_texts,
                                                project):
    os.makedirs(str(tmp_path / 'keys'), 0o700)
    _write(tmp_path / 'keys', 'nodes', key_texts['rsa'])
    assert _refusal(tmp_path / 'keys', 'nodes', project)[0] == \
        'no such key'


def test_a_readable_key_is_refused_without_showing_it(tmp_path, key_texts):
    _write(tmp_path, 'nodes', key_texts['rsa'], mode=0o644)
    reason, detail = _refusal(tmp_path, 'nodes')
    assert 'has mode 0644' in detail
    assert key_texts['rsa'].splitlines()[1][:20] not in reason + detail


@pytest.mark.parametrize('content', [
    b'', b'\xff\xfe', b'not a key',
    b'-----BEGIN OPENSSH PRIVATE KEY-----\nAAAA\n'
    b'-----END OPENSSH PRIVATE KEY-----\n',
    b'x' * (ssh_keys.MAX_KEY_BYTES + 1)])
def test_what_is_no_private_key_is_refused(tmp_path, content):
    _write(tmp_path, 'nodes', content)
    reason, detail = _refusal(tmp_path, 'nodes')
    assert reason.startswith('unusable key')
    assert 'cannot be parsed' in detail or 'larger than' in detail
    assert 'AAAA' not in reason + detail


def test_an_encrypted_key_is_refused(tmp_path):
    out = io.StringIO()
    paramiko.RSAKey.generate(2048).write_private_key(out, password='pw')
    _write(tmp_path, 'nodes', out.getvalue())
    reason, detail = _refusal(tmp_path, 'nodes')
    assert reason.startswith('unusable key')
    assert 'encrypted with a passphrase' in detail


def test_every_unusable_key_is_named_by_its_json_path(tmp_path, key_texts,
                                                      caplog):
    _write(tmp_path, 'good', key_texts['rsa'])
    _write(tmp_path, 'open', key_texts['rsa'], mode=0o644)
    with pytest.raises(exceptions.ParameterErrors) as caught:
        ssh_keys.load_all([('a.master_node.ssh_key', 'good'),
                           ('a.worker_node.ssh_key', 'open'),
                           ('a.storage_server.ssh_key', 'gone')],
                          str(tmp_path))
    assert [(error.path, error.reason.split(' (')[0])
            for error in caught.value.errors] == [
        ('a.worker_node.ssh_key', 'unsafe key file'),
        ('a.storage_server.ssh_key', 'no such key')]
    # The caller learns no path, owner or mode; the log has them.
    told = str(caught.value)
    for hidden in (str(tmp_path), '0644', 'uid', 'mode'):
        assert hidden not in told
    logged = caplog.text
    assert 'a.worker_node.ssh_key' in logged and 'has mode 0644' in logged
    assert os.path.join(str(tmp_path), 'gone') in logged
    assert set(ssh_keys.load_all([('p', 'good'), ('q', 'good')],
                                 str(tmp_path))) == {'good'}


# -- one key directory per project -------------------------------------------

def _conf(directory, per_project):
    return types.SimpleNamespace(ssh_key_dir=str(directory),
                                 ssh_key_per_project=per_project)


NAMED = [('a.worker_node.ssh_key', 'nodes')]


def _per_project_keys(tmp_path, key_texts):
    """ssh_key_dir with project-a's key "nodes", and a shared "nodes"."""
    os.makedirs(str(tmp_path / 'project-a'), 0o700)
    os.makedirs(str(tmp_path / 'project-b'), 0o700)
    _write(tmp_path / 'project-a', 'nodes', key_texts['rsa'])
    _write(tmp_path, 'nodes', key_texts['ecdsa'])


def test_a_project_uses_only_its_own_keys(tmp_path, key_texts):
    _per_project_keys(tmp_path, key_texts)
    conf = _conf(tmp_path, True)
    key = ssh_keys.load_configured(NAMED, conf, lambda: 'project-a')['nodes']
    assert isinstance(key, paramiko.RSAKey)
    for project in ('project-b', 'project-c'):
        with pytest.raises(exceptions.ParameterErrors) as caught:
            ssh_keys.load_configured(NAMED, conf, lambda: project)
        (error,) = caught.value.errors
        assert (error.path, error.reason.split(' (')[0]) == (
            'a.worker_node.ssh_key', 'no such key')
        assert project not in str(error)


def test_an_unknown_project_uses_no_key(tmp_path, key_texts):
    _per_project_keys(tmp_path, key_texts)
    with pytest.raises(exceptions.ParameterErrors) as caught:
        ssh_keys.load_configured(NAMED, _conf(tmp_path, True), lambda: None)
    assert caught.value.errors[0].reason.startswith('no such key')


def test_without_the_option_the_project_is_not_asked(tmp_path, key_texts):
    _per_project_keys(tmp_path, key_texts)

    def project_of():
        raise AssertionError('asked for the project')
    key = ssh_keys.load_configured(NAMED, _conf(tmp_path, False),
                                   project_of)['nodes']
    assert isinstance(key, paramiko.ECDSAKey)
    assert ssh_keys.load_configured([], _conf(tmp_path, True),
                                    project_of) == {}


def test_the_option_is_off_by_default():
    assert config.options().ssh_key_per_project is False


def test_the_v1_door_names_the_instance_s_project():
    driver = mgmt_driver.KubernetesPvMgmtDriver()
    context = types.SimpleNamespace(project_id='caller')
    assert driver.key_project(context, types.SimpleNamespace(
        tenant_id='owner')) == 'owner'
    assert driver.key_project(context, types.SimpleNamespace()) == 'caller'


def test_the_v2_door_names_the_project_of_the_openstack_vim(monkeypatch):
    asked = []

    def project_context(vim_id):
        asked.append(vim_id)
        return types.SimpleNamespace(project_id='vim-owner')
    monkeypatch.setattr(tacker_compat, 'project_context', project_context)
    inst = v2.vnf_instance()
    driver = v2_hook.V2Driver(v2.script_dict('heal_end', {}, inst), {})
    assert driver.key_project(None, None) == 'vim-owner'
    assert asked == [v2.OPENSTACK_VIM_ID]


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
