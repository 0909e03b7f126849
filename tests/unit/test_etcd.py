"""etcd membership decisions, as tables."""

import json
import types

import pytest

from kubernetes_mgmt_pv.cluster import etcd
from kubernetes_mgmt_pv import exceptions

MEMBERS = [
    etcd.Member('8e9e05c52164694d', 'master1', ('https://10.0.0.1:2380',)),
    etcd.Member('91bc3c398fb3c146', 'master10', ('https://10.0.0.10:2380',)),
    etcd.Member('fd422379fda50e48', 'master2', ('https://10.0.0.2:2380',))]
LEARNER = etcd.Member('a1', 'master3', ('https://10.0.0.3:2380',), True)


def test_members_are_read_from_json_with_hex_ids():
    output = json.dumps({'header': {'cluster_id': 1}, 'members': [
        {'ID': 10276657743932975437, 'name': 'master1',
         'peerURLs': ['https://10.0.0.1:2380'],
         'clientURLs': ['https://10.0.0.1:2379']},
        {'ID': 1, 'peerURLs': ['https://10.0.0.3:2380'], 'isLearner': True}]})
    assert etcd.parse_members(output) == [
        ('8e9e05c52164694d', 'master1', ('https://10.0.0.1:2380',), False),
        ('1', '', ('https://10.0.0.3:2380',), True)]


@pytest.mark.parametrize('output', ['', '{"members": [{"name": "x"}]}',
                                    '[]'])
def test_unreadable_member_lists_fail(output):
    with pytest.raises(exceptions.ClusterInstallError):
        etcd.parse_members(output)


@pytest.mark.parametrize('name, address, expected', [
    ('master1', '10.0.0.1', '8e9e05c52164694d'),   # not master10
    ('master10', '10.0.0.10', '91bc3c398fb3c146'),
    ('master3', '10.0.0.3', None),                  # already removed
])
def test_the_member_is_matched_exactly(name, address, expected):
    assert etcd.member_of(MEMBERS, name, address) == expected


@pytest.mark.parametrize('name, address', [
    ('master1', '10.0.0.9'),    # the name, another peer URL
    ('master9', '10.0.0.2'),    # the peer URL, another name
])
def test_a_partial_match_is_refused(name, address):
    with pytest.raises(exceptions.ClusterInstallError, match='only in part'):
        etcd.member_of(MEMBERS, name, address)


@pytest.mark.parametrize('name, address, expected', [
    ('master1', '10.0.0.1', True),
    ('master1', '10.0.0.10', False),   # master10's URL: not a substring
    ('master2', '10.0.0.1', False),    # master1's URL, another name
    ('master3', '10.0.0.3', False),
])
def test_a_member_has_the_name_and_the_peer_url(name, address, expected):
    assert etcd.is_member(MEMBERS, name, address) is expected


def test_a_member_added_but_never_started_is_not_one():
    unstarted = [etcd.Member('1', '', ('https://10.0.0.3:2380',))]
    assert not etcd.is_member(unstarted, 'master3', '10.0.0.3')


def test_a_learner_is_not_a_member_yet_but_can_be_removed():
    assert not etcd.is_member(MEMBERS + [LEARNER], 'master3', '10.0.0.3')
    assert etcd.member_of(MEMBERS + [LEARNER], 'master3', '10.0.0.3') == 'a1'
    assert etcd.stale_members([LEARNER], ['10.0.0.3']) == ['a1']


def test_stale_members_hold_a_joining_peer_url():
    assert etcd.stale_members(MEMBERS, ['10.0.0.2', '10.0.0.5']) == [
        'fd422379fda50e48']
    assert etcd.stale_members(MEMBERS, ['10.0.0.100']) == []


def test_ipv6_peer_urls_are_bracketed():
    assert etcd.peer_url('fd00::1') == 'https://[fd00::1]:2380'


def test_the_members_must_be_exactly_the_masters():
    expected = {'master1': '10.0.0.1', 'master10': '10.0.0.10',
                'master2': '10.0.0.2'}
    etcd.check_members(MEMBERS, expected)
    with pytest.raises(exceptions.ClusterInstallError,
                       match=r'etcd has members .*master10.*; expected one '
                             r'per Master: master1 .*master2'):
        etcd.check_members(MEMBERS, {'master1': '10.0.0.1',
                                     'master2': '10.0.0.2'})


def test_a_learner_left_by_a_join_fails_the_check():
    expected = {'master1': '10.0.0.1', 'master10': '10.0.0.10',
                'master2': '10.0.0.2', 'master3': '10.0.0.3'}
    with pytest.raises(exceptions.ClusterInstallError,
                       match=r'etcd members master3 \(https://10.0.0.3:2380'
                             r'\) are still learners'):
        etcd.check_members(MEMBERS + [LEARNER], expected)


def test_etcdctl_uses_the_local_member_and_kubeadms_client_certificate():
    argv = etcd.etcdctl('member', 'list')
    assert argv[:3] == ['env', 'ETCDCTL_API=3', 'etcdctl']
    assert '--endpoints=https://127.0.0.1:2379' in argv
    assert '--cert=/etc/kubernetes/pki/etcd/healthcheck-client.crt' in argv
    assert argv[-2:] == ['member', 'list']


class FakeExecutor(object):
    """Answers etcdctl member remove with the given (exit, stderr)s."""

    host = 'm1'

    def __init__(self, *answers):
        self.answers = list(answers)
        self.calls = 0

    def run(self, argv, **kwargs):
        self.calls += 1
        status, stderr = self.answers.pop(0)
        return types.SimpleNamespace(ok=status == 0, stderr=stderr,
                                     exit_status=status)

    def failure(self, description, result):
        return exceptions.RemoteCommandError(self.host, description,
                                             result.exit_status, '',
                                             result.stderr)


def test_a_member_removal_waits_out_an_unhealthy_cluster():
    executor = FakeExecutor(
        (1, 'Error: etcdserver: unhealthy cluster'), (0, ''))
    etcd.remove_member(executor, 'abc', backoff=0)
    assert executor.calls == 2


@pytest.mark.parametrize('answers, calls', [
    ([(1, 'Error: etcdserver: member not found')], 1),
])
def test_a_member_already_gone_is_fine(answers, calls):
    executor = FakeExecutor(*answers)
    etcd.remove_member(executor, 'abc', backoff=0)
    assert executor.calls == calls


def test_other_removal_errors_fail_at_once():
    executor = FakeExecutor((1, 'Error: context deadline exceeded'))
    with pytest.raises(exceptions.RemoteCommandError):
        etcd.remove_member(executor, 'abc', backoff=0)
    persistent = FakeExecutor(*[(1, 'unhealthy cluster')] * 3)
    with pytest.raises(exceptions.RemoteCommandError):
        etcd.remove_member(persistent, 'abc', attempts=3, backoff=0)
    assert persistent.calls == 3


# -- the health check over etcd's API (curl, nothing installed) ---------------

def api_listing(*members):
    """The gateway's member list: ids as strings, as etcd prints them."""
    return json.dumps({'header': {'cluster_id': '1'}, 'members': [
        dict({'ID': str(index), 'peerURLs': []}, **member)
        for index, member in enumerate(members)]})


M1 = {'name': 'master1', 'clientURLs': ['https://10.0.0.1:2379']}
M2 = {'name': 'master2', 'clientURLs': ['https://10.0.0.2:2379',
                                        'https://10.0.9.2:2379']}
V6 = {'name': 'master6', 'clientURLs': ['https://[fd00::6]:2379']}


@pytest.mark.parametrize('members, urls, problems', [
    ([M1, M2], [('master1', 'https://10.0.0.1:2379'),
                ('master2', 'https://10.0.0.2:2379')], []),
    ([V6], [('master6', 'https://[fd00::6]:2379')], []),
    # Two members of one name: both are asked.
    ([M1, dict(M2, name='master1')], [('master1', 'https://10.0.0.1:2379'),
                                      ('master1', 'https://10.0.0.2:2379')],
     []),
    # A name is shown on one line.
    ([dict(M1, name='m1\nERROR fake line')],
     [('m1\\nERROR fake line', 'https://10.0.0.1:2379')], []),
    # Added, never started: no name, no client URL.
    ([M1, {'peerURLs': ['https://10.0.0.3:2380']}],
     [('master1', 'https://10.0.0.1:2379')], ['unnamed has no client URL']),
    # VM text that is no https://<IP>:<port> is never asked.
    ([{'name': 'x', 'clientURLs': ['https://u@10.0.0.1:2379']}], [],
     ['x has client URL']),
    ([{'name': 'x', 'clientURLs': ['https://10.0.0.1:2379/; reboot']}], [],
     ['x has client URL']),
    ([{'name': 'x', 'clientURLs': ['http://10.0.0.1:2379']}], [],
     ['x has client URL']),
    ([{'name': 'x', 'clientURLs': ['https://etcd.example:2379']}], [],
     ['x has client URL']),
    ([{'name': 'x', 'clientURLs': ['https://10.0.0.1']}], [],
     ['x has client URL']),
])
def test_the_health_urls_of_the_members(members, urls, problems):
    found, reasons = etcd.health_urls(etcd.parse_api_members(
        api_listing(*members)))
    assert found == urls
    assert len(reasons) == len(problems)
    for reason, expected in zip(reasons, problems):
        assert reason.startswith(expected)


@pytest.mark.parametrize('output', ['', 'not json', '{"members": 1}',
                                    '{"header": {}}', '[]'])
def test_an_unreadable_api_member_list_fails(output):
    with pytest.raises(exceptions.ClusterInstallError):
        etcd.parse_api_members(output)


URLS = [('master1', 'https://10.0.0.1:2379'),
        ('master2', 'https://10.0.0.2:2379')]


@pytest.mark.parametrize('output, problems', [
    ('200\n200\n', []),
    ('200\n000\n', ['master2 (https://10.0.0.2:2379) does not answer']),
    ('503\n200\n', ['master1 (https://10.0.0.1:2379) answers HTTP 503']),
    # Fewer or unreadable lines: not read is not healthy.
    ('200\n', ['the health of 2 member(s) was not read']),
    ('200\nok\n', ['the health of 2 member(s) was not read']),
    ('', ['the health of 2 member(s) was not read']),
])
def test_unhealthy_members(output, problems):
    found = etcd.unhealthy(URLS, output)
    assert [reason[:len(expected)] for reason, expected in
            zip(found, problems)] == problems
    assert len(found) == len(problems)


class ApiExecutor(object):
    """Answers the member list and the health script; records argv."""

    host = 'm1'

    def __init__(self, listing, health=None):
        self.answers = [listing] + ([health] if health else [])
        self.argvs = []

    def run(self, argv, **kwargs):
        self.argvs.append(argv)
        status, stdout = self.answers.pop(0)
        result = types.SimpleNamespace(ok=status == 0, stdout=stdout,
                                       stderr='', exit_status=status)
        if kwargs.get('check', True) and not result.ok:
            raise self.failure(kwargs.get('description'), result)
        return result

    def failure(self, description, result):
        return exceptions.RemoteCommandError(self.host, description,
                                             result.exit_status, '', '')


def test_the_health_check_installs_nothing_and_names_the_unhealthy():
    executor = ApiExecutor((0, api_listing(M1, M2)), (0, '200\n000\n'))
    with pytest.raises(exceptions.ClusterInstallError,
                       match='master2 .https://10.0.0.2:2379. does not'):
        etcd.check_health(executor)
    listing, health = executor.argvs
    assert listing[0] == 'curl' and listing[-1] == (
        'https://127.0.0.1:2379/v3/cluster/member/list')
    # The URLs are arguments of a fixed script, never part of it.
    assert health[:2] == ['sh', '-c']
    assert health[-2:] == [url for _, url in URLS]
    assert 'https://10.0.0' not in health[2]
    assert not any('apt' in word or 'etcdctl' in word
                   for argv in executor.argvs for word in argv)


def test_the_health_check_passes_when_every_member_answers():
    assert etcd.check_health(ApiExecutor((0, api_listing(M1, M2)),
                                         (0, '200\n200\n'))) is True


def test_without_curl_the_health_is_not_checked():
    executor = ApiExecutor((127, ''))
    assert etcd.check_health(executor) is False
    assert len(executor.argvs) == 1


def test_a_local_member_that_does_not_answer_fails():
    with pytest.raises(exceptions.RemoteCommandError):
        etcd.check_health(ApiExecutor((7, '')))


def test_without_curl_the_install_asks_etcdctl():
    """Not skipped in silence: where curl is missing, the hooks that
    install etcdctl ask it instead."""
    executor = ApiExecutor((127, ''), (0, ''))
    etcd.check_health_or_etcdctl(executor)
    assert executor.argvs[1][-3:] == ['endpoint', 'health', '--cluster']
    failing = ApiExecutor((127, ''), (1, ''))
    with pytest.raises(exceptions.RemoteCommandError):
        etcd.check_health_or_etcdctl(failing)
