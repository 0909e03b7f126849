"""The Tacker v2 front door: the process the VNF package's script runs.

Tacker v2's conductor runs the script of the VNFD's Vnflcm interface as
``sys.executable <script>``, writes one pickled dict to its stdin and reads
one pickled dict from its stdout; anything else on stdout makes it drop
the result silently, and a non-zero exit fails the operation with the
script's stderr as the error. So ``main``:

* points file descriptors 1 and 2 at the log file (``v2_log_file``, else
  kubernetes-mgmt-pv-v2.log in Tacker's ``log_dir``, else in its
  ``state_path``; only the conductor user's own regular file, mode 0600,
  secrets redacted) before importing the driver, so no library, warning
  or child process can write to Tacker's pipes;
* reads Tacker's configuration, which the script process has not: the
  files named by KUBERNETES_MGMT_PV_TACKER_CONF (``:``-separated), else
  the ``--config-file``/``--config-dir`` of the conductor that started it
  (its master process's, as its workers hide theirs), else
  /etc/tacker/tacker.conf;
* stops at ``v2_hook_deadline`` (Tacker sets no limit while it holds the
  VNF's lock), failing as below;
* writes only the final pickle to stdout and, on failure, exits 1 with one
  ASCII line "<step> failed on <host>: <reason>" on stderr (Tacker names
  the hook) and the same failure, with the log file and what a retry will
  do, in its user_script_err_handling_data (``v2_failure``).

Only the standard library (and ``exceptions``, which imports nothing
else) is imported before the log is set up.
"""

import errno
import fcntl
import logging
import os
import pickle
import re
import stat
import sys
import threading

from kubernetes_mgmt_pv import exceptions

LOG = logging.getLogger(__name__)

CONFIG_ENV = 'KUBERNETES_MGMT_PV_TACKER_CONF'
DEFAULT_CONFIG = '/etc/tacker/tacker.conf'
_CONFIG_OPTIONS = ('--config-file', '--config-dir')
_MASTER_TITLE = re.compile(r'[^\[]*: master process \[(.*)\]')
LOG_NAME = 'kubernetes-mgmt-pv-v2.log'
# Tacker's own default state_path, for a configuration without Tacker's.
TACKER_STATE_PATH = '/var/lib/tacker'


def config_args(environ, ancestor_argvs, default_exists):
    """The oslo.config arguments naming Tacker's configuration: from the
    environment, else from the nearest ancestor (parent first) whose
    command line names any, else the default file if it exists."""
    if environ.get(CONFIG_ENV):
        return [arg for path in environ[CONFIG_ENV].split(os.pathsep)
                if path for arg in ('--config-file', path)]
    for argv in ancestor_argvs:
        args = _config_options(_untitled(argv))
        if args:
            return args
    return ['--config-file', DEFAULT_CONFIG] if default_exists else []


def _config_options(argv):
    args = []
    for index, arg in enumerate(argv):
        for option in _CONFIG_OPTIONS:
            if arg == option and index + 1 < len(argv):
                args += [option, argv[index + 1]]
            elif arg.startswith(option + '='):
                args += [option, arg.split('=', 1)[1]]
    return args


def _untitled(argv):
    """The command line of a process that retitled itself: Tacker 16's
    conductor master keeps its own, space-joined, in brackets (its
    workers, the script's parents, keep none)."""
    match = len(argv) == 1 and _MASTER_TITLE.fullmatch(argv[0])
    return match.group(1).split() if match else argv


def _ancestor_argvs(depth=4):
    """Command lines of the script's parent and its ancestors."""
    argvs, pid = [], os.getppid()
    while pid > 1 and len(argvs) < depth:
        try:
            with open('/proc/%d/cmdline' % pid, 'rb') as stream:
                cmdline = stream.read()
            with open('/proc/%d/stat' % pid) as stream:
                stat = stream.read()
        except OSError:
            break
        argvs.append([arg.decode('utf-8', 'replace')
                      for arg in cmdline.split(b'\0') if arg])
        # "pid (comm) state ppid ...": comm may hold spaces and parentheses.
        pid = int(stat.rsplit(')', 1)[1].split()[1])
    return argvs


class _Redacting(logging.Filter):
    """Hides the hook's secrets in every record, its traceback included."""

    def __init__(self, secrets):
        super().__init__()
        self._secrets = secrets

    def filter(self, record):
        from kubernetes_mgmt_pv import redaction
        record.msg = redaction.redact(record.getMessage(), self._secrets)
        record.args = ()
        if record.exc_info:
            record.exc_text = redaction.redact(
                logging.Formatter().formatException(record.exc_info),
                self._secrets)
            record.exc_info = None
        return True


class _AppendHandler(logging.Handler):
    """One write(2) per record on an O_APPEND file: the records of hook
    processes running at the same time never interleave."""

    def __init__(self, fd):
        super().__init__()
        self._fd = fd

    def emit(self, record):
        try:
            os.write(self._fd, (self.format(record) + '\n').encode(
                'utf-8', 'backslashreplace'))
        except Exception:
            self.handleError(record)


def log_path(configured, log_dir, state_path):
    """The hook log: ``v2_log_file`` when set, else LOG_NAME in Tacker's
    ``log_dir``, else in its ``state_path``: directories Tacker's own user
    writes, where a fixed /var/log/tacker may not be (devstack logs to
    the journal)."""
    if configured:
        return configured
    return os.path.join(log_dir or state_path or TACKER_STATE_PATH,
                        LOG_NAME)


class LogFileError(exceptions.MgmtDriverError):
    """The hook log cannot be written; the message says where and why."""

    def __init__(self, path, reason):
        super().__init__(
            'the log file %s cannot be written: %s; set v2_log_file in the '
            '[kubernetes_mgmt_pv] section of tacker.conf to a file the '
            'conductor\'s user may write' % (path, reason))


_OPEN_ERRORS = {errno.ELOOP: 'it is a symbolic link',
                errno.ENXIO: 'it is not a regular file'}


def _make_directories(directory):
    """Create ``directory`` and its missing parents with mode 0700."""
    if not os.path.isdir(directory):
        _make_directories(os.path.dirname(directory))
        try:
            os.mkdir(directory, 0o700)
        except FileExistsError:
            pass  # another hook made it; a file there fails the open


def _owner(uid):
    return 'it belongs to uid %d, not to this user (uid %d)' % (
        uid, os.geteuid())


def open_log(path):
    """An append-only fd on the log ``path``: created with mode 0600 (its
    directories 0700), and refused when it is a symbolic link, not a
    regular file or another user's; its mode set to 0600."""
    try:
        _make_directories(os.path.dirname(os.path.abspath(path)))
        # O_NONBLOCK: a FIFO fails (ENXIO) instead of blocking here.
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT |
                     os.O_NOFOLLOW | os.O_NOCTTY | os.O_NONBLOCK, 0o600)
    except OSError as error:
        raise LogFileError(path, _OPEN_ERRORS.get(
            error.errno, error.strerror or str(error))) from None
    try:
        found = os.fstat(fd)
        if not stat.S_ISREG(found.st_mode):
            raise LogFileError(path, 'it is not a regular file')
        if found.st_uid != os.geteuid():
            raise LogFileError(path, _owner(found.st_uid))
        os.fchmod(fd, 0o600)
        fcntl.fcntl(fd, fcntl.F_SETFL,
                    fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
    except BaseException:
        os.close(fd)
        raise
    return fd


def log_problem(path):
    """Why the hook could not write the log ``path``, or None; checked
    without creating anything (``validate``)."""
    try:
        found = os.lstat(path)
    except FileNotFoundError:
        parent = os.path.dirname(os.path.abspath(path))
        while not os.path.lexists(parent):
            parent = os.path.dirname(parent)
        if not os.path.isdir(parent) or not os.access(
                parent, os.W_OK | os.X_OK):
            return ('the log file %s cannot be created: %s is not a '
                    'directory this user may write' % (path, parent))
        return None
    except OSError as error:
        return str(LogFileError(path, error.strerror))
    if stat.S_ISLNK(found.st_mode):
        reason = 'it is a symbolic link'
    elif not stat.S_ISREG(found.st_mode):
        reason = 'it is not a regular file'
    elif found.st_uid != os.geteuid():
        reason = _owner(found.st_uid)
    elif not os.access(path, os.W_OK):
        reason = 'it is not writable'
    else:
        return None
    return str(LogFileError(path, reason))


def _tacker_config(environ):
    """(options, whether a file was read) of Tacker's configuration on
    this host, read as a hook reads it but into a private ConfigOpts,
    without Tacker; with no file (not the conductor host), the defaults."""
    from oslo_config import cfg

    from kubernetes_mgmt_pv import config
    args = config_args(environ, [], os.path.exists(DEFAULT_CONFIG))
    conf = cfg.ConfigOpts()
    config.register_opts(conf)
    conf.register_opts([cfg.StrOpt('log_dir'), cfg.StrOpt('state_path')])
    conf(args=args, project='tacker', default_config_files=[])
    return conf, bool(args)


def configured_log_file(environ):
    """The hook log path Tacker's configuration gives (``validate``)."""
    from kubernetes_mgmt_pv import config
    conf, _ = _tacker_config(environ)
    return log_path(config.options(conf).v2_log_file, conf.log_dir,
                    conf.state_path)


def configured_key_options(environ):
    """(ssh_key_dir, ssh_key_per_project) of Tacker's configuration on
    this host (``validate`` on the conductor host); None without one."""
    from kubernetes_mgmt_pv import config
    conf, read = _tacker_config(environ)
    options = config.options(conf)
    return (options.ssh_key_dir, options.ssh_key_per_project) \
        if read else None


def _log_to(path, secrets):
    """Send the root logger, warnings and fds 1 and 2 to ``path``."""
    fd = open_log(path)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    handler = _AppendHandler(fd)
    handler.setFormatter(logging.Formatter(
        '%(asctime)s ' + str(os.getpid()) +
        ' %(levelname)s %(name)s %(message)s'))
    handler.addFilter(_Redacting(secrets))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    logging.captureWarnings(True)


def _silence():
    """fds 1 and 2 to /dev/null until the log is known."""
    fd = os.open(os.devnull, os.O_WRONLY)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)


class _Handback(object):
    """What goes back to Tacker, once: the result pickle on stdout, or the
    failure (its fields in user_script_err_handling_data, its line on
    stderr), from the hook's thread or the deadline's, whichever ends
    first."""

    def __init__(self, out_fd, err_fd):
        self._out_fd, self._err_fd = out_fd, err_fd
        self._once = threading.Lock()
        self.operation, self.secrets, self.log_file = 'hook', [], None
        self.data, self.progress = None, {}

    def succeed(self, result):
        if not self._once.acquire(blocking=False):
            return False
        LOG.info('%s done', self.operation)
        logging.shutdown()
        if self.data is not None:
            result['user_script_err_handling_data'] = self._data()
        os.write(self._out_fd, pickle.dumps(result))
        return True

    def fail(self, error):
        if not self._once.acquire(blocking=False):
            return False
        from kubernetes_mgmt_pv.doors import v2_failure
        found = v2_failure.failure(self.operation, error, self.secrets)
        line = v2_failure.error_line(found)
        LOG.error('%s failed: %s', self.operation, line,
                  exc_info=error if error.__traceback__ else None)
        logging.shutdown()
        if self.data is not None:
            self.progress[v2_failure.FAILURE_KEY] = \
                v2_failure.failure_fields(found, self.log_file,
                                          v2_failure.retry_note(
                                              self.operation, error,
                                              self.progress.get('done', ())))
            os.write(self._out_fd, pickle.dumps(
                {'user_script_err_handling_data': self._data()}))
        os.write(self._err_fd, line.encode('ascii'))
        return True

    def _data(self):
        """user_script_err_handling_data with the door's entry, when it
        has content."""
        from kubernetes_mgmt_pv.doors import v2_mapping
        if self.progress:
            self.data[v2_mapping.STATE_KEY] = self.progress
        return self.data


def _start_deadline(seconds, handback):
    """Past ``seconds``, fail the hook from a timer thread: the hook's
    threads may be blocked in I/O, which no exception interrupts."""
    def expire():
        if handback.fail(exceptions.MgmtDriverError(
                'no result within v2_hook_deadline (%g s); nothing more is '
                'done' % seconds)):
            os._exit(1)
    timer = threading.Timer(seconds, expire)
    timer.daemon = True
    timer.start()
    return timer


def main(stdin=None):
    """Run one hook as Tacker v2 asks; the process's exit status."""
    stdin = stdin or sys.stdin.buffer
    handback = _Handback(os.dup(1), os.dup(2))
    _silence()
    try:
        script_dict = pickle.load(stdin)
        handback.operation = operation = str(script_dict.get('operation'))
        from kubernetes_mgmt_pv.doors import v2_failure
        from kubernetes_mgmt_pv.doors import v2_mapping
        if not v2_mapping.runs(operation):
            # Not a hook of the driver: no configuration, log or engine.
            handback.succeed({})
            return 0
        data = dict(script_dict.get('user_script_err_handling_data') or {})
        progress = dict(data.get(v2_mapping.STATE_KEY) or {})
        progress.pop(v2_failure.FAILURE_KEY, None)
        handback.data, handback.progress = data, progress
        from kubernetes_mgmt_pv import config
        from kubernetes_mgmt_pv.doors import tacker_compat
        tacker_compat.load_tacker_config(config_args(
            os.environ, _ancestor_argvs(), os.path.exists(DEFAULT_CONFIG)))
        options = config.options()
        path = log_path(options.v2_log_file, *tacker_compat.tacker_paths())
        _log_to(path, handback.secrets)
        handback.log_file = path
        _start_deadline(options.v2_hook_deadline, handback)
        from kubernetes_mgmt_pv.doors import v2_hook
        LOG.info('%s of VNF instance %s', operation,
                 (script_dict.get('vnf_instance') or {}).get('id'))
        result = v2_hook.run(script_dict, handback.secrets, progress)
    except Exception as error:
        handback.fail(error)
        return 1
    return 0 if handback.succeed(result) else 1
