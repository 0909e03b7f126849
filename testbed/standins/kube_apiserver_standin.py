#!/usr/bin/python3
"""kube-apiserver stand-in: the "static pod" of a test Master.

Installed as /usr/lib/testbed/kube-apiserver-standin and started by the
kubeadm stand-in. A real Master serves the API on <node ip>:6443; here a
plain TCP forwarder listens there and relays every connection to the shared
test API server (testbed/kubeapi/), so TLS, tokens and objects are the
test server's while addresses, ports, haproxy and keepalived behave as on a
real cluster: when this process dies (kubeadm reset, the host is killed),
<node ip>:6443 stops answering.

    kube-apiserver-standin --listen IP:PORT --upstream HOST:PORT
                           [--pid-file PATH]

The PID file is written once the port is bound, and removed on SIGTERM.
"""

import argparse
import errno
import os
import signal
import socket
import sys
import threading
import time


def address(text):
    host, _, port = text.rpartition(':')
    return host.strip('[]'), int(port)


def log(message):
    print(f'{time.strftime("%Y-%m-%dT%H:%M:%S")} {message}', flush=True)


def pump(source, destination):
    """Copy bytes one way until EOF, then pass the EOF on (half-close)."""
    try:
        while True:
            data = source.recv(65536)
            if not data:
                break
            destination.sendall(data)
    except OSError:
        pass
    finally:
        try:
            destination.shutdown(socket.SHUT_WR)
        except OSError:
            pass


def relay(client, upstream):
    """Connect one client to the upstream and copy both ways."""
    with client:
        try:
            server = socket.create_connection(upstream, timeout=5)
        except OSError as error:
            log(f'cannot reach upstream {upstream[0]}:{upstream[1]}: {error}')
            return
        with server:
            server.settimeout(None)
            upward = threading.Thread(target=pump, args=(client, server),
                                      daemon=True)
            upward.start()
            pump(server, client)
            upward.join()


def listen(address, patience=30.0):
    """Bind the API port; while it is still held (a stopped forwarder's
    last threads exiting), retry as the kubelet restarts a crashed static
    pod, for up to ``patience`` seconds."""
    deadline = time.monotonic() + patience
    delay = 0.05
    while True:
        try:
            return socket.create_server(address, backlog=128)
        except OSError as error:
            if error.errno != errno.EADDRINUSE or \
                    time.monotonic() > deadline:
                raise
            log(f'{address[0]}:{address[1]} in use; binding again')
            time.sleep(delay)
            delay = min(delay * 2, 1.0)


def main(argv):
    parser = argparse.ArgumentParser(prog='kube-apiserver-standin')
    parser.add_argument('--listen', type=address, required=True)
    parser.add_argument('--upstream', type=address, required=True)
    parser.add_argument('--pid-file')
    args = parser.parse_args(argv)

    listener = listen(args.listen)
    if args.pid_file:
        with open(args.pid_file, 'w') as handle:
            handle.write(f'{os.getpid()}\n')

    def stop(signum, frame):
        if args.pid_file:
            try:
                os.unlink(args.pid_file)
            except OSError:
                pass
        log(f'stopped by signal {signum}')
        os._exit(0)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    log(f'listening on {args.listen[0]}:{args.listen[1]}, forwarding to '
        f'{args.upstream[0]}:{args.upstream[1]}')
    while True:
        client, _ = listener.accept()
        threading.Thread(target=relay, args=(client, args.upstream),
                         daemon=True).start()


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
