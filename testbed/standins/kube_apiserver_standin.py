#!/usr/bin/python3 -S
"""kube-apiserver stand-in: the "static pod" of a test Master.

Installed as /usr/lib/testbed/kube-apiserver-standin and started by the
kubeadm stand-in. A real Master serves the API on <node ip>:6443 with its
/etc/kubernetes/pki/apiserver.crt; here this process listens there and
relays every connection to the shared test API server (testbed/kubeapi/),
so tokens and objects are the test server's while addresses, ports,
haproxy and keepalived behave as on a real cluster: when this process
dies (kubeadm reset, the host is killed), <node ip>:6443 stops answering.

With --tls-cert-file and --tls-private-key-file (kube-apiserver's flags)
it terminates TLS with that certificate, as the real API server does, so
a client checks this Master's certificate and the names kubeadm put in it;
it then speaks TLS to the test API server, verified with
--upstream-ca-file. Without them it relays the bytes (TLS and all) as
they come, for hosts made Masters without kubeadm.

    kube-apiserver-standin --listen IP:PORT --upstream HOST:PORT
                           [--tls-cert-file PATH --tls-private-key-file PATH
                            --upstream-ca-file PATH] [--pid-file PATH]

The PID file is written once the port is bound, and removed on SIGTERM.
"""

import argparse
import asyncio
import errno
import os
import signal
import socket
import ssl
import sys
import time


def address(text):
    host, _, port = text.rpartition(':')
    return host.strip('[]'), int(port)


def log(message):
    print(f'{time.strftime("%Y-%m-%dT%H:%M:%S")} {message}', flush=True)


async def pump(reader, writer):
    """Copy bytes one way until EOF, then pass the EOF on: a half-close
    where the transport has one (TCP), else a close (TLS)."""
    try:
        while True:
            data = await reader.read(65536)
            if not data:
                break
            writer.write(data)
            await writer.drain()
    except (OSError, ssl.SSLError):
        pass
    finally:
        try:
            if writer.can_write_eof():
                writer.write_eof()
            else:
                writer.close()
        except (OSError, RuntimeError):
            pass


class Relay:
    """Connections to one upstream, optionally TLS on the upstream side."""

    def __init__(self, upstream, upstream_context=None):
        self.upstream = upstream
        self.context = upstream_context

    async def connect(self):
        host, port = self.upstream
        return await asyncio.wait_for(asyncio.open_connection(
            host, port, ssl=self.context,
            server_hostname=host if self.context else None), 5)

    async def serve(self, client_reader, client_writer):
        """Connect one client to the upstream and copy both ways."""
        try:
            reader, writer = await self.connect()
        except (OSError, ssl.SSLError, asyncio.TimeoutError) as error:
            log(f'cannot reach upstream {self.upstream[0]}:'
                f'{self.upstream[1]}: {error!r}')
            client_writer.close()
            return
        await asyncio.gather(pump(client_reader, writer),
                             pump(reader, client_writer))
        for each in (writer, client_writer):
            each.close()


def listen(address, patience=30.0):
    """Bind the API port; while it is still held (a stopped forwarder's
    last connections closing), retry as the kubelet restarts a crashed
    static pod, for up to ``patience`` seconds."""
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


def tls_contexts(args):
    """(server context, upstream context), both None without TLS flags."""
    if not args.tls_cert_file:
        return None, None
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(args.tls_cert_file, args.tls_private_key_file)
    upstream = ssl.create_default_context(cafile=args.upstream_ca_file)
    return server, upstream


def quiet_handshake_errors(loop, context):
    """A client that rejects the certificate ends its handshake: one log
    line, not asyncio's traceback."""
    log(f'connection error: {context.get("exception")!r}')


async def serve(listener, relay, server_context):
    asyncio.get_running_loop().set_exception_handler(quiet_handshake_errors)
    server = await asyncio.start_server(relay.serve, sock=listener,
                                        ssl=server_context)
    async with server:
        await server.serve_forever()


def main(argv):
    parser = argparse.ArgumentParser(prog='kube-apiserver-standin')
    parser.add_argument('--listen', type=address, required=True)
    parser.add_argument('--upstream', type=address, required=True)
    parser.add_argument('--tls-cert-file')
    parser.add_argument('--tls-private-key-file')
    parser.add_argument('--upstream-ca-file')
    parser.add_argument('--pid-file')
    args = parser.parse_args(argv)
    if bool(args.tls_cert_file) != bool(args.tls_private_key_file) or \
            bool(args.tls_cert_file) != bool(args.upstream_ca_file):
        parser.error('--tls-cert-file, --tls-private-key-file and '
                     '--upstream-ca-file go together')
    server_context, upstream_context = tls_contexts(args)

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
    log(f'listening on {args.listen[0]}:{args.listen[1]}'
        f'{" (TLS: " + args.tls_cert_file + ")" if server_context else ""}'
        f', forwarding to {args.upstream[0]}:{args.upstream[1]}')
    asyncio.run(serve(listener, Relay(args.upstream, upstream_context),
                      server_context))


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
