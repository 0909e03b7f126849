"""paramiko clients set up with the host key policy of the driver's
configuration (``host_key_policy``): known_hosts, warn, reject, or a
policy the caller gives (a Nova console check)."""

from oslo_log import log as logging
import paramiko

from kubernetes_mgmt_pv import exceptions
from kubernetes_mgmt_pv.remote import host_keys

LOG = logging.getLogger(__name__)


class _RecordNewHostKey(paramiko.MissingHostKeyPolicy):
    """Trust on first use: record an unknown host's key in known_hosts_file
    (paramiko refuses a changed key before asking this policy)."""

    def __init__(self, path):
        self._path = path

    def missing_host_key(self, client, hostname, key):
        host_keys.record_known_host(self._path, hostname, key)
        LOG.info('Recorded the SSH host key of %s in %s', hostname, self._path)


class _AcceptAndWarn(paramiko.MissingHostKeyPolicy):
    """Accept an unknown host key, logging its fingerprint to Tacker's log
    (paramiko's WarningPolicy uses ``warnings``, which the log misses)."""

    def missing_host_key(self, client, hostname, key):
        LOG.warning('Accepting unverified SSH host key of %s: %s %s '
                    '(host_key_policy = warn)', hostname, key.get_name(),
                    key.fingerprint)


def new_client(conf, host, host_key_policy=None):
    """An SSHClient for ``host``: ``host_key_policy`` (a paramiko policy)
    when given, else the configured one."""
    client = paramiko.SSHClient()
    if host_key_policy is not None:
        client.set_missing_host_key_policy(host_key_policy)
        return client
    policy = conf.host_key_policy
    if policy == 'console':
        raise exceptions.RemoteConnectError(
            '%s: host_key_policy is "console" but no Nova server is '
            'known for this address, so its host key cannot be checked'
            % host)
    if policy == 'warn':
        client.set_missing_host_key_policy(_AcceptAndWarn())
        return client
    client.load_system_host_keys()
    try:
        client.load_host_keys(conf.known_hosts_file)
    except FileNotFoundError:
        pass
    if policy == 'known_hosts':
        client.set_missing_host_key_policy(
            _RecordNewHostKey(conf.known_hosts_file))
    else:
        client.set_missing_host_key_policy(paramiko.RejectPolicy())
    return client
