"""The certificate renewal step every cluster hook ends its Master work
with: read ``kubeadm certs check-expiration`` on each Master, and on those
whose certificates expire within ``cert_renewal_days`` renew them, one
Master at a time, so the API stays served by the others (through the VIP
with HA).
"""

import datetime
import functools
import time

from oslo_log import log as logging

from kubernetes_mgmt_pv.cluster import certificates
from kubernetes_mgmt_pv import exceptions
from kubernetes_mgmt_pv import step_report

LOG = logging.getLogger(__name__)

# Removing a static pod's sandbox makes the kubelet create it again, with
# the renewed certificates (kubeadm's "restart the control plane").
RESTART_SCRIPT = (
    'ids=$(crictl pods --namespace kube-system --name '
    '"^(kube-apiserver|kube-controller-manager|kube-scheduler|etcd)-" -q)'
    ' && { [ -z "$ids" ] || crictl rmp -f $ids; }')
# The login user's copy of admin.conf that the install script made, if
# there is one, follows the renewed admin.conf.
USER_KUBECONFIG_SCRIPT = (
    'home=$(getent passwd "${SUDO_USER:-root}" | cut -d: -f6) && '
    'if [ -f "$home/.kube/config" ]; then install -m 600 -o '
    '"${SUDO_USER:-root}" /etc/kubernetes/admin.conf "$home/.kube/config";'
    ' fi')


def renew_expiring(flow, sessions, masters, report, now=None):
    """Renew the certificates of the ``masters`` (topology.Node) that
    need it; returns the addresses renewed. ``flow``: the hook's
    ClusterWorkflow (sessions, kubectl, options)."""
    expiries = {}

    def read(node):
        expiries[node.address] = read_expiry(flow.session(sessions, node))

    flow.on_hosts('certificate expiry check', {
        node.address: functools.partial(read, node) for node in masters})
    plan = certificates.renewal_plan(
        {node.address: expiries[node.address] for node in masters},
        now or datetime.datetime.now(datetime.timezone.utc),
        flow.conf.cert_renewal_days)
    for address in plan.unknown:
        LOG.warning('Master %s: kubeadm certs check-expiration listed no '
                    'certificate; its certificates are not checked',
                    address)
    for node in masters:
        if node.address in plan.renew:
            name, expires = plan.reasons[node.address]
            LOG.info('Master %s: certificate %s expires %s, within '
                     'cert_renewal_days (%d): renewing', node.address, name,
                     expires.isoformat(), flow.conf.cert_renewal_days)
            _renew(flow, flow.session(sessions, node), report)
    return plan.renew


def read_expiry(executor):
    """The Master's certificates.Expiry, or None if kubeadm cannot say."""
    result = executor.run(certificates.CHECK_ARGV, sudo=True, check=False,
                          description='kubeadm certs check-expiration')
    return certificates.parse_expiration(result.stdout) if result.ok \
        else None


def _renew(flow, executor, report):
    """Renew, restart the control plane, wait for its API server, then
    log the new dates."""
    host = executor.host
    with step_report.step(host, 'certificate renewal'):
        executor.run(certificates.RENEW_ARGV, sudo=True)
    with step_report.step(host, 'control plane restart'):
        executor.run(['sh', '-c', RESTART_SCRIPT], sudo=True)
        wait_for_api(flow.kubectl(executor), flow.conf.node_ready_timeout)
    with step_report.step(host, 'kubeconfig update'):
        executor.run(['sh', '-c', USER_KUBECONFIG_SCRIPT], sudo=True)
    expiry = read_expiry(executor)
    detail = certificates.describe(expiry) if expiry else 'not readable'
    LOG.info('Master %s: certificates renewed, now expiring: %s', host,
             detail)
    report.record(host, 'certificates renewed', True, detail)


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
