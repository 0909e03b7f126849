"""Real Tacker (tacker-server and tacker-conductor) on this machine, private.

Everything lives under one work directory: a MariaDB (testbed.mariadb) and
a RabbitMQ node (testbed.rabbitmq) of its own, logs, the package stores,
the Fernet key directories and ``tacker.conf``. No system service is
started or touched; every process is started here, tracked by its PID and
stopped by it.

Tacker comes from the ``.tox/tacker`` virtualenv (``TACKER_VENV`` overrides
it), where the driver is installed in develop mode: the conductor loads it
through its entry point, exactly as an operator installs it. Its key
manager is testbed.tacker_keymgr (no Barbican here), which logs in to
Keystone as the service user of ``[keystone_authtoken]`` (``extra_conf``;
TackerLab adds one to its Keystone).

``TackerService`` starts (idempotently) and stops (idempotently, always
completely) the whole stack. Logs of every process are kept in
``<workdir>/logs`` (``log_dir``), which a failed test prints
(``log_tails``) or points to. testbed.tacker_client is a REST client of
its API; testbed.tacker_lab the whole user-guide set-up.
"""

import concurrent.futures
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

from testbed import conductors
from testbed import mariadb
from testbed import polling
from testbed import processes
from testbed import rabbitmq
from testbed import tacker_keymgr

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_VENV = os.path.join(ROOT, '.tox', 'tacker')


class TackerService(object):
    """MariaDB + RabbitMQ + tacker-server + tacker-conductor, private.

    ``driver_options`` go to ``[kubernetes_mgmt_pv]`` of tacker.conf (the
    driver's options, e.g. testbed.virtual_vnf.TEST_OPTIONS). ``workdir``
    (default: a new temporary directory) holds everything; it is removed
    by ``stop(remove=True)`` unless ``keep`` says otherwise.
    ``conductor_count``: how many tacker-conductor processes to run
    (testbed/conductors.py; ``conductors.scale`` changes it later).
    """

    def __init__(self, workdir=None, venv=None, driver_options=None,
                 stack_retries=300, stack_retry_wait=1, extra_conf=None,
                 conductor_count=1):
        self.venv = venv or os.environ.get('TACKER_VENV') or DEFAULT_VENV
        self.workdir = workdir
        self.driver_options = dict(driver_options or {})
        self.stack_retries = stack_retries
        self.stack_retry_wait = stack_retry_wait
        self.extra_conf = extra_conf or {}
        self.api_port = None
        self.mariadb = mariadb.MariaDB(self._p)
        self.rabbitmq = rabbitmq.RabbitMQ(self._p)
        self._server = None
        self.conductor_count = conductor_count
        self.conductors = conductors.Conductors(self)
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
        if not os.path.exists(rabbitmq.SERVER):
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
                    'glance', 'locks', 'fernet_keys',
                    'secrets', 'state'):
            os.makedirs(self._p(sub), exist_ok=True)
        os.chmod(self._p('secrets'), 0o700)
        try:
            # RabbitMQ boots while the database is set up: tacker-db-manage
            # reads only [database] of the configuration written before
            # RabbitMQ settled on its port; it is written again after.
            with concurrent.futures.ThreadPoolExecutor(1) as pool:
                rabbitmq = pool.submit(self._timed, 'rabbitmq',
                                       self.rabbitmq.start)
                self._timed('mariadb', self.mariadb.start)
                if not os.path.exists(self._p('state', 'db-migrated')):
                    self._write_conf()
                    self._timed('db_upgrade', self._db_upgrade)
                rabbitmq.result()
            self._write_conf()
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
                     self.rabbitmq.stop, self._stop_mariadb):
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
                     'mariadb': processes.read_pid(self.mariadb.pid_file),
                     'rabbitmq': processes.read_pid(self.rabbitmq.pid_file)})
        for name, pid in pids.items():
            if pid and processes.alive(pid):
                result[name] = processes.rss_mb(pid)
        return result

    def log_tails(self, lines=30):
        """The last lines of every log, for a failed test's report."""
        out = []
        for name in sorted(os.listdir(self.log_dir)):
            path = os.path.join(self.log_dir, name)
            if os.path.isfile(path):
                out.append('==> %s <==\n%s'
                           % (path, processes.tail(path, lines)))
        return '\n'.join(out)

    # -- Tacker ---------------------------------------------------------------

    def _stop_mariadb(self):
        if self.workdir:  # else it never started
            self.mariadb.stop()

    def _write_paste(self):
        """Tacker's api-paste.ini, patched for ``noauth``; returns its
        path."""
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
                                    'catch_errors keystonecontext '
                                    'conductoropts ', 1)
            patched.append(line)
        patched += ['', '[filter:conductoropts]',
                    'paste.filter_factory = testbed.tacker_keymgr:%s'
                    % tacker_keymgr.conductor_options_filter.__name__]
        with open(paste, 'w') as handle:
            handle.write('\n'.join(patched) + '\n')
        return paste

    def _write_conf(self):
        self.api_port = self.api_port or processes.free_port()
        conf = {
            'DEFAULT': {
                'auth_strategy': 'noauth',
                'api_paste_config': self._write_paste(),
                'bind_host': '127.0.0.1',
                'bind_port': self.api_port,
                'api_workers': 0,
                'transport_url': self.rabbitmq.transport_url(),
                'state_path': self._p('state'),
                'debug': 'True',
                'use_stderr': 'False',
            },
            'database': {
                'connection': self.mariadb.url(),
            },
            'vnf_package': {'vnf_package_csar_path': self._p('csar')},
            'glance_store': {'stores': 'file', 'default_store': 'file',
                             'filesystem_store_datadir': self._p('glance')},
            'oslo_concurrency': {'lock_path': self._p('locks')},
            # Tacker's locks of a VNF instance, held by whichever
            # conductor (or, for v2, tacker-server) works on it: a tooz
            # backend all hosts reach, not a host's files.
            'coordination': {'backend_url': self.mariadb.tooz_url()},
            'tacker': {'vnflcm_mgmt_driver':
                       'vnflcm_noop,mgmt-drivers-kubernetes'},
            'vim_keys': {'openstack': self._p('fernet_keys')},
            'openstack_vim': {'stack_retries': self.stack_retries,
                              'stack_retry_wait': self.stack_retry_wait},
            # v1's Kubernetes infra driver polls a CNF's resources so.
            'kubernetes_vim': {'stack_retries': self.stack_retries,
                               'stack_retry_wait': self.stack_retry_wait},
            'key_manager': {'api_class': '%s.%s' % (
                tacker_keymgr.__name__,
                tacker_keymgr.FileKeyManager.__name__)},
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
        env[tacker_keymgr.KEYMGR_DIR_ENV] = self._p('secrets')
        # FileKeyManager is imported by the services from this checkout.
        env['PYTHONPATH'] = os.pathsep.join(
            [ROOT] + [p for p in env.get('PYTHONPATH', '').split(os.pathsep)
                      if p])
        env['PATH'] = os.path.join(self.venv, 'bin') + os.pathsep + env.get(
            'PATH', '')
        env.pop('PYTHONHOME', None)
        # No KUBERNETES_MGMT_PV_TACKER_CONF: the driver's Tacker v2 script
        # finds tacker.conf in the conductor master's command line, as it
        # does on an operator's host.
        env.pop('KUBERNETES_MGMT_PV_TACKER_CONF', None)
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
            raise processes.ServiceError(
                'tacker-db-manage upgrade head failed:\n%s'
                % processes.tail(log))
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
        return processes.Process(name, popen, log)

    def _check_alive(self, process):
        if not process.alive():
            raise processes.ServiceError('%s exited with %s:\n%s' % (
                process.name, process.popen.returncode,
                processes.tail(process.log)
                or processes.tail(process.log[:-4] + '.out')))

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
        polling.wait_until(ready, 'tacker-server', 90, first_delay=0.05,
                           max_delay=1.0, log=self._server.log)

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
