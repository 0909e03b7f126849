"""The node side of the kubeadm stand-in (kubeadm.py): its files under
/etc/kubernetes, the test API server it talks to (the client, bootstrap
tokens, the kubeadm-certs Secret, Node objects) and the API server
"static pod". Installed as /usr/lib/testbed/kubeadm_node.py next to
kubeadm_etcd.py; standard library plus the openssl CLI only.
"""

import base64
import contextlib
import datetime
import hashlib
import hmac
import http.client
import ipaddress
import json
import os
import re
import secrets
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request

import kubeadm_etcd as etcd
import kubeadm_pki as pki

PACKAGE_VERSION = '1.36.4-1.1'  # rewritten by testbed.standins when built
VERSION = 'v' + PACKAGE_VERSION.split('-')[0]
CONTAINERD_SOCKET = 'unix:///var/run/containerd/containerd.sock'


UPSTREAM_CONFIG = '/etc/testbed/kube-upstream.json'


KUBELET_DEFAULTS = '/etc/default/kubelet'
API_SERVER = '/usr/lib/testbed/kube-apiserver-standin'
API_SERVER_PID = '/run/kube-apiserver-standin.pid'
API_SERVER_LOG = '/var/log/kube-apiserver-standin.log'
API_PORT = 6443
API_SERVER_MANIFEST = '/etc/kubernetes/manifests/kube-apiserver.yaml'
DEFAULT_TIMEOUT = 60.0  # seconds; kube-upstream.json "timeout" overrides
CERTS_SECRET = 'kubeadm-certs'
CERT_KEY_HASH = 'certificate-key.sha256'
# Secret data key -> file, of the certificates upload-certs encrypts.
ENCRYPTED_CERTS = {'ca.key': pki.CLUSTER_CA_KEY, 'etcd-ca.crt': etcd.CA_CERT,
                   'etcd-ca.key': etcd.CA_KEY}


TOKEN_GROUPS = 'system:bootstrappers:kubeadm:default-node-token'


class KubeadmError(Exception):
    """A failure reported the way kubeadm does: message, exit status 1."""


def preflight_error(*errors):
    """The error kubeadm prints when preflight checks fail."""
    lines = ''.join(f'\t[ERROR {check}]: {text}\n' for check, text in errors)
    return KubeadmError(
        'error execution phase preflight: [preflight] Some fatal errors '
        f'occurred:\n{lines}[preflight] If you know what you are doing, you '
        'can make a check non-fatal with `--ignore-preflight-errors=...`')


# --- configuration files -----------------------------------------------------


def upstream():
    """The shared test API server: {"server", "ca_pem", "token", ...}."""
    try:
        with open(UPSTREAM_CONFIG) as handle:
            return json.load(handle)
    except (OSError, ValueError) as error:
        raise KubeadmError(f'testbed: cannot read {UPSTREAM_CONFIG} (the '
                           f'testbed did not connect this host): {error}')


def timeout_seconds():
    try:
        return float(upstream().get('timeout', DEFAULT_TIMEOUT))
    except KubeadmError:
        return DEFAULT_TIMEOUT


def kubeconfig(server, ca_pem, token, user):
    """A kubeconfig as kubeadm writes it, with a token instead of a client
    certificate (the test API server authenticates by token only)."""
    ca_data = base64.b64encode(ca_pem.encode()).decode()
    return ('apiVersion: v1\n'
            'kind: Config\n'
            'clusters:\n'
            '- cluster:\n'
            f'    certificate-authority-data: {ca_data}\n'
            f'    server: {server}\n'
            '  name: kubernetes\n'
            'contexts:\n'
            '- context:\n'
            '    cluster: kubernetes\n'
            f'    user: {user}\n'
            f'  name: {user}@kubernetes\n'
            f'current-context: {user}@kubernetes\n'
            'preferences: {}\n'
            'users:\n'
            f'- name: {user}\n'
            '  user:\n'
            f'    token: {token}\n')


def read_kubeconfig(path):
    """(server, ca_pem, token) of a kubeconfig written by kubeconfig()."""
    try:
        with open(path) as handle:
            text = handle.read()
    except OSError as error:
        raise KubeadmError(f'failed to load admin kubeconfig: open {path}: '
                           f'{error.strerror.lower()}')
    fields = {}
    for key in ('server', 'certificate-authority-data', 'token'):
        match = re.search(rf'^\s*{key}: (\S+)$', text, re.M)
        if not match:
            raise KubeadmError(f'failed to load admin kubeconfig {path}: '
                               f'no {key}')
        fields[key] = match[1]
    return (fields['server'],
            base64.b64decode(fields['certificate-authority-data']).decode(),
            fields['token'])


def write_file(path, text, mode=0o600):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode),
              'w') as handle:
        handle.write(text)
    os.chmod(path, mode)


def kubelet_node_ip():
    """--node-ip from KUBELET_EXTRA_ARGS in /etc/default/kubelet, or None."""
    try:
        with open(KUBELET_DEFAULTS) as handle:
            text = handle.read()
    except FileNotFoundError:
        return None
    for line in text.splitlines():
        if line.strip().startswith('KUBELET_EXTRA_ARGS='):
            match = re.search(r'--node-ip[= ]([^\s"\']+)', line)
            if match:
                return match[1]
    return None


def node_ip(options):
    """The address the Node registers with: --apiserver-advertise-address,
    else the kubelet's --node-ip (the install script always sets it)."""
    address = options.get('apiserver-advertise-address') or kubelet_node_ip()
    if not address:
        raise KubeadmError(
            f'testbed: cannot tell this node\'s IP: no '
            f'--apiserver-advertise-address and no --node-ip in '
            f'KUBELET_EXTRA_ARGS of {KUBELET_DEFAULTS}')
    try:
        ipaddress.ip_address(address)
    except ValueError:
        raise KubeadmError(f'invalid node IP "{address}"')
    return address


def ca_cert_hash(ca_pem):
    """sha256:<hex> of the CA's DER SubjectPublicKeyInfo, as kubeadm pins
    it (the same openssl pipeline kubeadm's documentation shows)."""
    public_key = subprocess.run(
        ['openssl', 'x509', '-pubkey', '-noout'], input=ca_pem.encode(),
        capture_output=True, check=True).stdout
    der = subprocess.run(
        ['openssl', 'pkey', '-pubin', '-outform', 'der'], input=public_key,
        capture_output=True, check=True).stdout
    return 'sha256:' + hashlib.sha256(der).hexdigest()


# --- talking to the API server -----------------------------------------------


class Api:
    """A minimal Kubernetes REST client over HTTPS verifying the cluster CA.

    Proxies in the environment are ignored: the install script may run
    with the driver's http_proxy settings, but the testbed has no proxy.
    """

    def __init__(self, server, ca_pem, token, timeout=10):
        """``ca_pem`` None: the server is not verified (discovery)."""
        self.server = server.rstrip('/')
        self.token = token
        self.timeout = timeout
        if ca_pem is None:
            self.context = ssl.create_default_context()
            self.context.check_hostname = False
            self.context.verify_mode = ssl.CERT_NONE
        else:
            self.context = ssl.create_default_context(cadata=ca_pem)
        self.opener = urllib.request.build_opener(
            urllib.request.ProxyHandler({}),
            urllib.request.HTTPSHandler(context=self.context))

    def call(self, method, path, body=None,
             content_type='application/json'):
        """(status, decoded JSON or text); raises OSError if unreachable."""
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.server + path, data=data,
                                         method=method)
        request.add_header('Authorization', f'Bearer {self.token}')
        request.add_header('Accept', 'application/json')
        if data is not None:
            request.add_header('Content-Type', content_type)
        try:
            with self.opener.open(request, timeout=self.timeout) as response:
                status, raw = response.status, response.read()
        except urllib.error.HTTPError as error:
            status, raw = error.code, error.read()
        except urllib.error.URLError as error:
            reason = error.reason
            raise reason if isinstance(reason, OSError) else OSError(reason)
        except http.client.HTTPException as error:  # e.g. a cut connection
            raise OSError(f'{method} {self.server}{path}: {error!r}')
        try:
            return status, json.loads(raw)
        except ValueError:
            return status, raw.decode(errors='replace')

    def expect(self, method, path, body=None, ok=(200, 201), what=None,
               **kwargs):
        """call(), turning an unexpected status into a KubeadmError."""
        status, payload = self.call(method, path, body, **kwargs)
        if status not in ok:
            message = payload.get('message') if isinstance(payload, dict) \
                else payload
            raise KubeadmError(f'{what or method + " " + path}: '
                               f'{message or "status " + str(status)}')
        return status, payload


def is_certificate_error(error):
    return isinstance(error, ssl.SSLCertVerificationError)


def wait_until(check, deadline, what):
    """Poll check() with a growing back-off until it returns truthy.

    check() may raise OSError while the server is not up yet; its last
    error goes into the timeout message. TLS verification errors are final.
    """
    delay, last = 0.01, 'no answer'
    while True:
        try:
            result = check()
            if result:
                return result
        except OSError as error:
            if is_certificate_error(error):
                raise KubeadmError(f'{what}: tls: failed to verify '
                                   f'certificate: {error.verify_message}')
            last = str(error)
        if time.monotonic() >= deadline:
            raise KubeadmError(f'{what}: timed out: {last}')
        time.sleep(delay)
        delay = min(delay * 2, 0.5)


def healthy(api):
    """True if GET /healthz answers 200; raises OSError otherwise."""
    status, body = api.call('GET', '/healthz')
    if status != 200:
        raise OSError(f'/healthz answered {status}: {body}')
    return True


def wait_healthy(api, deadline, what):
    """Wait until GET /healthz answers 200; returns the seconds it took."""
    started = time.monotonic()
    wait_until(lambda: healthy(api), deadline, what)
    return time.monotonic() - started


CLUSTER_INFO_PATH = '/api/v1/namespaces/kube-public/configmaps'


def create_cluster_info(api, server, ca_pem):
    """kubeadm init's bootstrap-token phase: kube-public/cluster-info, the
    kubeconfig (API server and cluster CA) joining nodes discover."""
    kubeconfig = ('apiVersion: v1\nclusters:\n- cluster:\n'
                  f'    certificate-authority-data: {b64(ca_pem)}\n'
                  f'    server: {server}\n'
                  '  name: ""\ncontexts: null\ncurrent-context: ""\n'
                  'kind: Config\npreferences: {}\nusers: null\n')
    print('[bootstrap-token] Creating the "cluster-info" ConfigMap in the '
          '"kube-public" namespace')
    create_or_replace(
        api, CLUSTER_INFO_PATH, 'cluster-info',
        {'apiVersion': 'v1', 'kind': 'ConfigMap',
         'metadata': {'name': 'cluster-info', 'namespace': 'kube-public'},
         'data': {'kubeconfig': kubeconfig}},
        'error execution phase bootstrap-token: error creating the '
        'cluster-info ConfigMap')


def discover_cluster_ca(host, port, token, deadline):
    """The cluster CA (PEM) as kubeadm's token discovery reads it: from
    the cluster-info ConfigMap, fetched before the server is trusted."""
    url = f'https://{host}:{port}{CLUSTER_INFO_PATH}/cluster-info'
    api = Api(f'https://{host}:{port}', None, token, timeout=5)

    def fetch():
        status, config_map = api.call('GET',
                                      f'{CLUSTER_INFO_PATH}/cluster-info')
        if status != 200:
            raise OSError(f'the server answered {status}')
        data = re.search(r'certificate-authority-data: (\S+)',
                         (config_map.get('data') or {}).get('kubeconfig', ''))
        if not data:
            raise KubeadmError('couldn\'t validate the identity of the API '
                               'Server: the cluster-info ConfigMap names no '
                               'CA')
        return base64.b64decode(data[1]).decode()

    def attempt():
        try:
            return fetch()
        except OSError as error:
            print(f'[discovery] Failed to request cluster-info, will try '
                  f'again: Get "{url}": {error}', file=sys.stderr)
            raise

    return wait_until(attempt, deadline,
                      f'couldn\'t validate the identity of the API Server: '
                      f'Get "{url}"')


def secret_path(name=None):
    base = '/api/v1/namespaces/kube-system/secrets'
    return base if name is None else f'{base}/{name}'


def b64(text):
    return base64.b64encode(text.encode()).decode()


def unb64(text):
    return base64.b64decode(text or '').decode(errors='replace')


# kubeadm's KubernetesAPICallRetryInterval and the default of its
# KubernetesAPICall timeout: its CreateOrUpdate calls retry any failure
# within them, so a request cut by a VIP moving between Masters is sent
# again.
API_CALL_RETRY_INTERVAL = 0.5
API_CALL_TIMEOUT = 60


def create_or_replace(api, path, name, obj, what):
    """POST obj; if it exists, PUT it over the stored one. A failure is
    retried as kubeadm retries it; a certificate it cannot verify is
    final."""
    deadline = time.monotonic() + API_CALL_TIMEOUT
    while True:
        try:
            return _create_or_replace_once(api, path, name, obj, what)
        except OSError as error:
            if is_certificate_error(error):
                raise KubeadmError(f'{what}: tls: failed to verify '
                                   f'certificate: {error.verify_message}')
            last = KubeadmError(f'{what}: {error}')
        except KubeadmError as error:
            last = error
        if time.monotonic() >= deadline:
            raise last
        time.sleep(API_CALL_RETRY_INTERVAL)


def _create_or_replace_once(api, path, name, obj, what):
    status, payload = api.call('POST', path, obj)
    if status == 409:
        _, current = api.expect('GET', f'{path}/{name}', what=what)
        obj = dict(obj, metadata=dict(
            obj['metadata'],
            resourceVersion=current['metadata'].get('resourceVersion')))
        api.expect('PUT', f'{path}/{name}', obj, what=what)
    elif status not in (200, 201):
        message = payload.get('message') if isinstance(payload, dict) \
            else payload
        raise KubeadmError(f'{what}: {message}')


# --- cluster objects ---------------------------------------------------------


def create_bootstrap_token(api, ttl_seconds, description):
    """Create a bootstrap token Secret; return the token "<id>.<secret>"."""
    alphabet = 'abcdefghijklmnopqrstuvwxyz0123456789'
    token_id = ''.join(secrets.choice(alphabet) for _ in range(6))
    token_secret = ''.join(secrets.choice(alphabet) for _ in range(16))
    data = {'token-id': token_id, 'token-secret': token_secret,
            'usage-bootstrap-authentication': 'true',
            'usage-bootstrap-signing': 'true',
            'auth-extra-groups': TOKEN_GROUPS,
            'description': description}
    if ttl_seconds:
        expires = (datetime.datetime.now(datetime.timezone.utc)
                   + datetime.timedelta(seconds=ttl_seconds))
        data['expiration'] = expires.strftime('%Y-%m-%dT%H:%M:%SZ')
    secret = {'apiVersion': 'v1', 'kind': 'Secret',
              'metadata': {'name': f'bootstrap-token-{token_id}',
                           'namespace': 'kube-system'},
              'type': 'bootstrap.kubernetes.io/token',
              'data': {key: b64(value) for key, value in data.items()}}
    api.expect('POST', secret_path(), secret,
               what='error execution phase bootstrap-token: error creating '
                    'bootstrap token')
    return f'{token_id}.{token_secret}'


def _subkeys(key):
    """(AES key, HMAC key) derived from a certificate key (hex)."""
    raw = bytes.fromhex(key)
    return (hmac.new(raw, b'kubeadm-certs aes-256-ctr', 'sha256').digest(),
            hmac.new(raw, b'kubeadm-certs hmac-sha256', 'sha256').digest())


def encrypt(key, plaintext):
    """iv || AES-256-CTR(plaintext) || HMAC-SHA256(iv || ciphertext).

    kubeadm seals each file with AES-256-GCM (nonce || sealed); `openssl
    enc` has no AEAD modes, so CTR with an HMAC (encrypt-then-MAC, keys
    derived from the certificate key) stands in for it: only the right
    key decrypts, and a wrong one fails authentication.
    """
    aes_key, mac_key = _subkeys(key)
    iv = secrets.token_bytes(16)
    sealed = subprocess.run(
        ['openssl', 'enc', '-aes-256-ctr', '-K', aes_key.hex(), '-iv',
         iv.hex()], input=plaintext, capture_output=True, check=True).stdout
    return iv + sealed + hmac.new(mac_key, iv + sealed, 'sha256').digest()


def decrypt(key, blob, name):
    """The plaintext of encrypt(); KubeadmError as kubeadm's if the MAC
    does not verify (wrong key, or a tampered Secret)."""
    aes_key, mac_key = _subkeys(key)
    if len(blob) < 48 or not hmac.compare_digest(
            blob[-32:], hmac.new(mac_key, blob[:-32], 'sha256').digest()):
        raise KubeadmError(
            'error execution phase control-plane-prepare/download-certs: '
            f'error downloading certs: error decrypting certificate {name}: '
            'cipher: message authentication failed')
    return subprocess.run(
        ['openssl', 'enc', '-d', '-aes-256-ctr', '-K', aes_key.hex(), '-iv',
         blob[:16].hex()], input=blob[16:-32], capture_output=True,
        check=True).stdout


def upload_certs(api, ca_pem):
    """Store the control-plane certificates encrypted with a new key.

    The real Secret holds every CA's cert and key (and the service-account
    keys) encrypted with AES-GCM. Here it holds the cluster CA certificate
    in clear, the cluster CA's key (with which a joining Master signs its
    API server certificate) and the etcd CA certificate and key encrypted
    with the certificate key (see encrypt()), and the key's hash, which
    gives join kubeadm's message for a wrong key before any decryption.
    """
    key = secrets.token_hex(32)
    digest = hashlib.sha256(bytes.fromhex(key)).hexdigest()
    contents = pki.read_files(ENCRYPTED_CERTS.values())
    data = {'ca.crt': b64(ca_pem), CERT_KEY_HASH: b64(digest)}
    for name, plaintext in zip(ENCRYPTED_CERTS, contents):
        data[name] = base64.b64encode(encrypt(key, plaintext)).decode()
    secret = {'apiVersion': 'v1', 'kind': 'Secret',
              'metadata': {'name': CERTS_SECRET, 'namespace': 'kube-system'},
              'type': 'Opaque', 'data': data}
    print(f'[upload-certs] Storing the certificates in Secret '
          f'"{CERTS_SECRET}" in the "kube-system" Namespace')
    create_or_replace(api, secret_path(), CERTS_SECRET, secret,
                      'error execution phase upload-certs: error uploading '
                      'certs')
    return key


def node_object(name, address, control_plane):
    """The Node a kubelet registers, already Ready (no CNI to wait for)."""
    now = datetime.datetime.now(datetime.timezone.utc).strftime(
        '%Y-%m-%dT%H:%M:%SZ')
    labels = {'kubernetes.io/hostname': name, 'kubernetes.io/os': 'linux',
              'kubernetes.io/arch': 'amd64', 'beta.kubernetes.io/os': 'linux',
              'beta.kubernetes.io/arch': 'amd64'}
    spec = {}
    if control_plane:
        labels['node-role.kubernetes.io/control-plane'] = ''
        labels['node.kubernetes.io/exclude-from-external-load-balancers'] = ''
        spec['taints'] = [{'key': 'node-role.kubernetes.io/control-plane',
                           'effect': 'NoSchedule'}]
    return {
        'apiVersion': 'v1', 'kind': 'Node',
        'metadata': {
            'name': name, 'labels': labels,
            'annotations': {
                'kubeadm.alpha.kubernetes.io/cri-socket': CONTAINERD_SOCKET,
                'node.alpha.kubernetes.io/ttl': '0'}},
        'spec': spec,
        'status': {
            'addresses': [{'type': 'InternalIP', 'address': address},
                          {'type': 'Hostname', 'address': name}],
            'conditions': [{
                'type': 'Ready', 'status': 'True', 'reason': 'KubeletReady',
                'message': 'kubelet is posting ready status',
                'lastHeartbeatTime': now, 'lastTransitionTime': now}],
            'nodeInfo': {
                'kubeletVersion': VERSION, 'kubeProxyVersion': VERSION,
                'containerRuntimeVersion': 'containerd://1.7.24',
                'operatingSystem': 'linux', 'architecture': 'amd64',
                'osImage': os_image(), 'kernelVersion': os.uname().release,
                'machineID': '', 'systemUUID': '', 'bootID': ''}}}


def os_image():
    try:
        with open('/etc/os-release') as handle:
            match = re.search(r'^PRETTY_NAME="?([^"\n]*)', handle.read(),
                              re.M)
        return match[1] if match else 'Linux'
    except OSError:
        return 'Linux'


def register_node(api, address, control_plane):
    """Register this host as a Node, as its kubelet would on start.

    A Node left over from before a `kubeadm reset` is updated instead.
    """
    name = socket.gethostname().lower()
    node = node_object(name, address, control_plane)
    status, payload = api.call('POST', '/api/v1/nodes', node)
    if status == 409:
        # As the kubelet does: reconcile the existing Node's labels, then
        # post its status through the status subresource.
        merge = 'application/merge-patch+json'
        what = f'kubelet: unable to update node "{name}"'
        api.expect('PATCH', f'/api/v1/nodes/{name}',
                   {'metadata': {key: node['metadata'][key]
                                 for key in ('labels', 'annotations')},
                    'spec': node['spec']}, content_type=merge, what=what)
        api.expect('PATCH', f'/api/v1/nodes/{name}/status',
                   {'status': node['status']}, content_type=merge, what=what)
    elif status not in (200, 201):
        message = payload.get('message') if isinstance(payload, dict) \
            else payload
        raise KubeadmError(f'kubelet: unable to register node "{name}" with '
                           f'API server: {message}')
    print(f'[kubelet-start] Node "{name}" registered with InternalIP '
          f'{address}')
    return name


# --- the API server "static pod" ---------------------------------------------


def api_server_pid():
    """PID of this host's running API server stand-in, or None."""
    try:
        with open(API_SERVER_PID) as handle:
            pid = int(handle.read().strip())
        with open(f'/proc/{pid}/cmdline', 'rb') as handle:
            if API_SERVER.encode() not in handle.read():
                return None  # a stale file; the PID was reused
        return None if etcd.process_exited(pid) else pid
    except (OSError, ValueError):
        return None


def check_port_free(address):
    """kubeadm's control-plane preflight checks: Port-6443 (and that the
    address is ours), Port-2379, Port-2380 and DirAvailable--var-lib-etcd."""
    errors = []
    try:
        with socket.create_server((address, API_PORT)):
            pass
    except OSError as error:
        if error.errno != 98:  # EADDRINUSE
            raise KubeadmError(f'testbed: the API server cannot listen on '
                               f'{address}:{API_PORT}: {error.strerror}')
        errors.append((f'Port-{API_PORT}', f'Port {API_PORT} is in use'))
    errors += etcd.preflight_errors(address)
    if errors:
        raise preflight_error(*errors)


def control_plane_addresses(api):
    """InternalIPs of the control-plane Nodes: where the stacked etcd
    members are (kubeadm reads the etcd Pods' annotations instead)."""
    label = 'node-role.kubernetes.io/control-plane'
    _, nodes = api.expect('GET', f'/api/v1/nodes?labelSelector={label}',
                          what='could not retrieve the list of etcd '
                               'endpoints')
    return [address['address'] for node in nodes.get('items', [])
            if label in (node['metadata'].get('labels') or {})
            for address in node.get('status', {}).get('addresses', [])
            if address.get('type') == 'InternalIP']


def api_server_manifest(address, environ):
    """kube-apiserver's static Pod (JSON, which is YAML), as far as kubeadm
    writes it from its environment: like kubeadm, it carries every
    ``*_proxy`` variable kubeadm runs with (its GetProxyEnvVars)."""
    env = [{'name': name, 'value': value}
           for name, value in sorted(environ.items())
           if name.lower().endswith('_proxy')]
    return {'apiVersion': 'v1', 'kind': 'Pod',
            'metadata': {'name': 'kube-apiserver',
                         'namespace': 'kube-system'},
            'spec': {'hostNetwork': True, 'containers': [{
                'name': 'kube-apiserver',
                'image': f'registry.k8s.io/kube-apiserver:{VERSION}',
                'command': ['kube-apiserver',
                            f'--advertise-address={address}',
                            f'--secure-port={API_PORT}',
                            f'--tls-cert-file={pki.APISERVER_CERT}',
                            f'--tls-private-key-file={pki.APISERVER_KEY}'],
                'env': env}]}}


def start_api_server(address, deadline):
    """Start the API server stand-in detached (own session, output to its
    log), so it outlives this command like a static pod and dies with the
    host. It serves TLS with this Master's apiserver.crt and relays the
    requests to the test API server, which it verifies with the cluster
    CA (the test API server's own certificate)."""
    config = upstream()
    upstream_address = config['server'].split('//', 1)[-1].rstrip('/')
    with open(API_SERVER_LOG, 'ab') as log:
        process = subprocess.Popen(
            [API_SERVER, '--listen', f'{address}:{API_PORT}',
             '--upstream', upstream_address, '--pid-file', API_SERVER_PID,
             '--tls-cert-file', pki.APISERVER_CERT,
             '--tls-private-key-file', pki.APISERVER_KEY,
             '--upstream-ca-file', pki.CLUSTER_CA],
            stdin=subprocess.DEVNULL, stdout=log, stderr=log,
            start_new_session=True, close_fds=True)
    write_file(API_SERVER_MANIFEST, json.dumps(
        api_server_manifest(address, os.environ), indent=2) + '\n')
    print(f'[control-plane] Creating static Pod manifest for '
          f'"kube-apiserver" (testbed: TLS relay {address}:{API_PORT} -> '
          f'{upstream_address}, pid {process.pid})')
    local = Api(f'https://{address}:{API_PORT}', config['ca_pem'],
                config['token'])

    def up():
        if process.poll() is not None:
            raise KubeadmError(f'the API server stand-in exited with status '
                               f'{process.returncode}, see {API_SERVER_LOG}')
        return healthy(local)

    wait_until(up, deadline, 'error execution phase wait-control-plane: '
                             'the API server did not become healthy')


def stop_api_server():
    """SIGTERM the API server stand-in and wait until it is gone."""
    pid = api_server_pid()
    if pid is None:
        return False
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 5
    while not etcd.process_exited(pid):
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            deadline = float('inf')
        time.sleep(0.01)
    with contextlib.suppress(OSError):
        os.unlink(API_SERVER_PID)
    return True
