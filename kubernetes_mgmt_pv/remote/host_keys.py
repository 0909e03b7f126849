"""SSH host key verification against the keys a VM printed on its console.

A VM that Heat has just created, or re-created in a heal, has fresh host
keys that no known_hosts file can list. cloud-init prints them on the VM's
serial console during its first boot, and the console log read through
Nova's API with the VIM credentials comes from the hypervisor, not from the
network: a key listed there is the VM's own. ``ConsoleHostKeyPolicy``
accepts only such a key, so an impostor answering at the VM's address is
refused after the key exchange and before the password is sent.

cloud-init's output (``write-ssh-key-fingerprints``, run by the
keys_to_console module) is a block of ``ssh-keygen -l`` lines::

    -----BEGIN SSH HOST KEY FINGERPRINTS-----
    256 SHA256:<43 base64 characters> root@host (ED25519)
    -----END SSH HOST KEY FINGERPRINTS-----

followed by a block of public keys (``ssh-ed25519 AAAA... root@host``)
between ``-----BEGIN SSH HOST KEY KEYS-----`` and ``-----END SSH HOST KEY
KEYS-----``. On the console each line may carry a prefix: the syslog header
and tag of ``logger`` (``<14>Jun  5 10:11:12 ec2: ``), a kernel timestamp
and unit name, terminal colour codes, or a carriage return.
"""

import base64
import binascii
import contextlib
import fcntl
import functools
import hashlib
import os
import re
import struct
import threading
import time

from oslo_log import log as logging
import paramiko

from kubernetes_mgmt_pv import config
from kubernetes_mgmt_pv import exceptions
from kubernetes_mgmt_pv.openstack import nova

LOG = logging.getLogger(__name__)

FINGERPRINTS, KEYS = 'fingerprints', 'keys'
_MARKERS = {
    '-----BEGIN SSH HOST KEY FINGERPRINTS-----': (FINGERPRINTS, True),
    '-----END SSH HOST KEY FINGERPRINTS-----': (FINGERPRINTS, False),
    '-----BEGIN SSH HOST KEY KEYS-----': (KEYS, True),
    '-----END SSH HOST KEY KEYS-----': (KEYS, False),
}
# OpenSSH prints a SHA-256 digest as 43 base64 characters without padding.
_SHA256_FINGERPRINT = re.compile(
    r'(?<![A-Za-z0-9+/])SHA256:([A-Za-z0-9+/]{43})=?(?![A-Za-z0-9+/=])')
# Terminal control sequences (systemd colours its console status lines).
_CONTROL_SEQUENCE = re.compile(r'\x1b\[[0-9;?]*[A-Za-z]')
_PUBLIC_KEY = re.compile(
    r'(?<!\S)([a-z][a-z0-9.@-]*)\s+(AAAA[A-Za-z0-9+/]+={0,2})(?!\S)')
# The console is polled with a doubling delay between these bounds: a booting
# VM prints its keys within a minute or two, and Nova need not be hammered.
FIRST_POLL_DELAY = 1.0
MAX_POLL_DELAY = 15.0

_KNOWN_HOSTS_LOCK = threading.Lock()


class HostKeyMismatchError(exceptions.RemoteConnectError):
    """The host presented a key other than the VM's: maybe an impostor."""


class HostKeyUnverifiedError(exceptions.RemoteConnectError):
    """The VM's keys could not be read and console_key_fallback is reject."""


def sha256_fingerprint(key) -> str:
    """OpenSSH's ``SHA256:...`` fingerprint of a paramiko public key."""
    return _fingerprint_of_blob(key.asbytes())


def _fingerprint_of_blob(blob):
    digest = hashlib.sha256(blob).digest()
    return 'SHA256:' + base64.b64encode(digest).decode('ascii').rstrip('=')


def parse_console_fingerprints(console_text):
    """SHA-256 fingerprints of the host keys in the console's last report.

    Returns a frozenset of ``SHA256:...`` strings, or None while no block
    is complete (the VM is still booting). A report is the last complete
    block; when that is a keys block, the fingerprints block before it is
    part of it (cloud-init prints both, fingerprints first). Earlier
    reports, from an earlier boot, do not count. An empty set means the VM
    printed the blocks but listed no key.
    """
    blocks = list(_complete_blocks(console_text))
    if not blocks:
        return None
    kind, fingerprints = blocks[-1]
    if kind == KEYS and len(blocks) > 1 and blocks[-2][0] == FINGERPRINTS:
        fingerprints = fingerprints | blocks[-2][1]
    return frozenset(fingerprints)


def _complete_blocks(console_text):
    """(kind, fingerprints) of every block with both markers, in order.

    A BEGIN marker drops a block left open before it: output cut off by a
    reboot is not trusted.
    """
    open_kind, fingerprints = None, set()
    for line in _CONTROL_SEQUENCE.sub('', console_text).splitlines():
        marker = next((m for m in _MARKERS if m in line), None)
        if marker is not None:
            kind, begins = _MARKERS[marker]
            if begins:
                open_kind, fingerprints = kind, set()
            elif kind == open_kind:
                yield kind, frozenset(fingerprints)
                open_kind = None
        elif open_kind == FINGERPRINTS:
            fingerprints.update(
                'SHA256:' + match.group(1)
                for match in _SHA256_FINGERPRINT.finditer(line))
        elif open_kind == KEYS:
            fingerprints.update(
                _fingerprint_of_blob(blob)
                for blob in map(_public_key_blob, _PUBLIC_KEY.finditer(line))
                if blob)


def _public_key_blob(match):
    """The decoded key of an ``<type> <base64>`` match, if it names <type>.

    OpenSSH's blob starts with its key type; a line whose label and blob
    disagree is not a public key line.
    """
    try:
        blob = base64.b64decode(match.group(2), validate=True)
        (type_length,) = struct.unpack('>I', blob[:4])
    except (binascii.Error, struct.error):
        return None
    if blob[4:4 + type_length] != match.group(1).encode('ascii'):
        return None
    return blob


class ConsoleHostKeyPolicy(paramiko.MissingHostKeyPolicy):
    """Accept an SSH host key only if the VM printed it on its console.

    One policy per Nova server: ``fetch_console()`` returns the server's
    console log, or raises ``nova.ConsoleOutputError``. The console is read
    when the first key must be checked and polled, with a doubling delay,
    until it lists the keys or ``timeout`` seconds have passed; the answer
    is kept for the policy's lifetime. Without keys on the console,
    ``fallback`` decides: ``reject`` refuses the host, ``warn`` accepts any
    key with a warning, ``known_hosts`` accepts the key recorded for the
    host in ``known_hosts_file``, or records it on first use. With
    ``known_hosts``, keys verified on the console are recorded too, so a
    VM whose console no longer holds its keys is still checked.

    ``missing_host_key`` is called by paramiko after the key exchange and
    before authentication: raising there means the password is never sent.
    """

    def __init__(self, server_id, fetch_console, timeout, fallback='reject',
                 known_hosts_file=None, clock=time.monotonic,
                 sleep=time.sleep):
        if fallback not in config.CONSOLE_KEY_FALLBACKS:
            raise ValueError('fallback must be one of %s, not %r'
                             % (config.CONSOLE_KEY_FALLBACKS, fallback))
        if fallback == 'known_hosts' and not known_hosts_file:
            raise ValueError('the known_hosts fallback needs known_hosts_file')
        self.server_id = server_id
        self._fetch_console = fetch_console
        self._timeout = timeout
        self._fallback = fallback
        self._known_hosts_file = known_hosts_file
        self._clock = clock
        self._sleep = sleep
        self._lock = threading.Lock()
        self._checked_console = False
        self._fingerprints = None
        self._unverified_reason = None

    def missing_host_key(self, client, hostname, key):
        presented = sha256_fingerprint(key)
        trusted = self.console_fingerprints()
        if trusted is None:
            self._fall_back(hostname, key, presented)
        elif presented in trusted:
            LOG.debug('SSH host key of %s (%s %s) is on the console of Nova '
                      'server %s', hostname, key.get_name(), presented,
                      self.server_id)
            if self._fallback == 'known_hosts':
                record_known_host(self._known_hosts_file, hostname, key)
        else:
            raise HostKeyMismatchError(
                '%s: SSH host key %s (%s) is not one of the keys that Nova '
                'server %s printed on its console (%s): another machine may '
                'be answering at this address. The connection was closed '
                'and the password was NOT sent.' % (
                    hostname, presented, key.get_name(), self.server_id,
                    ', '.join(sorted(trusted))))

    def prepare(self):
        """Read the console before connecting (the executor calls this), so
        a booting VM is waited for outside the SSH handshake."""
        self.console_fingerprints()

    def console_fingerprints(self):
        """The fingerprints on the console, waiting for them while the VM
        boots; None if there are none (``unverified_reason`` says why)."""
        with self._lock:
            if not self._checked_console:
                self._fingerprints, self._unverified_reason = (
                    self._wait_for_fingerprints())
                self._checked_console = True
            return self._fingerprints

    @property
    def unverified_reason(self):
        return self._unverified_reason

    def _wait_for_fingerprints(self):
        deadline = self._clock() + self._timeout
        delay = FIRST_POLL_DELAY
        while True:
            try:
                fingerprints = parse_console_fingerprints(
                    self._fetch_console())
            except nova.ConsoleOutputError as error:
                if not error.retry:
                    return None, str(error)
                reason = str(error)
            else:
                if fingerprints:
                    return fingerprints, None
                if fingerprints is not None:
                    return None, ('Nova server %s printed an empty list of '
                                  'SSH host keys on its console'
                                  % self.server_id)
                reason = ('Nova server %s printed no SSH host keys on its '
                          'console (is cloud-init keys_to_console on?)'
                          % self.server_id)
            remaining = deadline - self._clock()
            if remaining <= 0:
                return None, '%s; waited %gs' % (reason, self._timeout)
            LOG.debug('%s; reading the console again in %.1fs', reason,
                      min(delay, remaining))
            self._sleep(min(delay, remaining))
            delay = min(delay * 2, MAX_POLL_DELAY)

    def _fall_back(self, hostname, key, presented):
        if self._fallback == 'warn':
            LOG.warning('Accepting unverified SSH host key of %s: %s %s '
                        '(%s; console_key_fallback = warn)', hostname,
                        key.get_name(), presented, self._unverified_reason)
        elif self._fallback == 'known_hosts':
            _check_or_record_known_host(self._known_hosts_file, hostname,
                                        key, presented, self.server_id)
        else:
            raise HostKeyUnverifiedError(
                '%s: cannot verify SSH host key %s (%s): %s. The connection '
                'was closed and the password was NOT sent; make the image '
                'print its keys (cloud-init keys_to_console) or set '
                'console_key_fallback.' % (
                    hostname, presented, key.get_name(),
                    self._unverified_reason))


@contextlib.contextmanager
def _locked(path, hostname):
    """The process-wide lock, and an flock on ``path``.lock shared with
    other conductors (processes, hosts) recording in the same file, so
    none of them overwrites the entries of another's VNFs."""
    with _KNOWN_HOSTS_LOCK:
        try:
            handle = open(path + '.lock', 'a')
        except OSError as error:
            raise _unwritable(hostname, path, error) from error
        with handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            yield


def _check_or_record_known_host(path, hostname, key, presented, server_id):
    """Trust on first use: the key recorded for hostname, else record it."""
    with _locked(path, hostname):
        known = _load_known_hosts(path, hostname)
        recorded = _recorded_key(known, hostname, key)
        if recorded is None:
            _save_known_host(known, path, hostname, key)
            LOG.warning('SSH host key of %s (%s %s) is not on the console of '
                        'Nova server %s; trusting it on first use and '
                        'recording it in %s', hostname, key.get_name(),
                        presented, server_id, path)
        elif recorded.asbytes() != key.asbytes():
            raise HostKeyMismatchError(
                '%s: SSH host key %s (%s) differs from the one recorded in '
                '%s, and Nova server %s lists no keys on its console to tell '
                'whether the VM was re-created: another machine may be '
                'answering at this address. The connection was closed and '
                'the password was NOT sent; if the VM was legitimately '
                're-created, remove its old entry from that file.' % (
                    hostname, presented, key.get_name(), path, server_id))


def record_known_host(path, hostname, key):
    """Record a trusted key as hostname's key of its type, under the
    lock every writer of known_hosts files takes."""
    with _locked(path, hostname):
        known = _load_known_hosts(path, hostname)
        recorded = _recorded_key(known, hostname, key)
        if recorded is None or recorded.asbytes() != key.asbytes():
            _save_known_host(known, path, hostname, key)


def _load_known_hosts(path, hostname):
    """The file as it is now: re-read under the lock before every change,
    so hosts checked concurrently do not overwrite each other's entries."""
    known = paramiko.HostKeys()
    try:
        known.load(path)
    except FileNotFoundError:
        pass
    except OSError as error:
        raise exceptions.RemoteConnectError(
            '%s: cannot read known_hosts_file %s: %s'
            % (hostname, path, error.strerror or error)) from error
    return known


def _recorded_key(known, hostname, key):
    """The key of key's type recorded for hostname, or None."""
    return (known.lookup(hostname) or {}).get(key.get_name())


def _save_known_host(known, path, hostname, key):
    """Add or replace hostname's key of key's type and replace the file
    whole: a connection loading it meanwhile (without the lock) sees the
    old or the new entries, never a truncated file."""
    known.add(hostname, key.get_name(), key)
    partial = '%s.%d.new' % (path, os.getpid())
    try:
        known.save(partial)
        os.replace(partial, path)
    except OSError as error:
        with contextlib.suppress(OSError):
            os.remove(partial)
        raise _unwritable(hostname, path, error) from error


def _unwritable(hostname, path, error):
    return exceptions.RemoteConnectError(
        '%s: cannot record its SSH host key in %s (known_hosts_file, '
        'used by console_key_fallback "known_hosts"): %s'
        % (hostname, path, error.strerror or error))


def console_policy(heat_client, server_id, conf=None):
    """A ConsoleHostKeyPolicy for server_id, reading its console through
    Nova on the Heat client's session, with the driver's options."""
    conf = conf or config.options()
    compute = nova.Compute(heat_client)
    return ConsoleHostKeyPolicy(
        server_id, functools.partial(compute.console_output, server_id),
        timeout=conf.console_key_timeout,
        fallback=conf.console_key_fallback,
        known_hosts_file=conf.known_hosts_file)
