"""A file from one host to another through the driver, streamed.

The hosts have no login on each other (only the driver has), and the file
may be larger than ``command_output_limit`` (an etcd snapshot holds the
whole database): the source command's standard output goes to the target
command's standard input a chunk at a time, never held whole in memory.
The target command checks what arrived (e.g. against a SHA-256 taken on
the source) before keeping it.
"""

import socket

import paramiko

from kubernetes_mgmt_pv import exceptions
from kubernetes_mgmt_pv import redaction
from kubernetes_mgmt_pv.remote import facts

CHUNK = 1 << 16
# Bytes kept of either side's own output (a listing, an error).
_KEPT = 1 << 16


def copy(source, source_argv, target, target_argv, description):
    """Run ``source_argv`` on ``source`` and ``target_argv`` on
    ``target`` (both with sudo), the first's stdout fed to the second's
    stdin. Returns the target's stdout (text, at most 64 KiB); raises
    ``RemoteCommandError`` naming the host whose side failed or stopped
    answering (``command_timeout`` without progress)."""
    with source.channel(source_argv, sudo=True) as reader, \
            target.channel(target_argv, sudo=True) as writer:
        try:
            _pump(reader, writer)
        except (socket.timeout, paramiko.SSHException, OSError) as error:
            if writer.exit_status_ready():
                _finish(writer, target, description)  # its own error
            failed = _failed_side(reader, writer, source, target)
            raise exceptions.RemoteCommandError(
                failed.host, description, None, reason='stream broken: %s'
                % redaction.one_line(str(error) or type(error).__name__))
        _finish(reader, source, description)
        return _finish(writer, target, description)


def _pump(reader, writer):
    while True:
        chunk = reader.recv(CHUNK)
        if not chunk:
            break
        writer.sendall(chunk)
    writer.shutdown_write()


def _failed_side(reader, writer, source, target):
    """The host whose command ended first (the other could not go on)."""
    return target if writer.exit_status_ready() and not \
        reader.exit_status_ready() else source


def _finish(channel, host, description):
    """The command's stdout once it exited 0; else its error."""
    stdout = _drain(channel.recv)
    stderr = _drain(channel.recv_stderr)
    if not channel.status_event.wait(channel.gettimeout()):
        raise exceptions.RemoteCommandError(host.host, description, None,
                                            timed_out=True)
    result = facts.CommandResult(channel.recv_exit_status(), stdout, stderr)
    if not result.ok:
        raise host.failure(description, result)
    return result.stdout


def _drain(receive):
    """What a stream of the channel still holds until its end (bytes),
    the first 64 KiB kept."""
    kept = b''
    while True:
        chunk = receive(CHUNK)
        if not chunk:
            return kept
        kept = (kept + chunk)[:_KEPT]
