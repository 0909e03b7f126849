"""Remote command execution on the VMs over SSH (paramiko).

One ``RemoteCommandExecutor`` holds one SSH connection to one host; every
command and every SFTP transfer of a hook reuses it. Commands are given as
argument lists and quoted with ``shlex`` so no value ever reaches a shell
unquoted. Failure is decided by the exit status, never by stderr noise.
Passwords and proxy credentials are scrubbed from every log line and error.
"""

import io
import re
import select
import shlex
import socket
import threading
import time

from oslo_log import log as logging
import paramiko

from kubernetes_mgmt_pv import config
from kubernetes_mgmt_pv import exceptions

LOG = logging.getLogger(__name__)

_URL_CREDENTIALS = re.compile(r'(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)[^/@\s]+@')
_KNOWN_HOSTS_LOCK = threading.Lock()


def redact(text, secrets=()):
    """Hide secrets and URL credentials (``scheme://user:pass@``) in text."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, '***')
    return _URL_CREDENTIALS.sub(r'\g<scheme>***@', text)


class CommandResult(object):
    """Exit status and decoded output of one remote command."""

    def __init__(self, exit_status, stdout, stderr):
        self.exit_status = exit_status
        self.stdout = stdout
        self.stderr = stderr

    @property
    def ok(self):
        return self.exit_status == 0


class _RecordNewHostKey(paramiko.MissingHostKeyPolicy):
    """Trust on first use: append an unknown host's key to known_hosts_file.

    The file is re-read under a process-wide lock before writing, so hosts
    connected concurrently do not overwrite each other's entries.
    """

    def __init__(self, path):
        self._path = path

    def missing_host_key(self, client, hostname, key):
        with _KNOWN_HOSTS_LOCK:
            keys = paramiko.HostKeys()
            try:
                keys.load(self._path)
            except FileNotFoundError:
                pass
            keys.add(hostname, key.get_name(), key)
            keys.save(self._path)
        LOG.info('Recorded the SSH host key of %s in %s', hostname, self._path)


class _AcceptAndWarn(paramiko.MissingHostKeyPolicy):
    """Accept an unknown host key, logging its fingerprint to Tacker's log
    (paramiko's WarningPolicy uses ``warnings``, which the log misses)."""

    def missing_host_key(self, client, hostname, key):
        LOG.warning('Accepting unverified SSH host key of %s: %s %s '
                    '(host_key_policy = warn)', hostname, key.get_name(),
                    key.fingerprint)


class RemoteCommandExecutor(object):
    """An SSH session to one VM: commands, sudo, and SFTP uploads."""

    _connections_lock = threading.Lock()
    connections_opened = 0  # every successful login, for the benchmark

    def __init__(self, host, username, password, port=22, secrets=(),
                 conf=None):
        self.host = host
        self.username = username
        self._password = password
        self.port = port
        self._secrets = tuple(s for s in (password,) + tuple(secrets) if s)
        self._conf = conf or config.options()
        self._client = None
        self._sftp = None

    def __repr__(self):
        return '<RemoteCommandExecutor %s@%s>' % (self.username, self.host)

    def __enter__(self):
        self.connect()
        return self

    def __exit__(self, *exc_info):
        self.close()

    # -- connection ---------------------------------------------------------

    def connect(self):
        """Log in, retrying with exponential back-off while the VM boots.

        Authentication failures and changed host keys are not retried: they
        do not heal by waiting, and retrying a wrong password only delays the
        error.
        """
        if self._client is not None:
            return
        delay = self._conf.ssh_retry_backoff
        attempts = self._conf.ssh_connect_retries + 1
        for attempt in range(1, attempts + 1):
            client = self._new_client()
            try:
                client.connect(
                    self.host, port=self.port, username=self.username,
                    password=self._password, look_for_keys=False,
                    allow_agent=False,
                    timeout=self._conf.ssh_connect_timeout,
                    banner_timeout=self._conf.ssh_connect_timeout,
                    auth_timeout=self._conf.ssh_connect_timeout)
            except paramiko.AuthenticationException:
                client.close()
                raise exceptions.RemoteConnectError(
                    '%s: SSH authentication failed for user %r: check the '
                    'username and password parameters of this node'
                    % (self.host, self.username))
            except paramiko.BadHostKeyException:
                client.close()
                raise exceptions.RemoteConnectError(
                    '%s: SSH host key does not match the one recorded in %s; '
                    'if the VM was legitimately re-created, remove its old '
                    'entry from that file' % (self.host,
                                              self._conf.known_hosts_file))
            except paramiko.SSHException as error:
                client.close()
                if 'not found in known_hosts' in str(error):
                    raise exceptions.RemoteConnectError(
                        '%s: unknown SSH host key and host_key_policy is '
                        '"reject"' % self.host)
                last_error = error
            except (socket.error, EOFError) as error:
                client.close()
                last_error = error
            else:
                self._client = client
                with RemoteCommandExecutor._connections_lock:
                    RemoteCommandExecutor.connections_opened += 1
                LOG.debug('Connected to %s@%s', self.username, self.host)
                return
            if attempt < attempts:
                LOG.info('SSH to %s failed (%s), retry %d/%d in %.1fs',
                         self.host, self._redact(str(last_error)), attempt,
                         attempts - 1, delay)
                time.sleep(delay)
                delay = min(delay * 2 or 0.1, self._conf.ssh_retry_max_delay)
        raise exceptions.RemoteConnectError(
            '%s: cannot connect over SSH after %d attempt(s): %s' % (
                self.host, attempts, self._redact(str(last_error))))

    def _new_client(self):
        client = paramiko.SSHClient()
        policy = self._conf.host_key_policy
        if policy == 'warn':
            client.set_missing_host_key_policy(_AcceptAndWarn())
            return client
        client.load_system_host_keys()
        try:
            client.load_host_keys(self._conf.known_hosts_file)
        except FileNotFoundError:
            pass
        if policy == 'known_hosts':
            client.set_missing_host_key_policy(
                _RecordNewHostKey(self._conf.known_hosts_file))
        else:
            client.set_missing_host_key_policy(paramiko.RejectPolicy())
        return client

    def close(self):
        if self._sftp is not None:
            self._sftp.close()
            self._sftp = None
        if self._client is not None:
            self._client.close()
            self._client = None

    # -- commands -----------------------------------------------------------

    def run(self, argv, sudo=False, check=True, timeout=None, env=None):
        """Run ``argv`` on the host and return its ``CommandResult``.

        ``env`` values are passed through ``env(1)`` and never logged (they
        may hold proxy credentials). With ``check`` a non-zero exit status
        raises ``RemoteCommandError`` carrying the (redacted) output.
        """
        self.connect()
        description = self._redact(shlex.join(argv))
        prefix = []
        if sudo:
            prefix += ['sudo', '-n', '--']
        if env:
            prefix += ['env'] + ['%s=%s' % item for item in sorted(env.items())]
        command = shlex.join(prefix + list(argv))
        timeout = timeout or self._conf.command_timeout
        LOG.debug('%s: run%s `%s`', self.host, ' (sudo)' if sudo else '',
                  description)
        channel = self._client.get_transport().open_session()
        try:
            channel.exec_command(command)
            channel.shutdown_write()
            stdout, stderr, exit_status = self._collect(channel, timeout)
        finally:
            channel.close()
        stdout = self._redact(stdout)
        stderr = self._redact(stderr)
        if exit_status is None:
            raise exceptions.RemoteCommandError(
                self.host, description, None, stdout, stderr, timed_out=True)
        result = CommandResult(exit_status, stdout, stderr)
        if sudo and exit_status == 1 and 'password is required' in stderr:
            raise exceptions.RemoteCommandError(
                self.host, description, exit_status, stdout,
                'user %r needs passwordless sudo on this host' % self.username)
        if check and not result.ok:
            raise exceptions.RemoteCommandError(
                self.host, description, exit_status, stdout, stderr)
        return result

    @staticmethod
    def _collect(channel, timeout):
        """Read stdout and stderr until the command exits or time runs out.

        Blocks on the channel's file descriptor, which paramiko wakes when
        data arrives on either stream or the remote end sends EOF, then on
        the exit-status event: no polling. Exit status is None on timeout.
        """
        deadline = time.monotonic() + timeout
        stdout, stderr = io.BytesIO(), io.BytesIO()
        while True:
            while channel.recv_ready():
                stdout.write(channel.recv(65536))
            while channel.recv_stderr_ready():
                stderr.write(channel.recv_stderr(65536))
            if channel.eof_received or channel.closed:
                break
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            select.select([channel], [], [], remaining)
        remaining = max(0.0, deadline - time.monotonic())
        exit_status = None
        if channel.status_event.wait(remaining):
            exit_status = channel.recv_exit_status()
        return (stdout.getvalue().decode('utf-8', 'replace'),
                stderr.getvalue().decode('utf-8', 'replace'),
                exit_status)

    def _redact(self, text):
        return redact(text, self._secrets)

    # -- files --------------------------------------------------------------

    def read_file(self, path, sudo=False):
        """Contents of a remote text file, or None if it does not exist."""
        result = self.run(['cat', '--', path], sudo=sudo, check=False)
        if result.ok:
            return result.stdout
        exists = self.run(['test', '-e', path], sudo=sudo, check=False)
        if not exists.ok:
            return None
        raise exceptions.RemoteCommandError(
            self.host, 'cat -- %s' % path, result.exit_status, '',
            result.stderr)

    def make_private_dir(self):
        """A fresh directory only the login user can read (``mktemp -d``)."""
        return self.run(['mktemp', '-d']).stdout.strip()

    def upload(self, data, remote_path, mode=0o600):
        """Write bytes to ``remote_path`` over SFTP as the login user."""
        self.connect()
        if self._sftp is None:
            self._sftp = self._client.open_sftp()
        self._sftp.putfo(io.BytesIO(data), remote_path, confirm=True)
        self._sftp.chmod(remote_path, mode)

    def install_file(self, data, path, mode='0644'):
        """Replace a root-owned file atomically with ``data``.

        The content is uploaded into a private directory, installed next to
        the target and renamed over it, so readers never see a partial file.
        """
        staging = self.make_private_dir()
        try:
            staged = staging + '/content'
            self.upload(data, staged)
            temporary = path + '.kubernetes-mgmt-pv.new'
            self.run(['install', '-m', mode, '-o', 'root', '-g', 'root',
                      staged, temporary], sudo=True)
            self.run(['mv', '-f', '--', temporary, path], sudo=True)
        finally:
            self.run(['rm', '-rf', '--', staging], check=False)


class SessionPool(object):
    """One SSH connection per host for the whole hook, shared by all steps.

    ``get`` is thread-safe: concurrent steps asking for the same host wait
    for the single connection instead of opening a second one.
    """

    def __init__(self, conf=None, secrets=()):
        self._conf = conf
        self._secrets = tuple(secrets)
        self._lock = threading.Lock()
        self._host_locks = {}
        self._sessions = {}

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()

    def get(self, host, username, password):
        with self._lock:
            host_lock = self._host_locks.setdefault(host, threading.Lock())
        with host_lock:
            session = self._sessions.get(host)
            if session is None:
                session = RemoteCommandExecutor(
                    host, username, password, secrets=self._secrets,
                    conf=self._conf)
                session.connect()
                self._sessions[host] = session
            return session

    def close(self):
        with self._lock:
            sessions, self._sessions = self._sessions, {}
        for session in sessions.values():
            session.close()
