"""The test Kubernetes API server: its lifecycle, connection details,
test helpers, authentication and discovery. Its objects and operations
are in store.py, its controllers in controllers.py, its HTTP handler in
handler.py."""

import base64
import copy
import dataclasses
import re
import secrets
import ssl
import tempfile
import threading
from typing import Callable, Optional

from testbed.kubeapi import auth
from testbed.kubeapi import certificates
from testbed.kubeapi import controllers
from testbed.kubeapi import daemonsets
from testbed.kubeapi import handler
from testbed.kubeapi import kinds
from testbed.kubeapi import model
from testbed.kubeapi import patches
from testbed.kubeapi import replication
from testbed.kubeapi import store
from testbed import node_lifecycle


@dataclasses.dataclass
class InjectedFailure:
    """Requests KubeApiServer.fail_requests() answers with an error."""
    method: str
    path: 're.Pattern'
    remaining: Optional[int]  # None: unlimited
    code: int
    message: str
    skip: int = 0  # matching requests still to let through
    hits: list = dataclasses.field(default_factory=list)


class KubeApiServer(store.Store, controllers.Controllers,
                    replication.Replication, daemonsets.DaemonSets):
    """In-memory Kubernetes API server over HTTPS, with a controller.

    Use it as a context manager, or call start() and stop(). Each instance
    has its own self-signed certificate and random admin bearer token
    (``token``), and kubeconfig() gives kubectl what it needs to connect.
    It starts with the namespaces of INITIAL_NAMESPACES and the ClusterRole
    cluster-admin.

    Stored objects are never mutated in place: every change stores a new
    dict, so snapshots and watch events can be shared without copying.
    """

    def __init__(self, host: str = '127.0.0.1', port: int = 0, *,
                 available_delay: float = 0.3, token_delay: float = 0.2,
                 pod_grace: float = 0.2, version: str = model.SERVER_VERSION,
                 extra_sans=()):
        """Bind to host:port (0: any free port) once started.

        ``available_delay``: seconds a new PV stays Pending before it becomes
        Available. ``token_delay``: seconds before the token controller
        fills a new service-account token Secret. ``pod_grace``: seconds a
        gracefully deleted Pod stays Terminating before its kubelet (the
        controller) removes it, whatever its grace period. ``version``: the
        gitVersion of /version, from which the Cloud SDK dispatcher picks
        its kubectl. ``extra_sans``: more names and IP addresses for the
        certificate; a network (an ``ipaddress`` network or a string such
        as "10.0.0.0/24") stands for all its host addresses (at most
        MAX_SAN_ADDRESSES).
        """
        self.host = host
        self.port = port
        self.available_delay = available_delay
        self.token_delay = token_delay
        self.pod_grace = pod_grace
        self.version = version
        self.token = secrets.token_urlsafe(24)
        self.ca_pem = ''
        # The certificate's key: the kubeadm stand-in signs each Master's
        # API server certificate with it, as kubeadm does with ca.key.
        self.ca_key_pem = ''
        self._client_host = host if host not in ('', '0.0.0.0') \
            else '127.0.0.1'
        self._sans = certificates.certificate_names(
            ['localhost', '127.0.0.1', self._client_host, *extra_sans])
        self._cond = threading.Condition(threading.RLock())
        # res -> key -> obj
        self._objects = {res: {} for res in kinds.RESOURCES}
        # self._events[i] is (type, resource, object) of resourceVersion i+1.
        self._events = []
        self._changes = 0  # bumped on every change the controller must see
        self._stuck_pending = set()
        self._failures = []  # InjectedFailure, see fail_requests()
        # (resource, namespace, name) -> time.monotonic() of its creation
        self._created_at = {}
        # (resource, namespace, name) -> time.monotonic() when its graceful
        # deletion began
        self._deleting_at = {}
        self._pod_addresses = 0  # pod IPs handed out
        self._tokens = {}  # minted service-account token -> its Secret's key
        # Nodes whose pods' volumes a node agent mounts (testbed.node_agent),
        # and the uids of the pods whose volumes it has mounted.
        self._agent_nodes = set()
        self._mounted_pods = set()
        self._requests = []
        self._watchers = 0
        self._stopping = False
        self._httpd = None
        self._threads = []
        for res, body in kinds.initial_objects():
            self._create(res, None, body)

    # -- lifecycle

    def start(self) -> 'KubeApiServer':
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        with tempfile.TemporaryDirectory(prefix='kubeapi-') as workdir:
            cert, key = certificates.make_certificate(workdir, self._sans)
            context.load_cert_chain(cert, key)
            with open(cert) as handle:
                self.ca_pem = handle.read()
            with open(key) as handle:
                self.ca_key_pem = handle.read()
        self._httpd = handler.HttpServer((self.host, self.port), self, context)
        self.port = self._httpd.server_address[1]
        self._threads = [
            threading.Thread(target=self._httpd.serve_forever,
                             kwargs={'poll_interval': 0.05},  # quick stop()
                             daemon=True, name='kubeapi-http'),
            threading.Thread(target=self._control, daemon=True,
                             name='kubeapi-controller')]
        for thread in self._threads:
            thread.start()
        return self

    def stop(self) -> None:
        """Stop serving: end watches cleanly, then close all connections."""
        if self._httpd is None:
            return
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
            self._cond.wait_for(lambda: self._watchers == 0, timeout=5)
        self._httpd.shutdown()
        self._httpd.close_connections()
        self._httpd.server_close()
        for thread in self._threads:
            thread.join()
        self._httpd = None

    def __enter__(self) -> 'KubeApiServer':
        return self.start()

    def __exit__(self, *exc_info) -> None:
        self.stop()

    # -- connection details

    @property
    def url(self) -> str:
        return f'https://{self._client_host}:{self.port}'

    @property
    def certificate_names(self) -> list:
        """The DNS names and IP addresses the certificate is valid for."""
        return list(self._sans)

    def kubeconfig(self, server_host: Optional[str] = None,
                   token: Optional[str] = None,
                   port: Optional[int] = None) -> str:
        """Return kubeconfig YAML for this server.

        ``server_host`` is the address kubectl dials (e.g. the bridge IP as
        seen from a test host); if the certificate does not name it, the
        kubeconfig sets tls-server-name to "localhost", which it does name.
        ``token`` replaces the admin one (a service account's, or a wrong
        one to test authentication failures). ``port``: a forwarder's to
        this server (a Master's 6443) instead of the server's own.
        """
        host = server_host or self._client_host
        tls_name = ('' if certificates.certificate_names([host])[0]
                    in self._sans else '    tls-server-name: localhost\n')
        ca_data = base64.b64encode(self.ca_pem.encode()).decode()
        return ('apiVersion: v1\n'
                'kind: Config\n'
                'clusters:\n'
                '- name: kubeapi-test\n'
                '  cluster:\n'
                f'    server: https://{host}:{port or self.port}\n'
                f'    certificate-authority-data: {ca_data}\n'
                f'{tls_name}'
                'users:\n'
                '- name: kubeapi-test\n'
                '  user:\n'
                f'    token: {token or self.token}\n'
                'contexts:\n'
                '- name: kubeapi-test\n'
                '  context:\n'
                '    cluster: kubeapi-test\n'
                '    user: kubeapi-test\n'
                '    namespace: default\n'
                'current-context: kubeapi-test\n')

    # -- test helpers

    @property
    def request_log(self) -> list:
        """(method, path without query) of every request, in order."""
        with self._cond:
            return list(self._requests)

    def objects(self, kind: str, namespace: Optional[str] = None) -> list:
        """Snapshot of the stored objects of a kind ("pv", "Node",
        "secrets", "clusterrolebinding", ...), optionally of one
        namespace."""
        res = kinds.resource_for(kind)
        with self._cond:
            items = sorted(self._objects[res].items(),
                           key=lambda item: model.sort_key(item[0]))
        return [copy.deepcopy(obj) for (ns, _), obj in items
                if namespace is None or ns == namespace]

    def nodes(self) -> list:
        """Snapshot of the stored Nodes."""
        return self.objects('node')

    @property
    def resource_version(self) -> int:
        """The resourceVersion of the latest change."""
        with self._cond:
            return len(self._events)

    def changes(self, kind: str, since: int = 0) -> list:
        """(event type, object) of each change to a kind after
        resourceVersion ``since``, in order: what a watch from there
        saw, for a test to replay states it could not catch live."""
        res = kinds.resource_for(kind)
        with self._cond:
            events = self._events[since:]
        return [(event_type, copy.deepcopy(obj))
                for event_type, event_res, obj in events if event_res == res]

    def get(self, kind: str, name: str,
            namespace: str = 'default') -> Optional[dict]:
        """A copy of one stored object, or None. ``namespace`` is ignored
        for cluster-scoped kinds."""
        res = kinds.resource_for(kind)
        key = (namespace if res.namespaced else None, name)
        with self._cond:
            return copy.deepcopy(self._objects[res].get(key))

    def create(self, obj: dict) -> dict:
        """Create an object as a client would (e.g. a PVC for a scenario,
        a Pod on a node from pod_manifest(), its ReplicaSet or DaemonSet,
        a PodDisruptionBudget); a namespaced one in metadata.namespace, by
        default "default"."""
        res = kinds.resource_for(obj.get('kind', ''))
        namespace = (obj.get('metadata') or {}).get('namespace') or 'default'
        created = self._create(res, namespace if res.namespaced else None,
                               obj)
        return copy.deepcopy(created)

    def delete(self, kind: str, name: str, namespace: str = 'default',
               grace_period: Optional[int] = None) -> None:
        """Delete an object as a client would: finalizers still hold it,
        and a Pod on a node terminates for pod_grace seconds unless
        ``grace_period`` is 0."""
        res = kinds.resource_for(kind)
        options = ({} if grace_period is None
                   else {'gracePeriodSeconds': grace_period})
        self._delete(res, namespace if res.namespaced else None, name,
                     options)

    def update_status(self, kind: str, name: str, status: dict,
                      namespace: str = 'default') -> dict:
        """Merge ``status`` into an object's status (a JSON merge patch:
        lists are replaced, None removes a key), as its controller or
        kubelet would; e.g. {"conditions": [...]} for a Node."""
        res = kinds.resource_for(kind)
        with self._cond:
            old = self._get(res, namespace if res.namespaced else None, name)
            new = patches.merge(old, {'status': status}, strategic=False)
            return copy.deepcopy(self._update(res, old, new, 'status'))

    def lose_node(self, name: str, uid: Optional[str] = None) -> None:
        """The Node's VM is off: the node lifecycle controller marks it
        unreachable (testbed.node_lifecycle) and its pods stay, an evicted
        or deleted one Terminating, until the Node is deleted. With ``uid``
        only that Node: not one deleted, nor one registered anew."""
        with self._cond:
            node = self._objects[kinds.NODE].get((None, name))
            if uid is not None and uid != (node or {}).get(
                    'metadata', {}).get('uid'):
                return  # deleted, or registered anew, meanwhile
            self._commit(kinds.NODE, node_lifecycle.unreachable(
                self._get(kinds.NODE, None, name)))

    def set_pv_phase(self, name: str, phase: str) -> None:
        """Set a PV's status.phase directly, as a controller would.

        The controller keeps applying its rules afterwards: a PV set back to
        Pending becomes Available again unless it is kept pending.
        """
        with self._cond:
            self._set_status(kinds.PV, self._get(kinds.PV, None, name),
                             phase=phase)

    def fail_requests(self, method: str, path: str,
                      count: Optional[int] = 1, code: int = 500,
                      message: str = 'injected fault',
                      skip: int = 0) -> 'InjectedFailure':
        """Answer matching requests with an error Status instead of
        serving them: after letting ``skip`` of them through, the next
        ``count`` (None: every one until clear_failures()) whose method is
        ``method`` and whose path, with ``?query`` when there is one, fully
        matches the regular expression ``path``. The returned record lists
        the requests it answered."""
        failure = InjectedFailure(method.upper(), re.compile(path), count,
                                  code, message, skip)
        with self._cond:
            self._failures.append(failure)
        return failure

    def clear_failures(self) -> None:
        with self._cond:
            self._failures.clear()

    def _injected_failure(self, method: str,
                          target: str) -> Optional[model.ApiError]:
        with self._cond:
            for failure in self._failures:
                if failure.remaining != 0 and failure.method == method and \
                        failure.path.fullmatch(target):
                    if failure.skip > 0:
                        failure.skip -= 1
                        continue
                    if failure.remaining is not None:
                        failure.remaining -= 1
                    failure.hits.append(target)
                    return model.ApiError(
                        failure.code, 'InternalError'
                        if failure.code >= 500 else 'BadRequest',
                        failure.message)
        return None

    def attach_node_agent(self, node_name: str) -> None:
        """From now on, a pod with claims on the Node runs only once its
        node agent reported the volumes mounted (volumes_mounted()), and a
        deleted one goes only once it reported them unmounted."""
        with self._cond:
            self._agent_nodes.add(node_name)
            self._wake()

    def volumes_mounted(self, pod_uid: str) -> None:
        with self._cond:
            self._mounted_pods.add(pod_uid)
            self._wake()

    def volumes_unmounted(self, pod_uid: str) -> None:
        with self._cond:
            self._mounted_pods.discard(pod_uid)
            self._wake()

    def keep_pending(self, *names: str) -> None:
        """Make the named PVs (existing or future ones) stay Pending."""
        with self._cond:
            self._stuck_pending.update(names)

    def release_pending(self, *names: str) -> None:
        """Let the named PVs become Available again."""
        with self._cond:
            self._stuck_pending.difference_update(names)
            self._wake()

    @property
    def watchers(self) -> int:
        """How many watch streams are open (wait_for() sees changes)."""
        with self._cond:
            return self._watchers

    @property
    def stuck_pending(self) -> frozenset:
        with self._cond:
            return frozenset(self._stuck_pending)

    def wait_for(self, predicate: Callable[[], bool],
                 timeout: float = 10.0) -> bool:
        """Wait until predicate() holds, re-checking on every change.

        Returns False on timeout.
        """
        with self._cond:
            return self._cond.wait_for(predicate, timeout)

    # -- requests: who asks, and what discovery answers

    def _log_request(self, method: str, path: str) -> None:
        with self._cond:
            self._requests.append((method, path))

    def _authenticate(self, header: Optional[str]) -> Optional[auth.User]:
        """The user of a request's Authorization header, None without
        one; a 401 for credentials that are not valid."""
        if header is None:
            return None
        scheme, _, token = header.partition(' ')
        token = token.strip()
        if scheme.lower() == 'bearer' and token:
            if secrets.compare_digest(token.encode(), self.token.encode()):
                return auth.ADMIN
            with self._cond:
                user = self._token_user(token)
            if user is not None:
                return user
        raise model.ApiError(401, 'Unauthorized', 'Unauthorized')

    def _authorize(self, user: Optional[auth.User],
                   request: model.Request) -> None:
        """Let the request through, or raise a 401 (no credentials) or a
        403 (not allowed)."""
        everyone = not request.is_resource and request.verb == 'get' and (
            auth.is_public(request.path)
            or (user is not None and auth.is_discovery(request.path)))
        if everyone:
            return
        if user is None:
            raise model.ApiError(401, 'Unauthorized', 'Unauthorized')
        if 'system:masters' in user.groups:
            return
        with self._cond:
            if self._rbac_allows(user, request):
                return
        raise auth.access_denied(user, request)

    def _discovery(self, path: str) -> Optional[dict]:
        groups = list(dict.fromkeys(res.group for res in kinds.RESOURCES
                                    if res.group))
        if path == '/version':
            major, minor = self.version.lstrip('v').split('.')[:2]
            return {'major': major, 'minor': minor,
                    'gitVersion': self.version, 'gitCommit': '0' * 40,
                    'gitTreeState': 'clean',
                    'buildDate': '2024-12-11T00:00:00Z',
                    'goVersion': 'go1.23.3', 'compiler': 'gc',
                    'platform': 'linux/amd64'}
        if path == '/api':
            return {'kind': 'APIVersions', 'versions': ['v1'],
                    'serverAddressByClientCIDRs': [{
                        'clientCIDR': '0.0.0.0/0',
                        'serverAddress': f'{self._client_host}:{self.port}'}]}
        if path == '/apis':
            return {'kind': 'APIGroupList', 'apiVersion': 'v1',
                    'groups': [kinds.api_group(group) for group in groups]}
        parts = path.split('/')[1:]
        if parts[0] == 'apis' and len(parts) == 2 and parts[1] in groups:
            return {'kind': 'APIGroup', 'apiVersion': 'v1',
                    **kinds.api_group(parts[1])}
        if parts[0] == 'api' and len(parts) == 2:
            group_version = ('', parts[1])
        elif parts[0] == 'apis' and len(parts) == 3:
            group_version = (parts[1], parts[2])
        else:
            return None
        resources = [res for res in kinds.RESOURCES
                     if (res.group, res.version) == group_version]
        if not resources:
            return None
        return {'kind': 'APIResourceList', 'apiVersion': 'v1',
                'groupVersion': resources[0].api_version,
                'resources': [entry for res in resources
                              for entry in kinds.discovery_entries(res)]}

    def _token_user(self, token: str) -> Optional[auth.User]:
        """The service account of a token the token controller minted,
        while its Secret and its service account still exist."""
        key = self._tokens.get(token)
        secret = self._objects[kinds.SECRET].get(key) if key else None
        if (secret is None or secret['metadata'].get('deletionTimestamp')
                or (secret.get('data') or {}).get('token')
                != model.b64(token)):
            return None
        annotations = secret['metadata'].get('annotations') or {}
        account = self._objects[kinds.SERVICE_ACCOUNT].get(
            (key[0], annotations.get(model.SERVICE_ACCOUNT_NAME)))
        if account is None or account['metadata']['uid'] != annotations.get(
                model.SERVICE_ACCOUNT_UID):
            return None
        return auth.service_account_user(key[0], account['metadata']['name'])

    def _rbac_allows(self, user: auth.User, request: model.Request) -> bool:
        """Whether a ClusterRoleBinding of the user grants the request."""
        for binding in self._objects[kinds.CLUSTER_ROLE_BINDING].values():
            role = self._objects[kinds.CLUSTER_ROLE].get(
                (None, (binding.get('roleRef') or {}).get('name')))
            if role is None or not any(
                    auth.names_user(subject, user)
                    for subject in binding.get('subjects') or []):
                continue
            if any(auth.rule_allows(rule, request)
                   for rule in role.get('rules') or []):
                return True
        return False
