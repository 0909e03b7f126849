"""A private RabbitMQ node for Tacker: its own Mnesia, logs, node name,
ports and Erlang cookie (``HOME`` is its directory, so
``~/.erlang.cookie`` is private; ``epmd`` runs on a private port)."""

import contextlib
import os
import signal
import subprocess
import uuid

from testbed import polling
from testbed import processes

CTL = '/usr/lib/rabbitmq/bin/rabbitmqctl'
SERVER = '/usr/lib/rabbitmq/bin/rabbitmq-server'
START_ATTEMPTS = 3
# Bounds a broken node only: with every test env running on two cores,
# a boot has taken over 40 s.
BOOT_TIMEOUT = 180


class NodeExited(processes.ServiceError):
    """The node's VM exited before the node was up."""


class RabbitMQ(object):
    """``path(*parts)``: a path under the work directory (``rabbitmq``,
    ``run`` and ``logs`` must exist when ``start`` runs)."""

    def __init__(self, path):
        self._path = path
        self.node = 'tacker-%s@localhost' % uuid.uuid4().hex[:8]
        self.amqp_port = self.epmd_port = self.dist_port = None
        self._started = False
        self._server = None

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
            # A VM that cannot boot dumps here, not into the cwd.
            'ERL_CRASH_DUMP': self._path('logs', 'erl_crash.dump'),
            # Idle schedulers sleep instead of spinning for work: on a
            # shared 2-core machine the spinning of two nodes took ~10 %
            # of the CPU from the test hosts.
            'RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS':
                '+sbwt none +sbwtdcpu none +sbwtdio none',
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

    def answer(self, *args, timeout=60):
        """What rabbitmqctl printed when it succeeded, else None; for
        polls: each call boots an Erlang VM, which a loaded machine keeps
        from answering in time (seen in CI), and that means "not yet"."""
        try:
            result = self.ctl(*args, timeout=timeout)
        except subprocess.TimeoutExpired:
            return None
        return result.stdout if result.returncode == 0 else None

    def start(self):
        """Start the node unless it runs already. A node whose VM exits
        while it boots (a port taken between its pick and its bind) is
        started again on other ports, up to ``START_ATTEMPTS`` times."""
        if self._started and processes.alive(
                processes.read_pid(self.pid_file)):
            return
        with open(self._path('rabbitmq', 'enabled_plugins'), 'w') as handle:
            handle.write('[].\n')
        for name in ('rabbitmq.conf', 'rabbitmq-env.conf'):
            open(self._path('rabbitmq', name), 'a').close()
        with open(self._path('rabbitmq', 'advanced.config'), 'w') as handle:
            handle.write('[].\n')
        for attempt in range(1, START_ATTEMPTS + 1):
            try:
                return self._start_once()
            except NodeExited:
                self._end_server()
                self._kill_epmd()
                if attempt == START_ATTEMPTS:
                    raise
                self.amqp_port = self.dist_port = self.epmd_port = None

    def _start_once(self):
        self.amqp_port = self.amqp_port or processes.free_port()
        self.dist_port = self.dist_port or processes.free_port()
        self.epmd_port = self.epmd_port or processes.free_port()
        log = self._path('logs', 'rabbitmq-server.out')
        # In the foreground (not -detached), so that what the VM prints
        # when it cannot start reaches the log and its exit is seen.
        with open(log, 'ab') as out:
            server = subprocess.Popen(
                [SERVER], env=self._env(), stdin=subprocess.DEVNULL,
                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        self._server = server
        self._started = True

        def up():
            if server.poll() is not None:
                self._started = False
                raise NodeExited('rabbitmq-server exited with status %d '
                                 'while starting; %s:\n%s' % (
                                     server.returncode, log,
                                     processes.tail(log, 20)))
            # The AMQP listener opens at the end of the boot: a cheap
            # probe until then, where each rabbitmqctl boots an Erlang VM.
            return (processes.port_open('127.0.0.1', self.amqp_port)
                    and self.answer('await_startup', '--timeout', '30')
                    is not None)
        polling.wait_until(up, 'RabbitMQ', BOOT_TIMEOUT, first_delay=0.05,
                           max_delay=1.0, log=log)

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
        self._end_server()
        self._kill_epmd()
        self._started = False

    def _end_server(self):
        """Reap the foreground script; a node that never came up goes with
        its whole session (the script traps SIGTERM to stop the node)."""
        if self._server is None:
            return
        for sent in (signal.SIGTERM, signal.SIGKILL):
            if self._server.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self._server.pid, sent)
            try:
                self._server.wait(timeout=30)
                break
            except subprocess.TimeoutExpired:
                continue
        self._server = None

    def _kill_epmd(self):
        """Our private epmd (ERL_EPMD_PORT) goes too."""
        subprocess.run(['epmd', '-port', str(self.epmd_port), '-kill'],
                       capture_output=True, timeout=30)
