"""HTTP(S) of the test API server: the server that does each TLS
handshake in the connection's thread, and the request handler, which
routes a resource request by its verb and scope through a table."""

import contextlib
import dataclasses
# The classes of the module itself: Tacker's imports rebind the `http`
# package's `server` attribute to an eventlet copy whose servers run on
# green threads, which never run in a test process (conftest of
# tests/tacker_integration).
from http.server import BaseHTTPRequestHandler
from http.server import ThreadingHTTPServer
import json
import socket
import ssl
import sys
import threading
import time
from typing import Optional
import urllib.parse

from testbed.kubeapi import auth
from testbed.kubeapi import bodies
from testbed.kubeapi import kinds
from testbed.kubeapi import model
from testbed.kubeapi import patches
from testbed.kubeapi import printing
from testbed.kubeapi import statefulsets


class HttpServer(ThreadingHTTPServer):
    """HTTPS server doing each TLS handshake in the connection's thread.

    Handler threads are daemons (a forgotten stop() cannot block interpreter
    exit), so the server tracks them itself to cut and join them on stop().
    """

    def __init__(self, address, api, ssl_context: ssl.SSLContext):
        """``api``: the server.KubeApiServer the handler serves."""
        self.api = api
        self.ssl_context = ssl_context
        self._connections = {}  # handler thread -> its TLS socket
        self._connections_lock = threading.Lock()
        super().__init__(address, _Handler)

    def track(self, connection: Optional[ssl.SSLSocket]) -> None:
        """Register (with None: forget) the current thread's connection."""
        with self._connections_lock:
            if connection is None:
                self._connections.pop(threading.current_thread(), None)
            else:
                self._connections[threading.current_thread()] = connection

    def close_connections(self) -> None:
        with self._connections_lock:
            connections = list(self._connections.items())
        for _, connection in connections:
            # Shut down a duplicate: that ends blocked reads without touching
            # the SSL object which the connection's thread is using.
            with contextlib.suppress(OSError), socket.fromfd(
                    connection.fileno(), socket.AF_INET,
                    socket.SOCK_STREAM) as duplicate:
                duplicate.shutdown(socket.SHUT_RDWR)
        for thread, _ in connections:
            thread.join(timeout=5)

    def handle_error(self, request, client_address) -> None:
        # Clients hanging up or failing the TLS handshake are routine here.
        if not isinstance(sys.exc_info()[1], OSError):
            super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = 'HTTP/1.1'  # keep-alive and chunked watch streams
    server_version = 'kubeapi-test'
    timeout = 30  # seconds before an idle keep-alive connection is closed

    def setup(self) -> None:
        self.request.settimeout(self.timeout)
        self.request = self.server.ssl_context.wrap_socket(
            self.request, server_side=True)
        self.server.track(self.request)
        super().setup()

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.server.track(None)
            self.request.close()

    def log_message(self, format, *args) -> None:
        pass  # KubeApiServer.request_log is the record tests use

    def do_GET(self):
        self._serve('GET')

    def do_POST(self):
        self._serve('POST')

    def do_PUT(self):
        self._serve('PUT')

    def do_PATCH(self):
        self._serve('PATCH')

    def do_DELETE(self):
        self._serve('DELETE')

    def _serve(self, method: str) -> None:
        api = self.server.api
        url = urllib.parse.urlsplit(self.path)
        query = {key: values[-1] for key, values in urllib.parse.parse_qs(
            url.query, keep_blank_values=True).items()}
        api._log_request(method, url.path)
        body = self.rfile.read(int(self.headers.get('Content-Length') or 0))
        injected = api._injected_failure(
            method, url.path + ('?' + url.query if url.query else ''))
        if injected is not None:
            self._send(injected.code, json.dumps(injected.status()).encode(),
                       'application/json')
            return
        headers = {}
        try:
            request = model.parse_request(method, url.path, query)
            api._authorize(api._authenticate(
                self.headers.get('Authorization')), request)
            if request.is_resource:
                code, payload = self._call(request, query, body)
            else:
                code, payload = self._serve_path(request)
        except model.ApiError as error:
            code, payload = error.code, error.status()
            retry_after = (error.details or {}).get('retryAfterSeconds')
            if retry_after:  # as the API server does: clients wait
                headers['Retry-After'] = str(retry_after)
        if payload is not None:
            self._send(code, json.dumps(payload).encode(), 'application/json',
                       headers)

    def _serve_path(self, request: model.Request) -> tuple:
        """Serve a non-resource request: (code, payload), or (200, None) if
        the response was sent."""
        if request.verb == 'get':
            if request.path == '/openapi/v2':
                self._send(200, b'', model.OPENAPI_V2_TYPE)
                return 200, None
            if auth.is_public(request.path) and request.path != '/version':
                self._send(200, b'ok', 'text/plain; charset=utf-8')
                return 200, None
            discovery = self.server.api._discovery(request.path)
            if discovery is not None:
                return 200, discovery
        raise model.no_such_path()

    def _call(self, request: model.Request, query: dict, body: bytes) -> tuple:
        """Serve a resource request: (code, payload), or (200, None) if the
        response was streamed."""
        res, namespace = _route(request)
        if request.verb not in ('get', 'list', 'watch') and 'dryRun' in query:
            raise model.ApiError(400, 'BadRequest',
                                 'dryRun is not supported by this test server')
        call = _Call(res, namespace, request.name, request.subresource,
                     query, body, self.headers.get('Content-Type', ''),
                     'as=Table' in self.headers.get('Accept', ''))
        serve = _SERVE.get((call.scope, request.verb))
        answer = serve(self, call) if serve is not None else None
        if answer is None:
            raise model.ApiError(405, 'MethodNotAllowed', 'the server does '
                                 'not allow this method on the requested '
                                 'resource')
        return answer

    def _stream_watch(self, res: model.Resource, namespace: Optional[str],
                      query: dict, table: bool) -> None:
        """Send watch events as chunked JSON lines, then a last chunk."""
        try:
            since = int(query.get('resourceVersion') or 0)
            deadline = time.monotonic() + float(
                query.get('timeoutSeconds') or 1800)
        except ValueError:
            raise model.ApiError(400, 'BadRequest',
                                 'invalid resourceVersion or timeoutSeconds')
        events = self.server.api._watch(
            res, namespace, patches.query_selector(query, res), since,
            deadline)
        with self.server.api._watching():
            self.send_response(200)
            self.send_header('Content-Type', 'application/json')
            self.send_header('Transfer-Encoding', 'chunked')
            self.end_headers()
            for event_type, obj in events:
                if table:
                    obj = printing.table(res, [obj], {
                        'resourceVersion': obj['metadata']['resourceVersion']})
                self._chunk(json.dumps({'type': event_type, 'object': obj})
                            .encode() + b'\n')
            self._chunk(b'')

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(b'%x\r\n%s\r\n' % (len(data), data))
        self.wfile.flush()

    def _send(self, code: int, data: bytes, content_type: str,
              headers: Optional[dict] = None) -> None:
        self.send_response(code)
        self.send_header('Content-Type', content_type)
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.send_header('Content-Length', str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def _route(request: model.Request) -> tuple:
    """(resource, namespace) of a resource request; a 404 for a path that
    names no resource or subresource served here."""
    res = kinds.ROUTES.get((request.group, request.version, request.resource))
    namespace = request.namespace
    if res is not None and not res.namespaced:
        # /api/v1/namespaces/<name> is a Namespace, which RequestInfo
        # puts in itself; no other cluster-scoped path has a namespace.
        if namespace not in (None, request.name if res is kinds.NAMESPACE
                             else None):
            res = None
        namespace = None
    if res is None or request.extra or request.subresource not in (
            None, 'status' if res.new_status else None,
            'eviction' if res.evictable else None,
            'scale' if res.scalable else None):
        raise model.no_such_path()
    return res, namespace


@dataclasses.dataclass(frozen=True)
class _Call:
    """A routed resource request."""
    res: model.Resource
    namespace: Optional[str]
    name: Optional[str]
    subresource: Optional[str]
    query: dict
    body: bytes
    content_type: str
    table: bool  # the client asked for a "kubectl get" table

    @property
    def scope(self) -> Optional[str]:
        """What the path names: the collection, a Pod's eviction, one
        object, or (None) a namespaced object without its namespace."""
        if self.name is None:
            return 'collection'
        if self.subresource == 'eviction':  # only ever POSTed
            return 'eviction'
        if self.namespace or not self.res.namespaced:
            return 'object'
        return None

    def decoded(self):
        return bodies.decode_body(self.body, self.content_type)


# What serves each (scope, verb): a function of the handler and the call
# that returns (code, payload), or None where the method is not allowed.

def _watch_collection(handler: _Handler, call: _Call) -> tuple:
    handler._stream_watch(call.res, call.namespace, call.query, call.table)
    return 200, None


def _list_collection(handler: _Handler, call: _Call) -> tuple:
    listing = handler.server.api._list(call.res, call.namespace, call.query)
    if call.table:
        return 200, printing.table(call.res, listing['items'],
                                   listing['metadata'])
    return 200, listing


def _create_object(handler: _Handler, call: _Call) -> Optional[tuple]:
    if call.namespace or not call.res.namespaced:
        return 201, handler.server.api._create(call.res, call.namespace,
                                               call.decoded())
    return None


def _evict_pod(handler: _Handler, call: _Call) -> Optional[tuple]:
    if call.namespace:
        return 201, handler.server.api._evict(call.namespace, call.name,
                                              call.decoded())
    return None


def _read_object(handler: _Handler, call: _Call) -> tuple:
    obj = handler.server.api._read(call.res, call.namespace, call.name)
    if call.subresource == 'scale':
        return 200, statefulsets.scale_of(obj)
    if call.table and not call.subresource:
        return 200, printing.table(call.res, [obj], {
            'resourceVersion': obj['metadata']['resourceVersion']})
    return 200, obj


def _replace_object(handler: _Handler, call: _Call) -> tuple:
    if call.subresource == 'scale':
        return 200, handler.server.api._scale(
            call.res, call.namespace, call.name,
            lambda scale: call.decoded())
    return 200, handler.server.api._replace(
        call.res, call.namespace, call.name, call.decoded(),
        call.subresource)


def _patch_object(handler: _Handler, call: _Call) -> tuple:
    if call.subresource == 'scale':
        return 200, handler.server.api._scale(
            call.res, call.namespace, call.name,
            lambda scale: patches.apply_patch(scale, call.content_type,
                                              call.body))
    return 200, handler.server.api._patch(
        call.res, call.namespace, call.name, call.content_type, call.body,
        call.subresource)


def _delete_object(handler: _Handler, call: _Call) -> Optional[tuple]:
    if call.subresource:
        return None
    return 200, handler.server.api._delete(call.res, call.namespace,
                                           call.name, call.decoded())


_SERVE = {
    ('collection', 'watch'): _watch_collection,
    ('collection', 'list'): _list_collection,
    ('collection', 'create'): _create_object,
    ('eviction', 'create'): _evict_pod,
    ('object', 'get'): _read_object,
    ('object', 'watch'): _read_object,
    ('object', 'update'): _replace_object,
    ('object', 'patch'): _patch_object,
    ('object', 'delete'): _delete_object,
}
