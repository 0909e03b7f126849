"""Real Tacker (tacker-server and tacker-conductor) on this machine, private.

Everything lives under one work directory: a MariaDB data directory with
its own socket and port on 127.0.0.1, a RabbitMQ node with its own Mnesia,
logs, node name, ports and Erlang cookie (``HOME`` is the work directory,
so ``~/.erlang.cookie`` is private; ``epmd`` runs on a private port), the
package stores, the Fernet key directories and ``tacker.conf``. No system
service is started or touched; every process is started here, tracked by
its PID and stopped by it.

Tacker comes from the ``.tox/tacker`` virtualenv (``TACKER_VENV`` overrides
it), where the driver is installed in develop mode: the conductor loads it
through its entry point, exactly as an operator installs it.

``TackerService`` starts (idempotently) and stops (idempotently, always
completely) the whole stack; ``TackerClient`` is a small REST client of
its v1 API with the headers the ``noauth`` pipelines need. Logs of every
process are kept in ``<workdir>/logs`` (``log_dir``), which a failed test
prints (``log_tails``) or points to.

Kubernetes VIMs need Barbican in Tacker 16 (``[k8s_vim] use_barbican``);
``FileKeyManager`` is the key manager plugged in instead through
``[key_manager] api_class``: secrets in files of a private directory,
shared by tacker-server and tacker-conductor.
"""

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import types
import urllib.error
import urllib.request
import uuid

from testbed import conductors as conductors_mod

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_VENV = os.path.join(ROOT, '.tox', 'tacker')
DB_NAME, DB_USER = 'tacker', 'tacker'
# Tacker's v1 APIs with auth_strategy = noauth read the caller from these.
PROJECT_ID = 'a1b2c3d4e5f60718293a4b5c6d7e8f90'
USER_ID = 'operator'
HEADERS = {'X-User-Id': USER_ID, 'X-Project-Id': PROJECT_ID,
           'X-Roles': 'admin,member,reader'}
KEYMGR_DIR_ENV = 'TESTBED_KEYMGR_DIR'


class ServiceError(RuntimeError):
    """A service did not start (the message names its log)."""


# -- helpers ------------------------------------------------------------------

def free_port(host='127.0.0.1'):
    with socket.socket() as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def wait_until(predicate, what, timeout, first_delay=0.05, max_delay=1.0,
               log=None):
    """Poll ``predicate`` with exponential back-off until it is truthy;
    ``ServiceError`` naming ``what`` (and ``log``) after ``timeout`` s."""
    delay = first_delay
    deadline = time.monotonic() + timeout
    while True:
        result = predicate()
        if result:
            return result
        if time.monotonic() > deadline:
            hint = ' (see %s)' % log if log else ''
            raise ServiceError('timed out after %ss waiting for %s%s'
                               % (timeout, what, hint))
        time.sleep(delay)
        delay = min(delay * 2, max_delay)


def _alive(pid):
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie child of ours counts as gone.
    try:
        with open('/proc/%d/stat' % pid) as stat:
            return stat.read().split(') ', 1)[1][0] != 'Z'
    except (FileNotFoundError, IndexError):
        return False


def _read_pid(path):
    try:
        with open(path) as handle:
            return int(handle.read().split()[0])
    except (FileNotFoundError, ValueError, IndexError):
        return None


def _tail(path, lines=40):
    try:
        with open(path, errors='replace') as handle:
            return ''.join(handle.readlines()[-lines:])
    except OSError:
        return ''


def rss_mb(pid):
    """Resident memory of a process and its descendants, in MB."""
    total = 0
    pids = [pid]
    while pids:
        current = pids.pop()
        try:
            with open('/proc/%d/status' % current) as status:
                for line in status:
                    if line.startswith('VmRSS:'):
                        total += int(line.split()[1])
            with open('/proc/%d/task/%d/children' % (current, current)) as f:
                pids.extend(int(p) for p in f.read().split())
        except (FileNotFoundError, ProcessLookupError, ValueError):
            continue
    return total // 1024


# -- the key manager the conductor and the server share -----------------------

def _key_manager_base():
    """Tacker's KeyManager base in a Tacker process (which imports this
    module through [key_manager] api_class); ``object`` elsewhere, so that
    tests and tools never import Tacker (and its eventlet) themselves."""
    if 'tacker' not in sys.modules:
        return object
    from tacker.keymgr import key_manager
    return key_manager.KeyManager


class FileKeyManager(_key_manager_base()):
    """Tacker's key manager interface with secrets in files of the
    directory ``$TESTBED_KEYMGR_DIR`` (what BarbicanKeyManager keeps in
    Barbican), so that every Tacker process of one service sees them."""

    def __init__(self, auth_url):
        self.auth_url = auth_url
        self.directory = os.environ[KEYMGR_DIR_ENV]

    def _path(self, secret_id):
        if not secret_id or '/' in secret_id or secret_id.startswith('.'):
            raise ValueError('bad secret id %r' % secret_id)
        return os.path.join(self.directory, secret_id)

    def store(self, context, managed_object, expiration=None):
        secret_id = str(uuid.uuid4())
        payload = managed_object.get_encoded() if hasattr(
            managed_object, 'get_encoded') else managed_object
        if isinstance(payload, str):
            payload = payload.encode()
        tmp = self._path(secret_id) + '.tmp'
        with open(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600),
                  'wb') as handle:
            handle.write(payload)
        os.rename(tmp, self._path(secret_id))
        return secret_id

    def get(self, context, managed_object_id, metadata_only=False):
        from tacker.keymgr import exception as keymgr_exception
        try:
            with open(self._path(managed_object_id), 'rb') as handle:
                payload = handle.read()
        except FileNotFoundError:
            raise keymgr_exception.ManagedObjectNotFoundError(
                uuid=managed_object_id)
        return types.SimpleNamespace(payload=payload,
                                     get_encoded=lambda: payload)

    def delete(self, context, managed_object_id):
        # Like BarbicanKeyManager, a missing secret is not an error.
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self._path(managed_object_id))


# -- the services -------------------------------------------------------------

class _Process(object):
    """A process we started, with its log files."""

    def __init__(self, name, popen, log):
        self.name = name
        self.popen = popen
        self.log = log

    @property
    def pid(self):
        return self.popen.pid

    def alive(self):
        return self.popen.poll() is None


class TackerService(object):
    """MariaDB + RabbitMQ + tacker-server + tacker-conductor, private.

    ``driver_options`` go to ``[kubernetes_mgmt_pv]`` of tacker.conf (the
    driver's options, e.g. testbed.cluster.TEST_OPTIONS). ``workdir``
    (default: a new temporary directory) holds everything; it is removed
    by ``stop(remove=True)`` unless ``keep`` says otherwise.
    ``conductors``: how many tacker-conductor processes to run
    (testbed/conductors.py; ``conductors.scale`` changes it later).
    """

    def __init__(self, workdir=None, venv=None, driver_options=None,
                 stack_retries=300, stack_retry_wait=1, extra_conf=None,
                 conductors=1):
        self.venv = venv or os.environ.get('TACKER_VENV') or DEFAULT_VENV
        self.workdir = workdir
        self.driver_options = dict(driver_options or {})
        self.stack_retries = stack_retries
        self.stack_retry_wait = stack_retry_wait
        self.extra_conf = extra_conf or {}
        self.db_port = self.amqp_port = self.api_port = None
        self.db_password = uuid.uuid4().hex
        self.rabbit_node = 'tacker-%s@localhost' % uuid.uuid4().hex[:8]
        self.epmd_port = self.dist_port = None
        self._mysqld_safe = None
        self._server = None
        self.conductor_count = conductors
        self.conductors = conductors_mod.Conductors(self)
        self._rabbit_started = False
        self.timings = {}

    # -- paths ----------------------------------------------------------------

    def _p(self, *parts):
        return os.path.join(self.workdir, *parts)

    @property
    def log_dir(self):
        return self._p('logs')

    @property
    def conf_path(self):
        return self._p('etc', 'tacker.conf')

    @property
    def api_url(self):
        return 'http://127.0.0.1:%d' % self.api_port

    def bin(self, name):
        return os.path.join(self.venv, 'bin', name)

    @staticmethod
    def available(venv=None):
        """Why this machine cannot run the service (a skip reason), or
        None."""
        venv = venv or os.environ.get('TACKER_VENV') or DEFAULT_VENV
        for tool in ('mysqld_safe', 'mariadb-install-db', 'mariadb'):
            if shutil.which(tool) is None:
                return '%s is not installed (testbed/install-deps.sh)' % tool
        if not os.path.exists('/usr/lib/rabbitmq/bin/rabbitmq-server'):
            return 'rabbitmq-server is not installed (testbed/install-deps.sh)'
        for name in ('tacker-server', 'tacker-conductor', 'tacker-db-manage'):
            if not os.path.exists(os.path.join(venv, 'bin', name)):
                return ('%s not found in %s (run tox -e tacker once)'
                        % (name, venv))
        return None

    # -- lifecycle ------------------------------------------------------------

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc_info):
        self.stop()

    def start(self):
        """Start whatever is not running yet; returns self."""
        if self.workdir is None:
            self.workdir = tempfile.mkdtemp(prefix='tacker-service-')
        for sub in ('logs', 'etc', 'run', 'mysql', 'rabbitmq', 'csar',
                    'glance', 'locks', 'coordination', 'fernet_keys',
                    'secrets', 'state'):
            os.makedirs(self._p(sub), exist_ok=True)
        os.chmod(self._p('secrets'), 0o700)
        try:
            self._timed('mariadb', self._start_mariadb)
            self._timed('rabbitmq', self._start_rabbitmq)
            self._write_conf()
            if not os.path.exists(self._p('state', 'db-migrated')):
                self._timed('db_upgrade', self._db_upgrade)
            self._timed('tacker_server', self._start_server)
            self._timed('tacker_conductor', self._start_conductors)
        except BaseException:
            self.stop(remove=False)
            raise
        return self

    def _timed(self, name, func):
        start = time.monotonic()
        func()
        self.timings[name] = round(time.monotonic() - start, 2)

    def stop(self, remove=False):
        """Stop everything started here (tolerates partial starts);
        ``remove`` deletes the work directory, logs included."""
        errors = []
        for step in (self.conductors.stop, self._stop_server,
                     self._stop_rabbitmq, self._stop_mariadb):
            try:
                step()
            except Exception as error:  # noqa: BLE001 - stop the others
                errors.append(error)
        if remove and self.workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)
        if errors:
            raise errors[0]

    def memory(self):
        """Resident memory (MB) of each running service."""
        result = {}
        pids = dict(self.conductors.pids())
        pids.update({'tacker-server': self._server and self._server.pid,
                     'mariadb': _read_pid(self._p('run', 'mysqld.pid')),
                     'rabbitmq': _read_pid(self._p('run', 'rabbit.pid'))})
        for name, pid in pids.items():
            if pid and _alive(pid):
                result[name] = rss_mb(pid)
        return result

    def log_tails(self, lines=30):
        """The last lines of every log, for a failed test's report."""
        out = []
        for name in sorted(os.listdir(self.log_dir)):
            path = os.path.join(self.log_dir, name)
            if os.path.isfile(path):
                out.append('==> %s <==\n%s' % (path, _tail(path, lines)))
        return '\n'.join(out)

    # -- MariaDB --------------------------------------------------------------

    def _mysql(self, sql):
        return subprocess.run(
            ['mariadb', '--no-defaults', '-uroot',
             '--socket=%s' % self._p('run', 'mysqld.sock'), '-e', sql],
            capture_output=True, text=True, timeout=30)

    def _start_mariadb(self):
        pid = _read_pid(self._p('run', 'mysqld.pid'))
        if pid and _alive(pid) and self._mysql('SELECT 1').returncode == 0:
            return
        datadir = self._p('mysql')
        log = self._p('logs', 'mariadb.err')
        if not os.path.exists(os.path.join(datadir, 'mysql')):
            with open(self._p('logs', 'mariadb-install.log'), 'w') as out:
                subprocess.run(
                    ['mariadb-install-db', '--no-defaults', '--user=root',
                     '--datadir=%s' % datadir, '--skip-test-db',
                     '--auth-root-authentication-method=socket'],
                    stdout=out, stderr=subprocess.STDOUT, check=True,
                    timeout=120)
        self.db_port = self.db_port or free_port()
        with open(self._p('logs', 'mysqld_safe.out'), 'ab') as out:
            popen = subprocess.Popen(
                ['mysqld_safe', '--no-defaults', '--user=root',
                 '--datadir=%s' % datadir,
                 '--socket=%s' % self._p('run', 'mysqld.sock'),
                 '--pid-file=%s' % self._p('run', 'mysqld.pid'),
                 '--port=%d' % self.db_port, '--bind-address=127.0.0.1',
                 '--log-error=%s' % log, '--skip-name-resolve',
                 '--innodb-buffer-pool-size=32M', '--skip-log-bin',
                 '--max-connections=500'],
                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True)
        self._mysqld_safe = _Process('mysqld_safe', popen, log)

        def ready():
            if popen.poll() is not None:
                raise ServiceError('mysqld_safe exited with %s:\n%s'
                                   % (popen.returncode, _tail(log)))
            return self._mysql('SELECT 1').returncode == 0
        wait_until(ready, 'MariaDB', 60, log=log)
        result = self._mysql(
            "CREATE DATABASE IF NOT EXISTS {db} CHARACTER SET utf8;"
            "CREATE USER IF NOT EXISTS '{u}'@'127.0.0.1' IDENTIFIED BY '{p}';"
            "ALTER USER '{u}'@'127.0.0.1' IDENTIFIED BY '{p}';"
            "GRANT ALL PRIVILEGES ON {db}.* TO '{u}'@'127.0.0.1';"
            "FLUSH PRIVILEGES;".format(db=DB_NAME, u=DB_USER,
                                       p=self.db_password))
        if result.returncode:
            raise ServiceError('MariaDB set-up failed: %s' % result.stderr)

    def _stop_mariadb(self):
        pid_file = self._p('run', 'mysqld.pid') if self.workdir else None
        pid = _read_pid(pid_file) if pid_file else None
        if pid and _alive(pid):
            os.kill(pid, signal.SIGTERM)
            try:
                wait_until(lambda: not _alive(pid), 'mariadbd to exit', 60)
            except ServiceError:
                os.kill(pid, signal.SIGKILL)
        if self._mysqld_safe is not None:
            popen = self._mysqld_safe.popen
            try:
                popen.wait(timeout=30)
            except subprocess.TimeoutExpired:
                popen.kill()
                popen.wait(timeout=10)
            self._mysqld_safe = None

    # -- RabbitMQ -------------------------------------------------------------

    def _rabbit_env(self):
        env = dict(os.environ)
        env.update({
            'HOME': self._p('rabbitmq'),
            'RABBITMQ_NODENAME': self.rabbit_node,
            'RABBITMQ_NODE_IP_ADDRESS': '127.0.0.1',
            'RABBITMQ_NODE_PORT': str(self.amqp_port),
            'RABBITMQ_DIST_PORT': str(self.dist_port),
            'ERL_EPMD_PORT': str(self.epmd_port),
            'ERL_EPMD_ADDRESS': '127.0.0.1',
            'RABBITMQ_MNESIA_BASE': self._p('rabbitmq', 'mnesia'),
            'RABBITMQ_LOG_BASE': self._p('logs', 'rabbitmq'),
            'RABBITMQ_PID_FILE': self._p('run', 'rabbit.pid'),
            'RABBITMQ_CONFIG_FILE': self._p('rabbitmq', 'rabbitmq'),
            'RABBITMQ_ADVANCED_CONFIG_FILE': self._p('rabbitmq',
                                                     'advanced.config'),
            'RABBITMQ_ENABLED_PLUGINS_FILE': self._p('rabbitmq',
                                                     'enabled_plugins'),
            'RABBITMQ_CONF_ENV_FILE': self._p('rabbitmq', 'rabbitmq-env.conf'),
        })
        return env

    def _rabbitmqctl(self, *args, timeout=60):
        return subprocess.run(
            ['/usr/lib/rabbitmq/bin/rabbitmqctl', '-n', self.rabbit_node,
             *args], env=self._rabbit_env(), capture_output=True, text=True,
            timeout=timeout)

    def _start_rabbitmq(self):
        if self._rabbit_started and _alive(
                _read_pid(self._p('run', 'rabbit.pid'))):
            return
        self.amqp_port = self.amqp_port or free_port()
        self.dist_port = self.dist_port or free_port()
        self.epmd_port = self.epmd_port or free_port()
        with open(self._p('rabbitmq', 'enabled_plugins'), 'w') as handle:
            handle.write('[].\n')
        for name in ('rabbitmq.conf', 'rabbitmq-env.conf'):
            open(self._p('rabbitmq', name), 'a').close()
        with open(self._p('rabbitmq', 'advanced.config'), 'w') as handle:
            handle.write('[].\n')
        log = self._p('logs', 'rabbitmq-server.out')
        with open(log, 'ab') as out:
            result = subprocess.run(
                ['/usr/lib/rabbitmq/bin/rabbitmq-server', '-detached'],
                env=self._rabbit_env(), stdin=subprocess.DEVNULL,
                stdout=out, stderr=subprocess.STDOUT, timeout=60)
        if result.returncode:
            raise ServiceError('rabbitmq-server -detached failed (see %s)'
                               % log)
        self._rabbit_started = True
        wait_until(lambda: self._rabbitmqctl(
            'await_startup', '--timeout', '10',
            timeout=30).returncode == 0, 'RabbitMQ', 90,
            log=self._p('logs', 'rabbitmq'))

    def _stop_rabbitmq(self):
        if not self._rabbit_started:
            return
        pid = _read_pid(self._p('run', 'rabbit.pid'))
        if pid and _alive(pid):
            self._rabbitmqctl('stop', timeout=60)
            if _alive(pid):
                os.kill(pid, signal.SIGTERM)
                try:
                    wait_until(lambda: not _alive(pid), 'RabbitMQ to exit', 30)
                except ServiceError:
                    os.kill(pid, signal.SIGKILL)
        # Our private epmd (ERL_EPMD_PORT) goes too.
        subprocess.run(['epmd', '-port', str(self.epmd_port), '-kill'],
                       capture_output=True, timeout=30)
        self._rabbit_started = False

    # -- Tacker ---------------------------------------------------------------

    def _write_conf(self):
        self.api_port = self.api_port or free_port()
        paste = self._p('etc', 'api-paste.ini')
        with open(os.path.join(self.venv, 'etc', 'tacker',
                               'api-paste.ini')) as handle:
            lines = handle.read().splitlines()
        patched = []
        for line in lines:
            # The shipped noauth pipelines lack keystonecontext: every
            # vnfpkgm/vnflcm call would fail with KeyError 'tacker.context'.
            if line.startswith('noauth =') and 'keystonecontext' not in line:
                line = line.replace('catch_errors ',
                                    'catch_errors keystonecontext ', 1)
            patched.append(line)
        with open(paste, 'w') as handle:
            handle.write('\n'.join(patched) + '\n')
        conf = {
            'DEFAULT': {
                'auth_strategy': 'noauth',
                'api_paste_config': paste,
                'bind_host': '127.0.0.1',
                'bind_port': self.api_port,
                'api_workers': 0,
                'transport_url': 'rabbit://guest:guest@127.0.0.1:%d/'
                                 % self.amqp_port,
                'state_path': self._p('state'),
                'debug': 'True',
                'use_stderr': 'False',
            },
            'database': {
                'connection': 'mysql+pymysql://%s:%s@127.0.0.1:%d/%s'
                              '?charset=utf8' % (DB_USER, self.db_password,
                                                 self.db_port, DB_NAME),
            },
            'vnf_package': {'vnf_package_csar_path': self._p('csar')},
            'glance_store': {'stores': 'file', 'default_store': 'file',
                             'filesystem_store_datadir': self._p('glance')},
            'oslo_concurrency': {'lock_path': self._p('locks')},
            'coordination': {'backend_url': 'file://%s'
                             % self._p('coordination')},
            'tacker': {'vnflcm_mgmt_driver':
                       'vnflcm_noop,mgmt-drivers-kubernetes'},
            'vim_keys': {'openstack': self._p('fernet_keys')},
            'openstack_vim': {'stack_retries': self.stack_retries,
                              'stack_retry_wait': self.stack_retry_wait},
            'key_manager': {'api_class': '%s.%s' % (
                'testbed.tacker_service', FileKeyManager.__name__)},
            'k8s_vim': {'use_barbican': 'True'},
            'kubernetes_mgmt_pv': self.driver_options,
        }
        for section, values in self.extra_conf.items():
            conf.setdefault(section, {}).update(values)
        with open(self.conf_path, 'w') as handle:
            for section, values in conf.items():
                handle.write('[%s]\n' % section)
                for key, value in values.items():
                    handle.write('%s = %s\n' % (key, value))
                handle.write('\n')

    def _tacker_env(self):
        env = dict(os.environ)
        env[KEYMGR_DIR_ENV] = self._p('secrets')
        # FileKeyManager is imported by the services from this checkout.
        env['PYTHONPATH'] = os.pathsep.join(
            [ROOT] + [p for p in env.get('PYTHONPATH', '').split(os.pathsep)
                      if p])
        env['PATH'] = os.path.join(self.venv, 'bin') + os.pathsep + env.get(
            'PATH', '')
        env.pop('PYTHONHOME', None)
        return env

    def _db_upgrade(self):
        log = self._p('logs', 'tacker-db-manage.log')
        with open(log, 'ab') as out:
            result = subprocess.run(
                [self.bin('tacker-db-manage'), '--config-file',
                 self.conf_path, 'upgrade', 'head'],
                env=self._tacker_env(), stdout=out, stderr=subprocess.STDOUT,
                timeout=300)
        if result.returncode:
            raise ServiceError('tacker-db-manage upgrade head failed:\n%s'
                               % _tail(log))
        open(self._p('state', 'db-migrated'), 'w').close()

    def _spawn(self, name, *extra_args, program=None):
        log = self._p('logs', '%s.log' % name)
        out = open(self._p('logs', '%s.out' % name), 'ab')
        try:
            popen = subprocess.Popen(
                [self.bin(program or name), '--config-file', self.conf_path,
                 *extra_args, '--log-file', log],
                env=self._tacker_env(), cwd=self.workdir,
                stdin=subprocess.DEVNULL, stdout=out,
                stderr=subprocess.STDOUT, start_new_session=True)
        finally:
            out.close()
        return _Process(name, popen, log)

    def _check_alive(self, process):
        if not process.alive():
            raise ServiceError('%s exited with %s:\n%s' % (
                process.name, process.popen.returncode,
                _tail(process.log) or _tail(process.log[:-4] + '.out')))

    def _start_server(self):
        if self._server is not None and self._server.alive():
            return
        self._server = self._spawn('tacker-server')

        def ready():
            self._check_alive(self._server)
            try:
                with urllib.request.urlopen(self.api_url + '/',
                                            timeout=2) as response:
                    return response.status == 200
            except (OSError, urllib.error.URLError):
                return False
        wait_until(ready, 'tacker-server', 90, log=self._server.log)

    def _start_conductors(self):
        self.conductors.scale(self.conductor_count)

    @staticmethod
    def _wait_exit(process, timeout):
        try:
            process.popen.wait(timeout=timeout)
            return True
        except subprocess.TimeoutExpired:
            return False

    def _kill_group(self, process, sig):
        """Signal the process group of a service we started (its workers
        were forked into it): by its id, never by name."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, sig)

    def _stop_server(self):
        process, self._server = self._server, None
        if process is None:
            return
        # tacker-server needs two SIGTERMs: the first one starts a graceful
        # shutdown that waits for idle WSGI connections, the second ends it.
        for grace in (1, 10):
            if not process.alive():
                break
            with contextlib.suppress(ProcessLookupError):
                os.kill(process.pid, signal.SIGTERM)
            if self._wait_exit(process, grace):
                break
        if process.alive():
            self._kill_group(process, signal.SIGKILL)
            process.popen.wait(timeout=10)
        self._kill_group(process, signal.SIGKILL)  # orphaned workers


# -- a small REST client ------------------------------------------------------

class TackerError(RuntimeError):
    def __init__(self, method, url, status, body):
        super().__init__('%s %s -> %s: %s'
                         % (method, url, status, body[:2000]))
        self.status = status
        self.body = body


class TackerClient(object):
    """Tacker's REST API as a user calls it (plain HTTP, noauth headers)."""

    def __init__(self, base_url, headers=None, timeout=60):
        self.base_url = base_url.rstrip('/')
        self.headers = dict(headers or HEADERS)
        self.timeout = timeout

    def request(self, method, path, body=None, data=None, content_type=None,
                expect=None):
        url = self.base_url + path
        headers = dict(self.headers)
        if body is not None:
            data = json.dumps(body).encode()
            content_type = 'application/json'
        if content_type:
            headers['Content-Type'] = content_type
        headers.setdefault('Accept', 'application/json')
        request = urllib.request.Request(url, data=data, method=method,
                                         headers=headers)
        try:
            with urllib.request.urlopen(request,
                                        timeout=self.timeout) as response:
                status, raw = response.status, response.read()
                headers = dict(response.headers)
        except urllib.error.HTTPError as error:
            status, raw, headers = error.code, error.read(), dict(
                error.headers)
        text = raw.decode('utf-8', 'replace')
        if expect is not None and status not in (
                expect if isinstance(expect, (tuple, list)) else (expect,)):
            raise TackerError(method, url, status, text)
        try:
            payload = json.loads(text) if text.strip() else None
        except ValueError:
            payload = text
        return types.SimpleNamespace(status=status, body=payload,
                                     headers=headers)

    def get(self, path, expect=200):
        return self.request('GET', path, expect=expect).body

    def post(self, path, body=None, expect=(200, 201, 202)):
        return self.request('POST', path, body=body if body is not None
                            else {}, expect=expect)

    def delete(self, path, expect=(200, 202, 204)):
        return self.request('DELETE', path, expect=expect)

    # -- package and LCM helpers ---------------------------------------------

    def onboard_package(self, zip_path, timeout=300):
        """Create a VNF package, upload the zip; returns the package once
        ONBOARDED."""
        package = self.post('/vnfpkgm/v1/vnf_packages', {}).body
        with open(zip_path, 'rb') as handle:
            self.request('PUT', '/vnfpkgm/v1/vnf_packages/%s/package_content'
                         % package['id'], data=handle.read(),
                         content_type='application/zip', expect=202)
        path = '/vnfpkgm/v1/vnf_packages/%s' % package['id']

        def onboarded():
            current = self.get(path)
            if current['onboardingState'] == 'ONBOARDED':
                return current
            if current['onboardingState'] == 'CREATED' and \
                    current.get('_upload_failed'):
                raise TackerError('GET', path, 200, json.dumps(current))
            return None
        return wait_until(onboarded, 'package %s to be ONBOARDED'
                          % package['id'], timeout, first_delay=0.2,
                          max_delay=2)

    def op_occ_id(self, response):
        location = response.headers.get('Location', '')
        return location.rstrip('/').rsplit('/', 1)[-1]

    def wait_op(self, op_id, timeout=1800,
                final=('COMPLETED', 'FAILED_TEMP', 'FAILED', 'ROLLED_BACK')):
        """Poll an LCM operation occurrence until it reaches a final state;
        returns its body."""
        path = '/vnflcm/v1/vnf_lcm_op_occs/%s' % op_id

        def done():
            occ = self.get(path)
            return occ if occ['operationState'] in final else None
        return wait_until(done, 'LCM operation %s' % op_id, timeout,
                          first_delay=0.5, max_delay=3)


if __name__ == '__main__':  # manual use: start, print, wait for Ctrl-C
    service = TackerService(workdir=sys.argv[1] if len(sys.argv) > 1
                            else None)
    service.start()
    print('Tacker API at %s, conf %s, logs %s' % (
        service.api_url, service.conf_path, service.log_dir), flush=True)
    try:
        signal.pause()
    except KeyboardInterrupt:
        pass
    finally:
        service.stop()


# -- the user guide's set-up: real Tacker, the Heat engine and the testbed ----

SAMPLE = os.path.join(ROOT, 'samples', 'kubernetes_pv_vnf')
REQUESTS = os.path.join(ROOT, 'samples', 'requests')
SAMPLE_VNFD_ID = '32ab1f35-a1f4-4798-9433-2bab9c77e6e8'
# The "Neutron network" of the testbed bridge, as the request names it.
TESTBED_NETWORK_ID = 'a0e0c0e0-7e57-4bed-8000-000000000001'
OP_TIMEOUT = 1800


class TackerLab(object):
    """The whole user-guide set-up on this machine: real Tacker
    (TackerService), the fake Keystone/Heat/Nova whose Heat is a HeatEngine
    booting testbed hosts, and helpers for the operator's steps and checks.
    """

    def __init__(self, workdir=None, driver_options=None, log=None,
                 conductors=1):
        from testbed import cluster
        from testbed import heat_engine
        from testbed import openstack_api
        self.cluster = cluster
        self.log = log or (lambda message: None)
        self.engine = heat_engine.HeatEngine()
        self.cloud = openstack_api.FakeOpenStack(heat_engine=self.engine)
        options = dict(cluster.TEST_OPTIONS)
        options.update(driver_options or {})
        self.service = TackerService(workdir=workdir, driver_options=options,
                                     conductors=conductors)
        self.client = None
        self.timings = {}

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc_info):
        self.stop()

    def start(self):
        started = time.monotonic()
        try:
            self.engine.start()
            self.cloud.start()
            self.service.start()
        except BaseException:
            self.stop()
            raise
        self.client = TackerClient(self.service.api_url)
        self.timings['setup'] = round(time.monotonic() - started, 1)
        return self

    def stop(self):
        errors = []
        for step in (self.service.stop, self.cloud.stop, self.engine.stop):
            try:
                step()
            except Exception as error:  # noqa: BLE001 - stop the others
                errors.append(error)
        if errors:
            raise errors[0]

    @property
    def workdir(self):
        return self.service.workdir

    def memory(self):
        """Resident memory (MB) of the services and of this process (which
        runs the fake OpenStack, the Heat engine and the API servers)."""
        result = self.service.memory()
        result['test process'] = rss_mb(os.getpid())
        return result

    # -- onboarding -----------------------------------------------------------

    def register_openstack_vim(self, name='testbed-openstack'):
        """POST /v1.0/vims: the fake Keystone as the default VIM."""
        body = {'vim': {
            'type': 'openstack', 'name': name, 'is_default': True,
            'description': 'the testbed (fake Keystone/Heat/Nova)',
            'auth_url': self.cloud.auth_url,
            'auth_cred': {'username': self.cloud.username,
                          'password': self.cloud.password,
                          'user_domain_name': self.cloud.user_domain_name,
                          'cert_verify': 'False'},
            'vim_project': {
                'name': self.cloud.project_name,
                'project_domain_name': self.cloud.project_domain_name}}}
        return self.client.post('/v1.0/vims', body, expect=201).body['vim']

    def build_package(self, output_dir):
        """The sample package, built with `kubernetes-mgmt-pv package` of
        Tacker's venv (the driver the conductor runs), under a fresh VNFD
        id (Tacker refuses a second package with the same one)."""
        vnfd_id = str(uuid.uuid4())
        source = os.path.join(output_dir, 'source-%s' % vnfd_id[:8])
        shutil.copytree(SAMPLE, source)
        definitions = os.path.join(source, 'Definitions')
        for name in os.listdir(definitions):
            path = os.path.join(definitions, name)
            with open(path) as handle:
                text = handle.read()
            if SAMPLE_VNFD_ID in text:
                with open(path, 'w') as handle:
                    handle.write(text.replace(SAMPLE_VNFD_ID, vnfd_id))
        output = os.path.join(output_dir, 'kubernetes_pv_vnf-%s.zip'
                              % vnfd_id[:8])
        result = subprocess.run(
            [self.service.bin('kubernetes-mgmt-pv'), 'package', '--source',
             source, '--output', output], capture_output=True, text=True,
            timeout=120)
        if result.returncode:
            raise ServiceError('kubernetes-mgmt-pv package failed: %s'
                               % result.stderr)
        shutil.rmtree(source)
        return vnfd_id, output

    def instantiate_request(self, vim_id, sample='instantiate_simple.json'):
        """The sample request, adapted where it must be for this cloud: the
        network ids (the testbed network), the VIM id, the Storage
        server's password (the testbed's guest has its own) and every
        export_to (the sample's 10.10.0.0/24 is the user guide's network;
        the nodes here are on the testbed's subnet)."""
        with open(os.path.join(REQUESTS, sample)) as handle:
            request = json.load(handle)
        for link in request.get('extVirtualLinks', []):
            link['resourceId'] = TESTBED_NETWORK_ID
        for info in request.get('vimConnectionInfo', []):
            info['vimId'] = vim_id
        storage = request['additionalParams'][
            'k8s_cluster_installation_param']['storage_server']
        storage['password'] = self.cluster.STORAGE_PASSWORD
        for export in storage['nfs_server_setup_params']:
            export['export_to'] = self.engine.testbed.subnet
        return request

    @staticmethod
    def sample_request(name):
        with open(os.path.join(REQUESTS, name)) as handle:
            return json.load(handle)

    # -- LCM ------------------------------------------------------------------

    def lcm(self, instance_id, operation, body, timeout=OP_TIMEOUT):
        """POST an LCM operation and wait for its final state; returns the
        operation occurrence (with 'seconds')."""
        started = time.monotonic()
        response = self.client.post('/vnflcm/v1/vnf_instances/%s/%s'
                                    % (instance_id, operation), body,
                                    expect=202)
        occ = self.client.wait_op(self.client.op_occ_id(response), timeout)
        occ['seconds'] = round(time.monotonic() - started, 1)
        self.log('%s: %s in %ss%s' % (
            operation, occ['operationState'], occ['seconds'],
            '' if occ['operationState'] == 'COMPLETED' else ' (%s)' % (
                (occ.get('error') or {}).get('detail'))))
        return occ

    def op_action(self, op_id, action, final=('FAILED', 'ROLLED_BACK',
                                              'COMPLETED', 'FAILED_TEMP'),
                  timeout=OP_TIMEOUT):
        """POST /vnf_lcm_op_occs/{id}/{retry|rollback|fail}; returns the
        occurrence once final again."""
        # No body at all: Tacker's handlers of these take none (a JSON
        # body, even {}, is a 500 TypeError).
        response = self.client.request(
            'POST', '/vnflcm/v1/vnf_lcm_op_occs/%s/%s' % (op_id, action),
            expect=(200, 202))
        if action == 'fail':
            return response.body
        # The state leaves FAILED_TEMP first, then reaches a final one.
        path = '/vnflcm/v1/vnf_lcm_op_occs/%s' % op_id
        wait_until(lambda: self.client.get(path)['operationState']
                   != 'FAILED_TEMP', '%s of %s to start' % (action, op_id),
                   60, first_delay=0.2)
        return self.client.wait_op(op_id, timeout, final=final)

    def instance(self, instance_id):
        return self.client.get('/vnflcm/v1/vnf_instances/%s' % instance_id)

    def vnfcs(self, instance_id, vdu_id=None):
        info = self.instance(instance_id).get('instantiatedVnfInfo') or {}
        return [vnfc for vnfc in info.get('vnfcResourceInfo', [])
                if vdu_id in (None, vnfc['vduId'])]

    # -- what the operator checks ---------------------------------------------

    def stack(self, instance_id):
        return self.cloud.find_stack('vnflcm_%s' % instance_id)

    def cp_address(self, instance_id, cp_name='storage_server_CP'):
        """`openstack stack resource show vnflcm_<id> <cp>` | ip_address."""
        stack = self.stack(instance_id)
        return stack.resources[cp_name].attributes['fixed_ips'][0][
            'ip_address']

    def host_at(self, address):
        for host in self.engine.testbed.hosts.values():
            if host.ip == address:
                return host
        raise LookupError('no testbed host at %s' % address)

    def masters(self):
        return sorted((h for h in self.engine.testbed.hosts.values()
                       if h.role == 'master'), key=lambda h: h.name)

    def ssh(self, host, command):
        """Run a command over SSH as the guide's user (ubuntu), like an
        operator logged in to the VM; returns stdout."""
        client = host.ssh_client()
        try:
            _, stdout, stderr = client.exec_command(command, timeout=60)
            output = stdout.read().decode()
            status = stdout.channel.recv_exit_status()
            if status:
                raise ServiceError('%s on %s: exit %s: %s' % (
                    command, host.name, status, stderr.read().decode()))
            return output
        finally:
            client.close()

    def storage_checks(self, instance_id):
        """df -h and sudo exportfs -v on the Storage server."""
        host = self.host_at(self.cp_address(instance_id))
        return {'address': host.ip,
                'df': self.ssh(host, 'df -h'),
                'exportfs': self.ssh(host, 'sudo exportfs -v')}

    def kubectl(self, *args, master=None):
        import shlex
        master = master or self.masters()[0]
        return self.ssh(master, 'kubectl ' + ' '.join(
            shlex.quote(a) for a in args))

    def cluster_checks(self):
        return {'pv': self.kubectl('get', 'pv'),
                'nodes': self.kubectl('get', 'nodes')}

    def persistent_volumes(self):
        items = json.loads(self.kubectl('get', 'pv', '-o', 'json'))['items']
        return {item['metadata']['name']: item for item in items}

    def nodes(self):
        items = json.loads(self.kubectl('get', 'nodes', '-o', 'json'))[
            'items']
        return {item['metadata']['name']: item for item in items}

    def vims(self):
        return self.client.get('/v1.0/vims')['vims']
