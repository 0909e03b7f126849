"""A real HTTP proxy (Debian's tinyproxy) for the test hosts: the proxy of
a site whose nodes reach the package mirrors only through it.

It runs on the runner in the foreground (-d), listening on the testbed
bridge's address and allowing only the testbed's subnet, as the user
tinyproxy; its log (LogLevel Info: one line per request, with the URL) is
what tests read to see that the nodes' requests went through it.
"""

import os
import shutil
import subprocess
import tempfile

from testbed import polling
from testbed import processes

BINARY = '/usr/bin/tinyproxy'
USER = 'tinyproxy'


class TinyProxy(object):
    """tinyproxy on ``address`` for clients of ``subnet``; use as a context
    manager. ``url`` is the proxy URL the nodes are given."""

    def __init__(self, address, subnet):
        self.address = address
        self.subnet = subnet
        self.port = None
        self.directory = None
        self._process = None

    @property
    def url(self):
        return f'http://{self.address}:{self.port}'

    @property
    def log_file(self):
        return os.path.join(self.directory, 'tinyproxy.log')

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc_info):
        self.stop()

    def start(self):
        self.directory = tempfile.mkdtemp(prefix='testbed-tinyproxy-')
        shutil.chown(self.directory, user=USER)
        self.port = processes.free_port(self.address)
        config = os.path.join(self.directory, 'tinyproxy.conf')
        with open(config, 'w') as stream:
            stream.write(f'User {USER}\nGroup {USER}\n'
                         f'Port {self.port}\nListen {self.address}\n'
                         f'Timeout 60\nLogFile "{self.log_file}"\n'
                         'LogLevel Info\nMaxClients 100\n'
                         f'Allow {self.subnet}\n')
        try:
            self._process = subprocess.Popen(
                [BINARY, '-d', '-c', config], stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            polling.wait_until(self._listening, 'tinyproxy to listen')
        except BaseException:
            self.stop()
            raise

    def _listening(self):
        if self._process.poll() is not None:
            raise RuntimeError(f'tinyproxy exited: {self.log()}')
        return processes.port_open(self.address, self.port)

    def log(self):
        try:
            with open(self.log_file) as stream:
                return stream.read()
        except FileNotFoundError:
            return ''

    def stop(self):
        if self._process is not None:
            self._process.terminate()
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
            self._process = None
        if self.directory:
            shutil.rmtree(self.directory, ignore_errors=True)
            self.directory = None
