"""The tacker-conductor processes of a TackerService.

One by default; more as a growing site runs them: all on the same MariaDB
and RabbitMQ, each with its own ``host`` (so its own server queue) and log,
and all consuming the one topic queue that tacker-server casts LCM
operations to, which RabbitMQ round-robins among them. The first shares
tacker-server's host; every other one has the state of a host of its own
(package, VIM key, SSH key, lock and state directories), and reaches the
same tooz coordination backend (MariaDB) and key manager.
"""

import contextlib
import os
import signal

from testbed import polling

TOPIC = 'TACKER_CONDUCTOR'


def conductor_name(index):
    """The first keeps the single-conductor names (log, host)."""
    return 'tacker-conductor' if index == 0 else 'tacker-conductor-%d' % (
        index + 1)


class Conductors(object):
    """Starts, counts and stops the conductors of ``service``."""

    def __init__(self, service):
        self._service = service
        self.processes = []

    def pids(self):
        return {p.name: p.pid for p in self.processes if p.alive()}

    def logs(self):
        """{conductor name: path of its log}."""
        return {p.name: p.log for p in self.processes}

    def served(self, marks):
        """{conductor name: the keys of ``marks`` ({key: strings, e.g. an
        instance's id and its servers' ids}) whose strings its log
        mentions}."""
        found = {}
        for name, path in self.logs().items():
            with open(path, errors='replace') as handle:
                text = handle.read()
            found[name] = sorted(key for key, strings in marks.items()
                                 if any(s in text for s in strings))
        return found

    def topic_consumers(self):
        """{queue: consumers} of the conductors' topic and server queues
        (none while RabbitMQ does not answer)."""
        listed = self._service.rabbitmq.answer('list_queues', '-q', 'name',
                                               'consumers')
        queues = {}
        for line in (listed or '').splitlines():
            fields = line.split()
            if len(fields) == 2 and fields[1].isdigit() and (
                    fields[0] == TOPIC or fields[0].startswith(TOPIC + '.')):
                queues[fields[0]] = int(fields[1])
        return queues

    def scale(self, count):
        """Run exactly ``count`` conductors; returns once each consumes."""
        while len(self.processes) > count:
            self._stop(self.processes.pop())
        for index, process in enumerate(self.processes):
            if not process.alive():  # restarted, as start() promises
                self._stop(process)
                self.processes[index] = self._spawn(index)
        for index in range(len(self.processes), count):
            self.processes.append(self._spawn(index))

        def ready():
            for process in self.processes:
                self._service._check_alive(process)
            queues = self.topic_consumers()
            # One server queue per host: every conductor is listening.
            servers = [q for q, n in queues.items() if q != TOPIC and n]
            return queues.get(TOPIC, 0) >= count and len(servers) >= count
        polling.wait_until(
            ready, '%d tacker-conductor(s) to consume' % count, 120,
            first_delay=0.5, max_delay=1.0, log=self.processes[-1].log)

    def _spawn(self, index):
        name = conductor_name(index)
        extra = []
        if index:
            extra = ['--config-file', self._write_host_conf(name)]
        return self._service._spawn(name, *extra, program='tacker-conductor')

    def host_dir(self, name, *parts):
        """A directory of the second conductor's "host": the state a
        conductor keeps on its own host."""
        return self._service._p('host-%s' % name, *parts)

    def _write_host_conf(self, name):
        """The options of a conductor on a host of its own: its own
        state, lock and VIM key directories (empty, as on a new host:
        the guide's step distributes the key files, see
        ``distribute_vim_keys``), package directory (Tacker casts every
        package's extraction to every conductor; two extracting into one
        vnf_package_csar_path collide and leave the package PROCESSING)
        and copy of the driver's ``ssh_key_dir`` (the guide's step 2 on
        every conductor host). Database, message queue, coordination
        backend and key manager are the services every host reaches."""
        dirs = {sub: self.host_dir(name, sub) for sub in (
            'state', 'locks', 'fernet_keys', 'csar', 'ssh_keys')}
        for path in dirs.values():
            os.makedirs(path, mode=0o700, exist_ok=True)
        text = ('[DEFAULT]\nhost = %s\nstate_path = %s\n\n'
                '[oslo_concurrency]\nlock_path = %s\n\n'
                '[vim_keys]\nopenstack = %s\n\n'
                '[vnf_package]\nvnf_package_csar_path = %s\n' % (
                    name, dirs['state'], dirs['locks'], dirs['fernet_keys'],
                    dirs['csar']))
        key_dir = self._service.driver_options.get('ssh_key_dir')
        if key_dir:
            _copy_private(key_dir, dirs['ssh_keys'])
            text += '\n[kubernetes_mgmt_pv]\nssh_key_dir = %s\n' % (
                dirs['ssh_keys'])
        path = self._service._p('etc', '%s.conf' % name)
        with open(path, 'w') as handle:
            handle.write(text)
        return path

    def vim_key_dir(self, index):
        """The ``[vim_keys] openstack`` directory of conductor ``index``."""
        if not index:
            return self._service._p('fernet_keys')
        return self.host_dir(conductor_name(index), 'fernet_keys')

    def distribute_vim_keys(self, index):
        """The guide's step for a conductor host: copy every OpenStack
        VIM key file of the host that registered the VIMs (tacker-server's
        ``[vim_keys] openstack``) into its own, mode 0600."""
        _copy_private(self.vim_key_dir(0), self.vim_key_dir(index))

    def stop(self):
        while self.processes:
            self._stop(self.processes.pop())

    def _stop(self, process):
        service = self._service
        if process.alive():
            size = os.path.getsize(process.log) if os.path.exists(
                process.log) else 0
            with contextlib.suppress(ProcessLookupError):
                os.kill(process.pid, signal.SIGTERM)
            # Its master logs "Shutdown finish" once its worker is gone,
            # but never exits: SIGKILL then (or after a grace period).

            def finished():
                if not process.alive():
                    return True
                with open(process.log, errors='replace') as handle:
                    handle.seek(size)
                    return 'Shutdown finish' in handle.read()
            with contextlib.suppress(polling.WaitTimeout):
                polling.wait_until(
                    finished, '%s to shut down' % process.name, 15,
                    first_delay=0.05, max_delay=1.0)
            if process.alive():
                service._kill_group(process, signal.SIGKILL)
                process.popen.wait(timeout=10)
        service._kill_group(process, signal.SIGKILL)


def _copy_private(source, target):
    """Copy the files of ``source`` into ``target``, mode 0600, as an
    operator copies key files to another host."""
    for name in os.listdir(source):
        with open(os.path.join(source, name), 'rb') as handle:
            data = handle.read()
        with open(os.open(os.path.join(target, name),
                          os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600),
                  'wb') as handle:
            handle.write(data)
