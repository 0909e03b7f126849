"""SSH private keys held on the conductor host, for logins that put no
secret in the request.

A request names a key by a plain file name (``ssh_key``), looked up in
``ssh_key_dir``: Tacker shows additionalParams unmasked in every LCM
operation occurrence and copies them into grant requests, so a password
there is readable by every API user, a file name is not a secret. The file
must be a regular file of the user the driver runs as (tacker-conductor's,
which the Tacker v2 script process shares) that no other user may read;
anything else is refused before any host is touched, naming the JSON path
of the parameter and why, never the key's content.
"""

import dataclasses
import errno
import io
import os
import re
import stat

import paramiko

from kubernetes_mgmt_pv import exceptions

# A file name, never a path: no "/", no leading "." (so no "..").
KEY_NAME = re.compile(r'[A-Za-z0-9][A-Za-z0-9_.-]{0,127}')
# OpenSSH private keys are a few KiB; a bigger file is not one.
MAX_KEY_BYTES = 64 * 1024
_KEY_CLASSES = (paramiko.Ed25519Key, paramiko.ECDSAKey, paramiko.RSAKey)


@dataclasses.dataclass(frozen=True)
class KeyFileFacts(object):
    """What ``fstat`` says of an opened key file."""
    is_regular: bool
    mode: int  # the permission bits
    owner_uid: int


def key_file_problem(facts, user_uid):
    """Why the key file may not be used (None: it may): another user who
    can write it could log the driver in as someone else's key, one who
    can read it could log in to every node."""
    if not facts.is_regular:
        return 'is not a regular file'
    if facts.owner_uid != user_uid:
        return ('is owned by uid %d, not by the user the driver runs as '
                '(uid %d)' % (facts.owner_uid, user_uid))
    if facts.mode & 0o077:
        return ('has mode %04o: group and others must have no access '
                '(chmod 600)' % facts.mode)
    return None


def load(directory, name):
    """The private key of file ``name`` in ``directory``, as a paramiko
    key. Raises ``KeyFileError`` saying why it cannot be used."""
    if not isinstance(name, str) or not KEY_NAME.fullmatch(name):
        raise KeyFileError('must be a file name in ssh_key_dir (a letter or '
                           'digit, then up to 127 letters, digits and _ . -)')
    path = os.path.join(directory, name)
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW |
                             os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as error:
        if error.errno == errno.ENOENT:
            raise KeyFileError('no key file %s (ssh_key_dir %s)'
                               % (name, directory))
        if error.errno == errno.ELOOP:
            raise KeyFileError('%s is a symbolic link, which is refused'
                               % path)
        raise KeyFileError('%s cannot be opened: %s'
                           % (path, os.strerror(error.errno)))
    try:
        status = os.fstat(descriptor)
        problem = key_file_problem(KeyFileFacts(
            is_regular=stat.S_ISREG(status.st_mode),
            mode=stat.S_IMODE(status.st_mode),
            owner_uid=status.st_uid), os.geteuid())
        if problem:
            raise KeyFileError('%s %s' % (path, problem))
        data = os.read(descriptor, MAX_KEY_BYTES + 1)
    finally:
        os.close(descriptor)
    if len(data) > MAX_KEY_BYTES:
        raise KeyFileError('%s is larger than %d bytes: not a private key'
                           % (path, MAX_KEY_BYTES))
    return parse(data, path)


def parse(data, path):
    """A paramiko key of an Ed25519, ECDSA or RSA private key file's
    bytes; the error never shows them."""
    try:
        text = data.decode('ascii')
    except UnicodeDecodeError:
        text = None
    for key_class in _KEY_CLASSES if text else ():
        try:
            return key_class.from_private_key(io.StringIO(text))
        except paramiko.PasswordRequiredException:
            raise KeyFileError('%s is encrypted with a passphrase, which '
                               'the driver does not support' % path)
        except (paramiko.SSHException, ValueError, TypeError, IndexError):
            continue  # another type of key, or not a key
    raise KeyFileError('%s cannot be parsed as an unencrypted Ed25519, '
                       'ECDSA or RSA private key' % path)


class KeyFileError(Exception):
    """A key file that cannot be used; the message says why."""


def load_all(named, directory):
    """{file name: key} of every (JSON path, file name) of ``named``.
    Raises ``ParameterErrors`` naming the JSON path of every key that
    cannot be used, before any of them is."""
    keys, errors = {}, []
    for path, name in named:
        if name in keys:
            continue
        try:
            keys[name] = load(directory, name)
        except KeyFileError as error:
            errors.append(exceptions.ParameterError(path, str(error)))
    if errors:
        raise exceptions.ParameterErrors(errors)
    return keys
