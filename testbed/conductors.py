"""The tacker-conductor processes of a TackerService.

One by default; more as a growing site runs them: all on the same MariaDB
and RabbitMQ, each with its own ``host`` (so its own server queue), log
and package directory, and all consuming the one topic queue that tacker-server
casts LCM operations to, which RabbitMQ round-robins among them.
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
            # As if on a host of its own: Tacker casts every package's
            # extraction to every conductor, and two extracting into one
            # vnf_package_csar_path collide (FileExistsError) and leave the
            # package PROCESSING forever.
            csar = self._service._p('csar-%s' % name)
            os.makedirs(csar, exist_ok=True)
            path = self._service._p('etc', '%s.conf' % name)
            with open(path, 'w') as handle:
                handle.write('[DEFAULT]\nhost = %s\n\n[vnf_package]\n'
                             'vnf_package_csar_path = %s\n' % (name, csar))
            extra = ['--config-file', path]
        return self._service._spawn(name, *extra, program='tacker-conductor')

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
