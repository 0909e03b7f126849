"""The cluster half's decisions, as tables: no host, no Heat."""

import base64
import json
import logging
import os
import types

import pytest

from kubernetes_mgmt_pv import admin_kubectl
from kubernetes_mgmt_pv.cluster import cluster
from kubernetes_mgmt_pv.cluster import cluster_feature
from kubernetes_mgmt_pv.cluster import cluster_workflow
from kubernetes_mgmt_pv.cluster import etcd
from kubernetes_mgmt_pv import exceptions
from kubernetes_mgmt_pv.openstack import vnf_topology
from kubernetes_mgmt_pv.request import param_model

SAMPLE_SCRIPT = os.path.join(
    os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(
        __file__)))), 'samples', 'kubernetes_pv_vnf', 'Scripts',
    'install_k8s_cluster.sh')
PEM = ('-----BEGIN CERTIFICATE-----\nMIIBfake\n'
       '-----END CERTIFICATE-----\n')
ACCESS = param_model.NodeAccess('cp', 'cp', 'ubuntu', 'secret')


def node(role, address):
    return vnf_topology.Node(role, address, address, address, 'cp', None,
                             ACCESS)


def facts(hostname, joined=False):
    return cluster.NodeFacts(hostname=hostname, joined=joined)


def info_block(**overrides):
    values = dict(server='https://10.0.0.5:16443',
                  token='abcdef.0123456789abcdef',
                  ca_cert_hash='sha256:' + 'a' * 64,
                  certificate_key='b' * 64,
                  ca_cert=base64.b64encode(PEM.encode()).decode())
    values.update(overrides)
    lines = [cluster.INFO_BEGIN] + ['%s=%s' % item for item in values.items()
                                    if item[1] is not None]
    return '\n'.join(['[init] done'] + lines + [cluster.INFO_END,
                                                'Install Success!'])


# -- facts and script output ------------------------------------------------

@pytest.mark.parametrize('output, expected', [
    (b'master1\njoined\n127.0.0.1 localhost\n',
     cluster.NodeFacts('master1', True, b'127.0.0.1 localhost\n')),
    (b'Worker-2\nfresh\n', cluster.NodeFacts('Worker-2', False, b'')),
    (b'w\nfresh', cluster.NodeFacts('w', False, b'')),
])
def test_facts_are_parsed(output, expected):
    assert cluster.parse_facts(output) == expected


def test_node_name_is_the_lower_case_host_name():
    assert facts('Worker-2').node_name == 'worker-2'


@pytest.mark.parametrize('output', [b'', b'master1\n', b'master1\nmaybe\n'])
def test_unexpected_facts_fail(output):
    with pytest.raises(exceptions.ClusterInstallError):
        cluster.parse_facts(output)


def test_join_info_is_read_from_the_block():
    info = cluster.parse_join_info(info_block())
    assert info == cluster.JoinInfo(
        'https://10.0.0.5:16443', 'abcdef.0123456789abcdef',
        'sha256:' + 'a' * 64, 'b' * 64, PEM)
    assert info.secrets == ('abcdef.0123456789abcdef', 'b' * 64)


def test_the_last_block_wins():
    output = info_block(token='old.0000000000000000') + '\n' + info_block()
    assert cluster.parse_join_info(output).token == 'abcdef.0123456789abcdef'


@pytest.mark.parametrize('output, message', [
    ('Install Success!', 'printed no'),
    (info_block(token=None), 'lacks token'),
    (info_block(certificate_key=''), 'lacks certificate_key'),
    (info_block(ca_cert='not base64!'), 'not base64'),
    (info_block(ca_cert=base64.b64encode(b'hello').decode()),
     'not a PEM certificate'),
    (info_block().replace(cluster.INFO_END, ''), 'printed no'),
    (info_block(token='abcdef.0123456789abcdef x'), 'malformed token'),
    (info_block(ca_cert_hash='sha256:' + 'a' * 63), 'malformed ca_cert_h'),
    (info_block(certificate_key='b' * 64 + '\x1b'), 'malformed certif'),
    (info_block(certificate_key='b' * 63), 'malformed certif'),
    (info_block(certificate_key='b' * 65536), 'malformed certif'),
])
def test_a_bad_block_fails_clearly(output, message):
    with pytest.raises(exceptions.ClusterInstallError, match=message):
        cluster.parse_join_info(output)


# -- addresses --------------------------------------------------------------

@pytest.mark.parametrize('masters, vip, expected', [
    (['10.0.0.11'], None, '10.0.0.11:6443'),
    (['10.0.0.11'], '10.0.0.5', '10.0.0.11:6443'),
    (['10.0.0.11', '10.0.0.12'], '10.0.0.5', '10.0.0.5:16443'),
    (['fd00::11'], None, '[fd00::11]:6443'),
    (['fd00::11', 'fd00::12'], 'fd00::5', '[fd00::5]:16443'),
])
def test_control_plane_endpoint(masters, vip, expected):
    assert cluster.control_plane_endpoint(masters, vip) == expected


def test_several_masters_need_the_vip_port():
    with pytest.raises(exceptions.ParameterErrors,
                       match=r'master_node\.cluster_cp_name: is required '
                             r'with more than one Master \(3\)'):
        cluster.control_plane_endpoint(['a', 'b', 'c'], None)


@pytest.mark.parametrize('endpoint, fip, expected', [
    ('10.0.0.11:6443', None, 'https://10.0.0.11:6443'),
    ('10.0.0.5:16443', '192.0.2.7', 'https://192.0.2.7:16443'),
    ('[fd00::5]:16443', None, 'https://[fd00::5]:16443'),
    ('10.0.0.5:16443', 'fd00::7', 'https://[fd00::7]:16443'),
])
def test_vim_url(endpoint, fip, expected):
    assert cluster.vim_url(endpoint, fip) == expected


@pytest.mark.parametrize('proxy, network, expected', [
    (param_model.Proxy(http_proxy='http://p:3128'),
     param_model.ClusterNetwork(),
     'localhost,127.0.0.1,10.0.0.5,10.0.0.11,10.0.0.21'),
    (param_model.Proxy(http_proxy='http://p:3128', no_proxy='.corp, localhost',
                       k8s_node_cidr='10.0.0.0/24'),
     param_model.ClusterNetwork(pod_cidr='192.168.0.0/16',
                                cluster_cidr='10.96.0.0/12'),
     '.corp,localhost,127.0.0.1,10.0.0.5,10.0.0.0/24,192.168.0.0/16,'
     '10.96.0.0/12'),
])
def test_no_proxy_covers_the_cluster(proxy, network, expected):
    assert cluster.no_proxy(proxy, network, '10.0.0.5',
                            ['10.0.0.11', '10.0.0.21']) == expected


def test_without_a_proxy_the_script_gets_no_environment():
    assert cluster.script_environment(
        param_model.Proxy(), param_model.ClusterNetwork(),
        '10.0.0.11:6443', ['10.0.0.11']) == {}


def test_the_script_environment_carries_the_proxy_and_no_proxy():
    env = cluster.script_environment(
        param_model.Proxy(https_proxy='http://p:3128', no_proxy='x'),
        param_model.ClusterNetwork(), '[fd00::5]:16443', ['10.0.0.11'])
    assert env == {'https_proxy': 'http://p:3128',
                   'no_proxy': 'x,localhost,127.0.0.1,fd00::5,10.0.0.11'}


def test_hosts_lines_name_every_node_at_its_address():
    pairs = [(node('master', '10.0.0.1'), facts('master1')),
             (node('worker', '10.0.0.10'), facts('worker1'))]
    assert cluster.hosts_lines(pairs) == ['10.0.0.1 master1',
                                          '10.0.0.10 worker1']


# -- the install plan ---------------------------------------------------------

M1, M2, M3 = (node('master', '10.0.0.1%d' % n) for n in (1, 2, 3))
W1, W2 = (node('worker', '10.0.0.2%d' % n) for n in (1, 2))


def plan(joined=(), api=None, masters=(M1, M2, M3), workers=(W1, W2),
         names=None, etcd_members=None):
    names = names or {M1: 'm1', M2: 'm2', M3: 'm3', W1: 'w1', W2: 'w2'}
    all_facts = {n.address: facts(names[n], n in joined)
                 for n in masters + workers}
    return cluster.plan_install(list(masters), list(workers), all_facts,
                                api or {}, etcd_members)


def etcd_member(name, address, member_id='1', learner=False):
    return etcd.Member(member_id, name, ('https://%s:2380' % address,),
                       learner)


@pytest.mark.parametrize('case, joined, api, expected', [
    ('a fresh cluster is initialised by the first Master', (), {},
     dict(leader=M1, master_addresses=('10.0.0.11', '10.0.0.12',
                                       '10.0.0.13'),
          join_masters=(M2, M3), join_workers=(W1, W2), reset=(),
          stale_api_nodes=(), members=(),
          script_nodes=(M1, M2, M3, W1, W2))),
    ('a re-run skips the members', (M1, M2, W1),
     {'m1': '10.0.0.11', 'm2': '10.0.0.12', 'w1': '10.0.0.21'},
     dict(leader=M1, join_masters=(M3,), join_workers=(W2,),
          members=(M2, W1), reset=(), script_nodes=(M1, M3, W2))),
    ('a member Master leads when the first is re-created: it joins, and '
     'does not init a second cluster', (M2, M3),
     {'m1': '10.0.0.11', 'm2': '10.0.0.12', 'm3': '10.0.0.13'},
     dict(leader=M2, master_addresses=('10.0.0.12', '10.0.0.11',
                                       '10.0.0.13'),
          join_masters=(M1,), stale_api_nodes=('m1',), members=(M3,))),
    ('a VM joined to a cluster that does not know it is reset', (M1, W1),
     {'m1': '10.0.0.11'},
     dict(reset=(W1,), join_workers=(W1, W2), join_masters=(M2, M3))),
    ('a Node with the name or address of a joining VM is stale', (M1,),
     {'m1': '10.0.0.11', 'w2': '10.0.0.99', 'old': '10.0.0.21'},
     dict(stale_api_nodes=('old', 'w2'), reset=())),
    ('half-joined Workers (kubeadm ran, no Node) are reset and joined',
     (M1, M2, M3, W1, W2),
     {'m1': '10.0.0.11', 'm2': '10.0.0.12', 'm3': '10.0.0.13'},
     dict(leader=M1, join_masters=(), join_workers=(W1, W2),
          reset=(W1, W2), members=(M2, M3))),
    ('every Master re-created, Workers still joined (no Master to ask '
     'for Nodes): the first inits, the Workers are reset and join the new '
     'cluster', (W1, W2), {},
     dict(leader=M1, join_masters=(M2, M3), join_workers=(W1, W2),
          reset=(W1, W2), stale_api_nodes=(), members=())),
])
def test_install_plan(case, joined, api, expected):
    result = plan(joined=joined, api=api)
    assert {field: getattr(result, field) for field in expected} == \
        expected, case


ALL_API = {'m1': '10.0.0.11', 'm2': '10.0.0.12', 'm3': '10.0.0.13',
           'w1': '10.0.0.21', 'w2': '10.0.0.22'}
ALL_JOINED = (M1, M2, M3, W1, W2)
M1_ETCD, M3_ETCD = etcd_member('m1', '10.0.0.11'), etcd_member(
    'm3', '10.0.0.13', '3')


@pytest.mark.parametrize('m2_etcd, half_joined', [
    ([etcd_member('m2', '10.0.0.12', '2')], ()),     # joined
    ([], (M2,)),                                     # no member
    ([etcd_member('', '10.0.0.12', '2')], (M2,)),    # added, never started
    ([etcd_member('m2', '10.0.0.99', '2')], (M2,)),  # its name, another URL
    ([etcd_member('m9', '10.0.0.12', '2')], (M2,)),  # its URL, another name
    # Started, never promoted: kubeadm join stopped before the promotion.
    ([etcd_member('m2', '10.0.0.12', '2', learner=True)], (M2,)),
])
def test_a_master_with_its_node_but_no_etcd_member_is_half_joined(
        m2_etcd, half_joined):
    result = plan(joined=ALL_JOINED, api=ALL_API,
                  etcd_members=[M1_ETCD] + m2_etcd + [M3_ETCD])
    assert result.half_joined == half_joined
    assert result.leader is M1
    if half_joined:
        # Reset, its Node deleted, joined again; the others left alone.
        assert result.join_masters == result.reset == (M2,)
        assert result.stale_api_nodes == ('m2',)
        assert result.members == (M3, W1, W2)
    else:
        assert result.join_masters == result.reset == ()
        assert result.stale_api_nodes == ()
        assert result.members == (M2, M3, W1, W2)
    assert result.join_workers == ()


def test_a_half_joined_first_master_does_not_lead():
    """The first Master's join stopped before etcd's (a heal): a Master
    that is an etcd member leads, the first joins again."""
    result = plan(joined=ALL_JOINED, api=ALL_API,
                  etcd_members=[etcd_member('m2', '10.0.0.12', '2'),
                                M3_ETCD])
    assert result.leader is M2
    assert result.half_joined == result.join_masters == result.reset == (
        M1,)
    assert result.stale_api_nodes == ('m1',)
    assert result.master_addresses == ('10.0.0.12', '10.0.0.11', '10.0.0.13')


def test_without_etcd_members_a_master_with_its_node_is_a_member():
    """One Master, or none in a cluster yet: etcd is not asked."""
    result = plan(joined=ALL_JOINED, api=ALL_API)
    assert result.half_joined == result.reset == result.join_masters == ()


def test_workers_need_no_etcd_member():
    result = plan(joined=ALL_JOINED, api=ALL_API,
                  etcd_members=[M1_ETCD, etcd_member('m2', '10.0.0.12', '2'),
                                M3_ETCD])
    assert result.members == (M2, M3, W1, W2)
    assert result.join_workers == result.reset == ()


def test_a_fresh_single_master():
    result = plan(masters=(M1,), workers=())
    assert (result.leader, result.join_masters, result.join_workers) == (
        M1, (), ())


# -- command lines ------------------------------------------------------------

TOKEN = 'abcdef.0123456789abcdef'
KEY = '12' * 32
INFO = cluster.JoinInfo('https://10.0.0.5:16443', TOKEN, 'sha256:h', KEY,
                        PEM)
NETWORK = param_model.ClusterNetwork(pod_cidr='192.168.0.0/16',
                                     cluster_cidr='10.96.0.0/12')


@pytest.mark.parametrize('role, target, join, expected, stdin', [
    ('leader', M1, None,
     ['-m', '10.0.0.11,10.0.0.12,10.0.0.13', '-i', '10.0.0.5:16443',
      '-p', '192.168.0.0/16', '-a', '10.96.0.0/12'], b''),
    ('master', M2, INFO,
     ['-m', '10.0.0.11,10.0.0.12,10.0.0.13', '-i', '10.0.0.5:16443',
      '-p', '192.168.0.0/16', '-a', '10.96.0.0/12', '-s', 'sha256:h'],
     b'token=' + TOKEN.encode() + b'\ncertificate_key=' + KEY.encode() +
     b'\n'),
    ('worker', W1, INFO,
     ['-w', '10.0.0.21', '-i', '10.0.0.5:16443', '-s', 'sha256:h'],
     b'token=' + TOKEN.encode() + b'\n'),
])
def test_script_command_lines_carry_no_secret(role, target, join, expected,
                                              stdin):
    argv = cluster.script_argv(role, plan(), target, '10.0.0.5:16443',
                               NETWORK, join, floating_ip='192.0.2.7')
    if role == 'leader':
        expected = expected + ['-e', '192.0.2.7']
    assert argv == ['bash', cluster.SCRIPT_PATH] + expected
    assert not [arg for arg in argv for secret in INFO.secrets
                if secret in arg]
    assert cluster.script_input(role, join) == stdin


@pytest.mark.parametrize('role, target, expected', [
    ('master', M2, ['-s', 'sha256:h', '-t', TOKEN, '-k', KEY]),
    ('worker', W1, ['-s', 'sha256:h', '-t', TOKEN]),
])
def test_a_script_of_the_earlier_contract_gets_the_secrets_as_arguments(
        role, target, expected):
    argv = cluster.script_argv(role, plan(), target, '10.0.0.5:16443',
                               param_model.ClusterNetwork(), INFO,
                               legacy_secrets=True)
    assert argv[-len(expected):] == expected


@pytest.mark.parametrize('script, on_stdin', [
    (b'#!/bin/bash\n# kubernetes-mgmt-pv-join-secrets: stdin\nmain\n', True),
    (b'#!/bin/bash\r\n# kubernetes-mgmt-pv-join-secrets: stdin\r\n', True),
    (b'#!/bin/bash\n# kubernetes-mgmt-pv-join-secrets: stdin?\n', False),
    (b'#!/bin/bash\necho "# kubernetes-mgmt-pv-join-secrets: stdin"\n',
     False),
    (b'#!/bin/bash\nwhile getopts t:k: option; do :; done\n', False),
])
def test_the_script_says_whether_it_reads_the_secrets_on_stdin(script,
                                                               on_stdin):
    assert cluster.secrets_on_stdin(script) is on_stdin


def test_the_sample_script_reads_the_secrets_on_stdin():
    with open(SAMPLE_SCRIPT, 'rb') as stream:
        assert cluster.secrets_on_stdin(stream.read())


def test_default_cidrs_are_left_to_kubeadm():
    argv = cluster.script_argv('leader', plan(), M1, '10.0.0.11:6443',
                               param_model.ClusterNetwork())
    assert '-p' not in argv and '-a' not in argv


# -- VIM credentials ----------------------------------------------------------

def test_the_credentials_bind_a_service_account_to_cluster_admin():
    items = cluster.credentials_manifest()['items']
    kinds = [item['kind'] for item in items]
    assert kinds == ['ServiceAccount', 'Secret', 'ClusterRoleBinding']
    secret, binding = items[1], items[2]
    assert secret['type'] == 'kubernetes.io/service-account-token'
    assert secret['metadata']['annotations'] == {
        'kubernetes.io/service-account.name': cluster.VIM_ACCOUNT}
    assert binding['roleRef']['name'] == 'cluster-admin'
    assert binding['subjects'] == [{
        'kind': 'ServiceAccount', 'name': cluster.VIM_ACCOUNT,
        'namespace': cluster.VIM_NAMESPACE}]


def secret_json(**data):
    return json.dumps({'kind': 'Secret', 'data': {
        key: base64.b64encode(value.encode()).decode()
        for key, value in data.items()}})


@pytest.mark.parametrize('output, expected', [
    (secret_json(token='t0k', **{'ca.crt': PEM}), ('t0k', PEM)),
    (secret_json(**{'ca.crt': PEM}), None),
    (json.dumps({'kind': 'Secret'}), None),
])
def test_token_secret(output, expected):
    assert cluster.parse_token_secret(output) == expected


def test_a_broken_secret_fails():
    with pytest.raises(exceptions.ClusterInstallError):
        cluster.parse_token_secret('{"data": {"token": "!!", "ca.crt": "x"}}')


def test_api_nodes_by_internal_ip():
    listing = {'items': [
        {'metadata': {'name': 'm1'}, 'status': {'addresses': [
            {'type': 'Hostname', 'address': 'm1'},
            {'type': 'InternalIP', 'address': '10.0.0.11'}]}},
        {'metadata': {'name': 'w1'}, 'status': {}}]}
    assert cluster.parse_api_nodes(json.dumps(listing)) == {
        'm1': '10.0.0.11', 'w1': None}
    with pytest.raises(exceptions.ClusterInstallError):
        cluster.parse_api_nodes('{"kind": "Status"}')


@pytest.mark.parametrize('names, message', [
    (['m1', 'M1'], 'have the same host name'),
    (['m1', 'bad_name'], 'not a valid Kubernetes Node name'),
])
def test_node_names_must_be_valid_and_unique(names, message):
    pairs = [(node('master', '10.0.0.%d' % n), facts(name))
             for n, name in enumerate(names)]
    with pytest.raises(exceptions.ClusterInstallError, match=message):
        cluster.check_node_names(pairs)


# -- the package's script -----------------------------------------------------

def test_the_script_is_read_from_the_package(tmp_path):
    (tmp_path / 'Scripts').mkdir()
    (tmp_path / 'Scripts' / 'install.sh').write_text('#!/bin/bash\n')
    assert cluster_feature.read_package_file(
        str(tmp_path), 'Scripts/install.sh', 'x.script_path') == \
        b'#!/bin/bash\n'


@pytest.mark.parametrize('relative, reason', [
    ('../etc/passwd', 'resolves outside the VNF package'),
    ('Scripts/missing.sh', 'does not exist'),
    ('Scripts', 'is not a regular file but a directory'),
])
def test_a_bad_script_path_is_named_by_its_json_path(tmp_path, relative,
                                                     reason):
    (tmp_path / 'Scripts').mkdir()
    with pytest.raises(exceptions.ParameterErrors) as caught:
        cluster_feature.read_package_file(str(tmp_path), relative,
                                          'k8s.script_path')
    assert str(caught.value).count('k8s.script_path') == 1
    assert reason in str(caught.value)


# -- node removal ------------------------------------------------------------

def test_the_node_at_an_address():
    api = {'m1': '10.0.0.1', 'm10': '10.0.0.10'}
    assert cluster.name_at(api, '10.0.0.1') == 'm1'
    assert cluster.name_at(api, '10.0.0.100') is None


@pytest.mark.parametrize('force, extra', [
    (False, []), (True, ['--force', '--disable-eviction'])])
def test_drain_command(force, extra):
    assert cluster.drain_argv('w1', 60, force) == [
        'drain', 'w1', '--ignore-daemonsets', '--delete-emptydir-data',
        '--timeout=60s'] + extra


UNREACHABLE = 'node.kubernetes.io/unreachable'


@pytest.mark.parametrize('ready, taints, drained', [
    ('True', [], True),
    ('True', ['node-role.kubernetes.io/control-plane'], True),
    ('True', [UNREACHABLE], False),
    ('False', [], False),
    ('Unknown', [], False),
    ('Unknown', [UNREACHABLE], False),
    (None, [], False),
])
def test_only_a_ready_reachable_node_is_drained(ready, taints, drained):
    reason = cluster.undrainable(ready, taints)
    assert (reason is None) == drained
    if not drained:
        assert ('Ready is %s' % (ready or 'not reported') in reason) == \
            (ready != 'True')
        assert (UNREACHABLE in reason) == (UNREACHABLE in taints)


def test_undrainable_nodes_of_a_listing():
    listing = {'items': [
        {'metadata': {'name': 'm1'},
         'spec': {'taints': [{'key': 'node-role.kubernetes.io/control-plane',
                              'effect': 'NoSchedule'}]},
         'status': {'conditions': [{'type': 'Ready', 'status': 'True'}]}},
        {'metadata': {'name': 'w1'},
         'spec': {'taints': [{'key': UNREACHABLE, 'effect': 'NoExecute'}]},
         'status': {'conditions': [{'type': 'Ready', 'status': 'Unknown'}]}},
        {'metadata': {'name': 'w2'},
         'status': {'conditions': [{'type': 'Ready', 'status': 'False'}]}}]}
    assert cluster.undrainable_nodes(json.dumps(listing)) == {
        'w1': 'Ready is Unknown, tainted %s' % UNREACHABLE,
        'w2': 'Ready is False'}


@pytest.mark.parametrize('output', ['', '{"items": [{"spec": {}}]}', '[]'])
def test_an_unreadable_node_listing_fails(output):
    with pytest.raises(exceptions.ClusterInstallError, match='list of Nodes'):
        cluster.undrainable_nodes(output)


def test_nodes_not_ready():
    listing = {'items': [
        {'metadata': {'name': 'm1'}, 'status': {'conditions': [
            {'type': 'MemoryPressure', 'status': 'False'},
            {'type': 'Ready', 'status': 'True'}]}},
        {'metadata': {'name': 'w1'}, 'status': {'conditions': [
            {'type': 'Ready', 'status': 'Unknown'}]}},
        {'metadata': {'name': 'w2'}}]}
    assert cluster.not_ready(json.dumps(listing), ['m1', 'w1', 'w2', 'w3']) \
        == ['w1', 'w2', 'w3']


def test_the_floating_ip_goes_into_the_certificate_at_init_only():
    argv = cluster.script_argv('leader', plan(), M1, '10.0.0.5:16443',
                               param_model.ClusterNetwork(),
                               floating_ip='192.0.2.7')
    assert argv[-2:] == ['-e', '192.0.2.7']
    assert '-e' not in cluster.script_argv(
        'master', plan(), M2, '10.0.0.5:16443', param_model.ClusterNetwork(),
        INFO, floating_ip='192.0.2.7')


def test_a_masters_own_api_server():
    assert admin_kubectl.api_server_url('10.0.0.1') == 'https://10.0.0.1:6443'
    assert admin_kubectl.api_server_url('fd00::1') == 'https://[fd00::1]:6443'


@pytest.mark.parametrize('address, args, expected', [
    # Every kubectl step, cluster or PersistentVolume: root's admin.conf,
    # the Master's own API server, the step's arguments last and intact.
    ('10.0.0.1', ['get', 'nodes', '-o', 'json'],
     ['kubectl', '--kubeconfig', '/etc/kubernetes/admin.conf', '--server',
      'https://10.0.0.1:6443', 'get', 'nodes', '-o', 'json']),
    ('10.0.0.2', ('apply', '-f', '-'),
     ['kubectl', '--kubeconfig', '/etc/kubernetes/admin.conf', '--server',
      'https://10.0.0.2:6443', 'apply', '-f', '-']),
    ('fd00::1', ['wait', '--for=jsonpath={.status.phase}=Available'],
     ['kubectl', '--kubeconfig', '/etc/kubernetes/admin.conf', '--server',
      'https://[fd00::1]:6443', 'wait',
      '--for=jsonpath={.status.phase}=Available']),
    ('10.0.0.3', [],
     ['kubectl', '--kubeconfig', '/etc/kubernetes/admin.conf', '--server',
      'https://10.0.0.3:6443']),
])
def test_kubectl_runs_as_the_cluster_admin_on_the_masters_api_server(
        address, args, expected):
    assert admin_kubectl.kubectl_argv(address, args) == expected


def test_a_missing_admin_kubeconfig_says_which_file_and_what_to_do():
    message = admin_kubectl.MISSING_ADMIN_KUBECONFIG
    assert message.startswith('/etc/kubernetes/admin.conf is missing')
    assert 'every Master' in message and 'root' in message


def test_a_script_of_the_earlier_contract_is_warned_of_sudo_logs(caplog):
    """Its join secrets are arguments of `sudo`, whose log keeps them."""
    flow = types.SimpleNamespace(
        script=b'#!/bin/bash\n', params=types.SimpleNamespace(
            network=param_model.ClusterNetwork(), offline=None))
    with caplog.at_level(logging.WARNING):
        argv, _ = cluster_workflow.ClusterWorkflow._script_call(
            flow, 'worker', plan(), W1, '10.0.0.5:16443', INFO)
    assert TOKEN in argv
    warning, = [record.getMessage() for record in caplog.records
                if record.levelno == logging.WARNING]
    assert W1.address in warning and 'sudo' in warning
