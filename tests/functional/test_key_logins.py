"""Logins by a key file of ssh_key_dir, through the flows' sessions, on a
real OpenSSH server whose user accepts the testbed's client key."""

import os
import subprocess

import pytest

from kubernetes_mgmt_pv import config
from kubernetes_mgmt_pv import exceptions
from kubernetes_mgmt_pv import flow
from kubernetes_mgmt_pv.openstack import vnf_topology
from kubernetes_mgmt_pv.request import param_model

WORKER_KEY_PATH = ('additionalParams.k8s_cluster_installation_param.'
                   'worker_node.ssh_key')


@pytest.fixture(scope='module')
def host(testbed):
    return testbed.add_host('keyvm', 'worker')


@pytest.fixture
def key_dir(testbed, tmp_path, host):
    directory = testbed.place_client_key(str(tmp_path / 'keys'), 'nodes')
    config.CONF.set_override('ssh_key_dir', directory, config.GROUP_NAME)
    config.CONF.set_override('ssh_connect_retries', 0, config.GROUP_NAME)
    # No Nova here: the host key policies without the console.
    config.CONF.set_override('host_key_policy', 'warn', config.GROUP_NAME)
    return directory


def _worker_flow(host, project=None, **login):
    """A flow whose one node is ``host``, a Worker logging in as
    ``login`` says (ssh_key or password), of a VNF instance of
    ``project``."""
    access = param_model.NodeAccess(
        ssh_cp_name='workerNode_CP2', nic_cp_name='workerNode_CP2',
        username='ubuntu', **login)
    params = param_model.ClusterParams(worker=access)
    node = vnf_topology.Node(vnf_topology.WORKER, 'workerNode_CP2', host.ip,
                             host.ip, 'workerNode_CP2', None, access)
    worker_flow = flow.Flow(params, heat=None, key_project=lambda: project)
    worker_flow._topology = vnf_topology.Topology(None, [node])
    return worker_flow, node


def _run_on(worker_flow, node, command):
    with worker_flow.sessions() as sessions:
        worker_flow.preflight(sessions, [node])
        return worker_flow.session(sessions, node).run(command).stdout


def test_a_key_file_logs_in_without_a_password(host, key_dir):
    seen = len(host.sshd_log())
    worker_flow, node = _worker_flow(host, ssh_key='nodes')
    assert _run_on(worker_flow, node, ['id', '-un']).strip() == 'ubuntu'
    log = host.sshd_log()[seen:]
    assert 'Accepted publickey for ubuntu' in log, log
    assert 'password' not in log.lower(), log


def test_a_key_the_host_does_not_accept_fails_at_once(
        host, key_dir, logins):
    other = os.path.join(key_dir, 'other')
    subprocess.run(['ssh-keygen', '-q', '-t', 'ed25519', '-N', '', '-f',
                    other], check=True)
    config.CONF.set_override('ssh_connect_retries', 3, config.GROUP_NAME)
    worker_flow, node = _worker_flow(host, ssh_key='other')
    with pytest.raises(exceptions.NodeStepError) as caught:
        _run_on(worker_flow, node, ['true'])
    message = str(caught.value)
    assert 'authentication failed' in message and 'ssh_key' in message
    assert logins == []


def _refused_before_any_login(host, logins, caplog, reason, detail,
                              **flow_args):
    """The worker flow's key is refused: the caller reads the JSON path
    and ``reason``, not where the key is nor its owner or mode; the log
    has ``detail``; no host was logged in to."""
    worker_flow, node = _worker_flow(host, ssh_key='nodes', **flow_args)
    with pytest.raises(exceptions.ParameterErrors) as caught:
        _run_on(worker_flow, node, ['true'])
    (error,) = caught.value.errors
    assert error.path == WORKER_KEY_PATH
    assert error.reason.startswith(reason)
    told = str(caught.value)
    for hidden in (config.options().ssh_key_dir, 'uid', 'mode', '0640',
                   '0770'):
        assert hidden not in told
    assert detail in caplog.text
    assert logins == []
    return told


@pytest.mark.parametrize('spoil, reason, detail', [
    (lambda path: os.chmod(path, 0o640), 'unsafe key file',
     'has mode 0640'),
    (lambda path: os.chown(path, 12345, -1), 'unsafe key file',
     'is owned by uid 12345'),
    (lambda path: (os.rename(path, path + '.real'),
                   os.symlink(path + '.real', path)), 'unsafe key file',
     'symbolic link'),
    (lambda path: os.truncate(path, 20), 'unusable key', 'cannot be parsed'),
    (lambda path: os.unlink(path), 'no such key', 'no key file'),
    (lambda path: os.chmod(os.path.dirname(path), 0o770),
     'unsafe key directory', 'has mode 0770'),
    (lambda path: os.chown(os.path.dirname(path), 12345, -1),
     'unsafe key directory', 'is owned by uid 12345'),
])
def test_an_unusable_key_file_refuses_before_any_login(
        host, key_dir, logins, caplog, spoil, reason, detail):
    path = os.path.join(key_dir, 'nodes')
    with open(path, 'rb') as handle:
        secret = handle.read()
    spoil(path)
    told = _refused_before_any_login(host, logins, caplog, reason, detail)
    body = secret.decode().splitlines()[1]
    assert body[:16] not in told


@pytest.fixture
def per_project(testbed, key_dir):
    """ssh_key_per_project on; project-a's directory holds the key the
    host accepts, project-b's is empty, and ssh_key_dir holds one too."""
    testbed.place_client_key(os.path.join(key_dir, 'project-a'), 'nodes')
    os.mkdir(os.path.join(key_dir, 'project-b'), 0o700)
    config.CONF.set_override('ssh_key_per_project', True, config.GROUP_NAME)
    return key_dir


def test_a_project_logs_in_with_its_own_key(host, per_project):
    worker_flow, node = _worker_flow(host, 'project-a', ssh_key='nodes')
    assert _run_on(worker_flow, node, ['id', '-un']).strip() == 'ubuntu'


@pytest.mark.parametrize('project', ['project-b', 'project-c', None])
def test_a_project_cannot_use_another_project_s_key(
        host, per_project, logins, caplog, project):
    told = _refused_before_any_login(host, logins, caplog, 'no such key',
                                     'project' if project is None else
                                     os.path.join(per_project, project),
                                     project=project)
    assert 'project-a' not in told


def test_the_host_key_is_checked_before_the_key_is_offered(
        host, key_dir, tmp_path):
    config.CONF.set_override('host_key_policy', 'reject', config.GROUP_NAME)
    config.CONF.set_override('known_hosts_file', str(tmp_path / 'kh'),
                             config.GROUP_NAME)
    seen = len(host.sshd_log())
    worker_flow, node = _worker_flow(host, ssh_key='nodes')
    with pytest.raises(exceptions.NodeStepError) as caught:
        _run_on(worker_flow, node, ['true'])
    assert 'unknown SSH host key' in str(caught.value)
    log = host.sshd_log()[seen:]
    assert 'publickey' not in log, log
