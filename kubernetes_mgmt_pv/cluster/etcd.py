"""The etcd cluster of the Masters, as kubeadm runs it.

Route: ``etcdctl`` (the distribution's etcd-client package) on a Master,
run with sudo against the local member at https://127.0.0.1:2379 with the
client certificate kubeadm leaves on every control-plane node
(/etc/kubernetes/pki/etcd/healthcheck-client.*). It needs no container
runtime and no running etcd pod name, and only speaks etcd's v3 API, which
etcd 3.3 to 3.5 clients and servers share.

Members are matched exactly, by name and peer URL together, never by a
substring: removing master1 leaves master10 alone. A learner (a
non-voting member kubeadm's join adds and then promotes) is no Master's
member until promoted: its join did not finish.
"""

import collections
import json
import time

from kubernetes_mgmt_pv import exceptions

PACKAGE = 'etcd-client'
PKI = '/etc/kubernetes/pki/etcd'
PEER_PORT = 2380

# id: hex, as etcdctl's commands take it; name: '' until the member starts.
Member = collections.namedtuple('Member', 'id name peer_urls learner',
                                defaults=(False,))


def peer_url(address):
    host = '[%s]' % address if ':' in address else address
    return 'https://%s:%d' % (host, PEER_PORT)


def etcdctl(*args):
    """The argv of an etcdctl v3 command against the local member."""
    return ['env', 'ETCDCTL_API=3', 'etcdctl',
            '--endpoints=https://127.0.0.1:2379',
            '--cacert=%s/ca.crt' % PKI,
            '--cert=%s/healthcheck-client.crt' % PKI,
            '--key=%s/healthcheck-client.key' % PKI,
            '--command-timeout=30s'] + list(args)


def parse_members(output):
    """[Member] from ``member list -w json`` (etcdctl prints the ids as
    decimal integers; commands take hex)."""
    try:
        members = json.loads(output)['members']
        return [Member('%x' % int(member['ID']), member.get('name', ''),
                       tuple(member.get('peerURLs') or ()),
                       bool(member.get('isLearner'))) for member in members]
    except (ValueError, KeyError, TypeError):
        raise exceptions.ClusterInstallError(
            'etcdctl member list did not print the members as JSON')


def member_of(members, name, address):
    """The id of the member of the node ``name`` at ``address``, or None
    when there is none (already removed).

    A member with only the name or only the peer URL of the node is
    someone else's or half-registered: refused rather than guessed.
    """
    url = peer_url(address)
    for member in members:
        if member.name == name and url in member.peer_urls:
            return member.id
        if member.name == name or url in member.peer_urls:
            raise exceptions.ClusterInstallError(
                'etcd member %s (%s, %s) matches Master %s at %s only in '
                'part: not removed; check the etcd cluster by hand'
                % (member.id, member.name or 'unnamed',
                   ', '.join(member.peer_urls), name, url))
    return None


def is_member(members, name, address):
    """Whether the Master ``name`` at ``address`` is a started voting
    member: one member with its name and its peer URL (a member added but
    never started has no name), not a learner."""
    url = peer_url(address)
    return any(member.name == name and url in member.peer_urls and
               not member.learner for member in members)


def stale_members(members, joining):
    """Ids of the members that hold the peer URL of a Master about to join
    (``joining``: addresses): left over from its previous VM, they would
    make kubeadm's member add fail."""
    urls = {peer_url(address) for address in joining}
    return [member.id for member in members
            if urls.intersection(member.peer_urls)]


def check_members(members, expected):
    """Fail unless the members are exactly the Masters ``expected``
    ({name: address}), every one a voter."""
    found = {member.name: member.peer_urls for member in members}
    wanted = {name: (peer_url(address),) for name, address in
              expected.items()}
    if found != wanted:
        raise exceptions.ClusterInstallError(
            'etcd has members %s; expected one per Master: %s' % (
                _listed(found), _listed(wanted)))
    learners = [member for member in members if member.learner]
    if learners:
        raise exceptions.ClusterInstallError(
            'etcd members %s are still learners: their kubeadm join did '
            'not finish (the next run resets and joins them again)' % (
                _listed({m.name: m.peer_urls for m in learners})))


def _listed(members):
    return ', '.join('%s (%s)' % (name or 'unnamed', ', '.join(urls))
                     for name, urls in sorted(members.items())) or 'none'


def members(executor):
    """The etcd members, asked on a Master (one command)."""
    result = executor.run(etcdctl('member', 'list', '-w', 'json'), sudo=True,
                          description='etcdctl member list')
    return parse_members(result.stdout)


def remove_member(executor, member_id, attempts=5, backoff=1.0):
    """Remove a member. etcd refuses membership changes for a few seconds
    after the previous one ("unhealthy cluster"): retried with back-off."""
    description = 'etcdctl member remove %s' % member_id
    for attempt in range(attempts):
        result = executor.run(etcdctl('member', 'remove', member_id),
                              sudo=True, check=False, description=description)
        if result.ok or 'not found' in result.stderr:
            return
        if 'unhealthy cluster' not in result.stderr or \
                attempt == attempts - 1:
            raise executor.failure(description, result)
        time.sleep(backoff * 2 ** attempt)


def check_health(executor):
    """Every member answers (etcdctl exits non-zero otherwise)."""
    executor.run(etcdctl('endpoint', 'health', '--cluster'), sudo=True,
                 description='etcdctl endpoint health --cluster')
