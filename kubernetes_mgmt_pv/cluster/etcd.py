"""The etcd cluster of the Masters, as kubeadm runs it.

Route: ``etcdctl`` (the distribution's etcd-client package) on a Master,
run with sudo against the local member at https://127.0.0.1:2379 with the
client certificate kubeadm leaves on every control-plane node
(/etc/kubernetes/pki/etcd/healthcheck-client.*). It needs no container
runtime and no running etcd pod name, and only speaks etcd's v3 API, which
etcd 3.3 to 3.5 clients and servers share.

The health check changes nothing on the Master, so it does not install
etcdctl: it asks etcd's own HTTP API over the client port with curl and
the same certificate (the member list, then each member's ``/health``),
and is skipped, saying so, on a Master without curl.

Members are matched exactly, by name and peer URL together, never by a
substring: removing master1 leaves master10 alone. A learner (a
non-voting member kubeadm's join adds and then promotes) is no Master's
member until promoted: its join did not finish.
"""

import collections
import ipaddress
import json
import time
import urllib.parse

from kubernetes_mgmt_pv import exceptions
from kubernetes_mgmt_pv import redaction

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


# -- the health check, over etcd's HTTP API --------------------------------

LOCAL_API = 'https://127.0.0.1:2379'
# Seconds a member has to answer, as etcdctl's dial timeout.
HEALTH_TIMEOUT = 5
_CURL = ['curl', '--silent', '--show-error', '--max-time',
         str(HEALTH_TIMEOUT), '--cacert', '%s/ca.crt' % PKI,
         '--cert', '%s/healthcheck-client.crt' % PKI,
         '--key', '%s/healthcheck-client.key' % PKI]
# The HTTP status of each member's /health, one line per URL ("000": no
# answer); the URLs are its arguments.
_HEALTH_SCRIPT = ('for url do %s --output /dev/null --write-out '
                  '"%%{http_code}\n" "$url/health"; done'
                  % ' '.join(_CURL))
_NOT_FOUND = 127  # the shell's exit status for a missing command
_SHOWN = 80  # characters of a VM's text an error shows


def member_list_command():
    """The argv asking the local member for the members (etcd's gRPC
    gateway: POST /v3/cluster/member/list)."""
    return _CURL + ['--data', '{}', LOCAL_API + '/v3/cluster/member/list']


def parse_api_members(output):
    """[(name, client URLs)] of the gateway's member list: VM text,
    checked like user input."""
    try:
        listed = json.loads(output)['members']
        return [(str(member.get('name') or ''),
                 tuple(str(url) for url in member.get('clientURLs') or ()))
                for member in listed]
    except (ValueError, KeyError, TypeError, AttributeError):
        raise exceptions.ClusterInstallError(
            'etcd\'s member list is not the JSON of its API: %r'
            % output[:_SHOWN])


def health_urls(members):
    """([(name, the client URL asked)], [problem]): each member's first
    client URL, which must be https://<IP>:<port>; a member without one
    never started. Every member is asked, also two of one name; names are
    shown on one line."""
    urls, problems = [], []
    for name, client_urls in members:
        shown = redaction.one_line(name[:_SHOWN]) or 'unnamed'
        if not client_urls:
            problems.append('%s has no client URL (never started)' % shown)
        elif not _is_ip_url(client_urls[0]):
            problems.append('%s has client URL %r, not https://<IP>:<port>'
                            % (shown, client_urls[0][:_SHOWN]))
        else:
            urls.append((shown, client_urls[0]))
    return urls, problems


def _is_ip_url(url):
    """Whether ``url`` is exactly https://<IP>:<port> (no user, path or
    query: it is put in front of /health)."""
    try:
        parts = urllib.parse.urlsplit(url)
        address = ipaddress.ip_address(parts.hostname or '')
        port = parts.port
    except ValueError:
        return False
    host = '[%s]' % address if address.version == 6 else str(address)
    return port is not None and url == 'https://%s:%d' % (host, port)


def unhealthy(urls, output):
    """[problem] of the members whose /health did not answer 200, from
    the status lines of _HEALTH_SCRIPT for ``urls`` ([(name, URL)])."""
    codes = output.split()
    if len(codes) != len(urls) or not all(
            code.isdigit() and len(code) == 3 for code in codes):
        return ['the health of %d member(s) was not read: %r'
                % (len(urls), output[:_SHOWN])]
    return ['%s (%s) %s' % (name, url, 'does not answer' if code == '000'
                            else 'answers HTTP %s' % code)
            for (name, url), code in zip(urls, codes)
            if code != '200']


def check_health(executor):
    """Fail unless every member answers healthy on its client URL, as
    ``etcdctl endpoint health --cluster`` checks, with curl (nothing
    installed); False when the Master has no curl (not checked)."""
    listing = executor.run(member_list_command(), sudo=True, check=False,
                           description='etcd member list (curl)')
    if listing.exit_status == _NOT_FOUND:
        return False
    if not listing.ok:
        raise executor.failure('etcd member list (curl)', listing)
    urls, problems = health_urls(parse_api_members(listing.stdout))
    if urls:
        answers = executor.run(['sh', '-c', _HEALTH_SCRIPT, 'sh'] +
                               [url for _, url in urls], sudo=True,
                               check=False,
                               description='etcd health of each member')
        problems += unhealthy(urls, answers.stdout)
    if problems:
        raise exceptions.ClusterInstallError(
            'etcd members not healthy: %s' % '; '.join(problems))
    return True


def check_health_or_etcdctl(executor):
    """``check_health``; on a Master without curl, etcdctl's ``endpoint
    health --cluster`` (for the hooks that install etcdctl: the install,
    scale and heal, not the upgrade's check, which changes no host)."""
    if not check_health(executor):
        executor.run(etcdctl('endpoint', 'health', '--cluster'), sudo=True,
                     description='etcdctl endpoint health --cluster')
