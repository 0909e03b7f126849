"""The HA control plane's decisions as tables: configuration files, facts,
the plan and its commands. No host; the only processes are local ``sh``
runs of the driver's fixed scripts."""

import ipaddress
import os
import subprocess

import pytest

from kubernetes_mgmt_pv.cluster import ha
from kubernetes_mgmt_pv import exceptions
from kubernetes_mgmt_pv.remote import facts
from kubernetes_mgmt_pv.remote import remote

INSTALLED = 'install ok installed'
MASTERS = [('master-0', '10.0.0.11'), ('master-1', '10.0.0.12'),
           ('master-2', '10.0.0.13')]
VIP = '10.0.0.100'
IP_ADDR = (
    '1: lo    inet 127.0.0.1/8 scope host lo\\       valid_lft forever '
    'preferred_lft forever\n'
    '2: eth0    inet 10.0.0.11/24 brd 10.0.0.255 scope global eth0\\       '
    'valid_lft forever preferred_lft forever\n'
    '2: eth0    inet 10.0.0.100/24 scope global secondary eth0\\       '
    'valid_lft forever preferred_lft forever\n'
    '3: ens4@if7    inet 192.168.5.20/26 brd 192.168.5.63 scope global '
    'ens4\\       valid_lft forever preferred_lft forever\n')


def result(status=0, stdout=b'', stderr=b''):
    return facts.CommandResult(status, stdout, stderr)


def lines(content):
    return content.decode('ascii').splitlines()


def keepalived(own='10.0.0.11', peers=('10.0.0.12', '10.0.0.13'), vip=VIP,
               prefixlen=24, interface='eth0', priority=150):
    return ha.keepalived_config(own, list(peers), vip, prefixlen, interface,
                                priority)


# -- haproxy.cfg --------------------------------------------------------------

def test_haproxy_balances_over_every_master_in_order():
    config = lines(ha.haproxy_config(MASTERS))
    assert config[0] == ha.HEADER.decode().rstrip('\n')
    assert [line.strip() for line in config
            if line.startswith('    server ')] == [
        'server master-0 10.0.0.11:6443 check',
        'server master-1 10.0.0.12:6443 check',
        'server master-2 10.0.0.13:6443 check']
    assert '    bind *:16443' in config
    assert '    mode tcp' in config
    # Health checks: GET /healthz over TLS on every server.
    assert '    option httpchk GET /healthz' in config
    assert '    http-check expect status 200' in config
    assert any(line.startswith('    default-server check-ssl verify none')
               for line in config)
    # A reload keeps the master process.
    assert '    master-worker' in config
    # keepalived's check target answers on the loopback only.
    assert '    bind 127.0.0.1:16444' in config
    assert '    monitor-uri /healthz' in config
    assert ha.haproxy_config(MASTERS) == ha.haproxy_config(list(MASTERS))


def test_haproxy_has_no_statistics_page_and_no_password():
    text = ha.haproxy_config(MASTERS).decode()
    for keyword in ('stats uri', 'stats auth', 'stats enable', 'userlist',
                    'password'):
        assert keyword not in text


@pytest.mark.parametrize('masters, reason', [
    ([], 'needs 1 to 100 Masters, got 0'),
    ([('a b', '10.0.0.11'), ('c', '10.0.0.12')], "Master name 'a b'"),
    ([('a\nbind', '10.0.0.11'), ('c', '10.0.0.12')], 'Master name'),
    ([('-a', '10.0.0.11'), ('c', '10.0.0.12')], "Master name '-a'"),
    ([('a', '10.0.0.11'), ('b', 'master-1')],
     "address of Master b 'master-1' is not an IPv4 address"),
    ([('a', '10.0.0.11'), ('b', '10.0.0.11')], 'must be distinct'),
    ([('a', '10.0.0.11'), ('a', '10.0.0.12')], 'must be distinct'),
])
def test_haproxy_refuses_bad_master_lists(masters, reason):
    # (haproxy may balance over the first Master alone, until the others
    # have joined; keepalived needs two, see wanted_configs)
    with pytest.raises(ha.HaSetupError) as caught:
        ha.haproxy_config(masters)
    assert reason in str(caught.value)
    assert isinstance(caught.value, exceptions.MgmtDriverError)


# -- keepalived.conf ----------------------------------------------------------

@pytest.mark.parametrize('vip, router_id', [
    ('10.0.0.1', 12),          # (10 + 0 + 0 + 1) % 255 + 1
    ('10.0.0.100', 111),
    ('192.168.1.254', 106),    # (192 + 168 + 1 + 254) % 255 + 1
    ('172.16.0.240', 174),
    ('255.255.255.254', 255),
])
def test_virtual_router_id(vip, router_id):
    assert ha.virtual_router_id(vip) == router_id


@pytest.mark.parametrize('network', ['10.0.0.0/24', '192.168.7.0/24',
                                     '172.31.255.0/24', '10.1.2.128/25'])
def test_virtual_router_ids_differ_within_a_24(network):
    ids = [ha.virtual_router_id(str(address))
           for address in ipaddress.ip_network(network).hosts()]
    assert len(set(ids)) == len(ids)
    assert all(1 <= i <= 255 for i in ids)


def test_keepalived_of_the_first_master():
    config = lines(keepalived())
    assert config[0] == ha.HEADER.decode().rstrip('\n')
    body = [line.strip() for line in config[1:]]
    for expected in (
            'enable_script_security', 'state BACKUP', 'interface eth0',
            'virtual_router_id 111', 'priority 150', 'advert_int 1',
            'unicast_src_ip 10.0.0.11', 'check_unicast_src',
            '10.0.0.100/24 dev eth0', 'user nobody',
            'script "/bin/bash -c \'</dev/tcp/127.0.0.1/16444\'"'):
        assert expected in body, expected
    peers = body[body.index('unicast_peer {') + 1:]
    assert peers[:3] == ['10.0.0.12', '10.0.0.13', '}']
    # Preemption stays on: the first Master takes the VIP back.
    assert 'nopreempt' not in body
    assert 'state MASTER' not in body
    # The instance tracks the check the config defines.
    track = body[body.index('track_script {') + 1]
    assert 'vrrp_script %s {' % track in body


def test_keepalived_is_the_same_on_every_run():
    assert keepalived() == keepalived()
    other = keepalived(own='10.0.0.12', peers=('10.0.0.11', '10.0.0.13'),
                       priority=149)
    assert [line for line in lines(other) if 'virtual_router_id' in line] \
        == ['    virtual_router_id 111']


@pytest.mark.parametrize('kwargs, reason', [
    (dict(peers=()), 'at least one peer'),
    (dict(vip='10.0.1.100'), 'VIP 10.0.1.100 must be a free host address '
     'of 10.0.0.0/24, the network of 10.0.0.11 on eth0'),
    (dict(vip='10.0.0.11'), 'must be a free host address'),
    (dict(vip='10.0.0.12'), 'must be a free host address'),
    (dict(vip='10.0.0.255'), 'must be a free host address'),
    (dict(vip='10.0.0.0'), 'must be a free host address'),
    (dict(vip='10.0.0.100', prefixlen=28), 'of 10.0.0.0/28'),
    (dict(vip='cluster-vip'), "VIP 'cluster-vip' is not an IPv4 address"),
    (dict(priority=0), 'out of range 1..254'),
    (dict(priority=255), 'out of range 1..254'),
    (dict(interface='eth0 dev lo'), 'invalid interface name'),
    (dict(interface='a-very-long-interface'), 'invalid interface name'),
    (dict(interface=''), 'invalid interface name'),
])
def test_keepalived_refuses(kwargs, reason):
    with pytest.raises(ha.HaSetupError) as caught:
        keepalived(**kwargs)
    assert reason in str(caught.value)


@pytest.mark.parametrize('index, priority', [(0, 150), (1, 149), (2, 148),
                                             (99, 51)])
def test_priorities_follow_the_master_order(index, priority):
    assert ha.priority(index) == priority


def test_wanted_configs_place_the_node_by_its_address():
    addresses = ha.parse_addresses(IP_ADDR.replace('10.0.0.11/24',
                                                   '10.0.0.12/24'))
    haproxy, conf = ha.wanted_configs(addresses, '10.0.0.12', MASTERS, VIP)
    assert haproxy == ha.haproxy_config(MASTERS)
    assert conf == keepalived(own='10.0.0.12',
                              peers=('10.0.0.11', '10.0.0.13'),
                              priority=149)


def test_haproxy_balances_over_the_given_backends_only():
    """Until a Master has joined, requests are not sent to it."""
    haproxy, conf = ha.wanted_configs(ha.parse_addresses(IP_ADDR),
                                      '10.0.0.11', MASTERS, VIP,
                                      backends=MASTERS[:1])
    assert haproxy == ha.haproxy_config(MASTERS[:1])
    assert conf == ha.wanted_configs(ha.parse_addresses(IP_ADDR),
                                     '10.0.0.11', MASTERS, VIP)[1]


@pytest.mark.parametrize('node, addresses, reason', [
    ('10.0.0.14', IP_ADDR, '10.0.0.14 is not one of the Masters '
     '(10.0.0.11, 10.0.0.12, 10.0.0.13)'),
    ('10.0.0.12', IP_ADDR, '10.0.0.12 is not an address of any interface '
     'of this host (ip -4 addr lists 127.0.0.1/8 on lo, 10.0.0.11/24 on '
     'eth0, 10.0.0.100/24 on eth0, 192.168.5.20/26 on ens4)'),
    ('10.0.0.11', '', 'ip -4 addr lists none'),
])
def test_wanted_configs_refuse(node, addresses, reason):
    with pytest.raises(ha.HaSetupError) as caught:
        ha.wanted_configs(ha.parse_addresses(addresses), node, MASTERS, VIP)
    assert reason in str(caught.value)


# -- facts --------------------------------------------------------------------

@pytest.mark.parametrize('node, found', [
    ('10.0.0.11', ('eth0', 24)),
    ('10.0.0.100', ('eth0', 24)),        # the VIP itself, a secondary
    ('192.168.5.20', ('ens4', 26)),      # "name@link" is "name"
    ('127.0.0.1', ('lo', 8)),
])
def test_interface_holding_an_address(node, found):
    assert ha.interface_of(ha.parse_addresses(IP_ADDR), node) == found


@pytest.mark.parametrize('fact, pid', [
    (None, None),                         # not gathered
    (result(1), None),                    # no pid file, or a stale one
    (result(0, b'4242\n'), '4242'),
    (result(0, b'\n'), None),
    (result(0, b'0\n'), None),
    (result(0, b'12 13\n'), None),
])
def test_running_daemon(fact, pid):
    assert ha.parse_running(fact) == pid


# parse_facts only needs the executor to build its errors.
EXECUTOR = remote.RemoteCommandExecutor('10.0.0.11', 'ubuntu', 'password')


def gathered(**extra):
    answers = {'addresses': (0, IP_ADDR.encode()),
               'package_haproxy': (0, INSTALLED.encode()),
               'package_keepalived': (0, INSTALLED.encode()),
               'running_haproxy': (0, b'77\n'),
               'running_keepalived': (1, b'')}
    answers.update(extra)
    output = b''
    for name, (status, stdout) in answers.items():
        for prefix in ('package', 'running', 'file', 'pending'):
            name = name.replace(prefix + '_', prefix + ' ', 1)
        output += b'\nB %s\n%s\nB status %d\n' % (name.encode(), stdout,
                                                  status)
    return facts.parse_sections(output, 'B')


def test_facts_from_one_gathering():
    found = ha.parse_facts(EXECUTOR, gathered(**{
        'file_' + ha.HAPROXY_CONFIG: (0, b'global\n'),
        'pending_keepalived': (0, b''), 'systemd': (0, b'')}))
    assert found.addresses[1] == ('eth0', ipaddress.IPv4Interface(
        '10.0.0.11/24'))
    assert found.files == {ha.HAPROXY_CONFIG: b'global\n',
                           ha.KEEPALIVED_CONFIG: None}
    assert found.running == {'haproxy': '77', 'keepalived': None}
    assert found.packages == {'haproxy': INSTALLED, 'keepalived': INSTALLED}
    assert found.systemd
    assert found.pending == {'keepalived'}
    plain = ha.parse_facts(EXECUTOR, gathered())
    assert not plain.systemd and plain.pending == frozenset()


@pytest.mark.parametrize('extra, message', [
    ({'addresses': (255, b'')}, '`ip -o -4 addr show` failed'),
    ({'file_' + ha.KEEPALIVED_CONFIG: (1, b'')},
     '`cat -- /etc/keepalived/keepalived.conf` failed'),
    ({'package_keepalived': (2, b'')}, '`dpkg-query -W keepalived` failed'),
])
def test_failed_facts_are_errors(extra, message):
    with pytest.raises(exceptions.RemoteCommandError) as caught:
        ha.parse_facts(EXECUTOR, gathered(**extra))
    assert message in str(caught.value)


# -- the plan -----------------------------------------------------------------

OURS = ha.haproxy_config(MASTERS)
NEW = ha.haproxy_config(MASTERS[:2])
PACKAGE_DEFAULT = b'global\n\tlog /dev/log local0\n\tdaemon\n'
KEEPALIVED_OURS = ha.HEADER + b'vrrp_instance a {}\n'
KEEPALIVED_NEW = ha.HEADER + b'vrrp_instance b {}\n'


@pytest.mark.parametrize(
    'service, current, wanted, running, content, action, pending', [
        # A change cut short after its file was written (the file now looks
        # unchanged): restarted, or started if the daemon is gone.
        ('haproxy', OURS, OURS, '77', None, 'restart', True),
        ('keepalived', b'k', b'k', '78', None, 'restart', True),
        ('haproxy', OURS, OURS, None, None, 'start', True),
        # A pending change that changes again: restarted, whatever the file.
        ('haproxy', OURS, NEW, '77', NEW, 'restart', True),
        ('keepalived', b'k', b'k2', None, b'k2', 'start', True),
        # Not running: start, after writing the file if it differs.
        ('haproxy', None, OURS, None, OURS, 'start', False),
        ('haproxy', PACKAGE_DEFAULT, OURS, None, OURS, 'start', False),
        ('haproxy', OURS, OURS, None, None, 'start', False),
        ('keepalived', None, b'k', None, b'k', 'start', False),
        ('keepalived', b'k', b'k', None, None, 'start', False),
        # Running and unchanged: nothing.
        ('haproxy', OURS, OURS, '77', None, None, False),
        ('keepalived', b'k', b'k', '78', None, None, False),
        # Running, changed: haproxy reloads its own master-worker config...
        ('haproxy', OURS, NEW, '77', NEW, 'reload', False),
        # ... but restarts when it takes over another one (not master-worker:
        # SIGUSR2 would kill it).
        ('haproxy', PACKAGE_DEFAULT, OURS, '77', OURS, 'restart', False),
        ('haproxy', None, OURS, '77', OURS, 'restart', False),
        # keepalived reloads its own configuration (the VIP stays where it
        # is) and restarts when it takes over another one.
        ('keepalived', KEEPALIVED_OURS, KEEPALIVED_NEW, '78', KEEPALIVED_NEW,
         'reload', False),
        ('keepalived', b'k', b'k2', '78', b'k2', 'restart', False),
        ('keepalived', None, b'k', '78', b'k', 'restart', False),
    ])
def test_plan_of_one_daemon(service, current, wanted, running, content,
                            action, pending):
    assert ha.plan_service(service, current, wanted, running, pending) == \
        ha.ServicePlan(service, ha.CONFIG_FILES[service], content, action)


def master_facts(haproxy=None, keepalived=None, running=(None, None),
                 statuses=(INSTALLED, INSTALLED), systemd=False, pending=()):
    return ha.Facts(
        addresses=ha.parse_addresses(IP_ADDR),
        files={ha.HAPROXY_CONFIG: haproxy, ha.KEEPALIVED_CONFIG: keepalived},
        running=dict(zip(ha.SERVICES, running)),
        packages=dict(zip(ha.HA_PACKAGES, statuses)), systemd=systemd,
        pending=frozenset(pending))


@pytest.mark.parametrize('gathered_facts, install, services', [
    # Packages first; the daemons are planned after their installation.
    (master_facts(statuses=('unknown ok not-installed', INSTALLED)),
     ('haproxy',), ()),
    (master_facts(statuses=('deinstall ok config-files',
                            'unknown ok not-installed')),
     ('haproxy', 'keepalived'), ()),
    # A fresh Master: both files written, both daemons started, in order.
    (master_facts(haproxy=PACKAGE_DEFAULT), (), (
        ha.ServicePlan('haproxy', ha.HAPROXY_CONFIG, OURS, 'start'),
        ha.ServicePlan('keepalived', ha.KEEPALIVED_CONFIG, b'k',
                       'start'))),
    # A re-run: nothing.
    (master_facts(OURS, b'k', ('77', '78')), (), (
        ha.ServicePlan('haproxy', ha.HAPROXY_CONFIG),
        ha.ServicePlan('keepalived', ha.KEEPALIVED_CONFIG))),
    # A Master list change.
    (master_facts(NEW, b'old', ('77', '78')), (), (
        ha.ServicePlan('haproxy', ha.HAPROXY_CONFIG, OURS, 'reload'),
        ha.ServicePlan('keepalived', ha.KEEPALIVED_CONFIG, b'k',
                       'restart'))),
    # An interrupted reload of haproxy, completed by a restart.
    (master_facts(OURS, b'k', ('77', '78'), pending=['haproxy']), (), (
        ha.ServicePlan('haproxy', ha.HAPROXY_CONFIG, None, 'restart'),
        ha.ServicePlan('keepalived', ha.KEEPALIVED_CONFIG))),
    # keepalived stopped by someone: only started again.
    (master_facts(OURS, b'k', ('77', None)), (), (
        ha.ServicePlan('haproxy', ha.HAPROXY_CONFIG),
        ha.ServicePlan('keepalived', ha.KEEPALIVED_CONFIG, None,
                       'start'))),
])
def test_plan(gathered_facts, install, services):
    assert ha.plan(gathered_facts, OURS, b'k') == ha.Plan(install, services)


WAIT_RUNNING = ha.wait_command('keepalived', 'running')


@pytest.mark.parametrize('service, action, systemd, pid, commands', [
    ('haproxy', 'start', False, None,
     [['service', 'haproxy', 'start'], ha.wait_command('haproxy',
                                                       'running')]),
    ('keepalived', 'start', True, None,
     [['service', 'keepalived', 'start'], WAIT_RUNNING]),
    # A restart waits for the old daemon to be gone before starting.
    ('keepalived', 'restart', False, '78',
     [['service', 'keepalived', 'stop'],
      ha.wait_command('keepalived', 'stopped'),
      ['service', 'keepalived', 'start'], WAIT_RUNNING]),
    ('haproxy', 'restart', True, '77',
     [['service', 'haproxy', 'stop'], ha.wait_command('haproxy', 'stopped'),
      ['service', 'haproxy', 'start'], ha.wait_command('haproxy',
                                                       'running')]),
    # Reload: systemd's unit sends SIGUSR2 itself; without systemd, the
    # driver does (init.d's reload would replace the master).
    ('haproxy', 'reload', True, '77', [['service', 'haproxy', 'reload']]),
    ('haproxy', 'reload', False, '77', [['kill', '-s', 'USR2', '77']]),
    ('keepalived', 'reload', True, '78',
     [['service', 'keepalived', 'reload']]),
    ('keepalived', 'reload', False, '78', [['kill', '-s', 'HUP', '78']]),
])
def test_action_commands(service, action, systemd, pid, commands):
    assert ha.action_commands(service, action, systemd, pid) == commands


@pytest.mark.parametrize('service, action, pid, error', [
    ('haproxy', 'reload', None, ha.HaSetupError),
    ('haproxy', 'reload', '-1', ha.HaSetupError),
    ('keepalived', 'reload', None, ha.HaSetupError),
    ('haproxy', 'stop', '77', ValueError),
])
def test_impossible_actions(service, action, pid, error):
    with pytest.raises(error):
        ha.action_commands(service, action, False, pid)


def test_commands_are_described_for_operators():
    assert ha.describe(ha.wait_command('keepalived', 'stopped')) == \
        'wait until keepalived is stopped (pid file /run/keepalived.pid, ' \
        'up to 30s)'
    assert ha.describe(['service', 'haproxy', 'start']) == \
        'service haproxy start'


# -- the fixed scripts, run locally -------------------------------------------

@pytest.fixture
def sleeper(tmp_path):
    """A live process named "sleep" and a pid file naming it."""
    process = subprocess.Popen(['sleep', '60'])
    pidfile = tmp_path / 'sleep.pid'
    pidfile.write_text('%d\n' % process.pid)
    yield process, str(pidfile)
    process.kill()
    process.wait()


def run_wait(state, name, pidfile, tries='0'):
    argv = ha.wait_command('haproxy', state)
    argv[5:9] = [name, pidfile, tries, '0.01']
    return subprocess.run(argv, capture_output=True, text=True)


def test_wait_sees_a_running_daemon(sleeper):
    process, pidfile = sleeper
    assert run_wait('running', 'sleep', pidfile).returncode == 0
    waited = run_wait('stopped', 'sleep', pidfile)
    assert waited.returncode == 1
    assert waited.stderr == 'sleep is still running (pid file %s)\n' % pidfile


@pytest.mark.parametrize('content', ['', 'garbage\n', '999999999\n',
                                     None])
def test_wait_sees_no_daemon(tmp_path, content):
    pidfile = tmp_path / 'x.pid'
    if content is not None:
        pidfile.write_text(content)
    assert run_wait('stopped', 'sleep', str(pidfile)).returncode == 0
    assert run_wait('running', 'sleep', str(pidfile)).returncode == 1


def test_wait_for_a_process_of_another_name(sleeper):
    process, pidfile = sleeper
    # A pid file whose PID now belongs to another program: not running.
    assert run_wait('stopped', 'haproxy', pidfile).returncode == 0


def test_wait_until_a_daemon_exits(sleeper):
    process, pidfile = sleeper
    waiting = subprocess.Popen(
        ha.wait_command('haproxy', 'stopped')[:5] + ['sleep', pidfile,
                                                     '500', '0.01'])
    process.kill()
    process.wait()
    assert waiting.wait(timeout=10) == 0


def test_gathering_script_reads_every_fact(tmp_path, sleeper):
    """The gathering script on this machine, with stand-in paths."""
    process, pidfile = sleeper
    config = tmp_path / 'haproxy.cfg'
    config.write_bytes(b'global\n\xe9 no final newline')
    argv = ['sh', '-c', ha._GATHER, 'sh', 'B', str(config),
            str(tmp_path / 'missing.conf'), '1', 'no-such-package-xyz',
            'sleep', pidfile, str(tmp_path / 'sleep.pending'),
            'keepalived', str(tmp_path / 'none.pid'), str(pidfile)]
    output = subprocess.run(argv, capture_output=True, env=dict(
        os.environ, LC_ALL='C')).stdout
    found = facts.parse_sections(output, 'B')
    assert found['file %s' % config].stdout_bytes == \
        b'global\n\xe9 no final newline'
    assert 'file %s' % (tmp_path / 'missing.conf') not in found
    assert ha.parse_running(found['running sleep']) == str(process.pid)
    assert ha.parse_running(found['running keepalived']) is None
    assert 'pending sleep' not in found and 'pending keepalived' in found
    assert 'addresses' in found and 'package no-such-package-xyz' in found
