"""How a command that lost its host is reported: silence or a closed
connection (the whole path: tests/functional/test_remote.py)."""

import socket

import paramiko
import pytest

from kubernetes_mgmt_pv.remote import command_output
from kubernetes_mgmt_pv.remote import facts
from kubernetes_mgmt_pv.remote import remote


@pytest.mark.parametrize('quiet, limit, interval, silent', [
    # Nothing heard for the limit of starting a command: silent.
    (30.0, 30.0, 10.0, True),
    (3.2, 3.0, 0.0, True),
    # Dropped by the kernel (three unanswered intervals), before the limit.
    (40.0, 300.0, 10.0, True),
    (20.0, 300.0, 10.0, True),
    # Closed by the host, which answered within the last interval.
    (0.1, 30.0, 10.0, False),
    (10.5, 30.0, 10.0, False),
    (19.9, 30.0, 10.0, False),
    # Keepalives off: only the limit tells.
    (29.9, 30.0, 0.0, False),
])
def test_a_lost_connection_is_silence_only_after_unanswered_intervals(
        quiet, limit, interval, silent):
    assert command_output.fell_silent(quiet, limit, interval) is silent


@pytest.mark.parametrize('seconds, reason', [
    (30.0, 'no answer from 10.0.0.5 for 30 s'),
    (34.9, 'no answer from 10.0.0.5 for 34 s'),
    (0.2, 'no answer from 10.0.0.5 for 0 s'),
])
def test_no_answer_names_the_host_and_the_seconds_of_silence(seconds,
                                                             reason):
    assert command_output.no_answer_reason('10.0.0.5', seconds) == reason


@pytest.mark.parametrize('error, hinted', [
    # Dropped packets (a security group): no answer at all.
    (socket.timeout('timed out'), True),
    (TimeoutError(), True),
    # An answer: refused, unreachable, a handshake that failed.
    (ConnectionRefusedError(111, 'Connection refused'), False),
    (paramiko.ssh_exception.NoValidConnectionsError(
        {('10.0.0.5', 22): OSError(113, 'No route to host')}), False),
    (paramiko.SSHException('Error reading SSH protocol banner'), False),
    (EOFError(), False),
])
def test_an_unanswered_ssh_connection_points_at_the_security_group(
        error, hinted):
    hint = remote.unanswered_hint(error, 22)
    assert bool(hint) is hinted
    if hinted:
        assert 'port 22' in hint and 'security group' in hint
        assert 'management_cidr' in hint


@pytest.mark.parametrize('chunks, value, overflowed', [
    ([b'abc', b'def'], b'abcdef', False),
    ([b'abcdefgh'], b'abcdefgh', False),
    # Past the limit: the head and the tail, the middle counted.
    ([b'abcdefghi'], b'abcd\n[... 1 bytes left out ...]\nfghi', True),
    ([b'ab', b'cdefg', b'hijklmnop'],
     b'abcd\n[... 8 bytes left out ...]\nmnop', True),
])
def test_output_keeps_head_and_tail_within_the_limit(chunks, value,
                                                     overflowed):
    output = command_output.BoundedOutput(8)
    for chunk in chunks:
        output.add(chunk)
    assert output.getvalue() == value
    assert output.overflowed is overflowed


@pytest.mark.parametrize('status, stderr, wants', [
    (1, 'sudo: a password is required\n', True),
    # sudo-rs, Ubuntu's sudo since 25.10 (26.04 LTS).
    (1, 'sudo: interactive authentication is required\n', True),
    (1, 'sudo: a terminal is required to read the password\n', False),
    (1, 'grep: no match\n', False),  # the command's own failure
    (0, '', False),
    (2, 'sudo: a password is required\n', False),
])
def test_sudo_refusal_for_want_of_a_password(status, stderr, wants):
    result = facts.CommandResult(status, b'', stderr.encode())
    assert facts.sudo_wants_password(result) is wants
