"""The HA control plane on three real test hosts: haproxy and keepalived
installed by apt (from the local package cache), driven by their Debian
init.d scripts (the hosts have no systemd), VRRP between the hosts' network
namespaces over the testbed bridge, and the VIP reached from the runner.

Each host runs a stand-in API server: HTTPS on <its address>:6443,
answering every request (haproxy's ``GET /healthz`` check included) with
its own name. The tests run in file order on one set of hosts, each
leaving the cluster healthy for the next; the last one drops a Master.
"""

import http.client
import ipaddress
import shlex
import ssl
import time

import paramiko
import pytest

from kubernetes_mgmt_pv import admin_kubectl
from kubernetes_mgmt_pv.cluster import ha
from kubernetes_mgmt_pv import config
from kubernetes_mgmt_pv import exceptions
from kubernetes_mgmt_pv.remote import parallel
from kubernetes_mgmt_pv.remote import remote
from kubernetes_mgmt_pv.request import param_model
from kubernetes_mgmt_pv import step_report
from testbed import hosts
from testbed import polling
from testbed import virtual_vnf

NAMES = ('m1', 'm2', 'm3')
# VRRP elections take ~3 s (advert_int 1), an haproxy check ~2 s.
DEADLINE = 30.0

API_SERVER = r'''
import http.server, ssl, sys
name, address, cert, key = sys.argv[1:]
context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
context.load_cert_chain(cert, key)


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = name.encode()
        self.send_response(200)
        self.send_header('Content-Length', str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def finish_request(self, request, client_address):
        # The TLS handshake in the connection's thread, not in accept().
        request.settimeout(5)
        super().finish_request(
            context.wrap_socket(request, server_side=True), client_address)


Server((address, 6443), Handler).serve_forever()
'''

ADMIN_SOCKET_QUERY = r'''
import socket, sys
sock = socket.socket(socket.AF_UNIX)
sock.connect('/run/haproxy/admin.sock')
sock.sendall(sys.argv[1].encode() + b'\n')
data = b''
while True:
    chunk = sock.recv(65536)
    if not chunk:
        break
    data += chunk
sys.stdout.write(data.decode())
'''


def api_answer(address, port, timeout=2.0):
    """The body an HTTPS GET / returns (the answering server's name), or
    None while nothing answers."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    connection = http.client.HTTPSConnection(address, port, timeout=timeout,
                                             context=context)
    try:
        connection.request('GET', '/')
        return connection.getresponse().read().decode()
    except (OSError, http.client.HTTPException):
        return None
    finally:
        connection.close()


def start_api_server(host):
    """A detached stand-in API server in the host, answering its name."""
    host.run('openssl req -x509 -newkey ec -pkeyopt '
             'ec_paramgen_curve:prime256v1 -nodes -days 1 -subj /CN=%s '
             '-keyout /etc/api-server.key -out /etc/api-server.crt'
             % host.name)
    host.run('setsid -f /usr/bin/python3 -c %s %s %s /etc/api-server.crt '
             '/etc/api-server.key </dev/null >/dev/null 2>&1'
             % (shlex.quote(API_SERVER), host.name, host.ip))
    polling.wait_until(
        lambda: api_answer(host.ip, admin_kubectl.API_SERVER_PORT) ==
        host.name, 'the API server of %s' % host.name)


def vip_holders(bed, vip):
    """The names of the hosts whose eth0 holds the VIP."""
    return sorted(
        host.name for host in bed.hosts.values()
        if ' %s/' % vip in host.run('ip -o -4 addr show dev eth0').stdout)


def wait_for_holder(bed, vip, wanted):
    """Wait until exactly ``wanted`` (a set of names) hold the VIP and the
    VIP answers on :16443 (through haproxy, from the runner's namespace);
    returns (holders, answering Master, seconds waited)."""
    started = time.monotonic()

    def settled():
        holders = vip_holders(bed, vip)
        if len(holders) == 1 and holders[0] in wanted:
            answer = api_answer(vip, ha.FRONTEND_PORT)
            if answer:
                return holders, answer
        return None

    holders, answer = polling.wait_until(
        settled, 'one of %s to hold %s and answer' % (sorted(wanted), vip),
        timeout=DEADLINE)
    return holders, answer, time.monotonic() - started


def daemon_pid(host, name):
    """The PID of a running daemon (its pid file names a live process of
    that name), else None."""
    result = host.run('pid=$(cat %s) && [ "$(cat /proc/$pid/comm)" = %s ] '
                      '&& echo "$pid"' % (ha.PID_FILES[name], name),
                      check=False)
    return result.stdout.strip() or None


def stop(host, name):
    """Stop a daemon out of band; wait until its process is gone (init.d's
    stop only sends SIGTERM)."""
    host.run('service %s stop' % name)
    polling.wait_until(lambda: daemon_pid(host, name) is None,
                       '%s on %s to exit' % (name, host.name))


def master_pid(host):
    return host.read_file(ha.PID_FILES['haproxy']).strip()


def worker_pids(host, master):
    return set(host.run('pgrep -P %s -x haproxy' % master).stdout.split())


def runtime_servers(host):
    """The servers of the running haproxy's backend, from its runtime API."""
    output = host.run('/usr/bin/python3 -c %s %s' % (
        shlex.quote(ADMIN_SOCKET_QUERY),
        shlex.quote('show servers state %s' % ha.BACKEND))).stdout
    # "<version>", "# be_id be_name srv_id srv_name ...", one line each.
    return sorted(line.split()[3] for line in output.splitlines()[2:]
                  if line.strip())


def configured_servers(host):
    return sorted(line.split()[1]
                  for line in host.read_file(ha.HAPROXY_CONFIG).splitlines()
                  if line.strip().startswith('server '))


def configure(host, masters, vip):
    """ha.configure on one host over SSH, as the driver runs it."""
    report = step_report.Report()
    with remote.RemoteCommandExecutor(
            host.ip, 'ubuntu', 'ubuntu',
            host_key_policy=paramiko.AutoAddPolicy()) as executor:
        ha.configure(executor, host.ip, masters, vip, param_model.Proxy(),
                     config.options(), report)
    return {outcome.step: outcome for outcome in report.outcomes}


def configure_all(nodes, masters, vip):
    """configure on every node at once; {name: {step: outcome}}."""
    reports = {}

    def one(host):
        reports[host.name] = configure(host, masters, vip)

    parallel.run_on_nodes('HA control plane', one,
                          {host.name: host for host in nodes}, len(nodes))
    return reports


def changed(outcomes):
    return {step: outcome.detail for step, outcome in outcomes.items()
            if outcome.changed}


@pytest.fixture(scope='module')
def bed():
    """Three Masters on a testbed whose image lacks haproxy and keepalived
    (apt installs them offline from the runner's package cache)."""
    reason = hosts.require_testbed()
    if reason:
        pytest.skip(reason)
    started = time.monotonic()
    with hosts.Testbed(purge_packages=ha.HA_PACKAGES) as testbed:
        for name in NAMES:
            start_api_server(testbed.add_host(name, 'master'))
        print('\ntestbed with 3 hosts and API servers: %.1fs'
              % (time.monotonic() - started))
        yield testbed


@pytest.fixture(scope='module')
def vip(bed):
    """A free address of the testbed subnet: its last host address."""
    address = str(list(ipaddress.ip_network(bed.subnet).hosts())[-1])
    assert address not in {host.ip for host in bed.hosts.values()}
    assert address != bed.bridge_ip
    return address


@pytest.fixture(scope='module')
def masters(bed):
    return [(name, bed.hosts[name].ip) for name in NAMES]


@pytest.fixture(scope='module')
def first_run(bed, vip, masters):
    virtual_vnf.use_test_options()
    try:
        started = time.monotonic()
        reports = configure_all(bed.hosts.values(), masters, vip)
        elapsed = time.monotonic() - started
    finally:
        config.CONF.reset()
    print('first configure of 3 Masters (apt install included): %.1fs'
          % elapsed)
    return reports


def test_first_run_installs_configures_and_starts(bed, vip, first_run):
    for name in NAMES:
        assert changed(first_run[name]) == {
            'packages haproxy keepalived': 'installed haproxy keepalived',
            ha.HAPROXY_CONFIG: '', ha.KEEPALIVED_CONFIG: '',
            'service haproxy': 'started',
            'service keepalived': 'started'}, name
        host = bed.hosts[name]
        assert configured_servers(host) == list(NAMES)
        assert runtime_servers(host) == list(NAMES)
        assert host.read_file(ha.KEEPALIVED_CONFIG).encode() == \
            ha.keepalived_config(host.ip, [
                bed.hosts[other].ip for other in NAMES if other != name],
                vip, 24, 'eth0', ha.priority(NAMES.index(name)))
    # The first Master holds the VIP and the VIP answers from the runner.
    holders, answer, waited = wait_for_holder(bed, vip, {'m1'})
    print('VIP on m1 and answering: %.1fs after configure' % waited)
    # haproxy balances over every API server once its checks pass.
    seen = polling.wait_until(
        lambda: (lambda names: names if names == set(NAMES) else None)(
            {api_answer(vip, ha.FRONTEND_PORT) for _ in range(9)}),
        'every API server to answer through the VIP', timeout=DEADLINE)
    assert seen == set(NAMES)


def test_rerun_changes_nothing(bed, vip, masters, first_run):
    pids = {name: (master_pid(bed.hosts[name]),
                   bed.hosts[name].read_file(ha.PID_FILES['keepalived']))
            for name in NAMES}
    started = time.monotonic()
    reports = configure_all(bed.hosts.values(), masters, vip)
    print('re-run on 3 Masters: %.2fs' % (time.monotonic() - started))
    for name in NAMES:
        assert changed(reports[name]) == {}, name
        assert set(reports[name]) == {
            'packages haproxy keepalived', ha.HAPROXY_CONFIG,
            ha.KEEPALIVED_CONFIG, 'service haproxy', 'service keepalived'}
        assert (master_pid(bed.hosts[name]), bed.hosts[name].read_file(
            ha.PID_FILES['keepalived'])) == pids[name]
    assert vip_holders(bed, vip) == ['m1']


def test_vip_moves_when_keepalived_stops_and_comes_back(bed, vip, masters,
                                                        first_run):
    assert vip_holders(bed, vip) == ['m1']
    started = time.monotonic()
    stop(bed.hosts['m1'], 'keepalived')
    holders, answer, _ = wait_for_holder(bed, vip, {'m2', 'm3'})
    print('VIP on %s and answering %.1fs after `service keepalived stop` '
          'on m1' % (holders[0], time.monotonic() - started))
    # The priorities follow the Master order.
    assert holders == ['m2']
    assert answer in NAMES
    # The driver starts it again; the first Master takes the VIP back.
    outcomes = configure(bed.hosts['m1'], masters, vip)
    assert changed(outcomes) == {'service keepalived': 'started'}
    holders, answer, waited = wait_for_holder(bed, vip, {'m1'})
    print('VIP back on m1 (preemption): %.1fs' % waited)


def test_vip_moves_when_haproxy_stops(bed, vip, masters, first_run):
    """keepalived's check: a Master whose haproxy is gone gives up the VIP."""
    assert vip_holders(bed, vip) == ['m1']
    started = time.monotonic()
    stop(bed.hosts['m1'], 'haproxy')
    holders, answer, _ = wait_for_holder(bed, vip, {'m2', 'm3'})
    print('VIP on %s and answering %.1fs after `service haproxy stop` on '
          'm1' % (holders[0], time.monotonic() - started))
    assert answer in NAMES
    outcomes = configure(bed.hosts['m1'], masters, vip)
    assert changed(outcomes) == {'service haproxy': 'started'}
    wait_for_holder(bed, vip, {'m1'})


def test_refused_haproxy_config_is_not_installed(bed, vip, masters,
                                                 first_run, monkeypatch):
    host = bed.hosts['m2']
    before = host.read_file(ha.HAPROXY_CONFIG)
    pid = master_pid(host)
    monkeypatch.setattr(ha, 'haproxy_config', lambda masters: (
        ha.HEADER + b'global\n    no-such-keyword\n'))
    with pytest.raises(exceptions.StepError) as caught:
        configure(host, masters, vip)
    message = str(caught.value)
    assert message.startswith('haproxy configuration failed on %s: '
                              '`haproxy -c -f <new %s> (the new '
                              'configuration was not installed)` failed '
                              'with exit status 1' % (host.ip,
                                                      ha.HAPROXY_CONFIG))
    assert "unknown keyword 'no-such-keyword'" in message
    assert host.read_file(ha.HAPROXY_CONFIG) == before
    assert master_pid(host) == pid


def test_dropping_a_master_reloads_haproxy_on_the_others(bed, vip,
                                                         first_run):
    # A scale-in deletes the VM: its keepalived is gone with it.
    bed.remove_host('m3')
    remaining = [bed.hosts['m1'], bed.hosts['m2']]
    masters = [(host.name, host.ip) for host in remaining]
    before = {host.name: master_pid(host) for host in remaining}
    workers = {host.name: worker_pids(host, before[host.name])
               for host in remaining}
    started = time.monotonic()
    reports = configure_all(remaining, masters, vip)
    print('drop m3: configure of 2 Masters: %.1fs'
          % (time.monotonic() - started))
    for host in remaining:
        assert changed(reports[host.name]) == {
            ha.HAPROXY_CONFIG: '', ha.KEEPALIVED_CONFIG: '',
            'service haproxy': 'reloaded',
            'service keepalived': 'reloaded'}, host.name
        # A reload: the same master, new workers with the new backends.
        assert master_pid(host) == before[host.name]
        assert configured_servers(host) == ['m1', 'm2']
        polling.wait_until(lambda: runtime_servers(host) == ['m1', 'm2'],
                           'haproxy on %s to serve m1 and m2 only' % host.name)
        polling.wait_until(
            lambda: (lambda new: new and not new & workers[host.name])(
                worker_pids(host, before[host.name])),
            'the old haproxy workers of %s to be replaced' % host.name)
    wait_for_holder(bed, vip, {'m1'})
    answers = {api_answer(vip, ha.FRONTEND_PORT) for _ in range(6)}
    assert answers <= {'m1', 'm2'} and answers


def test_interrupted_change_is_completed_by_the_next_run(bed, vip,
                                                         monkeypatch):
    host = bed.hosts['m2']
    masters = [(name, bed.hosts[name].ip) for name in ('m1', 'm2')]
    render, commands = ha.haproxy_config, ha.action_commands
    monkeypatch.setattr(ha, 'haproxy_config',
                        lambda masters: render(masters) + b'# changed\n')
    # The file is written, then the reload fails.
    monkeypatch.setattr(ha, 'action_commands', lambda *args: [['false']])
    with pytest.raises(exceptions.StepError) as caught:
        configure(host, masters, vip)
    assert str(caught.value).startswith(
        'haproxy service failed on %s: `false` failed' % host.ip)
    assert host.read_file(ha.HAPROXY_CONFIG).endswith('# changed\n')
    pending = 'test -e %s' % ha.PENDING['haproxy']
    assert host.run(pending, check=False).returncode == 0
    before = master_pid(host)
    # The next run sees an unchanged file but completes the change.
    monkeypatch.setattr(ha, 'action_commands', commands)
    assert changed(configure(host, masters, vip)) == {
        'service haproxy': 'restarted'}
    assert host.run(pending, check=False).returncode == 1
    assert master_pid(host) != before
    assert changed(configure(host, masters, vip)) == {}
    # Back to the real configuration: an ordinary reload.
    monkeypatch.setattr(ha, 'haproxy_config', render)
    before = master_pid(host)
    assert changed(configure(host, masters, vip)) == {
        ha.HAPROXY_CONFIG: '', 'service haproxy': 'reloaded'}
    assert master_pid(host) == before
    polling.wait_until(lambda: runtime_servers(host) == ['m1', 'm2'],
                       'haproxy on m2 to serve m1 and m2')


def test_address_not_on_the_host_is_refused(bed, vip):
    host = bed.hosts['m1']
    masters = [('m1', '10.255.255.1'), ('m2', bed.hosts['m2'].ip)]
    with remote.RemoteCommandExecutor(
            host.ip, 'ubuntu', 'ubuntu',
            host_key_policy=paramiko.AutoAddPolicy()) as executor:
        with pytest.raises(exceptions.StepError) as caught:
            ha.configure(executor, '10.255.255.1', masters, vip,
                         param_model.Proxy(), config.options(),
                         step_report.Report())
    assert 'HA control plane configuration failed on %s: 10.255.255.1 is ' \
        'not an address of any interface of this host' % host.ip \
        in str(caught.value)
