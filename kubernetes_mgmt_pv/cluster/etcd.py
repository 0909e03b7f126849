"""The etcd cluster of the Masters, as kubeadm runs it.

Route: ``etcdctl`` (the distribution's etcd-client package) on a Master,
run with sudo against the local member at https://127.0.0.1:2379 with the
client certificate kubeadm leaves on every control-plane node
(/etc/kubernetes/pki/etcd/healthcheck-client.*). It needs no container
runtime and no running etcd pod name, and only speaks etcd's v3 API, which
etcd 3.3 to 3.5 clients and servers share.

Members are matched exactly, by name and peer URL together, never by a
substring: removing master1 leaves master10 alone.
"""

import json
import time

from kubernetes_mgmt_pv import exceptions

PACKAGE = 'etcd-client'
PKI = '/etc/kubernetes/pki/etcd'
PEER_PORT = 2380


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
    """[(member id as hex, name, peer URLs)] from ``member list -w json``
    (etcdctl prints the ids as decimal integers; commands take hex)."""
    try:
        members = json.loads(output)['members']
        return [('%x' % int(member['ID']), member.get('name', ''),
                 tuple(member.get('peerURLs') or ())) for member in members]
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
    for member_id, member_name, urls in members:
        if member_name == name and url in urls:
            return member_id
        if member_name == name or url in urls:
            raise exceptions.ClusterInstallError(
                'etcd member %s (%s, %s) matches Master %s at %s only in '
                'part: not removed; check the etcd cluster by hand'
                % (member_id, member_name or 'unnamed', ', '.join(urls),
                   name, url))
    return None


def is_member(members, name, address):
    """Whether the Master ``name`` at ``address`` is a started member: one
    member with its name and its peer URL (a member added but never
    started has no name)."""
    url = peer_url(address)
    return any(member_name == name and url in urls
               for _, member_name, urls in members)


def stale_members(members, joining):
    """Ids of the members that hold the peer URL of a Master about to join
    (``joining``: addresses): left over from its previous VM, they would
    make kubeadm's member add fail."""
    urls = {peer_url(address) for address in joining}
    return [member_id for member_id, _, member_urls in members
            if urls.intersection(member_urls)]


def check_members(members, expected):
    """Fail unless the members are exactly the Masters ``expected``
    ({name: address})."""
    found = {name: urls for _, name, urls in members}
    wanted = {name: (peer_url(address),) for name, address in
              expected.items()}
    if found != wanted:
        raise exceptions.ClusterInstallError(
            'etcd has members %s; expected one per Master: %s' % (
                _listed(found), _listed(wanted)))


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
