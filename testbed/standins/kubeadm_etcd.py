#!/usr/bin/python3 -S
"""Stacked etcd of the kubeadm stand-in: a REAL etcd, run as kubeadm does.

Installed as /usr/lib/testbed/kubeadm_etcd.py with the kubeadm package and
imported by the kubeadm stand-in (kubeadm.py). The Kubernetes objects of a
test cluster still live in the shared test API server; this etcd holds no
Kubernetes data, but its membership, certificates, ports, files and
processes are those of a kubeadm Master's stacked etcd, so the driver can
list, check and remove members of a real etcd cluster (Debian's etcd-server
3.4, /usr/bin/etcd, which every test host sees through its overlay root).

THE DRIVER'S ROUTE on a kubeadm Master (run over SSH, as root via sudo):

    sudo ETCDCTL_API=3 etcdctl --endpoints=https://127.0.0.1:2379 \\
        --cacert=/etc/kubernetes/pki/etcd/ca.crt \\
        --cert=/etc/kubernetes/pki/etcd/healthcheck-client.crt \\
        --key=/etc/kubernetes/pki/etcd/healthcheck-client.key \\
        member list -w json
    ... member remove <member ID in hex>
    ... endpoint health --cluster

`member list -w json` of etcdctl 3.4 (Debian's etcd-client) prints
    {"header":{"cluster_id":N,"member_id":N,"raft_term":N},
     "members":[{"ID":N,"name":"master1",
                 "peerURLs":["https://10.x.y.11:2380"],
                 "clientURLs":["https://10.x.y.11:2379"]}, ...]}
with every ID (and the header's cluster_id/member_id) a JSON *number in
decimal* (uint64, often above 2**53: parse it exactly, e.g. Python's json
does; JavaScript's would not), while `member remove` wants the ID in *hex*
(format(ID, 'x')), as the table output of `member list` shows it
("b24cfe6a87ad5b7, started, master1, https://..:2380, https://..:2379,
false"); it prints "Member <hex id> removed from cluster <hex>". A member
added but never started has no "name" and no "clientURLs"; a learner has
"isLearner":true (absent when false). `endpoint health --cluster` checks
the client URL of every started member; etcdctl 3.4 prints its
"https://IP:2379 is healthy: successfully committed proposal: took = ..."
lines on STDERR (nothing on stdout; `-w json` prints a JSON list on
stdout) and exits 1 ("Error: unhealthy cluster") if any member is
unhealthy or unreachable, after its 5 s command timeout for a dead one.
etcd refuses `member remove` of a *live* member with "etcdserver:
unhealthy cluster" within 5 s (its HealthInterval) of a member becoming
active (etcdctl does not retry; a dead member can be removed at once), and
`member add` likewise right after a join; this module retries both.
A real kubeadm Master has no etcdctl on the host (it is in the etcd
image): install etcd-client, or run it in the etcd container.

What `kubeadm init` does here, as kubeadm:
  * certs: etcd/ca (CN etcd-ca, 10 years), etcd/server and etcd/peer
    (CN <node name>, SANs DNS <node name>, localhost, IP <node ip>,
    127.0.0.1, ::1; server+client auth), etcd/healthcheck-client
    (CN kube-etcd-healthcheck-client, client auth) and
    apiserver-etcd-client (CN kube-apiserver-etcd-client, client auth),
    ECDSA P-256 keys (kubeadm's encryptionAlgorithm ECDSA-P256: RSA key
    generation took a seventh of a test cluster's CPU, and nothing the
    driver does depends on the key type) with openssl, 0600, under
    /etc/kubernetes/pki (made by kubeadm_pki.py);
  * the "etcd static pod": /etc/kubernetes/manifests/etcd.yaml with
    kubeadm's command line, and /usr/bin/etcd started from it detached
    (own session, in the host's PID namespace, output to
    /var/log/etcd.log), --name <node name>, --data-dir /var/lib/etcd,
    clients on https://127.0.0.1:2379 and https://<ip>:2379, peers on
    https://<ip>:2380, metrics on http://127.0.0.1:2381, client and peer
    certificate authentication against the etcd CA; then it polls
    https://127.0.0.1:2379/health (back-off, deadline) until healthy.

`kubeadm init phase upload-certs` puts etcd-ca.crt/etcd-ca.key, encrypted
with the certificate key, into Secret kube-system/kubeadm-certs (see
kubeadm.py), and `kubeadm join --control-plane --certificate-key K`
downloads them, makes its own server/peer/healthcheck/apiserver-etcd-client
certificates, then joins etcd as kubeadm 1.35 does (EtcdLearnerMode, on by
default since 1.29, GA since 1.33):
  * endpoints: the InternalIPs of the control-plane Nodes in the API server
    (kubeadm reads the etcd Pods' advertise-client-urls annotation; the
    test API server has no Pods), port 2379, then the members' client URLs;
  * member list; if a member already has this node's peer URL
    https://<ip>:2380 the addition is skipped and that member reused, as
    current kubeadm's addMember does (kubeadm 1.29/1.30 in learner mode
    retried the add until it timed out instead, so a half-added member
    blocked the join until someone removed it); else `member add` as a
    LEARNER;
  * etcd started with --initial-cluster-state=existing and
    --initial-cluster from the member list (this node under its own name,
    unnamed members under their hex ID, as kubeadm does);
  * the learner is promoted (retried until it has caught up), and the
    join waits until the local member is healthy.
A join that fails after the member was added leaves a learner, which
does not count for quorum, so the cluster stays writable. A retry works
both ways kubeadm supports: `kubeadm reset -f` removes the member (it is
found by its peer URL), or a join on a fresh node at the same address
finds the peer URL already listed and reuses it. Caveat, as with real
kubeadm: reusing the entry of a member that had STARTED (a dead Master
replaced without `member remove`) starts a new, empty etcd under an old
identity, which may panic ("tocommit(N) is out of range [lastIndex(0)]",
seen when the leader had not changed meanwhile: the join then fails) or
quietly catch up; the driver's heal must `member remove` the old Master
first.

`kubeadm reset -f` on a control-plane node: remove its own member (found
by peer URL) through another member, or the local one, best effort and
bounded in time (skipped if it is the only member, as kubeadm does), then
stop the local etcd, delete the contents of /var/lib/etcd (kubeadm's
CleanDir; kubeadm itself keeps them if the removal failed, here they go
in any case) and /etc/kubernetes.

Tuning for a testbed of up to ~18 hosts on 2 shared cores (the rest of
the command line is kubeadm's): --snapshot-count=1000 (kubeadm: 10000),
--quota-backend-bytes=64 MiB (which also caps bbolt's mmap), --max-wals
and --max-snapshots 2, --heartbeat-interval=250 and
--election-timeout=2500 ms (etcd's 10:1 ratio, 2.5 times the defaults, so
that a leader starved of CPU or fsync for a second does not lose its
lease), --pre-vote (etcd 3.5's default) and GOMAXPROCS=1. The process
gets no proxy variables from kubeadm's environment.

Client side, this module talks to etcd's JSON gateway (/v3/cluster/...,
/health) over HTTPS with the healthcheck-client certificate, so it needs
the standard library only.
"""

import http.client
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import time

ETCD = '/usr/bin/etcd'
KUBE_DIR = '/etc/kubernetes'
PKI_DIR = KUBE_DIR + '/pki'
ETCD_PKI = PKI_DIR + '/etcd'
CA_CERT = ETCD_PKI + '/ca.crt'
CA_KEY = ETCD_PKI + '/ca.key'
SERVER_CERT = ETCD_PKI + '/server.crt'
SERVER_KEY = ETCD_PKI + '/server.key'
PEER_CERT = ETCD_PKI + '/peer.crt'
PEER_KEY = ETCD_PKI + '/peer.key'
HEALTHCHECK_CERT = ETCD_PKI + '/healthcheck-client.crt'
HEALTHCHECK_KEY = ETCD_PKI + '/healthcheck-client.key'
APISERVER_CLIENT_CERT = PKI_DIR + '/apiserver-etcd-client.crt'
APISERVER_CLIENT_KEY = PKI_DIR + '/apiserver-etcd-client.key'
MANIFEST_DIR = KUBE_DIR + '/manifests'
MANIFEST = MANIFEST_DIR + '/etcd.yaml'
DATA_DIR = '/var/lib/etcd'
LOG_FILE = '/var/log/etcd.log'
PID_FILE = '/run/etcd.pid'
CLIENT_PORT = 2379
PEER_PORT = 2380
METRICS_PORT = 2381
LEARNER_MODE = True  # kubeadm's EtcdLearnerMode feature gate, GA in 1.35
REQUEST_TIMEOUT = 2.0  # kubeadm's etcdTimeout
RESET_REMOVE_BUDGET = 15.0  # seconds reset spends on removing the member
STOP_GRACE = 10.0  # seconds between SIGTERM and SIGKILL
# Testbed tuning, see the module docstring.
TUNING = ['--snapshot-count=1000', '--quota-backend-bytes=67108864',
          '--max-wals=2', '--max-snapshots=2', '--heartbeat-interval=250',
          '--election-timeout=2500', '--pre-vote=true']
ENVIRONMENT = {'PATH': '/usr/sbin:/usr/bin:/sbin:/bin', 'GOMAXPROCS': '1'}
VERBOSITY = 0  # kubeadm's --v; from 5 on, retried etcd errors are logged
# A test's switch: while it exists, a join stops after its etcd learner
# started, before promoting it, as a join killed there would (the etcd
# "static pod" runs on).
STOP_BEFORE_PROMOTION = '/etc/testbed/kubeadm-join-stops-before-promotion'


class EtcdError(Exception):
    """A failure kubeadm reports (exit status 1)."""


class EtcdApiError(Exception):
    """An error answer of etcd (the request reached a member)."""

    def __init__(self, status, message):
        super().__init__(message)
        self.status = status


def client_url(address):
    return f'https://{_host(address)}:{CLIENT_PORT}'


def peer_url(address):
    return f'https://{_host(address)}:{PEER_PORT}'


def _host(address):
    return f'[{address}]' if ':' in address else address


def node_name():
    return socket.gethostname().lower()


# --- preflight ---------------------------------------------------------------

def preflight_errors(address):
    """kubeadm's etcd preflight checks: (check, message) pairs."""
    errors = []
    for port, host in ((CLIENT_PORT, address), (PEER_PORT, address),
                       (CLIENT_PORT, '127.0.0.1')):
        try:
            with socket.create_server((host, port)):
                pass
        except OSError as error:
            if error.errno == 98:  # EADDRINUSE
                check = (f'Port-{port}', f'Port {port} is in use')
                if check not in errors:
                    errors.append(check)
            else:
                raise EtcdError(f'testbed: etcd cannot listen on '
                                f'{host}:{port}: {error.strerror}')
    try:
        if os.listdir(DATA_DIR):
            errors.append((f'DirAvailable-{DATA_DIR.replace("/", "-")}',
                           f'{DATA_DIR} is not empty'))
    except FileNotFoundError:
        pass
    return errors


# --- talking to etcd (its JSON gateway) --------------------------------------

class Client:
    """etcd v3 cluster API over HTTPS, as the healthcheck client.

    Tries the endpoints in turn, the last one that answered first, like a
    client balancer; an error answer of a member is final for that call.
    """

    def __init__(self, endpoints, timeout=REQUEST_TIMEOUT):
        self.endpoints = list(dict.fromkeys(endpoints))
        self.timeout = timeout
        self.context = ssl.create_default_context(cafile=CA_CERT)
        self.context.load_cert_chain(HEALTHCHECK_CERT, HEALTHCHECK_KEY)

    def request(self, method, path, body=None, endpoints=None):
        """(endpoint, decoded JSON); OSError if no endpoint answered."""
        errors = []
        for endpoint in endpoints or list(self.endpoints):
            try:
                return endpoint, self._request(endpoint, method, path, body)
            except (OSError, http.client.HTTPException) as error:
                errors.append(f'{endpoint}: {error}')
        raise OSError('; '.join(errors) or 'no etcd endpoints')

    def _request(self, endpoint, method, path, body):
        host, port = endpoint.split('//', 1)[1].rsplit(':', 1)
        connection = http.client.HTTPSConnection(
            host.strip('[]'), int(port), context=self.context,
            timeout=self.timeout)
        try:
            data = None if body is None else json.dumps(body).encode()
            connection.request(method, path, body=data, headers={
                'Content-Type': 'application/json'})
            response = connection.getresponse()
            raw = response.read()
        finally:
            connection.close()
        # This endpoint answers: try it first next time.
        if endpoint in self.endpoints:
            self.endpoints.remove(endpoint)
        self.endpoints.insert(0, endpoint)
        try:
            payload = json.loads(raw)
        except ValueError:
            payload = raw.decode(errors='replace')
        if response.status != 200:
            message = payload.get('error') or payload.get('message') \
                if isinstance(payload, dict) else payload
            raise EtcdApiError(response.status,
                               message or f'status {response.status}')
        return payload

    def members(self, endpoints=None):
        _, answer = self.request('POST', '/v3/cluster/member/list', {},
                                 endpoints)
        return [normalised(member) for member in answer.get('members', [])]

    def add_member(self, url, learner):
        body = {'peerURLs': [url]}
        if learner:
            body['isLearner'] = True
        _, answer = self.request('POST', '/v3/cluster/member/add', body)
        return normalised(answer['member']), [
            normalised(member) for member in answer.get('members', [])]

    def promote(self, member_id):
        self.request('POST', '/v3/cluster/member/promote',
                     {'ID': str(member_id)})

    def remove(self, member_id, endpoints=None):
        self.request('POST', '/v3/cluster/member/remove',
                     {'ID': str(member_id)}, endpoints)

    def health(self, endpoint):
        """True if the member at endpoint reports itself healthy."""
        _, answer = self.request('GET', '/health', endpoints=[endpoint])
        return isinstance(answer, dict) and answer.get('health') == 'true'


def normalised(member):
    """A member of the JSON gateway with its ID as an int."""
    return dict(member, ID=int(member.get('ID', 0)),
                isLearner=bool(member.get('isLearner')),
                peerURLs=member.get('peerURLs') or [],
                clientURLs=member.get('clientURLs') or [])


def retry(call, deadline, what, final=()):
    """call() until it returns without error, with a growing back-off,
    until the deadline; errors whose text contains one of ``final`` are
    raised at once."""
    delay, last = 0.05, 'no answer'
    while True:
        try:
            return call()
        except (OSError, EtcdApiError) as error:
            last = str(error)
            if any(text in last for text in final):
                raise
            if VERBOSITY >= 5:
                print(f'{time.strftime("%H:%M:%S")} [etcd] {what}: {last}; '
                      f'retrying in {delay:.2f}s', file=sys.stderr)
        if time.monotonic() >= deadline:
            raise EtcdError(f'{what}: timed out: {last}')
        time.sleep(delay)
        delay = min(delay * 2, 0.5)


# --- the "static pod" --------------------------------------------------------

def command_line(name, address, initial_cluster, existing):
    """etcd's argv as in kubeadm's static Pod manifest, plus the tuning."""
    args = [ETCD,
            f'--advertise-client-urls={client_url(address)}',
            f'--cert-file={SERVER_CERT}',
            '--client-cert-auth=true',
            f'--data-dir={DATA_DIR}',
            '--experimental-initial-corrupt-check=true',
            '--experimental-watch-progress-notify-interval=5s',
            f'--initial-advertise-peer-urls={peer_url(address)}',
            f'--initial-cluster={initial_cluster}']
    if existing:
        args.append('--initial-cluster-state=existing')
    args += [f'--key-file={SERVER_KEY}',
             f'--listen-client-urls=https://127.0.0.1:{CLIENT_PORT},'
             f'{client_url(address)}',
             f'--listen-metrics-urls=http://127.0.0.1:{METRICS_PORT}',
             f'--listen-peer-urls={peer_url(address)}',
             f'--name={name}',
             f'--peer-cert-file={PEER_CERT}',
             '--peer-client-cert-auth=true',
             f'--peer-key-file={PEER_KEY}',
             f'--peer-trusted-ca-file={CA_CERT}',
             f'--trusted-ca-file={CA_CERT}',
             '--logger=zap', '--log-outputs=stderr']
    return args + TUNING


def manifest(args, address):
    """A static Pod manifest like kubeadm's etcd.yaml (for people and for
    reset; the stand-in starts the command itself)."""
    command = ''.join(f'    - {arg}\n' for arg in ['etcd'] + args[1:])
    return ('apiVersion: v1\n'
            'kind: Pod\n'
            'metadata:\n'
            '  annotations:\n'
            '    kubeadm.kubernetes.io/etcd.advertise-client-urls: '
            f'{client_url(address)}\n'
            '  labels:\n'
            '    component: etcd\n'
            '    tier: control-plane\n'
            '  name: etcd\n'
            '  namespace: kube-system\n'
            'spec:\n'
            '  containers:\n'
            '  - command:\n'
            f'{command}'
            '    image: registry.k8s.io/etcd:3.5.15-0\n'
            '    name: etcd\n'
            '  hostNetwork: true\n'
            '  priorityClassName: system-node-critical\n')


def manifest_flags():
    """{flag: value} of the etcd manifest on this node, or None."""
    try:
        with open(MANIFEST) as handle:
            text = handle.read()
    except FileNotFoundError:
        return None
    flags = {}
    for line in text.splitlines():
        line = line.strip()
        if line.startswith('- --'):
            name, _, value = line[4:].partition('=')
            flags[name] = value
    return flags


def process_exited(pid):
    """True once the process is gone or a zombie none of whose threads
    still run: only then are its files, listening sockets included,
    closed (a zombie leader's other threads may still be exiting)."""
    try:
        with open(f'/proc/{pid}/stat') as handle:
            if handle.read().rsplit(')', 1)[1].split()[0] != 'Z':
                return False
        return os.listdir(f'/proc/{pid}/task') == [str(pid)]
    except OSError:
        return True


def _is_etcd(pid):
    """True if pid is a running etcd of /var/lib/etcd."""
    try:
        with open(f'/proc/{pid}/cmdline', 'rb') as handle:
            argv = handle.read().decode(errors='replace').split('\0')
    except OSError:
        return False
    return (argv[0] == ETCD and f'--data-dir={DATA_DIR}' in argv
            and not process_exited(pid))


def running_pids():
    """PIDs of the local etcd (this host's PID namespace only shows this
    host's processes)."""
    return sorted(int(entry) for entry in os.listdir('/proc')
                  if entry.isdigit() and _is_etcd(int(entry)))


def start(name, address, initial_cluster, existing):
    """Write the manifest and start etcd detached, as the kubelet would
    run the static Pod: own session, stdin from /dev/null, output to its
    log file (never to the caller's stdout/stderr, which may be an SSH
    channel), in the host's PID namespace so it dies with the host."""
    args = command_line(name, address, initial_cluster, existing)
    os.makedirs(MANIFEST_DIR, exist_ok=True)
    with open(os.open(MANIFEST, os.O_WRONLY | os.O_CREAT | os.O_TRUNC,
                      0o600), 'w') as handle:
        handle.write(manifest(args, address))
    os.makedirs(DATA_DIR, mode=0o700, exist_ok=True)
    os.chmod(DATA_DIR, 0o700)
    with open(LOG_FILE, 'ab') as log:
        process = subprocess.Popen(
            args, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
            start_new_session=True, close_fds=True, env=ENVIRONMENT,
            cwd='/')
    with open(PID_FILE, 'w') as handle:
        handle.write(f'{process.pid}\n')
    return process


def wait_healthy(process, deadline, what):
    """Poll the local member's /health until it is true; fail at once if
    the process exited (its log says why)."""
    client = Client([f'https://127.0.0.1:{CLIENT_PORT}'])
    delay, last = 0.02, 'no answer'
    started = time.monotonic()
    while True:
        if process.poll() is not None:
            raise EtcdError(f'{what}: etcd exited with status '
                            f'{process.returncode}: {log_tail()}')
        try:
            if client.health(client.endpoints[0]):
                return time.monotonic() - started
            last = 'health is false'
        except (OSError, EtcdApiError) as error:
            last = str(error)
        if time.monotonic() >= deadline:
            raise EtcdError(f'{what}: timed out: {last}; see {LOG_FILE}')
        time.sleep(delay)
        delay = min(delay * 2, 0.5)


def log_tail(lines=3):
    try:
        with open(LOG_FILE, errors='replace') as handle:
            tail = handle.read().splitlines()[-lines:]
    except OSError:
        return f'see {LOG_FILE}'
    return ' | '.join(tail) + f' (see {LOG_FILE})'


def stop():
    """SIGTERM the local etcd, SIGKILL it after STOP_GRACE; wait until it
    is gone. True if one was running."""
    pids = running_pids()
    for pid in pids:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + STOP_GRACE
    delay = 0.01
    while any(_is_etcd(pid) for pid in pids):
        if time.monotonic() > deadline:
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            deadline = float('inf')
        time.sleep(delay)
        delay = min(delay * 2, 0.1)
    try:
        os.unlink(PID_FILE)
    except FileNotFoundError:
        pass
    return bool(pids)


# --- kubeadm phases ----------------------------------------------------------

def init_local(name, address, deadline):
    """kubeadm init's etcd phase: a new single-member cluster."""
    print(f'[etcd] Creating static Pod manifest for local etcd in '
          f'"{MANIFEST_DIR}"')
    process = start(name, address, f'{name}={peer_url(address)}',
                    existing=False)
    took = wait_healthy(process, deadline, 'error execution phase etcd: '
                        'etcd did not become healthy')
    print(f'[etcd] The local etcd member "{name}" is healthy after '
          f'{took:.6f}s (testbed: pid {process.pid}, log {LOG_FILE})')


def join(name, address, seed_addresses, deadline):
    """kubeadm join's control-plane-join/etcd phase (learner mode)."""
    prefix = 'error execution phase control-plane-join/etcd: '
    own = peer_url(address)
    seeds = [client_url(ip) for ip in seed_addresses if ip != address]
    if not seeds:
        raise EtcdError(prefix + 'could not retrieve the list of etcd '
                                 'endpoints: no other control-plane Node')
    client = Client(seeds)
    members = retry(client.members, deadline,
                    prefix + 'error syncing endpoints with etcd')
    # As clientv3's Sync: the members' client URLs become the endpoints.
    client.endpoints = list(dict.fromkeys(
        client.endpoints[:1] + [url for member in members
                                for url in member['clientURLs']]))
    mine = [member for member in members if own in member['peerURLs']]
    if mine:
        member = mine[0]
        print(f'[etcd] The peer URL {own} is already a member '
              f'({member["ID"]:x}), skipping etcd member addition')
    else:
        def add():
            try:
                return client.add_member(own, LEARNER_MODE)
            except EtcdApiError as error:
                if 'Peer URLs already exists' not in str(error):
                    raise
                # An earlier attempt got through: use its member.
                listed = client.members()
                found = [m for m in listed if own in m['peerURLs']]
                if not found:
                    raise
                return found[0], listed
        member, members = retry(add, deadline, prefix + 'error adding etcd '
                                'member')
        print(f'[etcd] Announced new etcd member joining to the existing '
              f'etcd cluster ({member["ID"]:x}'
              f'{", as a learner" if member["isLearner"] else ""})')
    initial = []
    for other in members:
        if own in other['peerURLs']:
            initial.append(f'{name}={own}')
        else:
            other_name = other.get('name') or f'{other["ID"]:x}'
            initial.extend(f'{other_name}={url}'
                           for url in other['peerURLs'])
    print('[etcd] Creating static Pod manifest for "etcd"')
    process = start(name, address, ','.join(initial), existing=True)

    def promote():
        if process.poll() is not None:
            raise EtcdError(f'{prefix}etcd exited with status '
                            f'{process.returncode}: {log_tail()}')
        current = [m for m in client.members() if m['ID'] == member['ID']]
        if not current:
            raise EtcdError(f'{prefix}member {member["ID"]:x} was removed '
                            f'from the cluster while joining')
        if current[0]['isLearner']:
            if os.path.exists(STOP_BEFORE_PROMOTION):
                raise EtcdError(f'{prefix}testbed: stopped before promoting '
                                f'the learner {member["ID"]:x} '
                                f'({STOP_BEFORE_PROMOTION} exists)')
            client.promote(member['ID'])
            print(f'[etcd] The learner was promoted as a voting member: '
                  f'{member["ID"]:x}')
        return True

    retry(promote, deadline, prefix + f'error promoting the learner '
                                      f'{member["ID"]:x}')
    print('[etcd] Waiting for the new etcd member to join the cluster. '
          'This can take up to 40s')
    took = wait_healthy(process, deadline, prefix + 'timeout waiting for '
                        'etcd cluster to be available')
    print(f'[etcd] The new member "{name}" is healthy after {took:.6f}s '
          f'(testbed: pid {process.pid}, log {LOG_FILE})')


def remove_local_member(other_addresses, budget=RESET_REMOVE_BUDGET):
    """kubeadm reset's remove-etcd-member phase, best effort: returns a
    warning text, or None if removed (or nothing to remove)."""
    flags = manifest_flags()
    if flags is None:
        return None
    own = flags.get('initial-advertise-peer-urls', '')
    own_client = flags.get('advertise-client-urls', '')
    deadline = time.monotonic() + budget
    try:
        client = Client([client_url(ip) for ip in other_addresses]
                        + [f'https://127.0.0.1:{CLIENT_PORT}', own_client])
    except (OSError, ssl.SSLError) as error:
        return f'cannot create an etcd client: {error}'

    def remove():
        members = client.members()
        mine = [m for m in members if own in m['peerURLs']]
        if not mine:
            print(f'[reset] The etcd member {own} was already removed')
            return
        if len(members) == 1:
            print('[reset] This is the only remaining etcd member in the '
                  'etcd cluster, skip removing it')
            return
        # Through another member, the local one last: a member removing
        # itself may stop before it answers.
        others = [url for m in members if m is not mine[0]
                  for url in m['clientURLs']]
        try:
            client.remove(mine[0]['ID'], others + [
                f'https://127.0.0.1:{CLIENT_PORT}'])
        except EtcdApiError as error:
            if 'member not found' not in str(error):
                raise
        print(f'[reset] Removed etcd member {mine[0]["ID"]:x} ({own})')

    try:
        retry(remove, deadline, 'failed to remove the etcd member')
    except EtcdError as error:
        return str(error)
    return None


def clean_data_dir():
    """Delete the contents of /var/lib/etcd (kubeadm's CleanDir)."""
    try:
        entries = os.listdir(DATA_DIR)
    except FileNotFoundError:
        return
    if not entries:
        return
    for entry in entries:
        path = os.path.join(DATA_DIR, entry)
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
        else:
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass
    print(f'[reset] Deleted contents of the etcd data directory: '
          f'{DATA_DIR}')


if __name__ == '__main__':
    sys.exit('kubeadm_etcd is a module of the kubeadm stand-in')
