"""Every check of a name, a PID or a path accepts the whole value or
nothing: a trailing newline (which ``re.match(...$)`` lets through) would
start a new line of the file or command it goes into."""

import pytest

from kubernetes_mgmt_pv.cluster import cluster
from kubernetes_mgmt_pv.cluster import ha
from kubernetes_mgmt_pv.cluster import node_names
from kubernetes_mgmt_pv import exceptions
from kubernetes_mgmt_pv.remote import remote
from kubernetes_mgmt_pv.storage import manifests
from tests.unit import test_cluster

MASTER2 = ('master2', '10.0.0.12')


def pv(name):
    return {'apiVersion': 'v1', 'kind': 'PersistentVolume',
            'metadata': {'name': name},
            'spec': {'nfs': {'path': '/srv/nfs/pv1'}}}


@pytest.mark.parametrize('hostname, valid', [
    ('master1', True),
    ('Worker-10-0-0-12', True),
    ('w1.example', True),
    ('w1\n', False),
    ('w1 mirror.internal pkgs.k8s.io', False),
    ('w1\tmirror.internal', False),
    ('\u212a8s', False),  # KELVIN SIGN: lower-cased to an ASCII "k"
    ('-w1', False),
    ('', False),
])
def test_a_host_name_is_a_node_name_or_nothing(hostname, valid):
    assert node_names.is_valid(hostname) is valid
    nodes_facts = [(test_cluster.node('worker', '10.0.0.21'),
                    test_cluster.facts(hostname))]
    if valid:
        cluster.check_node_names(nodes_facts)
    else:
        with pytest.raises(exceptions.ClusterInstallError) as raised:
            cluster.check_node_names(nodes_facts)
        assert '10.0.0.21' in str(raised.value)


@pytest.mark.parametrize('name', ['master1\n', 'master1 mirror.internal',
                                  'Master_1'])
def test_an_haproxy_server_is_a_valid_node_name(name):
    with pytest.raises(ha.HaSetupError):
        ha.haproxy_config([(name, '10.0.0.11'), MASTER2])


def test_keepalived_refuses_an_interface_with_a_newline():
    with pytest.raises(ha.HaSetupError):
        ha.keepalived_config('10.0.0.11', ['10.0.0.12'], '10.0.0.100', 24,
                             'eth0\n', 150)


def test_a_reload_needs_a_whole_pid():
    assert ha.action_commands('haproxy', 'reload', False, '123')
    with pytest.raises(ha.HaSetupError):
        ha.action_commands('haproxy', 'reload', False, '123\n')


def test_an_environment_name_with_a_newline_is_refused():
    with pytest.raises(ValueError):
        remote.RemoteCommandExecutor._environment_script({'A\n': 'x'})


def test_a_pv_name_with_a_newline_is_refused():
    assert manifests._check_document(pv('pv1'), 'pv.yaml', 'cp').name == 'pv1'
    with pytest.raises(ValueError):
        manifests._check_document(pv('pv1\n'), 'pv.yaml', 'cp')
