"""Remote command execution on the VMs over SSH (paramiko).

One ``RemoteCommandExecutor`` holds one SSH connection to one host; every
command of a hook reuses it. Commands are given as argument lists and quoted
with ``shlex`` so no value ever reaches a shell unquoted; data (file
contents, manifests, proxy settings) travels over the command's standard
input, never in its argument list, where ``ps`` and sudo's log would show it.

Output is returned exactly as the host printed it: the steps parse it and
write parts of it back (``/etc/fstab``, ``/etc/exports``). Secrets are
scrubbed only from text that leaves the driver: log lines and error
messages (``redaction.redact``); an error keeps only the head and the tail
of a failed command's output, and redacts only those
(``redaction.excerpt``).

A host that stops answering cannot hang a hook: while a command runs
quietly the driver asks the host for an answer every
``ssh_keepalive_interval`` and gives up after ``command_timeout`` without
one ("no answer from <host> for N s"), even under a longer command
timeout; SSH keepalives and a TCP user timeout let the kernel detect a dead
peer too, and every operation on the connection (opening a channel,
sending, reading) runs under a deadline, after which the connection is
closed. Reading the output: ``command_output``; the host key policies:
``ssh_client``.
"""

import contextlib
import hashlib
import re
import shlex
import socket
import threading
import time

from oslo_log import log as logging
import paramiko

from kubernetes_mgmt_pv import config
from kubernetes_mgmt_pv import exceptions
from kubernetes_mgmt_pv import redaction
from kubernetes_mgmt_pv.remote import capacity
from kubernetes_mgmt_pv.remote import command_output
from kubernetes_mgmt_pv.remote import facts
from kubernetes_mgmt_pv.remote import ssh_client

LOG = logging.getLogger(__name__)

_ENV_NAME = re.compile(r'[A-Za-z_][A-Za-z0-9_]*')
# Exit status of the read script below when the file does not exist.
_MISSING = 44
# Seconds past a command's deadline before a connection that does not even
# let us give up the command (a silent peer) is torn down.
_CLOSE_GRACE = 2.0
# What a refused login needs on the VM, by the kind of login: what nothing
# gives a VM booted from a stock cloud image unless OpenStack is told to.
_LOGIN_NEEDS = {
    'ssh_key': 'the VM must accept the key: boot it with the Nova keypair '
               'made from the public half of that key file (key_name)',
    'password': 'a password login needs an image with that password and '
                'SSH password logins on (a stock cloud image has neither)'}

# Reads the variables from the head of standard input (its size in bytes
# on the first line, then the assignments; dd reads exactly that much),
# then runs the command with the rest of standard input: values never
# appear in the argument list.
_WITH_ENV = ('IFS= read -r size; set -a; '
             'eval "$(dd bs=1 count="$size" 2>/dev/null)"; set +a; '
             'exec "$@"')
_READ = 'if [ -e "$1" ]; then exec cat -- "$1"; fi; exit %d' % _MISSING
# Replace a file atomically with standard input, through a symlink, keeping
# the mode and owner of an existing file; refuse a truncated upload.
_INSTALL = r'''set -eu
target=$(readlink -f -- "$1")
mode=$2 owner=$3 group=$4 sum=$5
if [ -e "$target" ]; then
    mode=$(stat -c %a -- "$target")
    owner=$(stat -c %u -- "$target")
    group=$(stat -c %g -- "$target")
fi
tmp=$(mktemp -- "$target.kubernetes-mgmt-pv.XXXXXX")
trap 'rm -f -- "$tmp"' EXIT
cat > "$tmp"
echo "$sum  $tmp" | sha256sum -c --status - || {
    echo "content arrived incomplete" >&2; exit 1; }
chown -- "$owner:$group" "$tmp"
chmod -- "$mode" "$tmp"
mv -f -- "$tmp" "$target"
trap - EXIT
'''


class _Deadline(object):
    """Closes a connection whose operation outlives its deadline.

    paramiko blocks without a time limit in a few places (waiting for the
    answer to an exec request, for window space when sending); closing the
    transport from a timer thread wakes them with an error.
    """

    def __init__(self, executor, seconds):
        self.expired = False
        self._executor = executor
        self._timer = threading.Timer(seconds, self._expire)
        self._timer.daemon = True

    def _expire(self):
        self.expired = True
        LOG.warning('%s: no answer in time, closing the SSH connection',
                    self._executor.host)
        self._executor.close()

    def __enter__(self):
        self._timer.start()
        return self

    def __exit__(self, *exc_info):
        self._timer.cancel()


def unanswered_hint(error, port):
    """What an SSH connection that got no answer at all most often
    means on a cloud, for the error of a connection ``error`` ended; ''
    for any other error (a refusal, a failed handshake)."""
    if not isinstance(error, TimeoutError):  # socket.timeout too
        return ''
    return (' (no answer from port %d: a security group or firewall '
            'drops it, or the VM is down; the VM\'s security group must '
            'let %d/tcp in from this host, the conductor: see the '
            'templates\' management_cidr)' % (port, port))


class RemoteCommandExecutor(object):
    """An SSH session to one VM: commands, sudo, and file transfers."""

    def __init__(self, host, username, password, port=22, secrets=(),
                 conf=None, host_key_policy=None, pkey=None):
        self.host = host
        self.username = username
        self._password = password
        self._pkey = pkey  # a paramiko private key, logging in instead
        self.port = port
        self._secrets = tuple(s for s in (password,) + tuple(secrets) if s)
        self._conf = conf or config.options()
        self._host_key_policy = host_key_policy
        self._client = None
        self._listener = command_output.Listener(self._conf)

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

        Authentication failures and rejected host keys are not retried:
        they do not heal by waiting, and retrying a wrong password only
        delays the error.
        """
        if self._client is not None:
            return
        prepare = getattr(self._host_key_policy, 'prepare', None)
        if prepare is not None:
            # Slow look-ups (waiting for a booting VM's console) happen
            # before the handshake, where sshd's LoginGraceTime runs.
            prepare()
        delay = self._conf.ssh_retry_backoff
        attempts = self._conf.ssh_connect_retries + 1
        for attempt in range(1, attempts + 1):
            last_error = self._log_in()
            if last_error is None:
                return
            if attempt < attempts:
                LOG.info('SSH to %s failed (%s), retry %d/%d in %.1fs',
                         self.host, self._reason(last_error), attempt,
                         attempts - 1, delay)
                time.sleep(delay)
                delay = min(delay * 2 or 0.1, self._conf.ssh_retry_max_delay)
        raise exceptions.RemoteConnectError(
            '%s: cannot connect over SSH after %d attempt(s): %s%s' % (
                self.host, attempts, self._reason(last_error),
                unanswered_hint(last_error, self.port)))

    def _log_in(self):
        """One login attempt: None once logged in, or the error of an
        attempt worth repeating; raises for one that is not."""
        client = ssh_client.new_client(self._conf, self.host,
                                       self._host_key_policy)
        try:
            client.connect(
                self.host, port=self.port, username=self.username,
                password=self._password, pkey=self._pkey,
                look_for_keys=False,
                allow_agent=False,
                timeout=self._conf.ssh_connect_timeout,
                banner_timeout=self._conf.ssh_connect_timeout,
                auth_timeout=self._conf.ssh_connect_timeout)
        except BaseException as error:
            client.close()
            return self._login_failure(error)
        self._client = client
        self._tune_socket(client.get_transport())
        LOG.debug('Connected to %s@%s', self.username, self.host)
        return None

    def _login_failure(self, error):
        """``error`` of a login when a retry may succeed; else raises."""
        if isinstance(error, paramiko.AuthenticationException):
            raise exceptions.RemoteConnectError(
                '%s: SSH authentication failed for user %r: check the '
                'username and %s parameters of this node; %s (operator '
                'guide, "Logins on the VMs")' % (
                    self.host, self.username,
                    'ssh_key' if self._pkey else 'password',
                    _LOGIN_NEEDS['ssh_key' if self._pkey else 'password']))
        if isinstance(error, paramiko.BadHostKeyException):
            raise exceptions.RemoteConnectError(
                '%s: SSH host key does not match the one recorded in %s; '
                'if the VM was legitimately re-created, remove its old '
                'entry from that file' % (self.host,
                                          self._conf.known_hosts_file))
        if isinstance(error, exceptions.MgmtDriverError):
            raise error  # a host key policy refused the host
        if isinstance(error, paramiko.SSHException):
            if 'not found in known_hosts' in str(error):
                raise exceptions.RemoteConnectError(
                    '%s: unknown SSH host key and host_key_policy is '
                    '"reject"' % self.host)
            return error
        if isinstance(error, (OSError, EOFError)):
            return error
        raise error

    def _tune_socket(self, transport):
        """Send small packets at once and detect a silent peer.

        Without TCP_NODELAY every command waits ~40 ms for Nagle's
        algorithm to meet the VM's delayed ACK. Keepalives go out after
        ``ssh_keepalive_interval`` of silence, and the kernel drops the
        connection when they stay unacknowledged for three intervals.
        """
        sock = transport.sock
        interval = self._conf.ssh_keepalive_interval
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if interval and hasattr(socket, 'TCP_USER_TIMEOUT'):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT,
                                int(interval * 3 * 1000))
        except (OSError, AttributeError):
            pass  # not a TCP socket (a proxy channel): keepalives alone
        if interval:
            transport.set_keepalive(max(1, int(interval)))

    def close(self):
        client, self._client = self._client, None
        if client is not None:
            client.close()

    # -- commands -----------------------------------------------------------

    def run(self, argv, sudo=False, check=True, timeout=None, env=None,
            stdin=None, description=None):
        """Run ``argv`` on the host and return its ``facts.CommandResult``.

        ``stdin`` (bytes) is fed to the command. ``env`` values reach the
        command through the head of its standard input, which a wrapper
        reads before the command starts. The command runs in the C
        locale, so its messages parse the same on every VM.
        ``description`` names the command in logs and errors instead of
        its argument list. With ``check`` a non-zero exit status raises
        ``RemoteCommandError``; a timeout or a lost connection always
        does.
        """
        argv = list(argv)
        description = self._redact(description or shlex.join(argv))
        command, stdin = self._command_line(argv, sudo, env, stdin)
        timeout = timeout or self._conf.command_timeout
        LOG.debug('%s: run%s `%s`', self.host, ' (sudo)' if sudo else '',
                  description)
        result = facts.CommandResult(*self._finished(command, stdin, timeout,
                                                     description))
        if sudo and facts.sudo_wants_password(result):
            raise exceptions.RemoteCommandError(
                self.host, description, result.exit_status,
                reason='user %r needs passwordless sudo on this host'
                % self.username)
        if check and not result.ok:
            raise self._output_error(description, result.exit_status,
                                     result.stdout, result.stderr)
        return result

    def _command_line(self, argv, sudo, env, stdin):
        """The shell command line running ``argv`` and its standard input,
        ``env`` at the head of it."""
        if env:
            assignments = self._environment_script(env)
            stdin = b'%d\n' % len(assignments) + assignments + (stdin or b'')
            argv = ['sh', '-c', _WITH_ENV, 'sh'] + argv
        argv = ['env', 'LC_ALL=C'] + argv
        if sudo:
            argv = ['sudo', '-n', '--'] + argv
        return shlex.join(argv), stdin

    def _finished(self, command, stdin, timeout, description):
        """(exit status, stdout, stderr) of ``command``; raises
        ``RemoteCommandError`` when it did not finish, after closing the
        connection (the command may still run: never reuse the session).
        """
        self.connect()
        self._listener.heard()
        try:
            with _Deadline(self, timeout + _CLOSE_GRACE):
                exit_status, stdout, stderr = self._execute(
                    command, stdin, timeout)
        except command_output.Silent as silent:
            self.close()
            raise self._no_answer(description, silent.seconds)
        except command_output.TooMuchOutput as flood:
            self.close()
            raise self._output_error(
                description, None, flood.stdout, flood.stderr, reason=(
                    'printed more than %d bytes on %s (command_output_limit)'
                    '; abandoned' % (self._conf.command_output_limit,
                                     flood.stream)))
        except (paramiko.SSHException, OSError, EOFError) as error:
            raise self._connection_lost(description, error, timeout)
        if exit_status is None:
            self.close()
            raise self._output_error(
                description, None, stdout, stderr, timed_out=True,
                reason='timed out after %.0fs' % timeout)
        return exit_status, stdout, stderr

    def _connection_lost(self, description, error, timeout):
        quiet = time.monotonic() - self._listener.last_heard
        self.close()
        if command_output.fell_silent(
                quiet, min(timeout, self._conf.command_timeout),
                self._conf.ssh_keepalive_interval):
            return self._no_answer(description, quiet)
        return exceptions.RemoteCommandError(
            self.host, description, None,
            reason='connection lost: %s' % self._reason(error))

    @staticmethod
    def _environment_script(env):
        lines = []
        for name, value in sorted(env.items()):
            if not _ENV_NAME.fullmatch(name):
                raise ValueError('invalid environment variable name %r' % name)
            lines.append('%s=%s\n' % (name, shlex.quote(value)))
        return ''.join(lines).encode('utf-8')

    def _no_answer(self, description, seconds):
        return exceptions.RemoteCommandError(
            self.host, description, None, timed_out=True,
            reason=command_output.no_answer_reason(self.host, seconds))

    def _execute(self, command, stdin, timeout):
        """Open a channel, run ``command``, feed ``stdin``, collect output.

        Starting the command takes a few answers of the host, so it is
        bounded by ``command_timeout`` too. Returns (exit status or None on
        timeout, stdout, stderr).
        """
        deadline = time.monotonic() + timeout
        start_limit = min(timeout, self._conf.command_timeout)
        transport = self._client.get_transport()
        if transport is None or not transport.is_active():
            raise paramiko.SSHException('SSH session not active')
        channel = None
        try:
            with _Deadline(self, start_limit + _CLOSE_GRACE):
                channel = transport.open_session(timeout=start_limit)
                channel.exec_command(command)
                if stdin:
                    channel.sendall(stdin)
                channel.shutdown_write()
            self._listener.heard()
            return self._listener.collect(channel, deadline)
        finally:
            if channel is not None:
                channel.close()

    @contextlib.contextmanager
    def channel(self, argv, sudo=False):
        """An SSH channel running ``argv``, for a stream too big to hold
        in memory (``relay``): its reads and writes time out after
        ``command_timeout`` without progress; closed on leaving."""
        command, _ = self._command_line(list(argv), sudo, None, None)
        self.connect()
        transport = self._client.get_transport()
        if transport is None or not transport.is_active():
            raise exceptions.RemoteCommandError(
                self.host, self._redact(shlex.join(argv)), None,
                reason='SSH session not active')
        opened = transport.open_session(timeout=self._conf.command_timeout)
        try:
            opened.settimeout(self._conf.command_timeout)
            opened.exec_command(command)
            yield opened
        finally:
            opened.close()

    def hide(self, *secrets):
        """Redact these values too from now on."""
        self._secrets += tuple(s for s in secrets if s)

    def _redact(self, text):
        return redaction.redact(text, self._secrets)

    def _reason(self, error):
        """Why a connection failed, in one line: paramiko's errors may
        quote the host (its SSH banner, its authentication methods)."""
        return redaction.one_line(self._redact(
            command_output.describe_error(error)))

    def failure(self, description, result, stderr=None):
        """The error for a result the caller judged a failure, redacted
        like the executor's own (``stderr`` replaces the result's)."""
        return self._output_error(
            self._redact(description), result.exit_status, result.stdout,
            result.stderr if stderr is None else stderr)

    def _output_error(self, description, exit_status, stdout, stderr,
                      **details):
        """A RemoteCommandError showing the head and tail of the output
        (bytes or text), redacted: only what it shows is looked at."""
        return exceptions.RemoteCommandError(
            self.host, description, exit_status, self._excerpt(stdout),
            self._excerpt(stderr), **details)

    def _excerpt(self, output):
        if isinstance(output, bytes):
            output = output.decode('utf-8', 'replace')
        return redaction.excerpt(output, self._secrets)

    # -- files --------------------------------------------------------------

    def read_bytes(self, path, sudo=False):
        """Contents of a remote file, or None if it does not exist."""
        result = self.run(['sh', '-c', _READ, 'sh', path], sudo=sudo,
                          check=False, description='cat -- %s' % path)
        if result.exit_status == _MISSING:
            return None
        if not result.ok:
            raise self.failure('cat -- %s' % path, result)
        return result.stdout_bytes

    def read_file(self, path, sudo=False):
        """A remote text file (UTF-8, undecodable bytes kept), or None."""
        data = self.read_bytes(path, sudo=sudo)
        return None if data is None else data.decode('utf-8',
                                                     'surrogateescape')

    def install_file(self, data, path, mode='0644', owner='root',
                     group='root'):
        """Replace a root-owned file atomically with ``data``.

        The content goes over standard input into a temporary file next to
        the target, is checked against its SHA-256 (a dropped connection
        leaves no half-written file) and renamed over the target. A
        symlinked ``path`` keeps its link: the file it points to is
        replaced. An existing file keeps its mode and owner; ``mode``,
        ``owner`` and ``group`` apply to a new file only.
        """
        digest = hashlib.sha256(data).hexdigest()
        self.run(['sh', '-c', _INSTALL, 'sh', path, mode, owner, group,
                  digest], sudo=True, stdin=data,
                 description='install new content of %s' % path)


class _CappedSession(RemoteCommandExecutor):
    """An executor whose login holds one of the process's SSH session
    permits (``capacity.Limits``) until it is closed; closed while idle to
    make room, it logs in again at its next command."""

    def __init__(self, *args, limits, owner, **kwargs):
        super().__init__(*args, **kwargs)
        self._limits = limits
        self._owner = owner

    def connect(self):
        if self._client is not None:
            return
        prepare = getattr(self._host_key_policy, 'prepare', None)
        if prepare is not None:
            prepare()  # a booting VM is waited for without a permit
        with self._limits.session_in_use(self._owner, self):
            self._limits.open_session(self._owner, self)
            try:
                super().connect()
            except BaseException:
                self._limits.close_session(self._owner, self)
                raise

    def run(self, *args, **kwargs):
        with self._limits.session_in_use(self._owner, self):
            return super().run(*args, **kwargs)

    @contextlib.contextmanager
    def channel(self, *args, **kwargs):
        with self._limits.session_in_use(self._owner, self):
            with super().channel(*args, **kwargs) as opened:
                yield opened

    def detach(self):
        """Forget the connection, for the caller to close."""
        client, self._client = self._client, None
        return client

    def close(self):
        super().close()
        self._limits.close_session(self._owner, self)


class SessionPool(object):
    """One SSH connection per host for the whole hook, shared by all steps.

    ``get`` is thread-safe: concurrent steps asking for the same host wait
    for the single connection instead of opening a second one. The pool
    holds its session permits (``capacity.Limits``) until it is closed.
    """

    def __init__(self, conf=None, secrets=(), host_key_policy=None,
                 limits=None):
        """``host_key_policy(host)`` gives the MissingHostKeyPolicy of a
        host (or None: the configured policy applies); ``limits``: the
        session cap's bookkeeping (default: the process's)."""
        self._conf = conf
        self._limits = limits or capacity.process_limits()
        self._secrets = tuple(secrets)
        self._host_key_policy = host_key_policy or (lambda host: None)
        self._lock = threading.Lock()
        self._host_locks = {}
        self._sessions = {}

    def hide(self, *secrets):
        """Redact these values too, in the sessions open and to come: a
        hook learns some secrets (join tokens) only on the way."""
        with self._lock:
            self._secrets += tuple(s for s in secrets if s)
            sessions = list(self._sessions.values())
        for session in sessions:
            session.hide(*secrets)

    @property
    def hidden(self):
        """Every value redacted so far: the hook's secrets too."""
        with self._lock:
            return self._secrets

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()

    def reserve(self, hosts):
        """Hold a session permit per host before the first login (waits
        until free): no other hook's login closes this hook's sessions."""
        self._limits.reserve_sessions(self, hosts)

    def get(self, host, username, password, host_key_policy=None,
            pkey=None):
        """The session to host, opened at the first call; a flow sharing a
        pool it did not create gives its own ``host_key_policy`` (a
        callable like the pool's), used if it opens the connection. The
        login is ``pkey`` (a paramiko private key) when given, else the
        password."""
        with self._lock:
            host_lock = self._host_locks.setdefault(host, threading.Lock())
        with host_lock:
            session = self._sessions.get(host)
            if session is None:
                policy = host_key_policy or self._host_key_policy
                session = _CappedSession(
                    host, username, password, secrets=self._secrets,
                    conf=self._conf, host_key_policy=policy(host),
                    limits=self._limits, owner=self, pkey=pkey)
                session.connect()
                self._sessions[host] = session
            return session

    def close(self):
        with self._lock:
            sessions, self._sessions = self._sessions, {}
        try:
            for session in sessions.values():
                session.close()
        finally:
            self._limits.release_sessions(self)
