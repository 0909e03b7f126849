"""A private MariaDB for Tacker: its own data directory, socket, PID file
and port on 127.0.0.1, under the service's work directory; no system
service is started or touched."""

import os
import signal
import subprocess
import uuid

from testbed import polling
from testbed import processes

DB_NAME, DB_USER = 'tacker', 'tacker'
# mariadb-install-db's own advice after a failed bootstrap: about 30
# lines that would push mariadbd's errors out of any log tail.
INSTALL_ADVICE = 'Installation of system tables failed!'


class MariaDB(object):
    """``path(*parts)``: a path under the work directory (``mysql``,
    ``run`` and ``logs`` must exist when ``start`` runs)."""

    def __init__(self, path):
        self._path = path
        self.port = None
        self.password = uuid.uuid4().hex
        self._mysqld_safe = None

    @property
    def pid_file(self):
        return self._path('run', 'mysqld.pid')

    @property
    def socket(self):
        return self._path('run', 'mysqld.sock')

    @property
    def tmpdir(self):
        return self._path('mysql-tmp')

    def url(self):
        """The SQLAlchemy URL of Tacker's database."""
        return 'mysql+pymysql://%s:%s@127.0.0.1:%d/%s?charset=utf8' % (
            DB_USER, self.password, self.port, DB_NAME)

    def tooz_url(self):
        """The tooz coordination backend URL of this database (its
        ``GET_LOCK`` locks), which every host of the site reaches."""
        return 'mysql://%s:%s@127.0.0.1:%d/%s' % (
            DB_USER, self.password, self.port, DB_NAME)

    def sql(self, statements):
        """Run ``statements`` as root; on stdin, not in the argv, since
        they may set a password."""
        return subprocess.run(
            ['mariadb', '--no-defaults', '-uroot',
             '--socket=%s' % self.socket], input=statements,
            capture_output=True, text=True, timeout=30)

    def start(self):
        """Start it unless it answers already; create Tacker's database
        and user (idempotently)."""
        pid = processes.read_pid(self.pid_file)
        if pid and processes.alive(pid) and \
                self.sql('SELECT 1').returncode == 0:
            return
        datadir = self._path('mysql')
        log = self._path('logs', 'mariadb.err')
        # Its own tmpdir: a MariaDB that starts deletes every "#sql*"
        # file in its tmpdir, a shared /tmp included, i.e. the temporary
        # tables of any other MariaDB running there (a second lab's
        # bootstrap then fails with "Unknown table").
        os.makedirs(self.tmpdir, exist_ok=True)
        if not os.path.exists(os.path.join(datadir, 'mysql')):
            self._install(datadir)
        self.port = self.port or processes.free_port()
        with open(self._path('logs', 'mysqld_safe.out'), 'ab') as out:
            popen = subprocess.Popen(
                ['mysqld_safe', '--no-defaults', '--user=root',
                 '--datadir=%s' % datadir, '--tmpdir=%s' % self.tmpdir,
                 '--socket=%s' % self.socket,
                 '--pid-file=%s' % self.pid_file,
                 '--port=%d' % self.port, '--bind-address=127.0.0.1',
                 '--log-error=%s' % log, '--skip-name-resolve',
                 '--innodb-buffer-pool-size=32M', '--skip-log-bin',
                 '--max-connections=500'],
                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True)
        self._mysqld_safe = processes.Process('mysqld_safe', popen, log)

        def ready():
            if popen.poll() is not None:
                raise processes.ServiceError(
                    'mysqld_safe exited with %s:\n%s'
                    % (popen.returncode, processes.tail(log)))
            return self.sql('SELECT 1').returncode == 0
        polling.wait_until(ready, 'MariaDB', 60, first_delay=0.05,
                           max_delay=1.0, log=log)
        result = self.sql(
            "CREATE DATABASE IF NOT EXISTS {db} CHARACTER SET utf8;"
            "CREATE USER IF NOT EXISTS '{u}'@'127.0.0.1' IDENTIFIED BY '{p}';"
            "ALTER USER '{u}'@'127.0.0.1' IDENTIFIED BY '{p}';"
            "GRANT ALL PRIVILEGES ON {db}.* TO '{u}'@'127.0.0.1';"
            "FLUSH PRIVILEGES;".format(db=DB_NAME, u=DB_USER,
                                       p=self.password))
        if result.returncode:
            raise processes.ServiceError('MariaDB set-up failed: %s'
                                         % result.stderr)

    def _install(self, datadir):
        """Create the system tables; a failure names mariadbd's own
        errors, not the installer's advice that follows them."""
        install_log = self._path('logs', 'mariadb-install.log')
        with open(install_log, 'w') as out:
            status = subprocess.run(
                ['mariadb-install-db', '--no-defaults', '--user=root',
                 '--datadir=%s' % datadir, '--tmpdir=%s' % self.tmpdir,
                 '--skip-test-db',
                 '--auth-root-authentication-method=socket'],
                stdout=out, stderr=subprocess.STDOUT, timeout=120).returncode
        if status:
            with open(install_log, errors='replace') as handle:
                lines = handle.read(1 << 20).splitlines()
            advice = next((i for i, line in enumerate(lines)
                           if INSTALL_ADVICE in line), len(lines))
            raise processes.ServiceError(
                'mariadb-install-db exited with %d (%s):\n%s'
                % (status, install_log, '\n'.join(lines[:advice][-40:])))

    def stop(self):
        pid = processes.read_pid(self.pid_file)
        if pid and processes.alive(pid):
            os.kill(pid, signal.SIGTERM)
            try:
                polling.wait_until(lambda: not processes.alive(pid),
                                   'mariadbd to exit', 60, first_delay=0.05,
                                   max_delay=1.0)
            except polling.WaitTimeout:
                os.kill(pid, signal.SIGKILL)
        if self._mysqld_safe is not None:
            popen = self._mysqld_safe.popen
            try:
                popen.wait(timeout=30)
            except subprocess.TimeoutExpired:
                popen.kill()
                popen.wait(timeout=10)
            self._mysqld_safe = None
