"""The Tacker v2 front door: the process the VNF package's script runs.

Tacker v2's conductor runs the script of the VNFD's Vnflcm interface as
``sys.executable <script>``, writes one pickled dict to its stdin and reads
one pickled dict from its stdout; anything else on stdout makes it drop
the result silently, and a non-zero exit fails the operation with the
script's stderr as the error. So ``main``:

* points file descriptors 1 and 2 at the log file (``v2_log_file``, mode
  0600, secrets redacted) before importing the driver, so no library,
  warning or child process can write to Tacker's pipes;
* reads Tacker's configuration, which the script process has not: the
  files named by KUBERNETES_MGMT_PV_TACKER_CONF (``:``-separated), else
  the ``--config-file``/``--config-dir`` of the conductor that started it
  (its master process's, as its workers hide theirs), else
  /etc/tacker/tacker.conf;
* stops at ``v2_hook_deadline`` (Tacker sets no limit while it holds the
  VNF's lock);
* writes only the final pickle to stdout and, on failure, exits 1 with one
  line "<step> failed on <host>: <reason>" on stderr.

Only the standard library is imported before the log is set up.
"""

import logging
import os
import pickle
import re
import socket
import sys
import threading

LOG = logging.getLogger(__name__)

CONFIG_ENV = 'KUBERNETES_MGMT_PV_TACKER_CONF'
DEFAULT_CONFIG = '/etc/tacker/tacker.conf'
_CONFIG_OPTIONS = ('--config-file', '--config-dir')
_MASTER_TITLE = re.compile(r'^[^\[]*: master process \[(.*)\]$')
_STEP_LINE = re.compile(r'[^:]+ failed on \S+: ')


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
    match = len(argv) == 1 and _MASTER_TITLE.match(argv[0])
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


def error_line(operation, error, host, secrets=()):
    """One line "<step> failed on <host>: <reason>", secrets hidden; an
    error that names no host is the conductor host's."""
    from kubernetes_mgmt_pv import redaction
    text = ' '.join(str(error).split()) or type(error).__name__
    if not _STEP_LINE.match(text):
        prefix = '%s failed: ' % operation
        if text.startswith(prefix):
            text = text[len(prefix):]
        text = '%s failed on %s: %s' % (operation, host, text)
    return redaction.redact(text, secrets)


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


def _log_to(path, secrets):
    """Send the root logger, warnings and fds 1 and 2 to ``path``."""
    directory = os.path.dirname(path)
    if directory:
        os.makedirs(directory, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
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


class _Deadline(object):
    """Past ``seconds``, fail the hook from a timer thread (the hook's
    threads may be blocked in I/O, which no exception interrupts), unless
    ``stop`` came first: the hook's own result is then the one handed
    back, even when it came right at the deadline."""

    def __init__(self, seconds, operation, err_fd):
        self._seconds = seconds
        self._operation = operation
        self._err_fd = err_fd
        self._lock = threading.Lock()
        self._stopped = False
        self._timer = threading.Timer(seconds, self._expire)
        self._timer.daemon = True
        self._timer.start()

    def _expire(self):
        with self._lock:
            if self._stopped:
                return
            line = ('%s failed on %s: no result within v2_hook_deadline '
                    '(%g s); nothing more is done, the operation can be '
                    'retried' % (self._operation, socket.gethostname(),
                                 self._seconds))
            LOG.error(line)
            logging.shutdown()
            os.write(self._err_fd, line.encode('utf-8') + b'\n')
            os._exit(1)

    def stop(self):
        """No expiry from now on (waits for one that has begun: it ends
        the process)."""
        with self._lock:
            self._stopped = True
        self._timer.cancel()


def main(stdin=None):
    """Run one hook as Tacker v2 asks; the process's exit status."""
    stdin = stdin or sys.stdin.buffer
    out_fd, err_fd = os.dup(1), os.dup(2)
    _silence()
    operation, secrets, progress = 'hook', [], {}
    handback, deadline = {}, None
    try:
        script_dict = pickle.load(stdin)
        operation = str(script_dict.get('operation'))
        from kubernetes_mgmt_pv.doors import v2_mapping
        if not v2_mapping.runs(operation):
            # Not a hook of the driver: no configuration, log or engine.
            os.write(out_fd, pickle.dumps({}))
            return 0
        data = dict(script_dict.get('user_script_err_handling_data') or {})
        from kubernetes_mgmt_pv import config
        from kubernetes_mgmt_pv.doors import tacker_compat
        tacker_compat.load_tacker_config(config_args(
            os.environ, _ancestor_argvs(), os.path.exists(DEFAULT_CONFIG)))
        options = config.options()
        _log_to(options.v2_log_file, secrets)
        deadline = _Deadline(options.v2_hook_deadline, operation, err_fd)
        from kubernetes_mgmt_pv.doors import v2_hook
        progress = data[v2_mapping.STATE_KEY] = dict(
            data.get(v2_mapping.STATE_KEY) or {})
        handback = {'user_script_err_handling_data': data}
        LOG.info('%s of VNF instance %s', operation,
                 (script_dict.get('vnf_instance') or {}).get('id'))
        handback.update(v2_hook.run(script_dict, secrets, progress))
    except Exception as error:
        if deadline is not None:
            deadline.stop()
        line = error_line(operation, error, socket.gethostname(), secrets)
        LOG.error('%s', line, exc_info=True)
        logging.shutdown()
        os.write(out_fd, pickle.dumps(handback))
        os.write(err_fd, line.encode('utf-8') + b'\n')
        return 1
    if deadline is not None:
        deadline.stop()
    LOG.info('%s done', operation)
    logging.shutdown()
    os.write(out_fd, pickle.dumps(handback))
    return 0
