#!/usr/bin/python3 -S
"""crictl stand-in, installed as /usr/bin/crictl (kubeadm's cri-tools).

The test hosts run the control plane's "static pods" as plain processes
(the API server forwarder and a real etcd, see kubeadm_node.py and
kubeadm_etcd.py). This answers the two calls that restart them:

    crictl pods --namespace kube-system --name REGEX -q
    crictl rmp -f POD_ID...

A pod's ID is derived from its component and process ID; removing it
stops the process and starts it again with the same command line, as the
kubelet re-creates a static pod whose sandbox is removed.
"""

import hashlib
import os
import re
import signal
import socket
import subprocess
import sys
import time

# No .pyc of its own: an upgrade's modules have the size and, built in the
# same second, the mtime of the old ones, so a timestamp .pyc would outlive
# it. The package's own, which check the source's hash, are read.
sys.dont_write_bytecode = True
sys.path[:0] = ['/usr/lib/testbed', os.path.dirname(os.path.abspath(__file__))]
import kubeadm_etcd as etcd  # noqa: E402
import kubeadm_node as node  # noqa: E402

STOP_GRACE = 5.0


def _running():
    """{pod ID: (component, pid, log file)} of this host's static pods."""
    pods = []
    api_pid = node.api_server_pid()
    if api_pid:
        pods.append(('kube-apiserver', api_pid, node.API_SERVER_LOG))
    pods += [('etcd', pid, etcd.LOG_FILE) for pid in etcd.running_pids()]
    return {hashlib.sha256(f'{name}:{pid}'.encode()).hexdigest():
            (name, pid, log) for name, pid, log in pods}


def _restart(pid, log_file):
    """Stop the process and start its command line again, detached."""
    with open(f'/proc/{pid}/cmdline', 'rb') as handle:
        argv = [arg.decode() for arg in handle.read().split(b'\0')[:-1]]
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_GRACE
    while not etcd.process_exited(pid):
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            deadline = float('inf')
        time.sleep(0.02)
    with open(log_file, 'ab') as log:
        process = subprocess.Popen(argv, stdin=subprocess.DEVNULL,
                                   stdout=log, stderr=log,
                                   start_new_session=True, close_fds=True,
                                   env=etcd.ENVIRONMENT, cwd='/')
    if argv[0] == etcd.ETCD:
        with open(etcd.PID_FILE, 'w') as handle:
            handle.write(f'{process.pid}\n')


def pods(args):
    namespace, pattern, quiet = None, '', False
    while args:
        arg = args.pop(0)
        if arg == '--namespace':
            namespace = args.pop(0)
        elif arg == '--name':
            pattern = args.pop(0)
        elif arg == '-q':
            quiet = True
        else:
            raise SystemExit(f'crictl (testbed): unsupported flag {arg}')
    if not quiet or namespace != 'kube-system':
        raise SystemExit('crictl (testbed): only "pods --namespace '
                         'kube-system --name REGEX -q" is supported')
    host = socket.gethostname()
    for pod_id, (name, _, _) in sorted(_running().items()):
        if re.search(pattern, f'{name}-{host}'):
            print(pod_id)


def rmp(args):
    if args[:1] != ['-f']:
        raise SystemExit('crictl (testbed): only "rmp -f ID..." is '
                         'supported')
    running = _running()
    for pod_id in args[1:]:
        if pod_id not in running:
            raise SystemExit(f'removing the pod sandbox "{pod_id}": not '
                             'found')
        _, pid, log_file = running[pod_id]
        _restart(pid, log_file)
        print(f'Removed sandbox {pod_id}')


def main(args):
    commands = {'pods': pods, 'rmp': rmp}
    if not args or args[0] not in commands:
        print('crictl (testbed): only "pods" and "rmp" are supported',
              file=sys.stderr)
        return 1
    commands[args[0]](args[1:])
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
