"""Benchmark of auto-heal through Tacker v2: one powered-off Worker, from
``openstack server stop`` to the cluster whole again, with no request
from here.

A TackerLab (real tacker-server and tacker-conductor with Tacker 16's
Prometheus plugin, Prometheus, Alertmanager and blackbox-exporter from
Debian; testbed/monitoring.py) instantiates the v2 sample (1 Master, 2
Workers, Storage server). Then a Worker's server is stopped through
Nova's API and the phases are timed:

- to the alert firing (Prometheus's ``for`` plus its scrape and
  evaluation intervals);
- to Tacker's HEAL starting (Alertmanager's group_wait plus Tacker's
  ``timer_interval``);
- to the heal COMPLETED with the new Worker's Node Ready (the heal
  itself: Heat replaces the VM, the driver joins it);
- the total.

Each phase is printed with the machine's CPU load over it (the test
hosts and Tacker share the cores: near 100 % a phase is CPU-bound). The
driver adds no waits of its own: the total is ``for`` + the scrape and
evaluation intervals + ``timer_interval`` + the heal (what an operator's
heal of that Worker takes); the last lines set the configured waits
beside the measured time to Tacker's HEAL.

Usage (as root, after ``tox -e tacker``)::

    .tox/tacker/bin/python -m tools.benchmark_auto_heal
"""

import os
import shutil
import sys
import tempfile
import time

from testbed import hosts
from testbed import monitoring
from testbed import node_lifecycle
from testbed import polling
from testbed import tacker_lab
from testbed import tacker_service
from testbed import tacker_v2
from tools import bench_common


class Marks(object):
    """Named moments with the machine's busy CPU seconds at each."""

    def __init__(self):
        self.marks = [('start', time.monotonic(),
                       bench_common._busy_cpu_seconds())]

    def mark(self, name):
        self.marks.append((name, time.monotonic(),
                           bench_common._busy_cpu_seconds()))

    def report(self):
        start = self.marks[0]
        for (_, began, busy), (name, ended, busy_end) in zip(
                self.marks, self.marks[1:]):
            print('%-32s %6.1f s  (total %6.1f s)  load %3.0f %%' % (
                name, ended - began, ended - start[1],
                100 * (busy_end - busy) / ((ended - began) * os.cpu_count())))


def instantiate(lab, workdir):
    """The v2 sample instantiated; (V2Api, instance id)."""
    v2 = tacker_v2.V2Api(lab.service.api_url)
    vim = lab.register_openstack_vim()
    vnfd_id, zip_path = lab.build_package(workdir, api='v2')
    lab.client.onboard_package(zip_path)
    instance_id = v2.create(vnfd_id, 'auto-heal-benchmark')['id']
    occ = v2.lcm(instance_id, 'instantiate', lab.instantiate_request(
        vim['id'], api='v2', login='key'))
    if occ['operationState'] != 'COMPLETED':
        raise RuntimeError('instantiate: %s' % occ.get('error'))
    return v2, instance_id


def measure(lab, v2, instance_id):
    vnfc = tacker_v2.vnfcs(v2.instance(instance_id), 'workerNode')[0]
    server = vnfc['computeResource']['resourceId']
    address = lab.engine.testbed.hosts[lab.engine.hosts[server]].ip
    polling.wait_until(lambda: all(lab.monitoring.probed(
        instance_id).values()), 'every VM probed', 60)
    known = v2.op_ids(instance_id)
    marks = Marks()
    lab.stop_server(server)
    polling.wait_until(lambda: any(
        alert['vnfc_info_id'] == vnfc['vnfcInfoId']
        for alert in lab.monitoring.firing()), 'the alert', 300,
        first_delay=0.05, max_delay=0.2)
    marks.mark('alert firing')
    polling.wait_until(lambda: v2.op_ids(instance_id) - known,
                       "Tacker's HEAL", 300, first_delay=0.05, max_delay=0.2)
    marks.mark("Tacker's HEAL started")
    occ = v2.automatic_heal(instance_id, known)
    polling.wait_until(lambda: [
        node for node in lab.nodes().values()
        if node_lifecycle.internal_ip(node) == address and
        not node_lifecycle.kubelet_gone(node)], 'the new Node', 60)
    marks.mark('heal COMPLETED, Node Ready')
    marks.report()
    waits = _seconds(tacker_lab.AUTO_HEAL_FOR) + tacker_lab.AUTO_HEAL_TIMER
    print('configured waits: "for" %s + timer_interval %d s = %.0f s, plus '
          'the scrape and evaluation intervals (%s each); measured to the '
          'HEAL: %.1f s' % (tacker_lab.AUTO_HEAL_FOR,
                            tacker_lab.AUTO_HEAL_TIMER, waits,
                            lab.monitoring.interval,
                            marks.marks[2][1] - marks.marks[0][1]))
    return occ


def _seconds(duration):
    """Seconds of a Prometheus duration in seconds ("2s")."""
    return float(duration.rstrip('s'))


def main():
    reason = (hosts.require_testbed() or monitoring.available() or
              tacker_service.TackerService.available())
    if reason:
        print('benchmark_auto_heal: cannot run here: %s' % reason,
              file=sys.stderr)
        return 2
    workdir = tempfile.mkdtemp(prefix='bench-auto-heal-')
    lab = tacker_lab.TackerLab(workdir=os.path.join(workdir, 'service'))
    try:
        lab.start()
        v2, instance_id = instantiate(lab, workdir)
        print('alert "for" %s, Tacker timer_interval %d s; machine: %d '
              'cores' % (tacker_lab.AUTO_HEAL_FOR, tacker_lab.AUTO_HEAL_TIMER,
                         os.cpu_count()))
        occ = measure(lab, v2, instance_id)
        print('automatic heal: %s, isAutomaticInvocation %s'
              % (occ['operationState'], occ['isAutomaticInvocation']))
        return 0 if occ['operationState'] == 'COMPLETED' else 1
    finally:
        lab.stop()
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == '__main__':
    sys.exit(main())
