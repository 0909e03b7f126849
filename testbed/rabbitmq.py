"""A private RabbitMQ node for Tacker: its own Mnesia, logs, node name,
ports and Erlang cookie (``HOME`` is its directory, so
``~/.erlang.cookie`` is private; ``epmd`` runs on a private port)."""

import os
import signal
import subprocess
import uuid

from testbed import polling
from testbed import processes

CTL = '/usr/lib/rabbitmq/bin/rabbitmqctl'
SERVER = '/usr/lib/rabbitmq/bin/rabbitmq-server'


class RabbitMQ(object):
    """``path(*parts)``: a path under the work directory (``rabbitmq``,
    ``run`` and ``logs`` must exist when ``start`` runs)."""

    def __init__(self, path):
        self._path = path
        self.node = 'tacker-%s@localhost' % uuid.uuid4().hex[:8]
        self.amqp_port = self.epmd_port = self.dist_port = None
        self._started = False

    @property
    def pid_file(self):
        return self._path('run', 'rabbit.pid')

    def transport_url(self):
        return 'rabbit://guest:guest@127.0.0.1:%d/' % self.amqp_port

    def _env(self):
        env = dict(os.environ)
        env.update({
            'HOME': self._path('rabbitmq'),
            'RABBITMQ_NODENAME': self.node,
            'RABBITMQ_NODE_IP_ADDRESS': '127.0.0.1',
            'RABBITMQ_NODE_PORT': str(self.amqp_port),
            'RABBITMQ_DIST_PORT': str(self.dist_port),
            'ERL_EPMD_PORT': str(self.epmd_port),
            'ERL_EPMD_ADDRESS': '127.0.0.1',
            'RABBITMQ_MNESIA_BASE': self._path('rabbitmq', 'mnesia'),
            'RABBITMQ_LOG_BASE': self._path('logs', 'rabbitmq'),
            'RABBITMQ_PID_FILE': self.pid_file,
            'RABBITMQ_CONFIG_FILE': self._path('rabbitmq', 'rabbitmq'),
            'RABBITMQ_ADVANCED_CONFIG_FILE': self._path('rabbitmq',
                                                        'advanced.config'),
            'RABBITMQ_ENABLED_PLUGINS_FILE': self._path('rabbitmq',
                                                        'enabled_plugins'),
            'RABBITMQ_CONF_ENV_FILE': self._path('rabbitmq',
                                                 'rabbitmq-env.conf'),
        })
        return env

    def ctl(self, *args, timeout=60):
        """rabbitmqctl on this node."""
        return subprocess.run(
            [CTL, '-n', self.node, *args], env=self._env(),
            capture_output=True, text=True, timeout=timeout)

    def start(self):
        """Start the node unless it runs already."""
        if self._started and processes.alive(
                processes.read_pid(self.pid_file)):
            return
        self.amqp_port = self.amqp_port or processes.free_port()
        self.dist_port = self.dist_port or processes.free_port()
        self.epmd_port = self.epmd_port or processes.free_port()
        with open(self._path('rabbitmq', 'enabled_plugins'), 'w') as handle:
            handle.write('[].\n')
        for name in ('rabbitmq.conf', 'rabbitmq-env.conf'):
            open(self._path('rabbitmq', name), 'a').close()
        with open(self._path('rabbitmq', 'advanced.config'), 'w') as handle:
            handle.write('[].\n')
        log = self._path('logs', 'rabbitmq-server.out')
        with open(log, 'ab') as out:
            result = subprocess.run(
                [SERVER, '-detached'], env=self._env(),
                stdin=subprocess.DEVNULL, stdout=out,
                stderr=subprocess.STDOUT, timeout=60)
        if result.returncode:
            raise processes.ServiceError(
                'rabbitmq-server -detached failed (see %s)' % log)
        self._started = True
        polling.wait_until(
            lambda: self.ctl('await_startup', '--timeout', '10',
                             timeout=30).returncode == 0,
            'RabbitMQ', 90, first_delay=0.05, max_delay=1.0,
            log=self._path('logs', 'rabbitmq'))

    def stop(self):
        if not self._started:
            return
        pid = processes.read_pid(self.pid_file)
        if pid and processes.alive(pid):
            self.ctl('stop', timeout=60)
            if processes.alive(pid):
                os.kill(pid, signal.SIGTERM)
                try:
                    polling.wait_until(lambda: not processes.alive(pid),
                                       'RabbitMQ to exit', 30,
                                       first_delay=0.05, max_delay=1.0)
                except polling.WaitTimeout:
                    os.kill(pid, signal.SIGKILL)
        # Our private epmd (ERL_EPMD_PORT) goes too.
        subprocess.run(['epmd', '-port', str(self.epmd_port), '-kill'],
                       capture_output=True, timeout=30)
        self._started = False
