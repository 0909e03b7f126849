"""SSH private keys held on the conductor host, for logins that put no
secret in the request.

A request names a key by a plain file name (``ssh_key``), looked up in
``ssh_key_dir``, or with ``ssh_key_per_project`` in its subdirectory named
after the VNF instance's project, so that one project cannot log in with
another's key: Tacker shows additionalParams unmasked in every LCM
operation occurrence and copies them into grant requests, so a password
there is readable by every API user, a file name is not a secret. The key
directories must be directories of the user the driver runs as
(tacker-conductor's, which the Tacker v2 script process shares) that no
other user may write, the file a regular file of that user that no other
user may read; anything else is refused before any host is touched. The
caller learns the JSON path of the parameter and the reason's class (no
such key, unsafe key file, unsafe key directory, unusable key); the path,
owner and mode only go to the conductor's log.
"""

import dataclasses
import errno
import io
import os
import re
import stat

from oslo_log import log as logging
import paramiko

from kubernetes_mgmt_pv import exceptions

LOG = logging.getLogger(__name__)

# A file name, never a path: no "/", no leading "." (so no "..").
KEY_NAME = re.compile(r'[A-Za-z0-9][A-Za-z0-9_.-]{0,127}')
# A project id (Keystone's: 32 hex digits) as a directory name.
PROJECT_NAME = re.compile(r'[A-Za-z0-9][A-Za-z0-9_-]{0,63}')
# OpenSSH private keys are a few KiB; a bigger file is not one.
MAX_KEY_BYTES = 64 * 1024
_KEY_CLASSES = (paramiko.Ed25519Key, paramiko.ECDSAKey, paramiko.RSAKey)

# What a refusal tells the caller; the details go to the log.
NO_SUCH_KEY = 'no such key'
UNSAFE_KEY_FILE = 'unsafe key file'
UNSAFE_KEY_DIRECTORY = 'unsafe key directory'
UNUSABLE_KEY = ('unusable key: not an unencrypted Ed25519, ECDSA or RSA '
                'private key')
_DIRECTORY_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | \
    os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


@dataclasses.dataclass(frozen=True)
class KeyFileFacts(object):
    """What ``fstat`` says of an opened key file."""
    is_regular: bool
    mode: int  # the permission bits
    owner_uid: int


@dataclasses.dataclass(frozen=True)
class DirectoryFacts(object):
    """What ``fstat`` says of an opened key directory (opened without
    following a symbolic link)."""
    is_directory: bool
    mode: int  # the permission bits
    owner_uid: int


def _problem(facts, user_uid, right_kind, forbidden_bits, rule):
    """The first reason against an opened file or directory of
    ``facts``: not ``right_kind``, another owner, or ``forbidden_bits``
    set in its mode (``rule`` says what they must be)."""
    if not right_kind:
        return 'is not a %s' % ('directory' if isinstance(
            facts, DirectoryFacts) else 'regular file')
    if facts.owner_uid != user_uid:
        return ('is owned by uid %d, not by the user the driver runs as '
                '(uid %d)' % (facts.owner_uid, user_uid))
    if facts.mode & forbidden_bits:
        return 'has mode %04o: %s' % (facts.mode, rule)
    return None


def key_file_problem(facts, user_uid):
    """Why the key file may not be used (None: it may): another user who
    can write it could log the driver in as someone else's key, one who
    can read it could log in to every node."""
    return _problem(facts, user_uid, facts.is_regular, 0o077,
                    'group and others must have no access (chmod 600)')


def directory_problem(facts, user_uid):
    """Why a key directory may not be used (None: it may): another user
    who can write it could put a key of theirs there, or rename one."""
    return _problem(facts, user_uid, facts.is_directory, 0o022,
                    'group and others must not write it (chmod go-w)')


@dataclasses.dataclass(frozen=True)
class KeyPlace(object):
    """Where the hooks look a request's key files up: ``ssh_key_dir``,
    or its subdirectory ``project`` (ssh_key_per_project)."""
    directory: str
    project: str = None


class KeyFileError(Exception):
    """A key file that cannot be used: ``str()`` is the reason's class,
    for the caller; ``detail`` says where and why, for the log."""

    def __init__(self, reason, detail):
        super().__init__(reason)
        self.detail = detail


def _open_directory(path, user_uid, dir_fd=None, name=None):
    """A descriptor of the key directory ``path`` (opened as ``name``
    relative to ``dir_fd`` when given), checked by
    ``directory_problem``."""
    try:
        descriptor = os.open(name or path, _DIRECTORY_FLAGS, dir_fd=dir_fd)
    except OSError as error:
        if error.errno == errno.ENOENT:
            raise KeyFileError(NO_SUCH_KEY, 'key directory %s does not '
                               'exist' % path)
        raise KeyFileError(UNSAFE_KEY_DIRECTORY, 'key directory %s cannot '
                           'be opened (a symbolic link is refused): %s'
                           % (path, os.strerror(error.errno)))
    status = os.fstat(descriptor)
    problem = directory_problem(DirectoryFacts(
        is_directory=stat.S_ISDIR(status.st_mode),
        mode=stat.S_IMODE(status.st_mode), owner_uid=status.st_uid),
        user_uid)
    if problem:
        os.close(descriptor)
        raise KeyFileError(UNSAFE_KEY_DIRECTORY, 'key directory %s %s'
                           % (path, problem))
    return descriptor


def _read_key_file(dir_fd, name, path, user_uid):
    """The bytes of key file ``name`` in the directory open as
    ``dir_fd`` (``path`` names it in the log)."""
    try:
        descriptor = os.open(name, _FILE_FLAGS, dir_fd=dir_fd)
    except OSError as error:
        if error.errno == errno.ENOENT:
            raise KeyFileError(NO_SUCH_KEY, 'no key file %s' % path)
        if error.errno == errno.ELOOP:
            raise KeyFileError(UNSAFE_KEY_FILE, '%s is a symbolic link, '
                               'which is refused' % path)
        raise KeyFileError(UNSAFE_KEY_FILE, '%s cannot be opened: %s'
                           % (path, os.strerror(error.errno)))
    try:
        status = os.fstat(descriptor)
        problem = key_file_problem(KeyFileFacts(
            is_regular=stat.S_ISREG(status.st_mode),
            mode=stat.S_IMODE(status.st_mode),
            owner_uid=status.st_uid), user_uid)
        if problem:
            raise KeyFileError(UNSAFE_KEY_FILE, '%s %s' % (path, problem))
        data = os.read(descriptor, MAX_KEY_BYTES + 1)
    finally:
        os.close(descriptor)
    if len(data) > MAX_KEY_BYTES:
        raise KeyFileError(UNUSABLE_KEY, '%s is larger than %d bytes: not a '
                           'private key' % (path, MAX_KEY_BYTES))
    return data


def load(directory, name, project=None, user_uid=None):
    """The private key of file ``name`` in ``directory``, or in its
    subdirectory ``project``, as a paramiko key. Each directory and the
    file must belong to ``user_uid`` (default: the process's effective
    uid). Raises ``KeyFileError`` saying why it cannot be used."""
    if not isinstance(name, str) or not KEY_NAME.fullmatch(name):
        raise KeyFileError('must be a file name in ssh_key_dir (a letter or '
                           'digit, then up to 127 letters, digits and _ . -)',
                           'not a key file name: %r' % (name,))
    if project is not None and not (isinstance(project, str) and
                                    PROJECT_NAME.fullmatch(project)):
        raise KeyFileError(NO_SUCH_KEY, 'project id %r is no directory name'
                           % (project,))
    user_uid = os.geteuid() if user_uid is None else user_uid
    descriptors = [_open_directory(directory, user_uid)]
    try:
        path = directory
        if project is not None:
            path = os.path.join(directory, project)
            descriptors.append(_open_directory(path, user_uid,
                                               descriptors[0], project))
        path = os.path.join(path, name)
        return parse(_read_key_file(descriptors[-1], name, path, user_uid),
                     path)
    finally:
        for descriptor in descriptors:
            os.close(descriptor)


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
            raise KeyFileError(UNUSABLE_KEY, '%s is encrypted with a '
                               'passphrase, which the driver does not '
                               'support' % path)
        except (paramiko.SSHException, ValueError, TypeError, IndexError):
            continue  # another type of key, or not a key
    raise KeyFileError(UNUSABLE_KEY, '%s cannot be parsed as an '
                       'unencrypted Ed25519, ECDSA or RSA private key' % path)


def load_all(named, directory, project=None, user_uid=None):
    """{file name: key} of every (JSON path, file name) of ``named``, in
    ``directory`` or its subdirectory ``project``. Raises
    ``ParameterErrors`` naming the JSON path and the reason's class of
    every key that cannot be used, before any of them is; the log says
    where and why."""
    keys, errors = {}, []
    for path, name in named:
        if name in keys:
            continue
        try:
            keys[name] = load(directory, name, project, user_uid)
        except KeyFileError as error:
            LOG.warning('%s refused: %s', path, error.detail)
            errors.append(exceptions.ParameterError(path, '%s (the '
                                                    'driver\'s log says why)'
                                                    % error))
    if errors:
        raise exceptions.ParameterErrors(errors)
    return keys


def load_configured(named, conf, project_of=None):
    """``load_all`` as the driver's options say: from ssh_key_dir or, with
    ssh_key_per_project, from its subdirectory of the project that
    ``project_of()`` names (asked only then: the VNF instance's)."""
    if not named:
        return {}
    if not conf.ssh_key_per_project:
        return load_all(named, conf.ssh_key_dir)
    project = project_of() if project_of else None
    if not project:
        LOG.error('ssh_key_per_project is set but the project of the VNF '
                  'instance is not known: no key file is used')
        raise exceptions.ParameterErrors([exceptions.ParameterError(
            path, '%s: the project of the VNF instance is not known '
            '(ssh_key_per_project)' % NO_SUCH_KEY) for path, _ in named])
    return load_all(named, conf.ssh_key_dir, project)
