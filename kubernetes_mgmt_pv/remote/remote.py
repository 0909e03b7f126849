"""Remote command execution on the VMs over SSH (paramiko).

One ``RemoteCommandExecutor`` holds one SSH connection to one host; every
command of a hook reuses it. Commands are given as argument lists and quoted
with ``shlex`` so no value ever reaches a shell unquoted; data (file
contents, manifests, proxy settings) travels over the command's standard
input, never in its argument list, where ``ps`` and sudo's log would show it.

Output is returned exactly as the host printed it: the steps parse it and
write parts of it back (``/etc/fstab``, ``/etc/exports``). Secrets are
scrubbed only from text that leaves the driver: log lines and error
messages (``redaction.redact``).

A host that stops answering cannot hang a hook: while a command runs
quietly the driver asks the host for an answer every
``ssh_keepalive_interval`` and gives up after ``command_timeout`` without
one ("no answer from <host> for N s"), even under a longer command
timeout; SSH keepalives and a TCP user timeout let the kernel detect a dead
peer too, and every operation on the connection (opening a channel,
sending, reading) runs under a deadline, after which the connection is
closed.
"""

import hashlib
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
from kubernetes_mgmt_pv import redaction
from kubernetes_mgmt_pv.remote import capacity
from kubernetes_mgmt_pv.remote import facts
from kubernetes_mgmt_pv.remote import host_keys

LOG = logging.getLogger(__name__)

_ENV_NAME = re.compile(r'[A-Za-z_][A-Za-z0-9_]*')
# Exit status of the read script below when the file does not exist.
_MISSING = 44
# Seconds past a command's deadline before a connection that does not even
# let us give up the command (a silent peer) is torn down.
_CLOSE_GRACE = 2.0

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


class _Silent(Exception):
    """The host gave no answer for ``seconds`` while a command ran."""

    def __init__(self, seconds):
        super().__init__(seconds)
        self.seconds = seconds


def no_answer_reason(host, seconds):
    return 'no answer from %s for %d s' % (host, seconds)


def fell_silent(quiet, limit, keepalive_interval):
    """Whether a connection lost after ``quiet`` seconds without a word
    from the host was lost to silence, not closed by the host: ``limit``
    is the deadline of starting a command. A live host answers within a
    keepalive interval (``_probe``), while the kernel drops a connection
    only after three intervals of unacknowledged data (TCP user
    timeout): two intervals of silence tell them apart."""
    return quiet >= limit or bool(
        keepalive_interval and quiet >= 2 * keepalive_interval)


def describe_error(error):
    """A non-empty reason for any exception (``str(EOFError())`` is '')."""
    text = str(error).strip()
    name = type(error).__name__
    return '%s: %s' % (name, text) if text else name


class _TooMuchOutput(Exception):
    """A command printed more than ``command_output_limit`` on a stream."""

    def __init__(self, stream, stdout, stderr):
        super().__init__(stream)
        self.stream = stream
        self.stdout = stdout
        self.stderr = stderr


class BoundedOutput(object):
    """One output stream of a command, held in at most ``limit`` bytes:
    its head and its tail, the middle left out once the stream outgrows
    the limit."""

    def __init__(self, limit):
        self.limit = limit
        self.size = 0
        self._head_limit = limit // 2
        self._tail_limit = limit - self._head_limit
        self._head = bytearray()
        self._tail = bytearray()

    def add(self, data):
        self.size += len(data)
        room = self._head_limit - len(self._head)
        if room > 0:
            self._head += data[:room]
            data = data[room:]
        self._tail += data
        excess = len(self._tail) - self._tail_limit
        if excess > 0:
            del self._tail[:excess]

    @property
    def overflowed(self):
        return self.size > self.limit

    def getvalue(self):
        left_out = self.size - len(self._head) - len(self._tail)
        if not left_out:
            return bytes(self._head + self._tail)
        return b'%s\n[... %d bytes left out ...]\n%s' % (
            self._head, left_out, self._tail)


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
        # When the host last answered, or when we started waiting for it.
        self._last_heard = time.monotonic()

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
            client = self._new_client()
            try:
                client.connect(
                    self.host, port=self.port, username=self.username,
                    password=self._password, pkey=self._pkey,
                    look_for_keys=False,
                    allow_agent=False,
                    timeout=self._conf.ssh_connect_timeout,
                    banner_timeout=self._conf.ssh_connect_timeout,
                    auth_timeout=self._conf.ssh_connect_timeout)
            except paramiko.AuthenticationException:
                client.close()
                raise exceptions.RemoteConnectError(
                    '%s: SSH authentication failed for user %r: check the '
                    'username and %s parameters of this node'
                    % (self.host, self.username,
                       'ssh_key' if self._pkey else 'password'))
            except paramiko.BadHostKeyException:
                client.close()
                raise exceptions.RemoteConnectError(
                    '%s: SSH host key does not match the one recorded in %s; '
                    'if the VM was legitimately re-created, remove its old '
                    'entry from that file' % (self.host,
                                              self._conf.known_hosts_file))
            except exceptions.MgmtDriverError:
                client.close()  # a host key policy refused the host
                raise
            except paramiko.SSHException as error:
                client.close()
                if 'not found in known_hosts' in str(error):
                    raise exceptions.RemoteConnectError(
                        '%s: unknown SSH host key and host_key_policy is '
                        '"reject"' % self.host)
                last_error = error
            except (OSError, EOFError) as error:
                client.close()
                last_error = error
            else:
                self._client = client
                self._tune_socket(client.get_transport())
                LOG.debug('Connected to %s@%s', self.username, self.host)
                return
            if attempt < attempts:
                LOG.info('SSH to %s failed (%s), retry %d/%d in %.1fs',
                         self.host, self._redact(describe_error(last_error)),
                         attempt, attempts - 1, delay)
                time.sleep(delay)
                delay = min(delay * 2 or 0.1, self._conf.ssh_retry_max_delay)
        raise exceptions.RemoteConnectError(
            '%s: cannot connect over SSH after %d attempt(s): %s' % (
                self.host, attempts,
                self._redact(describe_error(last_error))))

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

    def _new_client(self):
        client = paramiko.SSHClient()
        if self._host_key_policy is not None:
            client.set_missing_host_key_policy(self._host_key_policy)
            return client
        policy = self._conf.host_key_policy
        if policy == 'console':
            raise exceptions.RemoteConnectError(
                '%s: host_key_policy is "console" but no Nova server is '
                'known for this address, so its host key cannot be checked'
                % self.host)
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
        if env:
            assignments = self._environment_script(env)
            stdin = b'%d\n' % len(assignments) + assignments + (stdin or b'')
            argv = ['sh', '-c', _WITH_ENV, 'sh'] + argv
        argv = ['env', 'LC_ALL=C'] + argv
        if sudo:
            argv = ['sudo', '-n', '--'] + argv
        timeout = timeout or self._conf.command_timeout
        LOG.debug('%s: run%s `%s`', self.host, ' (sudo)' if sudo else '',
                  description)
        self.connect()
        self._last_heard = time.monotonic()
        try:
            with _Deadline(self, timeout + _CLOSE_GRACE):
                exit_status, stdout, stderr = self._execute(
                    shlex.join(argv), stdin, timeout)
        except _Silent as silent:
            self.close()
            raise self._no_answer(description, silent.seconds)
        except _TooMuchOutput as flood:
            self.close()  # the command may still run: never reuse the session
            raise exceptions.RemoteCommandError(
                self.host, description, None,
                self._redact_bytes(flood.stdout),
                self._redact_bytes(flood.stderr), reason=(
                    'printed more than %d bytes on %s (command_output_limit)'
                    '; abandoned' % (self._conf.command_output_limit,
                                     flood.stream)))
        except (paramiko.SSHException, OSError, EOFError) as error:
            quiet = time.monotonic() - self._last_heard
            self.close()
            if fell_silent(quiet, min(timeout, self._conf.command_timeout),
                           self._conf.ssh_keepalive_interval):
                raise self._no_answer(description, quiet)
            raise exceptions.RemoteCommandError(
                self.host, description, None, reason=self._redact(
                    'connection lost: %s' % describe_error(error)))
        if exit_status is None:
            self.close()  # the command may still run: never reuse the session
            raise exceptions.RemoteCommandError(
                self.host, description, None, self._redact_bytes(stdout),
                self._redact_bytes(stderr), timed_out=True,
                reason='timed out after %.0fs' % timeout)
        result = facts.CommandResult(exit_status, stdout, stderr)
        if sudo and facts.sudo_wants_password(result):
            raise exceptions.RemoteCommandError(
                self.host, description, exit_status,
                reason='user %r needs passwordless sudo on this host'
                % self.username)
        if check and not result.ok:
            raise exceptions.RemoteCommandError(
                self.host, description, exit_status,
                self._redact(result.stdout), self._redact(result.stderr))
        return result

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
            reason=no_answer_reason(self.host, seconds))

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
            self._last_heard = time.monotonic()
            return self._collect(channel, deadline)
        finally:
            if channel is not None:
                channel.close()

    def _collect(self, channel, deadline):
        """Read stdout and stderr until the command exits or time runs out,
        or a stream outgrows ``command_output_limit`` (``_TooMuchOutput``).

        Blocks on the channel's file descriptor, which paramiko wakes when
        data arrives on either stream, the remote end sends EOF or the
        connection dies, or when it is time to ask a quiet host for an
        answer (``_probe``, after ``ssh_keepalive_interval`` without
        output); then on the exit-status event.
        """
        # Ask at least twice within command_timeout: a single late question
        # is no proof of silence.
        interval = min(self._conf.ssh_keepalive_interval,
                       self._conf.command_timeout / 2)
        limit = self._conf.command_output_limit
        stdout, stderr = BoundedOutput(limit), BoundedOutput(limit)
        while True:
            heard = False
            while channel.recv_ready() and not stdout.overflowed:
                stdout.add(channel.recv(65536))
                heard = True
            while channel.recv_stderr_ready() and not stderr.overflowed:
                stderr.add(channel.recv_stderr(65536))
                heard = True
            for stream, output in (('stdout', stdout), ('stderr', stderr)):
                if output.overflowed:
                    raise _TooMuchOutput(stream, stdout.getvalue(),
                                         stderr.getvalue())
            now = time.monotonic()
            if heard:
                self._last_heard = now
            if channel.eof_received or channel.closed or now >= deadline:
                break
            wait = deadline - now
            if interval:
                if now - self._last_heard >= interval:
                    self._probe(channel.get_transport(), deadline)
                    continue
                wait = min(wait, self._last_heard + interval - now)
            select.select([channel], [], [], wait)
        exit_status = None
        if channel.status_event.wait(max(0.0, deadline - time.monotonic())):
            exit_status = channel.recv_exit_status()
            # -1: no exit status came; either the command died of a signal
            # (a failure like any other) or the connection is gone.
            if exit_status == -1 and not channel.get_transport().is_active():
                raise EOFError('the connection closed before the command '
                               'reported its exit status')
        return exit_status, stdout.getvalue(), stderr.getvalue()

    def _probe(self, transport, deadline):
        """Ask the host for an answer: open a session channel, which sshd
        confirms (or refuses) without running anything; raise ``_Silent``
        when the host has given none for ``command_timeout``. Returns
        without an answer when the command's deadline comes first."""
        now = time.monotonic()
        # At least a second to answer, should this thread have run late.
        wait = max(self._last_heard + self._conf.command_timeout - now, 1.0)
        try:
            transport.open_session(timeout=min(wait, deadline - now)).close()
        except paramiko.ChannelException:
            pass  # refused: an answer all the same
        except paramiko.SSHException:
            if not transport.is_active():
                raise  # the connection is gone, not merely silent
            if time.monotonic() < deadline:
                raise _Silent(time.monotonic() - self._last_heard)
            return
        self._last_heard = time.monotonic()

    def hide(self, *secrets):
        """Redact these values too from now on."""
        self._secrets += tuple(s for s in secrets if s)

    def _redact(self, text):
        return redaction.redact(text, self._secrets)

    def failure(self, description, result, stderr=None):
        """The error for a result the caller judged a failure, redacted
        like the executor's own (``stderr`` replaces the result's)."""
        return exceptions.RemoteCommandError(
            self.host, self._redact(description), result.exit_status,
            self._redact(result.stdout),
            self._redact(result.stderr if stderr is None else stderr))

    def _redact_bytes(self, data):
        return self._redact(data.decode('utf-8', 'replace'))

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
