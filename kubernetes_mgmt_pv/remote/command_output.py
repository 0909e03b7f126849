"""A running command's output, read within bounds.

Its streams are held in at most ``command_output_limit`` bytes each
(``BoundedOutput``), and a host that falls silent while its command runs
quietly is asked for an answer every ``ssh_keepalive_interval``, until
``command_timeout`` without one (``Silent``).
"""

import select
import time

import paramiko


class Silent(Exception):
    """The host gave no answer for ``seconds`` while a command ran."""

    def __init__(self, seconds):
        super().__init__(seconds)
        self.seconds = seconds


class TooMuchOutput(Exception):
    """A command printed more than ``command_output_limit`` on a stream."""

    def __init__(self, stream, stdout, stderr):
        super().__init__(stream)
        self.stream = stream
        self.stdout = stdout
        self.stderr = stderr


def no_answer_reason(host, seconds):
    return 'no answer from %s for %d s' % (host, seconds)


def fell_silent(quiet, limit, keepalive_interval):
    """Whether a connection lost after ``quiet`` seconds without a word
    from the host was lost to silence, not closed by the host: ``limit``
    is the deadline of starting a command. A live host answers within a
    keepalive interval (``Listener.probe``), while the kernel drops a
    connection only after three intervals of unacknowledged data (TCP user
    timeout): two intervals of silence tell them apart."""
    return quiet >= limit or bool(
        keepalive_interval and quiet >= 2 * keepalive_interval)


def describe_error(error):
    """A non-empty reason for any exception (``str(EOFError())`` is '')."""
    text = str(error).strip()
    name = type(error).__name__
    return '%s: %s' % (name, text) if text else name


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


class Listener(object):
    """Reads the commands of one connection, and knows when its host last
    answered (or when we started waiting for it)."""

    def __init__(self, conf):
        self._conf = conf
        self.last_heard = time.monotonic()

    def heard(self):
        self.last_heard = time.monotonic()

    def collect(self, channel, deadline):
        """Read stdout and stderr until the command exits or time runs out,
        or a stream outgrows ``command_output_limit`` (``TooMuchOutput``).

        Blocks on the channel's file descriptor, which paramiko wakes when
        data arrives on either stream, the remote end sends EOF or the
        connection dies, or when it is time to ask a quiet host for an
        answer (``probe``, after ``ssh_keepalive_interval`` without
        output); then on the exit-status event. Returns (exit status or
        None on timeout, stdout, stderr).
        """
        limit = self._conf.command_output_limit
        stdout, stderr = BoundedOutput(limit), BoundedOutput(limit)
        while self._read(channel, stdout, stderr, deadline):
            pass
        exit_status = None
        if channel.status_event.wait(max(0.0, deadline - time.monotonic())):
            exit_status = channel.recv_exit_status()
            # -1: no exit status came; either the command died of a signal
            # (a failure like any other) or the connection is gone.
            if exit_status == -1 and not channel.get_transport().is_active():
                raise EOFError('the connection closed before the command '
                               'reported its exit status')
        return exit_status, stdout.getvalue(), stderr.getvalue()

    def _read(self, channel, stdout, stderr, deadline):
        """Take what the channel has, then wait for more: False once the
        command's output has ended or its deadline come."""
        # Ask at least twice within command_timeout: a single late question
        # is no proof of silence.
        interval = min(self._conf.ssh_keepalive_interval,
                       self._conf.command_timeout / 2)
        heard = False
        while channel.recv_ready() and not stdout.overflowed:
            stdout.add(channel.recv(65536))
            heard = True
        while channel.recv_stderr_ready() and not stderr.overflowed:
            stderr.add(channel.recv_stderr(65536))
            heard = True
        for stream, output in (('stdout', stdout), ('stderr', stderr)):
            if output.overflowed:
                raise TooMuchOutput(stream, stdout.getvalue(),
                                    stderr.getvalue())
        now = time.monotonic()
        if heard:
            self.last_heard = now
        if channel.eof_received or channel.closed or now >= deadline:
            return False
        wait = deadline - now
        if interval:
            if now - self.last_heard >= interval:
                self.probe(channel.get_transport(), deadline)
                return True
            wait = min(wait, self.last_heard + interval - now)
        select.select([channel], [], [], wait)
        return True

    def probe(self, transport, deadline):
        """Ask the host for an answer: open a session channel, which sshd
        confirms (or refuses) without running anything; raise ``Silent``
        when the host has given none for ``command_timeout``. Returns
        without an answer when the command's deadline comes first."""
        now = time.monotonic()
        # At least a second to answer, should this thread have run late.
        wait = max(self.last_heard + self._conf.command_timeout - now, 1.0)
        try:
            transport.open_session(timeout=min(wait, deadline - now)).close()
        except paramiko.ChannelException:
            pass  # refused: an answer all the same
        except paramiko.SSHException:
            if not transport.is_active():
                raise  # the connection is gone, not merely silent
            if time.monotonic() < deadline:
                raise Silent(time.monotonic() - self.last_heard)
            return
        self.last_heard = time.monotonic()
