"""The certificate renewal step every cluster hook ends its Master work
with: read ``kubeadm certs check-expiration`` on each Master, and on those
whose certificates expire within ``cert_renewal_days`` renew them, one
Master at a time, so the API stays served by the others (through the VIP
with HA).

The control plane reads its certificates only when it starts: a renewal
is finished when the restart after it is. A marker in the host's /run,
written before ``kubeadm certs renew all`` and removed once the restarted
API server answers and the login user's kubeconfig holds the new
certificate, tells the next hook that a renewal stopped half-way
(lost connection, failed restart); that hook restarts the control plane
of that Master even though its certificates' dates are fresh. A reboot
restarts the control plane too, and clears /run with it.
"""

import datetime
import functools
import shlex
import time

from oslo_log import log as logging

from kubernetes_mgmt_pv.cluster import certificates
from kubernetes_mgmt_pv import exceptions
from kubernetes_mgmt_pv.remote import host_lock
from kubernetes_mgmt_pv import step_report

LOG = logging.getLogger(__name__)

# Removing a static pod's sandbox makes the kubelet create it again, with
# the renewed certificates (kubeadm's "restart the control plane").
RESTART_SCRIPT = (
    'ids=$(crictl pods --namespace kube-system --name '
    '"^(kube-apiserver|kube-controller-manager|kube-scheduler|etcd)-" -q)'
    ' && { [ -z "$ids" ] || crictl rmp -f $ids; }')
# Exists from before a renewal until its control plane restart is over.
UNFINISHED_MARKER = host_lock.RUN_DIR + '/certificate-renewal-unfinished'
UNFINISHED_LINE = 'kubernetes-mgmt-pv: certificate renewal unfinished'
# check-expiration, after a line that says whether the marker is there.
READ_SCRIPT = (
    'if [ -e %s ]; then echo %s; fi; exec "$@"' % (
        UNFINISHED_MARKER, shlex.quote(UNFINISHED_LINE)))
MARK_SCRIPT = 'mkdir -p -m 0700 %s && touch %s' % (
    host_lock.RUN_DIR, UNFINISHED_MARKER)
# The login user's copy of admin.conf that the install script made, if
# there is one, follows the renewed admin.conf.
USER_KUBECONFIG_SCRIPT = (
    'home=$(getent passwd "${SUDO_USER:-root}" | cut -d: -f6) && '
    'if [ -f "$home/.kube/config" ]; then install -m 600 -o '
    '"${SUDO_USER:-root}" /etc/kubernetes/admin.conf "$home/.kube/config";'
    ' fi')


def renew_expiring(flow, sessions, masters, report, now=None):
    """Renew the certificates of the ``masters`` (topology.Node) that
    need it, and finish the renewals an earlier hook left unfinished;
    returns the addresses renewed. ``flow``: the hook's ClusterWorkflow
    (sessions, kubectl, options)."""
    states = {}

    def read(node):
        states[node.address] = read_state(flow.session(sessions, node))

    flow.on_hosts('certificate expiry check', {
        node.address: functools.partial(read, node) for node in masters})
    plan = certificates.renewal_plan(
        {node.address: states[node.address][0] for node in masters},
        now or datetime.datetime.now(datetime.timezone.utc),
        flow.conf.cert_renewal_days,
        unfinished={address for address, (_, unfinished) in states.items()
                    if unfinished})
    for address in plan.unknown:
        LOG.warning('Master %s: kubeadm certs check-expiration listed no '
                    'certificate; its certificates are not checked',
                    address)
    for node in masters:
        executor = flow.session(sessions, node)
        if node.address in plan.renew:
            name, expires = plan.reasons[node.address]
            LOG.info('Master %s: certificate %s expires %s, within '
                     'cert_renewal_days (%d): renewing', node.address, name,
                     expires.isoformat(), flow.conf.cert_renewal_days)
            _renew(flow, executor, report)
        elif node.address in plan.restart:
            LOG.warning('Master %s: an earlier renewal of its certificates '
                        'did not finish: restarting its control plane on '
                        'the renewed certificates', node.address)
            _restart(flow, executor)
            report.record(executor.host, 'control plane restart', True,
                          'finishing an earlier certificate renewal')
    return plan.renew


def read_state(executor):
    """(certificates.Expiry or None, whether a renewal is unfinished) of
    a Master, in one command."""
    result = executor.run(['sh', '-c', READ_SCRIPT, 'sh'] +
                          certificates.CHECK_ARGV, sudo=True, check=False,
                          description='kubeadm certs check-expiration')
    unfinished = result.stdout.startswith(UNFINISHED_LINE + '\n')
    expiry = certificates.parse_expiration(result.stdout) if result.ok \
        else None
    return expiry, unfinished


def _renew(flow, executor, report):
    """Mark the renewal unfinished, renew, then finish it (_restart) and
    log the new dates."""
    host = executor.host
    with step_report.step(host, 'certificate renewal'):
        host_lock.run_exclusive(
            executor, ['sh', '-c', MARK_SCRIPT + ' && exec "$@"', 'sh'] +
            certificates.RENEW_ARGV, ' '.join(certificates.RENEW_ARGV),
            flow.conf.command_timeout)
    _restart(flow, executor)
    expiry = read_state(executor)[0]
    detail = certificates.describe(expiry) if expiry else 'not readable'
    LOG.info('Master %s: certificates renewed, now expiring: %s', host,
             detail)
    report.record(host, 'certificates renewed', True, detail)


def _restart(flow, executor):
    """Restart the control plane, wait for its API server, update the
    login user's kubeconfig; then the renewal is finished."""
    host = executor.host
    with step_report.step(host, 'control plane restart'):
        # Under the step lock: never while an earlier renewal or upgrade,
        # cut off from its hook, still writes the certificates.
        host_lock.run_exclusive(executor, ['sh', '-c', RESTART_SCRIPT],
                                'control plane restart',
                                flow.conf.command_timeout)
        wait_for_api(flow.kubectl(executor), flow.conf.node_ready_timeout)
    with step_report.step(host, 'kubeconfig update'):
        executor.run(['sh', '-c', USER_KUBECONFIG_SCRIPT + ' && rm -f ' +
                      UNFINISHED_MARKER], sudo=True)


def wait_for_api(kubectl, timeout, clock=time.monotonic, sleep=time.sleep):
    """Return as soon as the Master's own API server answers /readyz
    again (its restart is over); fail after ``timeout`` seconds."""
    deadline = clock() + timeout
    delay = 0.2
    while True:
        result = kubectl.run(['get', '--raw', '/readyz'], check=False,
                             timeout=30)
        if result.ok:
            return
        if clock() >= deadline:
            raise exceptions.ClusterInstallError(
                'the API server did not answer within %ds after the control '
                'plane restart: %s' % (timeout, result.stderr.strip()[-300:]))
        sleep(delay)
        delay = min(delay * 2, 2.0)
