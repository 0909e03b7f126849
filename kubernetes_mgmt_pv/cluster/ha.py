"""The HA control plane of clusters with more than one Master.

Every Master runs haproxy, listening on ``*:16443`` and balancing TCP over
the API servers of all Masters (``<master>:6443``), and keepalived, which
holds the cluster's VIP on one Master; the control-plane endpoint is
``<VIP>:16443`` (the operator guide, "HA control plane").

Like the storage steps, each Master is handled in three parts: one command
gathers every fact (the interface holding the node's address, the current
configuration files, whether each daemon runs, dpkg's statuses), pure
functions render the wanted configuration files and decide what to change
(``plan``), and ``configure`` applies only that. A re-run therefore
rewrites nothing and restarts nothing, and a change cut short after its
file was written is completed by the next run (``PENDING``).

Daemons are driven with ``service <name> start|stop|reload`` (systemd on
Ubuntu and Debian VMs, the init.d scripts of Debian's packages on hosts
without systemd), with three deliberate exceptions, each because the
init.d scripts cannot do the job:

* whether a daemon runs is read from its pid file (``/run/<name>.pid``:
  haproxy writes it with ``-p`` under both systemd and init.d, keepalived
  always) and ``/proc/<pid>/comm``, never from ``service <name>
  status``: Debian's
  keepalived script has no ``status`` action (and exits 0, "running",
  when keepalived.conf does not exist), and on a Kubernetes Master
  ``pidof`` also sees haproxy processes inside pods (ingress controllers);
* a restart is ``stop``, a wait until the daemon is gone, ``start``, a wait
  until it runs: the init.d script of keepalived restarts with
  ``stop; sleep 1; start`` and, when the old daemon is still shutting down
  (it sends its last VRRP advert first), its ``start`` fails and the
  script still exits 0, leaving no keepalived at all;
* without systemd, haproxy is reloaded by sending SIGUSR2 to its master
  process, which is exactly systemd's ``ExecReload`` (haproxy's config
  runs in master-worker mode): the init.d script's ``reload`` starts a new
  haproxy that replaces the old one (``-sf``), a new master with a new PID.
"""

import dataclasses
import ipaddress
import re

from kubernetes_mgmt_pv import admin_kubectl
from kubernetes_mgmt_pv.cluster import node_names
from kubernetes_mgmt_pv import exceptions
from kubernetes_mgmt_pv.remote import dpkg
from kubernetes_mgmt_pv.remote import facts
from kubernetes_mgmt_pv import step_report

HAPROXY_CONFIG = '/etc/haproxy/haproxy.cfg'
KEEPALIVED_CONFIG = '/etc/keepalived/keepalived.conf'
CONFIG_FILES = {'haproxy': HAPROXY_CONFIG, 'keepalived': KEEPALIVED_CONFIG}
PID_FILES = {'haproxy': '/run/haproxy.pid',
             'keepalived': '/run/keepalived.pid'}
# A daemon's marker exists from the moment its new configuration file is
# installed until the daemon has been started, reloaded or restarted with
# it: a change cut short in between (a lost connection, a failed reload)
# is completed by the next run, although the file then looks unchanged.
# /run is emptied by a reboot, which starts the daemons with their files.
PENDING_DIR = '/run/kubernetes-mgmt-pv'
PENDING = {name: '%s/%s.pending' % (PENDING_DIR, name)
           for name in ('haproxy', 'keepalived')}
# Configured and started in this order: keepalived's check needs haproxy.
SERVICES = ('haproxy', 'keepalived')
# What each daemon re-reads its configuration on, as their systemd units
# send it on reload.
RELOAD_SIGNALS = {'haproxy': 'USR2', 'keepalived': 'HUP'}
HA_PACKAGES = ('haproxy', 'keepalived')

FRONTEND_PORT = 16443
# haproxy answers here itself (monitor-uri), on the loopback only: the
# port keepalived's check connects to.
HEALTH_PORT = 16444
BACKEND = 'kube-apiserver'
VRRP_INSTANCE = 'kubernetes_mgmt_pv'
CHECK_SCRIPT = 'kubernetes_mgmt_pv_haproxy'
# The priority of the first Master; each following one gets one less.
FIRST_PRIORITY = 150
MAX_MASTERS = 100

# Seconds a daemon may take to start or to stop, and how often (seconds,
# as sleep(1) takes it) it is looked at meanwhile.
SERVICE_TIMEOUT = 30
POLL_INTERVAL = '0.1'

HEADER = (b'# Managed by kubernetes-mgmt-pv (Tacker management driver): '
          b'changes made here are overwritten.\n')

# haproxy server names: what a host name (or Heat resource name) may hold.
_INTERFACE = re.compile(r'[A-Za-z0-9][A-Za-z0-9_.:-]{0,14}')
_PID = re.compile(r'[1-9][0-9]{0,9}')


class HaSetupError(exceptions.MgmtDriverError):
    """haproxy and keepalived could not be brought to the wanted state."""


# -- configuration files ------------------------------------------------------

def _address(value, what):
    try:
        return ipaddress.IPv4Address(value)
    except ValueError:
        raise HaSetupError('%s %r is not an IPv4 address' % (what, value))


def _masters(masters, minimum=2):
    """``masters`` as a list of (name, IPv4Address), checked: at least
    ``minimum`` of them (haproxy may start with the first Master alone)."""
    checked = []
    for name, address in masters:
        if not node_names.is_valid(name):
            raise HaSetupError(
                'Master name %r cannot name an haproxy server: it is no '
                'valid Kubernetes Node name' % name)
        checked.append((name, _address(address, 'address of Master %s'
                                       % name)))
    names = [name for name, _ in checked]
    addresses = [address for _, address in checked]
    if len(set(names)) != len(names) or \
            len(set(addresses)) != len(addresses):
        raise HaSetupError('Master names and addresses must be distinct: %s'
                           % ', '.join('%s=%s' % m for m in checked))
    if not minimum <= len(checked) <= MAX_MASTERS:
        raise HaSetupError('an HA control plane needs %d to %d Masters, got '
                           '%d' % (minimum, MAX_MASTERS, len(checked)))
    return checked


# haproxy.cfg's global and default settings and the health frontend, the
# same on every Master (see ``haproxy_config``).
_HAPROXY_BASE = (
    'global',
    '    log /dev/log local0 notice',
    '    chroot /var/lib/haproxy',
    '    stats socket /run/haproxy/admin.sock mode 660 level admin',
    '    stats timeout 30s',
    '    user haproxy',
    '    group haproxy',
    '    master-worker',
    '',
    'defaults',
    '    log global',
    '    mode tcp',
    '    option dontlognull',
    '    timeout connect 5s',
    '    timeout client 1h',
    '    timeout server 1h',
    '    timeout check 5s',
    '',
    'frontend kubernetes-mgmt-pv-health',
    '    bind 127.0.0.1:%d' % HEALTH_PORT,
    '    mode http',
    '    no log',
    '    monitor-uri /healthz',
    '',
)


def _config_file(lines):
    """A configuration file of ours (bytes): the header, then ``lines``."""
    return HEADER + ''.join(line + '\n' for line in lines).encode('ascii')


def haproxy_config(masters):
    """haproxy.cfg (bytes) balancing TCP over the API server of every
    Master; ``masters`` is an ordered sequence of (node name, address).

    The Masters' API servers are checked with ``GET /healthz`` over TLS
    (answered to anonymous clients by kube-apiserver), without verifying
    their certificate, which does not exist before ``kubeadm init``: a
    check carries no credential, and the client traffic itself is passed
    through untouched, TLS end to end. ``leastconn`` spreads the
    long-lived watch connections of kubelets and controllers evenly.

    haproxy runs in master-worker mode, so a reload keeps the master
    process (and its PID) and replaces the workers without closing the
    listening socket. A frontend bound to 127.0.0.1 only answers
    ``/healthz`` itself, for keepalived's check. No statistics page; the
    runtime API is the local UNIX socket of Debian's default configuration
    (root and group haproxy only).
    """
    servers = ['    server %s %s:%d check' % (
        name, address, admin_kubectl.API_SERVER_PORT)
        for name, address in _masters(masters, minimum=1)]
    return _config_file(_HAPROXY_BASE + (
        'frontend %s' % BACKEND,
        '    bind *:%d' % FRONTEND_PORT,
        '    option tcplog',
        '    option clitcpka',
        '    default_backend %s' % BACKEND,
        '',
        'backend %s' % BACKEND,
        '    balance leastconn',
        '    option srvtcpka',
        '    option httpchk GET /healthz',
        '    http-check expect status 200',
        '    default-server check-ssl verify none inter 2s fall 2 rise 2',
    ) + tuple(servers))


def virtual_router_id(vip):
    """The VRRP router id (1..255) of the cluster holding ``vip``.

    The address modulo 255, plus one: since 256 = 1 (mod 255) that is the
    sum of its four bytes modulo 255, plus one, so the host addresses of
    any /24 (x.y.z.1 to x.y.z.254) all get different ids, and clusters
    whose VIPs share a network of that size never share an id. It is the
    same on every Master and across re-runs.
    """
    return int(_address(vip, 'VIP')) % 255 + 1


def priority(index):
    """The VRRP priority of the Master at ``index`` in the Master list."""
    if not 0 <= index < MAX_MASTERS:
        raise HaSetupError('Master index %d out of range' % index)
    return FIRST_PRIORITY - index


# keepalived.conf's check of haproxy, the same on every Master: a Master
# whose haproxy does not answer goes to FAULT and gives up the VIP. The
# check connects to haproxy's own loopback health frontend, so it proves
# haproxy accepts connections without opening one to an API server (a
# bare connect to :16443 would, every 2 seconds, and each API server would
# log a failed TLS handshake). It runs ``/bin/bash`` (present on every
# Debian and Ubuntu, in /bin also without merged /usr) as ``nobody``:
# ``enable_script_security`` accepts it because nobody can write to it,
# and the check needs no privilege.
_KEEPALIVED_CHECK = (
    'global_defs {',
    '    enable_script_security',
    '}',
    '',
    'vrrp_script %s {' % CHECK_SCRIPT,
    '    script "/bin/bash -c \'</dev/tcp/127.0.0.1/%d\'"' % HEALTH_PORT,
    '    interval 2',
    '    timeout 2',
    '    rise 2',
    '    fall 2',
    '    user nobody',
    '}',
    '',
)


def keepalived_config(own_address, peer_addresses, vip, prefixlen, interface,
                      priority):
    """keepalived.conf (bytes) of one Master.

    VRRP adverts go by unicast to the other Masters only (clouds seldom
    pass multicast), and adverts from any other address are ignored
    (``check_unicast_src``), so a removed Master still running keepalived
    cannot take part. The VIP gets the prefix length of the node's own
    address, on the same interface.

    Every Master starts as BACKUP and the election goes by priority,
    highest first in Master order, so the first Master holds the VIP
    whenever it is healthy. Preemption stays on (no ``nopreempt``): with
    ``nopreempt`` the holder would be whichever Master's keepalived
    happened to start first, or survived last, and could differ after
    every heal or re-run, while the contract (and an operator reading the
    Master list) expects the first Master. The price is one more move of
    the VIP when the first Master comes back after a failure: connections
    through the VIP are reset then, and Kubernetes clients reconnect.
    """
    own, peers, vip_address, network = _vrrp_addresses(
        own_address, peer_addresses, vip, prefixlen, interface, priority)
    return _config_file(_KEEPALIVED_CHECK + (
        'vrrp_instance %s {' % VRRP_INSTANCE,
        '    state BACKUP',
        '    interface %s' % interface,
        '    virtual_router_id %d' % virtual_router_id(vip_address),
        '    priority %d' % int(priority),
        '    advert_int 1',
        '    unicast_src_ip %s' % own,
        '    unicast_peer {',
    ) + tuple('        %s' % peer for peer in peers) + (
        '    }',
        '    check_unicast_src',
        '    virtual_ipaddress {',
        '        %s/%d dev %s' % (vip_address, network.prefixlen, interface),
        '    }',
        '    track_script {',
        '        %s' % CHECK_SCRIPT,
        '    }',
        '}',
    ))


def _vrrp_addresses(own_address, peer_addresses, vip, prefixlen, interface,
                    priority):
    """(own, peers, VIP, network) of keepalived_config's arguments, each
    checked: no value reaches keepalived.conf unchecked."""
    own = _address(own_address, 'own address')
    peers = [_address(peer, 'peer address') for peer in peer_addresses]
    vip_address = _address(vip, 'VIP')
    if not peers:
        raise HaSetupError('keepalived needs at least one peer Master')
    if not 1 <= int(priority) <= 254:
        raise HaSetupError('VRRP priority %r out of range 1..254' % priority)
    if not _INTERFACE.fullmatch(interface or ''):
        raise HaSetupError('invalid interface name %r' % interface)
    network = ipaddress.IPv4Interface('%s/%s' % (own, prefixlen)).network
    if vip_address not in network or vip_address in (own, *peers) or \
            vip_address in (network.network_address,
                            network.broadcast_address):
        raise HaSetupError(
            'VIP %s must be a free host address of %s, the network of %s '
            'on %s' % (vip_address, network, own, interface))
    return own, peers, vip_address, network


# -- facts --------------------------------------------------------------------

# The facts of one Master in one command (see ``facts``).
_GATHER = facts.script('running.sh', 'ha_facts.sh')
GATHERED = ('ip -o -4 addr show, cat %s %s, dpkg-query, pid files, '
            'pending changes' % (HAPROXY_CONFIG, KEEPALIVED_CONFIG))
_MARK = 'mkdir -p -- "$1" && : > "$2"'

# Waits until a daemon runs (or is gone).
_WAIT = facts.read_script('running.sh') + facts.read_script('ha_wait.sh')


@dataclasses.dataclass(frozen=True)
class Facts(object):
    """What one Master says, as ``parse_facts`` reads it."""
    addresses: tuple = ()      # (interface, IPv4Interface) of every address
    files: dict = dataclasses.field(default_factory=dict)  # path: bytes|None
    running: dict = dataclasses.field(default_factory=dict)  # name: pid|None
    packages: dict = dataclasses.field(default_factory=dict)  # name: status
    systemd: bool = False
    pending: frozenset = frozenset()  # daemons with an unfinished change


def parse_addresses(output):
    """(interface, IPv4Interface) of each line of ``ip -o -4 addr show``.

    A line reads ``2: eth0    inet 10.0.0.11/24 brd ... scope global
    eth0\\ ...``; an interface named ``name@link`` is ``name``.
    """
    addresses = []
    for line in output.split('\n'):
        fields = line.split()
        if len(fields) < 4 or fields[2] != 'inet':
            continue
        try:
            address = ipaddress.IPv4Interface(fields[3])
        except ValueError:
            continue
        addresses.append((fields[1].split('@')[0], address))
    return tuple(addresses)


def interface_of(addresses, node_address):
    """(interface, prefix length) that holds ``node_address``."""
    wanted = _address(node_address, 'node address')
    for interface, address in addresses:
        if address.ip == wanted:
            return interface, address.network.prefixlen
    raise HaSetupError(
        '%s is not an address of any interface of this host (ip -4 addr '
        'lists %s)' % (wanted, ', '.join(
            '%s on %s' % (address, interface)
            for interface, address in addresses) or 'none'))


def parse_running(result):
    """The PID a ``running`` fact printed, None when the daemon is not
    running."""
    if result is None or not result.ok:
        return None
    pid = result.stdout.strip()
    return pid if _PID.fullmatch(pid) else None


def _checked(executor, sections, name, description):
    result = sections.get(name)
    if result is not None and not result.ok:
        raise executor.failure(description, result)
    return result


def parse_facts(executor, sections):
    """``Facts`` from the gathered sections; a failed look is an error."""
    addresses = _checked(executor, sections, 'addresses',
                         'ip -o -4 addr show')
    files = {}
    for path in CONFIG_FILES.values():
        result = _checked(executor, sections, 'file %s' % path,
                          'cat -- %s' % path)
        files[path] = None if result is None else result.stdout_bytes
    return Facts(
        addresses=parse_addresses(addresses.stdout if addresses else ''),
        files=files,
        running={name: parse_running(sections.get('running %s' % name))
                 for name in SERVICES},
        packages=dpkg.gathered_statuses(executor, sections,
                                        HA_PACKAGES),
        systemd='systemd' in sections,
        pending=frozenset(name for name in SERVICES
                          if 'pending %s' % name in sections))


def gather_facts(executor):
    """Every fact of one Master, from one command."""
    arguments = [HAPROXY_CONFIG, KEEPALIVED_CONFIG, len(HA_PACKAGES)]
    arguments += list(HA_PACKAGES)
    for name in SERVICES:
        arguments += [name, PID_FILES[name], PENDING[name]]
    return parse_facts(executor, facts.gather(executor, _GATHER, arguments,
                                              GATHERED, sudo=True))


# -- decisions ----------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class ServicePlan(object):
    """What to do with one daemon: its new configuration file content
    (None: unchanged) and the action ('start', 'reload', 'restart' or
    None: leave it running)."""
    service: str
    path: str
    content: bytes = None
    action: str = None


@dataclasses.dataclass(frozen=True)
class Plan(object):
    """Packages to install first; once they are, the daemons' plans."""
    install: tuple = ()
    services: tuple = ()


def managed(content):
    """True when a configuration file was written by this driver."""
    return content is not None and content.startswith(HEADER)


def plan_service(service, current, wanted, running, pending=False):
    """The ``ServicePlan`` of one daemon.

    A daemon that does not run is started (after its file is written, if
    it differs). A running daemon whose file changes is reloaded when the
    running one is this driver's own configuration: haproxy in
    master-worker mode keeps its master and serves on; keepalived re-reads
    its file on SIGHUP keeping its VRRP state, so the Master holding the
    VIP keeps it (a restart would drop the VIP, and every API request
    through it, until the next election). The first time the driver takes
    a daemon over (the package's configuration: haproxy not in
    master-worker mode, where SIGUSR2 would kill it) it is restarted,
    when nothing is served through it yet. A running daemon with a
    ``pending`` change (see ``PENDING``) is restarted: whatever state the
    interrupted change left it in, a restart reads the file.
    """
    path = CONFIG_FILES[service]
    content = None if current == wanted else wanted
    if not running:
        action = 'start'
    elif pending:
        action = 'restart'
    elif content is None:
        action = None
    elif managed(current):
        action = 'reload'
    else:
        action = 'restart'
    return ServicePlan(service, path, content, action)


def plan(gathered, haproxy_cfg, keepalived_conf):
    """What to change on a Master, given its ``Facts`` and the wanted
    configuration files: packages first (the daemons are planned from the
    facts gathered after their installation), else each daemon's file
    and action, haproxy first."""
    missing = dpkg.missing_packages(HA_PACKAGES, gathered.packages)
    if missing:
        return Plan(install=tuple(missing))
    wanted = {'haproxy': haproxy_cfg, 'keepalived': keepalived_conf}
    return Plan(services=tuple(
        plan_service(name, gathered.files.get(CONFIG_FILES[name]),
                     wanted[name], gathered.running.get(name),
                     name in gathered.pending)
        for name in SERVICES))


def wait_command(service, state, timeout=SERVICE_TIMEOUT):
    """The command that waits until ``service`` is running|stopped."""
    tries = int(timeout / float(POLL_INTERVAL))
    return ['sh', '-c', _WAIT, 'sh', state, service, PID_FILES[service],
            str(tries), POLL_INTERVAL]


def describe(argv):
    """How a command of ``action_commands`` is named in logs and errors."""
    if argv[:3] == ['sh', '-c', _WAIT]:
        return 'wait until %s is %s (pid file %s, up to %gs)' % (
            argv[5], argv[4], argv[6],
            int(argv[7]) * float(argv[8]))
    return ' '.join(argv)


def action_commands(service, action, systemd, pid=None):
    """The commands that carry out ``action``, each start followed by a
    wait until the daemon runs (see the module's docstring for why).

    ``pid`` is the running daemon's PID (haproxy's master, for a reload
    without systemd).
    """
    if action == 'start':
        return [['service', service, 'start'],
                wait_command(service, 'running')]
    if action == 'restart':
        return [['service', service, 'stop'],
                wait_command(service, 'stopped'),
                ['service', service, 'start'],
                wait_command(service, 'running')]
    if action == 'reload':
        if systemd:
            return [['service', service, 'reload']]
        if not _PID.fullmatch(pid or ''):
            raise HaSetupError('no PID of the %s master to reload' % service)
        return [['kill', '-s', RELOAD_SIGNALS[service], pid]]
    raise ValueError('no %r action for %s' % (action, service))


# -- steps --------------------------------------------------------------------

def check_haproxy_config(executor, content):
    """Let haproxy check ``content`` before it replaces the current file."""
    result = executor.run(['haproxy', '-c', '-f', '/dev/stdin'], sudo=True,
                          stdin=content, check=False,
                          description='haproxy -c -f <new %s>'
                          % HAPROXY_CONFIG)
    if not result.ok:
        raise executor.failure(
            'haproxy -c -f <new %s> (the new configuration was not '
            'installed)' % HAPROXY_CONFIG, result)


def _apply(executor, service_plan, gathered, report):
    host = executor.host
    service = service_plan.service
    pending = service in gathered.pending
    with step_report.step(host, '%s configuration' % service):
        if service_plan.content is not None:
            if service == 'haproxy':
                check_haproxy_config(executor, service_plan.content)
            if not pending:
                executor.run(['sh', '-c', _MARK, 'sh', PENDING_DIR,
                              PENDING[service]], sudo=True,
                             description='mark a pending change of %s: %s'
                             % (service, PENDING[service]))
                pending = True
            executor.install_file(service_plan.content, service_plan.path)
        report.record(host, service_plan.path,
                      service_plan.content is not None)
    with step_report.step(host, '%s service' % service):
        if service_plan.action is not None:
            for argv in action_commands(service, service_plan.action,
                                        gathered.systemd,
                                        gathered.running.get(service)):
                executor.run(argv, sudo=True, timeout=SERVICE_TIMEOUT * 2,
                             description=describe(argv))
        if pending:
            executor.run(['rm', '-f', '--', PENDING[service]], sudo=True)
        report.record(host, 'service %s' % service,
                      service_plan.action is not None,
                      {'start': 'started', 'reload': 'reloaded',
                       'restart': 'restarted', None: 'running'}[
                          service_plan.action])


def wanted_configs(addresses, node_address, masters, vip, backends=None):
    """(haproxy.cfg, keepalived.conf) of the Master at ``node_address``,
    given the host's ``addresses`` (``parse_addresses``): its priority
    comes from its place in ``masters``, its VRRP interface and the VIP's
    prefix length from the address it holds. haproxy balances over
    ``backends`` (default: every Master): the Masters whose API server
    runs, so that none is sent requests before it has joined."""
    backends = _masters(backends if backends is not None else masters,
                        minimum=1)
    masters = _masters(masters)
    own = _address(node_address, 'node address')
    order = [address for _, address in masters]
    if own not in order:
        raise HaSetupError('%s is not one of the Masters (%s)' % (
            own, ', '.join(str(address) for address in order)))
    interface, prefixlen = interface_of(addresses, own)
    return haproxy_config(backends), keepalived_config(
        own, [address for address in order if address != own], vip,
        prefixlen, interface, priority(order.index(own)))


def configure(executor, node_address, masters, vip, proxy, conf, report,
              backends=None):
    """Bring haproxy and keepalived on one Master to the wanted state.

    ``masters`` is the ordered sequence of (node name, address) of every
    Master, this one (``node_address``) included; ``vip`` the cluster's
    VIP; ``conf`` the driver's options (package_install_timeout);
    ``backends``: the Masters haproxy sends requests to (default: all).
    Returns the ``Plan`` that was carried out.
    """
    host = executor.host
    with step_report.step(host, 'HA control plane facts'):
        gathered = gather_facts(executor)
    with step_report.step(host, 'HA control plane configuration'):
        haproxy_cfg, keepalived_conf = wanted_configs(
            gathered.addresses, node_address, masters, vip, backends)
        changes = plan(gathered, haproxy_cfg, keepalived_conf)
    with step_report.step(host, 'HA control plane packages'):
        installed = dpkg.ensure_installed(
            executor, HA_PACKAGES, proxy, conf.package_install_timeout,
            report, gathered.packages)
        if installed:  # the packages' own files and, with systemd, daemons
            gathered = gather_facts(executor)
            changes = plan(gathered, haproxy_cfg, keepalived_conf)
            if changes.install:
                raise HaSetupError('dpkg does not list %s as installed '
                                   'after apt-get' % ', '.join(
                                       changes.install))
    for service_plan in changes.services:
        _apply(executor, service_plan, gathered, report)
    return changes
