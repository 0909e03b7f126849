#!/usr/bin/python3
"""kubeadm stand-in, installed as /usr/bin/kubeadm in every test host.

The testbed cannot run Kubernetes, so this imitates what the install script
and the driver observe of kubeadm: the files under /etc/kubernetes, an API
server answering on <node ip>:6443 (a TCP forwarder to the shared test API
server, see kube_apiserver_standin.py), Node objects, bootstrap tokens and
the kubeadm-certs Secret, and kubeadm's checks and error messages. It
accepts only the command lines of the cluster contract:

    kubeadm init --control-plane-endpoint HOST:PORT
                 --apiserver-advertise-address IP
                 [--pod-network-cidr CIDR] [--service-cidr CIDR]
                 [--upload-certs]
    kubeadm join HOST:PORT --token T --discovery-token-ca-cert-hash sha256:H
                 [--control-plane --certificate-key K
                  --apiserver-advertise-address IP]
    kubeadm join --config FILE   (a JoinConfiguration, see kubeadm_config.py)
    kubeadm token create [--ttl DURATION]
    kubeadm init phase upload-certs --upload-certs
    kubeadm reset [-f]
    kubeadm version [-o short|json]

Every call is appended to /var/log/kubeadm-standin.log as one JSON line
{"argv": [...], "time": <epoch seconds>} so tests can check what was run;
a call with --config also logs the file's configuration, its token and
certificate key replaced by "***" ("config", or null if unreadable).
The test API server (address, CA, admin token) is read from
/etc/testbed/kube-upstream.json, which the testbed writes into each host.

etcd is real: init and control-plane joins create kubeadm's etcd
certificates and run a stacked etcd member per control-plane node, join
adds its member (as a learner, then promoted) through the existing ones,
reset removes it; upload-certs carries the etcd CA, encrypted with the
certificate key. See kubeadm_etcd.py, installed next to the API server
stand-in, for the details and the etcdctl route the driver uses.

Standard library plus the openssl CLI only: it runs on the hosts' python3.
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
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request

# The etcd half (kubeadm_etcd.py) is installed next to the API server
# stand-in; from a source tree it is next to this file.
sys.path[:0] = ['/usr/lib/testbed', os.path.dirname(os.path.abspath(__file__))]
import kubeadm_config  # noqa: E402
import kubeadm_etcd as etcd  # noqa: E402

PACKAGE_VERSION = '1.31.4-1.1'  # rewritten by testbed.standins when built
VERSION = 'v' + PACKAGE_VERSION.split('-')[0]
CONTAINERD_SOCKET = 'unix:///var/run/containerd/containerd.sock'

CALL_LOG = '/var/log/kubeadm-standin.log'
UPSTREAM_CONFIG = '/etc/testbed/kube-upstream.json'
KUBE_DIR = '/etc/kubernetes'
CA_FILE = KUBE_DIR + '/pki/ca.crt'
ADMIN_CONF = KUBE_DIR + '/admin.conf'
KUBELET_CONF = KUBE_DIR + '/kubelet.conf'
KUBELET_DEFAULTS = '/etc/default/kubelet'
API_SERVER = '/usr/lib/testbed/kube-apiserver-standin'
API_SERVER_PID = '/run/kube-apiserver-standin.pid'
API_SERVER_LOG = '/var/log/kube-apiserver-standin.log'
API_PORT = 6443
DEFAULT_TIMEOUT = 60.0  # seconds; kube-upstream.json "timeout" overrides
CERTS_SECRET = 'kubeadm-certs'
CERT_KEY_HASH = 'certificate-key.sha256'
# Secret data key -> file, of the certificates upload-certs encrypts.
ENCRYPTED_CERTS = {'etcd-ca.crt': etcd.CA_CERT, 'etcd-ca.key': etcd.CA_KEY}
TOKEN_PATTERN = re.compile(r'([a-z0-9]{6})\.([a-z0-9]{16})')
TOKEN_GROUPS = 'system:bootstrappers:kubeadm:default-node-token'
STACK_HINT = ('To see the stack trace of this error execute with --v=5 or '
              'higher')

# Flags per command: name -> True if it takes a value. -o/-f are short forms.
FLAGS = {
    'init': {'control-plane-endpoint': True,
             'apiserver-advertise-address': True,
             'pod-network-cidr': True, 'service-cidr': True,
             'apiserver-cert-extra-sans': True, 'upload-certs': False},
    'init phase upload-certs': {'upload-certs': False},
    'join': {'token': True, 'discovery-token-ca-cert-hash': True,
             'control-plane': False, 'certificate-key': True,
             'apiserver-advertise-address': True, 'config': True},
    'token create': {'ttl': True},
    'reset': {'force': False},
    'version': {'output': True},
}
SHORT_FLAGS = {'o': 'output', 'f': 'force'}
GLOBAL_FLAGS = {'v': True}  # klog verbosity: >= 5 logs etcd retries
# The flags kubeadm accepts next to --config (its isAllowedFlag).
WITH_CONFIG = {'config', 'ignore-preflight-errors', 'dry-run', 'kubeconfig',
               'node-name', 'kubeconfig-dir', 'upload-certs',
               'print-join-command', 'rootfs', 'v', 'log-file'}


class KubeadmError(Exception):
    """A failure reported the way kubeadm does: message, exit status 1."""


def preflight_error(*errors):
    """The error kubeadm prints when preflight checks fail."""
    lines = ''.join(f'\t[ERROR {check}]: {text}\n' for check, text in errors)
    return KubeadmError(
        'error execution phase preflight: [preflight] Some fatal errors '
        f'occurred:\n{lines}[preflight] If you know what you are doing, you '
        'can make a check non-fatal with `--ignore-preflight-errors=...`')


# --- command line ------------------------------------------------------------

def parse_flags(command, args):
    """Split args into (options, positional) as cobra would, rejecting
    flags the contract does not use with cobra's message."""
    known = dict(FLAGS[command], **GLOBAL_FLAGS)
    options, positional = {}, []
    args = list(args)
    while args:
        arg = args.pop(0)
        if not arg.startswith('-') or arg == '-':
            positional.append(arg)
            continue
        name, has_value, value = arg.lstrip('-').partition('=')
        if not arg.startswith('--'):
            name = SHORT_FLAGS.get(name, '-' + name)
        if name not in known:
            raise KubeadmError(f'unknown flag: {arg.partition("=")[0]}')
        if not known[name]:
            options[name] = value.lower() not in ('false', '0') \
                if has_value else True
        elif has_value:
            options[name] = value
        elif args:
            options[name] = args.pop(0)
        else:
            raise KubeadmError(f'flag needs an argument: {arg}')
    return options, positional


def parse_duration(text):
    """Seconds in a Go duration such as "2h", "24h0m0s", "90m" or "0"."""
    if text == '0':
        return 0.0
    units = {'h': 3600, 'm': 60, 's': 1, 'ms': 0.001}
    parts = re.findall(r'(\d+(?:\.\d+)?)(ms|h|m|s)', text)
    if not parts or ''.join(n + u for n, u in parts) != text:
        raise KubeadmError(f'invalid argument "{text}" for "--ttl" flag: '
                           f'time: invalid duration "{text}"')
    return sum(float(number) * units[unit] for number, unit in parts)


def split_endpoint(endpoint):
    """(host, port) of HOST[:PORT]; kubeadm's default port is 6443."""
    host, _, port = endpoint.rpartition(':')
    if not host:
        return endpoint, API_PORT
    if not port.isdigit():
        raise KubeadmError(f'invalid endpoint "{endpoint}": bad port')
    return host, int(port)


def config_path(args):
    """The value of --config in args, or None."""
    for index, arg in enumerate(args):
        if arg.startswith('--config='):
            return arg.partition('=')[2]
        if arg == '--config' and index + 1 < len(args):
            return args[index + 1]
    return None


def log_call(argv):
    """Append this call to the call log (best effort: non-root callers of
    `kubeadm version` cannot write to /var/log)."""
    entry = {'argv': [os.path.basename(argv[0])] + argv[1:],
             'time': time.time()}
    config = config_path(argv[1:])
    if config:
        try:
            entry['config'] = kubeadm_config.redacted(
                kubeadm_config.load_join_configuration(config)[0])
        except kubeadm_config.ConfigError:
            entry['config'] = None
    try:
        with open(CALL_LOG, 'a') as log:
            log.write(json.dumps(entry) + '\n')
    except OSError:
        pass


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


def pem_of(der):
    return ssl.DER_cert_to_PEM_cert(der)


# --- talking to the API server -----------------------------------------------

class Api:
    """A minimal Kubernetes REST client over HTTPS verifying the cluster CA.

    Proxies in the environment are ignored: the install script may run
    with the driver's http_proxy settings, but the testbed has no proxy.
    """

    def __init__(self, server, ca_pem, token, timeout=10):
        self.server = server.rstrip('/')
        self.token = token
        self.timeout = timeout
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


def fetch_server_certificate(host, port, deadline):
    """The certificate an endpoint presents, as kubeadm's discovery reads
    cluster-info without trusting the server yet (PEM)."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE

    def fetch():
        with socket.create_connection((host, port), timeout=5) as raw:
            with context.wrap_socket(raw, server_hostname=host) as tls:
                return pem_of(tls.getpeercert(binary_form=True))

    def attempt():
        try:
            return fetch()
        except OSError as error:
            print(f'[discovery] Failed to request cluster-info, will try '
                  f'again: Get "https://{host}:{port}/api/v1/namespaces/'
                  f'kube-public/configmaps/cluster-info": {error}',
                  file=sys.stderr)
            raise

    return wait_until(attempt, deadline,
                      f'couldn\'t validate the identity of the API Server: '
                      f'Get "https://{host}:{port}"')


def secret_path(name=None):
    base = '/api/v1/namespaces/kube-system/secrets'
    return base if name is None else f'{base}/{name}'


def b64(text):
    return base64.b64encode(text.encode()).decode()


def unb64(text):
    return base64.b64decode(text or '').decode(errors='replace')


def create_or_replace(api, path, name, obj, what):
    """POST obj; if it exists, PUT it over the stored one."""
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
    in clear (the key of the test API server's CA is not ours to hand out),
    the etcd CA certificate and key encrypted with the certificate key (see
    encrypt()), and the key's hash, which gives join kubeadm's message for
    a wrong key before any decryption.
    """
    key = secrets.token_hex(32)
    digest = hashlib.sha256(bytes.fromhex(key)).hexdigest()
    cert_pem, key_pem = etcd.read_ca()
    data = {'ca.crt': b64(ca_pem), CERT_KEY_HASH: b64(digest)}
    for name, plaintext in zip(ENCRYPTED_CERTS, (cert_pem, key_pem)):
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
        with open(f'/proc/{pid}/stat') as handle:
            if handle.read().rsplit(')', 1)[1].split()[0] == 'Z':
                return None  # exited, not reaped yet
        return pid
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


def start_api_server(address, deadline):
    """Start the forwarder detached (own session, output to its log), so
    it outlives this command like a static pod and dies with the host."""
    config = upstream()
    upstream_address = config['server'].split('//', 1)[-1].rstrip('/')
    with open(API_SERVER_LOG, 'ab') as log:
        process = subprocess.Popen(
            [API_SERVER, '--listen', f'{address}:{API_PORT}',
             '--upstream', upstream_address, '--pid-file', API_SERVER_PID],
            stdin=subprocess.DEVNULL, stdout=log, stderr=log,
            start_new_session=True, close_fds=True)
    print(f'[control-plane] Creating static Pod manifest for '
          f'"kube-apiserver" (testbed: forwarder {address}:{API_PORT} -> '
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
    """SIGTERM the forwarder and wait until it is gone."""
    pid = api_server_pid()
    if pid is None:
        return False
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 5
    while api_server_pid() == pid:
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            deadline = float('inf')
        time.sleep(0.01)
    with contextlib.suppress(OSError):
        os.unlink(API_SERVER_PID)
    return True


# --- commands ----------------------------------------------------------------

def require_root():
    if os.geteuid() != 0:
        raise preflight_error(('IsPrivilegedUser',
                               'user is not running as root'))


def require_not_member():
    """kubeadm's FileAvailable preflight check for the kubelet.conf."""
    if os.path.exists(KUBELET_CONF):
        name = KUBELET_CONF.replace('/', '-')
        raise preflight_error((f'FileAvailable-{name}',
                               f'{KUBELET_CONF} already exists'))


def check_cidr(value, field):
    try:
        ipaddress.ip_network(value, strict=False)
    except ValueError:
        raise KubeadmError(f'networking.{field}: Invalid value: "{value}": '
                           f'couldn\'t parse subnet')


def cmd_init(options, positional):
    """Bring up the first control-plane node."""
    if positional:
        raise KubeadmError(f'unknown command "{positional[0]}" for '
                           f'"kubeadm init"')
    require_root()
    address = node_ip(options)
    endpoint = options.get('control-plane-endpoint') or \
        f'{address}:{API_PORT}'
    host, port = split_endpoint(endpoint)
    for option, field in (('pod-network-cidr', 'podSubnet'),
                          ('service-cidr', 'serviceSubnet')):
        if option in options:
            check_cidr(options[option], field)
    print(f'[init] Using Kubernetes version: {VERSION}')
    print('[preflight] Running pre-flight checks')
    require_not_member()
    check_port_free(address)
    config = upstream()
    deadline = time.monotonic() + timeout_seconds()
    server = f'https://{host}:{port}'
    write_file(CA_FILE, config['ca_pem'], 0o644)
    print('[certs] Using existing ca certificate authority')
    name = socket.gethostname().lower()
    etcd.create_ca()
    etcd.create_member_certificates(name, address)
    write_file(ADMIN_CONF, kubeconfig(server, config['ca_pem'],
                                      config['token'], 'kubernetes-admin'))
    write_file(KUBELET_CONF, kubeconfig(server, config['ca_pem'],
                                        config['token'],
                                        f'system:node:{socket.gethostname()}'))
    print('[kubeconfig] Writing "admin.conf" kubeconfig file')
    print('[kubeconfig] Writing "kubelet.conf" kubeconfig file')
    etcd.init_local(name, address, deadline)
    start_api_server(address, deadline)
    api = Api(server, config['ca_pem'], config['token'])
    print('[api-check] Waiting for a healthy API server. This can take up '
          'to 4m0s')
    took = wait_healthy(api, deadline, 'error execution phase '
                        'wait-control-plane: could not reach the control-'
                        f'plane endpoint {endpoint}')
    print(f'[api-check] The API server is healthy after {took:.6f}s')
    key = None
    if options.get('upload-certs'):
        key = upload_certs(api, config['ca_pem'])
        print(f'[upload-certs] Using certificate key:\n{key}')
    register_node(api, address, control_plane=True)
    print('[mark-control-plane] Marking the node as control-plane')
    token = create_bootstrap_token(api, 24 * 3600,
                                   'The default bootstrap token generated '
                                   'by \'kubeadm init\'.')
    print(f'[bootstrap-token] Using token: {token}')
    ca_hash = ca_cert_hash(config['ca_pem'])
    join = (f'kubeadm join {host}:{port} --token {token} \\\n'
            f'\t--discovery-token-ca-cert-hash {ca_hash}')
    print('\nYour Kubernetes control-plane has initialized successfully!\n')
    if key:
        print('You can now join any number of control-plane nodes running '
              'the following command on each as root:\n\n'
              f'  {join} \\\n\t--control-plane --certificate-key {key}\n')
    print('Then you can join any number of worker nodes by running the '
          f'following on each as root:\n\n{join}')


def check_token(api, token):
    """The bootstrap token must exist, match and not be expired; the
    messages are kubeadm's for a token cluster-info is not signed with."""
    match = TOKEN_PATTERN.fullmatch(token or '')
    if not match:
        raise KubeadmError(
            f'error execution phase preflight: couldn\'t validate the '
            f'identity of the API Server: the bootstrap token "{token}" was '
            f'not of the form "^([a-z0-9]{{6}})\\.([a-z0-9]{{16}})$"')
    token_id, token_secret = match.groups()
    status, secret = api.call('GET', secret_path(
        f'bootstrap-token-{token_id}'))
    not_signed = KubeadmError(
        f'error execution phase preflight: couldn\'t validate the identity '
        f'of the API Server: could not find a JWS signature in the '
        f'cluster-info ConfigMap for token ID "{token_id}"')
    if status == 404:
        raise not_signed
    if status != 200:
        raise KubeadmError(f'error execution phase preflight: couldn\'t '
                           f'validate the identity of the API Server: '
                           f'status {status}: {secret}')
    data = secret.get('data') or {}
    expiration = unb64(data.get('expiration'))
    if expiration and expiration < datetime.datetime.now(
            datetime.timezone.utc).strftime('%Y-%m-%dT%H:%M:%SZ'):
        raise not_signed
    if (secret.get('type') != 'bootstrap.kubernetes.io/token'
            or unb64(data.get('token-secret')) != token_secret
            or unb64(data.get('usage-bootstrap-authentication')) != 'true'):
        raise KubeadmError(
            'error execution phase preflight: couldn\'t validate the identity '
            'of the API Server: failed to verify JWS signature of received '
            'cluster info object, can\'t trust this API Server')


def check_ca_hash(ca_pem, pinned):
    """The discovered CA must match the --discovery-token-ca-cert-hash."""
    kind, _, value = (pinned or '').partition(':')
    if kind != 'sha256' or not re.fullmatch(r'[0-9a-fA-F]{64}', value):
        raise KubeadmError(
            f'error execution phase preflight: invalid discovery token CA '
            f'certificate hash: invalid hash "{pinned}", expected a '
            f'"type:value" format with type sha256 and a 64-digit hex value')
    actual = ca_cert_hash(ca_pem)
    if actual != 'sha256:' + value.lower():
        raise KubeadmError(
            f'error execution phase preflight: couldn\'t validate the '
            f'identity of the API Server: cluster CA found in cluster-info '
            f'ConfigMap is invalid: none of the public keys "{actual}" are '
            f'pinned')


def check_certificate_key(api, key):
    """--certificate-key must decrypt kubeadm-certs, i.e. be the key of
    the last `upload-certs`."""
    prefix = ('error execution phase control-plane-prepare/download-certs: '
              'error downloading certs: ')
    if not key:
        raise KubeadmError(
            'error execution phase control-plane-prepare/certs: error '
            'creating PKI assets: failure loading certificate for CA: '
            f'couldn\'t load the certificate file {CA_FILE}: open {CA_FILE}: '
            'no such file or directory')
    try:
        raw = bytes.fromhex(key)
    except ValueError:
        raise KubeadmError(prefix + 'error decoding certificate key: '
                                    'encoding/hex: invalid byte')
    if len(raw) != 32:
        raise KubeadmError(prefix + f'error decoding certificate key: '
                                    f'crypto/aes: invalid key size {len(raw)}')
    status, secret = api.call('GET', secret_path(CERTS_SECRET))
    if status != 200:
        raise KubeadmError(prefix + f'error downloading the secret: '
                                    f'secrets "{CERTS_SECRET}" not found')
    stored = unb64((secret.get('data') or {}).get(CERT_KEY_HASH))
    if stored != hashlib.sha256(raw).hexdigest():
        raise KubeadmError(prefix + 'error decrypting certificate ca.crt: '
                                    'cipher: message authentication failed')
    return secret


def download_certs(secret, key):
    """Decrypt the etcd CA of the kubeadm-certs Secret into this node's
    /etc/kubernetes/pki/etcd (kubeadm's download-certs phase)."""
    data = secret.get('data') or {}
    files = {}
    for name, path in ENCRYPTED_CERTS.items():
        if name not in data:
            raise KubeadmError(
                'error execution phase control-plane-prepare/download-certs: '
                'error downloading certs: the Secret does not include the '
                f'required certificate or key - name: {name}, path: {path}')
        files[name] = decrypt(key, base64.b64decode(data[name]), name)
    etcd.install_ca(files['etcd-ca.crt'], files['etcd-ca.key'])


def join_from_config(options):
    """The join options a --config JoinConfiguration gives, as the flags
    would; kubeadm refuses other flags next to --config."""
    mixed = sorted(set(options) - WITH_CONFIG)
    if mixed:
        raise KubeadmError(f'can not mix \'--config\' with arguments '
                           f'[{" ".join(mixed)}]')
    try:
        config, warnings = kubeadm_config.load_join_configuration(
            options['config'])
    except kubeadm_config.ConfigError as error:
        raise KubeadmError(str(error))
    for warning in warnings:
        print(f'W0101 00:00:00.000000 strict decoding error: {warning}',
              file=sys.stderr)
    discovery = config.get('discovery') or {}
    bootstrap = discovery.get('bootstrapToken') or {}
    hashes = bootstrap.get('caCertHashes') or []
    joined = {'token': bootstrap.get('token'),
              'discovery-token-ca-cert-hash': hashes[0] if hashes else None}
    control_plane = config.get('controlPlane')
    if control_plane is not None:
        local = control_plane.get('localAPIEndpoint') or {}
        joined.update({'control-plane': True,
                       'certificate-key': control_plane.get('certificateKey'),
                       'apiserver-advertise-address':
                           local.get('advertiseAddress')})
    return ({key: value for key, value in joined.items() if value},
            [bootstrap.get('apiServerEndpoint')])


def cmd_join(options, positional):
    """Join this host as a worker or, with --control-plane, a master."""
    if 'config' in options:  # an endpoint given as well is ignored
        options, positional = join_from_config(options)
    if len(positional) != 1:
        raise KubeadmError('testbed: kubeadm join needs exactly one '
                           'API server endpoint HOST:PORT')
    require_root()
    control_plane = options.get('control-plane', False)
    address = node_ip(options)
    host, port = split_endpoint(positional[0])
    print('[preflight] Running pre-flight checks')
    require_not_member()
    if control_plane:
        check_port_free(address)
    config = upstream()
    deadline = time.monotonic() + timeout_seconds()
    if not options.get('token'):
        raise KubeadmError('discovery: Invalid value: "": using token-based '
                           'discovery without caCertHashes can be unsafe. '
                           'Set unsafeSkipCAVerification as true in your '
                           'kubeadm config file or pass '
                           '--discovery-token-unsafe-skip-ca-verification '
                           'flag to continue')
    ca_pem = fetch_server_certificate(host, port, deadline)
    server = f'https://{host}:{port}'
    api = Api(server, ca_pem, config['token'])
    check_token(api, options['token'])
    check_ca_hash(ca_pem, options.get('discovery-token-ca-cert-hash'))
    print(f'[discovery] Cluster info signature and contents are valid and '
          f'TLS certificate validates against pinned roots, will use API '
          f'Server "{host}:{port}"')
    name = socket.gethostname().lower()
    if control_plane:
        key = options.get('certificate-key')
        secret = check_certificate_key(api, key)
        print('[download-certs] Downloading the certificates in Secret '
              '"kubeadm-certs" in the "kube-system" Namespace')
        download_certs(secret, key)
        etcd.create_member_certificates(name, address)
    write_file(CA_FILE, ca_pem, 0o644)
    write_file(KUBELET_CONF, kubeconfig(
        server, ca_pem, config['token'],
        f'system:node:{socket.gethostname()}'))
    if control_plane:
        write_file(ADMIN_CONF, kubeconfig(server, ca_pem, config['token'],
                                          'kubernetes-admin'))
        start_api_server(address, deadline)
    register_node(api, address, control_plane)
    if control_plane:
        etcd.join(name, address, control_plane_addresses(api), deadline)
    print('\nThis node has joined the cluster'
          + (' and a new control plane instance was created' if control_plane
             else '') + ':\n* Certificate signing request was sent to '
          'apiserver and a response was received.\n* The Kubelet was '
          'informed of the new secure connection details.')


def admin_api():
    """An Api for the cluster in /etc/kubernetes/admin.conf."""
    server, ca_pem, token = read_kubeconfig(ADMIN_CONF)
    return Api(server, ca_pem, token), ca_pem


def cmd_token(options, positional):
    if positional != ['create']:
        raise KubeadmError('testbed: only "kubeadm token create" is '
                           'supported')
    ttl = parse_duration(options.get('ttl', '24h0m0s'))
    api, _ = admin_api()
    print(create_bootstrap_token(api, ttl, 'testbed: kubeadm token create'))


def cmd_upload_certs(options, positional):
    if positional:
        raise KubeadmError(f'unknown command "{positional[0]}" for '
                           f'"kubeadm init phase upload-certs"')
    if not options.get('upload-certs'):
        print('[upload-certs] Skipping phase. Please see --upload-certs')
        return
    api, ca_pem = admin_api()
    key = upload_certs(api, ca_pem)
    print(f'[upload-certs] Using certificate key:\n{key}')


def cmd_reset(options, positional):
    """Undo init/join on this host; the Node object stays, as with
    kubeadm (which does not delete it either)."""
    require_root()
    if not options.get('force'):
        sys.stdout.write('[reset] Are you sure you want to proceed? [y/N]: ')
        sys.stdout.flush()
        if sys.stdin.readline().strip().lower() not in ('y', 'yes'):
            raise KubeadmError('aborted reset operation')
    print('[preflight] Running pre-flight checks')
    if etcd.manifest_flags() is not None:
        # kubeadm's remove-etcd-member phase, while etcd still runs.
        warning = etcd.remove_local_member(reset_etcd_addresses())
        if warning:
            print(f'[reset] WARNING: Failed to remove etcd member: {warning}'
                  ', please manually remove this etcd member using etcdctl',
                  file=sys.stderr)
    print('[reset] Stopping the kubelet service')
    if stop_api_server():
        print('[reset] Stopped the kube-apiserver static Pod')
    if etcd.stop():
        print('[reset] Stopped the etcd static Pod')
    etcd.clean_data_dir()
    print(f'[reset] Deleting contents of directories: [{KUBE_DIR}]')
    shutil.rmtree(KUBE_DIR, ignore_errors=True)
    print('\nThe reset process does not clean CNI configuration, iptables '
          'or IPVS tables, or your $HOME/.kube/config file.')


def reset_etcd_addresses():
    """The control-plane Nodes' addresses for reset, best effort: reset
    must work when the API server is gone too."""
    try:
        server, ca_pem, token = read_kubeconfig(ADMIN_CONF)
        return control_plane_addresses(Api(server, ca_pem, token, timeout=5))
    except (KubeadmError, OSError, ssl.SSLError) as error:
        print(f'[reset] WARNING: cannot list the control-plane Nodes: '
              f'{error}', file=sys.stderr)
        return []


def cmd_version(options, positional):
    output = options.get('output', '')
    if output == 'short':
        print(VERSION)
        return
    major, minor = VERSION.lstrip('v').split('.')[:2]
    info = {'major': major, 'minor': minor, 'gitVersion': VERSION,
            'gitCommit': '0' * 40, 'gitTreeState': 'clean',
            'buildDate': '2024-12-10T00:00:00Z', 'goVersion': 'go1.22.9',
            'compiler': 'gc', 'platform': 'linux/amd64'}
    if output == 'json':
        print(json.dumps({'clientVersion': info}, indent=2))
    elif output == '':
        fields = ', '.join(f'{key[0].upper()}{key[1:]}:"{value}"'
                           for key, value in info.items())
        print(f'kubeadm version: &version.Info{{{fields}}}')
    else:
        raise KubeadmError(f'invalid output format: {output}')


COMMANDS = {('init', 'phase', 'upload-certs'): ('init phase upload-certs',
                                                cmd_upload_certs),
            ('init',): ('init', cmd_init),
            ('join',): ('join', cmd_join),
            ('token',): ('token create', cmd_token),
            ('reset',): ('reset', cmd_reset),
            ('version',): ('version', cmd_version)}


def main(argv):
    log_call(argv)
    args = argv[1:]
    try:
        for words, (flag_set, command) in COMMANDS.items():
            if tuple(args[:len(words)]) == words:
                options, positional = parse_flags(flag_set,
                                                  args[len(words):])
                with contextlib.suppress(ValueError):
                    etcd.VERBOSITY = int(options.pop('v', 0))
                command(options, positional)
                return 0
        raise KubeadmError(f'testbed: unsupported kubeadm command: '
                           f'{" ".join(args) or "(none)"}')
    except (KubeadmError, etcd.EtcdError) as error:
        print(f'{error}\n{STACK_HINT}', file=sys.stderr)
        return 1
    except (OSError, subprocess.CalledProcessError) as error:
        # An API server that went away mid-command, openssl failing, ...
        print(f'error: {error}\n{STACK_HINT}', file=sys.stderr)
        return 1


if __name__ == '__main__':
    sys.exit(main(sys.argv))
