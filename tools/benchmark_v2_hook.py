#!/usr/bin/env python3
"""Benchmark of the Tacker v2 door's start-up: one hook, one process.

Tacker v2 runs the VNF package's script once per hook, as a new process
of tacker-conductor's interpreter, so every hook pays the interpreter's
start, the driver's imports and the reading of tacker.conf before its
first remote step. This runs the sample package's script as the conductor
does (pickle on stdin, result on stdout) for hooks that reach no host:

* ``modify_information_start``: an operation the driver does not act at
  (a no-op: start-up, configuration, the log file);
* ``instantiate_end`` with both features off: the driver's whole engine
  imported and its hook run.

For each it reports the median and the worst wall time from spawn to exit
and the peak RSS of one hook process, with the machine load beside them
(busy share of all cores taken by everything but the hook processes during
the runs, and the 1-minute load average): start-up competes with whatever
else the machine does. Targets:

* median start-up of a hook with the engine <= 3 s on an idle machine
  (load < 50%), else only reported
* peak RSS of one hook process <= 200 MB

Usage::

    .venv/bin/python -m tools.benchmark_v2_hook [--runs 10] \\
        [--python .tox/tacker/bin/python]

Exit status 0 when every target holds, 1 otherwise.
"""

import argparse
import os
import pickle
import resource
import statistics
import subprocess
import sys
import tempfile
import time

from tools import bench_common

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, 'samples', 'kubernetes_pv_vnf', 'v2',
                      'Scripts', 'kubernetes_mgmt_v2.py')
START_TARGET_SECONDS = 3.0
IDLE_LOAD = 0.5
RSS_TARGET_MB = 200.0


def script_dict(operation, package_dir):
    instance = {
        'id': 'bench-instance', 'vnfdId': 'bench-vnfd',
        'vimConnectionInfo': {'vim1': {
            'vimId': 'bench-vim', 'vimType': 'ETSINFV.OPENSTACK_KEYSTONE.V_3',
            'interfaceInfo': {'endpoint': 'http://127.0.0.1:1/v3'},
            'accessInfo': {'username': 'u', 'password': 'p', 'project': 'p',
                           'projectDomain': 'Default',
                           'userDomain': 'Default'}}}}
    return {'operation': operation,
            'request': {'flavourId': 'simple', 'additionalParams': {
                'k8s_cluster_installation_param': {}}},
            'vnf_instance': instance, 'grant_request': None,
            'grant_response': None, 'tmp_csar_dir': package_dir,
            'user_script_err_handling_data': {}}


# The hook process's own peak RSS (VmHWM of its image, read at exit): the
# rusage of a child also counts the memory of the parent it was forked
# from, here the benchmark itself.
_RUNNER = ('import atexit, runpy, sys\n'
           'def peak(path=sys.argv[2]):\n'
           '    with open("/proc/self/status") as status, '
           'open(path, "w") as out:\n'
           '        out.write(status.read())\n'
           'atexit.register(peak)\n'
           'sys.argv = sys.argv[1:2]\n'
           'runpy.run_path(sys.argv[0], run_name="__main__")\n')


def run_once(python, operation, env, package_dir):
    """(wall seconds, peak RSS in MB) of one hook process."""
    status = os.path.join(package_dir, 'status')
    started = time.monotonic()
    done = subprocess.run(
        [python, '-c', _RUNNER, SCRIPT, status],
        input=pickle.dumps(script_dict(operation, package_dir)),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    wall = time.monotonic() - started
    if done.returncode != 0 or (operation == 'instantiate_end' and
                                'vnf_instance' not in
                                pickle.loads(done.stdout)):
        raise SystemExit('benchmark: %s failed: %s' % (
            operation, done.stderr.decode()))
    with open(status) as stream:
        peak_kb = [int(line.split()[1]) for line in stream
                   if line.startswith('VmHWM:')][0]
    return wall, peak_kb / 1024


def _children_cpu_seconds():
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def measure(python, operation, runs, env, package_dir):
    """Wall times and RSS of ``runs`` hook processes, with the load of
    everything else on the machine: the hook processes themselves (one
    core busy) are taken out, so "idle" means no other work competed."""
    busy = bench_common._busy_cpu_seconds()
    hooks = _children_cpu_seconds()
    started = time.monotonic()
    results = [run_once(python, operation, env, package_dir)
               for _ in range(runs)]
    elapsed = time.monotonic() - started
    others = (bench_common._busy_cpu_seconds() - busy
              - (_children_cpu_seconds() - hooks))
    load = max(0.0, others) / (elapsed * os.cpu_count())
    walls = [wall for wall, _ in results]
    return {'median': statistics.median(walls), 'worst': max(walls),
            'rss_mb': max(rss for _, rss in results), 'load': load,
            'loadavg': os.getloadavg()[0]}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--runs', type=int, default=10)
    parser.add_argument('--python', default=sys.executable,
                        help='the interpreter of the hook processes: '
                             'tacker-conductor\'s (default: this one)')
    args = parser.parse_args()
    tacker = subprocess.run([args.python, '-c', 'import tacker'],
                            capture_output=True).returncode == 0
    print('hook interpreter %s (Tacker %s)' % (
        args.python, 'installed' if tacker else 'not installed'))
    with tempfile.TemporaryDirectory(prefix='v2-bench-') as directory:
        conf = os.path.join(directory, 'tacker.conf')
        with open(conf, 'w') as stream:
            stream.write('[kubernetes_mgmt_pv]\nv2_log_file = %s\n'
                         % os.path.join(directory, 'v2.log'))
        env = dict(os.environ, PYTHONPATH=ROOT,
                   KUBERNETES_MGMT_PV_TACKER_CONF=conf)
        print('%-26s %9s %9s %9s %7s %8s' % (
            'hook process', 'median s', 'worst s', 'RSS MB', 'others',
            'loadavg'))
        ok = True
        for operation in ('modify_information_start', 'instantiate_end'):
            result = measure(args.python, operation, args.runs, env,
                             directory)
            print('%-26s %9.2f %9.2f %9.1f %6.0f%% %8.2f' % (
                operation, result['median'], result['worst'],
                result['rss_mb'], 100 * result['load'], result['loadavg']))
            ok &= result['rss_mb'] <= RSS_TARGET_MB
            if operation != 'instantiate_end':
                continue
            if result['load'] < IDLE_LOAD:
                ok &= result['median'] <= START_TARGET_SECONDS
            else:
                print('start-up not judged: other work took %.0f%% of the '
                      'cores' % (100 * result['load']))
    print('targets: start-up <= %.1f s when idle, RSS <= %.0f MB: %s' % (
        START_TARGET_SECONDS, RSS_TARGET_MB, 'ok' if ok else 'MISSED'))
    return 0 if ok else 1


if __name__ == '__main__':
    sys.exit(main())
