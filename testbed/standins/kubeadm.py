#!/usr/bin/python3 -S
"""kubeadm stand-in, installed as /usr/bin/kubeadm in every test host.

The testbed cannot run Kubernetes, so this imitates what the install script
and the driver observe of kubeadm: the files under /etc/kubernetes, an API
server answering on <node ip>:6443 with this Master's apiserver.crt (signed
with the cluster CA, the test API server's, for kubeadm's names) and
relaying to the shared test API server (see kube_apiserver_standin.py),
the cluster-info ConfigMap joins discover the CA from, Node objects,
bootstrap tokens and the kubeadm-certs Secret, and kubeadm's checks and
error messages. It
accepts only the command lines of the cluster contract:

    kubeadm init --control-plane-endpoint HOST:PORT
                 --apiserver-advertise-address IP
                 [--pod-network-cidr CIDR] [--service-cidr CIDR]
                 [--apiserver-cert-extra-sans NAMES] [--upload-certs]
    kubeadm join HOST:PORT --token T --discovery-token-ca-cert-hash sha256:H
                 [--control-plane --certificate-key K
                  --apiserver-advertise-address IP]
    kubeadm join --config FILE   (a JoinConfiguration, see kubeadm_config.py)
    kubeadm token create [--ttl DURATION]
    kubeadm token delete TOKEN_OR_ID...
    kubeadm init phase upload-certs --upload-certs
    kubeadm reset [-f]
    kubeadm version [-o short|json]
    kubeadm certs check-expiration
    kubeadm certs renew all
    kubeadm upgrade plan | apply vX.Y.Z [--yes] | node   (kubeadm_upgrade.py)

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
stand-in, for the details and the etcdctl route the driver uses; the
files, the API server client and the "static pod" are in kubeadm_node.py.

Standard library plus the openssl CLI only: it runs on the hosts' python3.
"""

import base64
import contextlib
import datetime
import hashlib
import ipaddress
import json
import os
import re
import shutil
import socket
import ssl
import subprocess
import sys
import time

# The etcd half (kubeadm_etcd.py) and the node side (kubeadm_node.py) are
# installed next to the API server stand-in; from a source tree they are
# next to this file.
# No .pyc of its own: an upgrade's modules have the size and, built in the
# same second, the mtime of the old ones, so a timestamp .pyc would outlive
# it. The package's own, which check the source's hash, are read.
sys.dont_write_bytecode = True
sys.path[:0] = ['/usr/lib/testbed', os.path.dirname(os.path.abspath(__file__))]
import kubeadm_config  # noqa: E402
import kubeadm_etcd as etcd  # noqa: E402
import kubeadm_node as node  # noqa: E402
import kubeadm_pki as pki  # noqa: E402
import kubeadm_upgrade as upgrade  # noqa: E402
import kubelet_service  # noqa: E402


CALL_LOG = '/var/log/kubeadm-standin.log'
KUBE_DIR = '/etc/kubernetes'
CA_FILE = KUBE_DIR + '/pki/ca.crt'
ADMIN_CONF = KUBE_DIR + '/admin.conf'
KUBELET_CONF = KUBE_DIR + '/kubelet.conf'
TOKEN_PATTERN = re.compile(r'([a-z0-9]{6})\.([a-z0-9]{16})')
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
    'token delete': {},
    'reset': {'force': False},
    'version': {'output': True},
    'certs': {},
    **upgrade.FLAGS,
}
SHORT_FLAGS = {'o': 'output', 'f': 'force', 'y': 'yes'}
GLOBAL_FLAGS = {'v': True}  # klog verbosity: >= 5 logs etcd retries
# The flags kubeadm accepts next to --config (its isAllowedFlag).
WITH_CONFIG = {'config', 'ignore-preflight-errors', 'dry-run', 'kubeconfig',
               'node-name', 'kubeconfig-dir', 'upload-certs',
               'print-join-command', 'rootfs', 'v', 'log-file'}


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
            raise node.KubeadmError(f'unknown flag: {arg.partition("=")[0]}')
        if not known[name]:
            options[name] = value.lower() not in ('false', '0') \
                if has_value else True
        elif has_value:
            options[name] = value
        elif args:
            options[name] = args.pop(0)
        else:
            raise node.KubeadmError(f'flag needs an argument: {arg}')
    return options, positional


def parse_duration(text):
    """Seconds in a Go duration such as "2h", "24h0m0s", "90m" or "0"."""
    if text == '0':
        return 0.0
    units = {'h': 3600, 'm': 60, 's': 1, 'ms': 0.001}
    parts = re.findall(r'(\d+(?:\.\d+)?)(ms|h|m|s)', text)
    if not parts or ''.join(n + u for n, u in parts) != text:
        raise node.KubeadmError(f'invalid argument "{text}" for "--ttl" flag: '
                                f'time: invalid duration "{text}"')
    return sum(float(number) * units[unit] for number, unit in parts)


def split_endpoint(endpoint):
    """(host, port) of HOST[:PORT]; kubeadm's default port is 6443."""
    host, _, port = endpoint.rpartition(':')
    if not host:
        return endpoint, node.API_PORT
    if not port.isdigit():
        raise node.KubeadmError(f'invalid endpoint "{endpoint}": bad port')
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


# --- commands ----------------------------------------------------------------

def require_root():
    if os.geteuid() != 0:
        raise node.preflight_error(('IsPrivilegedUser',
                                    'user is not running as root'))


def require_not_member():
    """kubeadm's FileAvailable preflight check for the kubelet.conf."""
    if os.path.exists(KUBELET_CONF):
        name = KUBELET_CONF.replace('/', '-')
        raise node.preflight_error((f'FileAvailable-{name}',
                                    f'{KUBELET_CONF} already exists'))


def check_cidr(value, field):
    try:
        ipaddress.ip_network(value, strict=False)
    except ValueError:
        raise node.KubeadmError(f'networking.{field}: Invalid value: '
                                f'"{value}": couldn\'t parse subnet')


def cmd_init(options, positional):
    """Bring up the first control-plane node."""
    if positional:
        raise node.KubeadmError(f'unknown command "{positional[0]}" for '
                                f'"kubeadm init"')
    require_root()
    address = node.node_ip(options)
    endpoint = options.get('control-plane-endpoint') or \
        f'{address}:{node.API_PORT}'
    host, port = split_endpoint(endpoint)
    for option, field in (('pod-network-cidr', 'podSubnet'),
                          ('service-cidr', 'serviceSubnet')):
        if option in options:
            check_cidr(options[option], field)
    print(f'[init] Using Kubernetes version: {node.VERSION}')
    print('[preflight] Running pre-flight checks')
    require_not_member()
    node.check_port_free(address)
    config = node.upstream()
    deadline = time.monotonic() + node.timeout_seconds()
    server = f'https://{host}:{port}'
    cluster_config = upgrade.cluster_configuration(
        node.VERSION, endpoint, extra_sans(options),
        options.get('service-cidr', pki.DEFAULT_SERVICE_SUBNET))
    name = init_files(config, server, address, cluster_config)
    etcd.init_local(name, address, deadline)
    node.start_api_server(address, deadline)
    api = node.Api(server, config['ca_pem'], config['token'])
    print('[api-check] Waiting for a healthy API server. This can take up '
          'to 4m0s')
    took = node.wait_healthy(api, deadline, 'error execution phase '
                             'wait-control-plane: could not reach the control-'
                             f'plane endpoint {endpoint}')
    print(f'[api-check] The API server is healthy after {took:.6f}s')
    key = None
    if options.get('upload-certs'):
        key = node.upload_certs(api, config['ca_pem'])
        print(f'[upload-certs] Using certificate key:\n{key}')
    upgrade.upload_config(api, cluster_config)
    node.register_node(api, address, control_plane=True)
    kubelet_service.start()
    print('[mark-control-plane] Marking the node as control-plane')
    token = node.create_bootstrap_token(
        api, 24 * 3600,
        'The default bootstrap token generated by \'kubeadm init\'.')
    print(f'[bootstrap-token] Using token: {token}')
    node.create_cluster_info(api, server, config['ca_pem'])
    print_join_commands(host, port, token, config['ca_pem'], key)


def extra_sans(options):
    """--apiserver-cert-extra-sans: a comma-separated list, as cobra's
    string slices."""
    return [name.strip() for name in
            options.get('apiserver-cert-extra-sans', '').split(',')
            if name.strip()]


def init_files(config, server, address, cluster_config):
    """The cluster CA (the test API server's), this Master's certificates
    and the kubeconfig files; the node name."""
    node.write_file(CA_FILE, config['ca_pem'], 0o644)
    node.write_file(pki.CLUSTER_CA_KEY, config['ca_key_pem'], 0o600)
    print('[certs] Using existing ca certificate authority')
    name = socket.gethostname().lower()
    apiserver_certificate(name, address, cluster_config)
    pki.create_ca()
    pki.create_member_certificates(name, address)
    node.write_file(ADMIN_CONF, node.kubeconfig(
        server, config['ca_pem'], config['token'], 'kubernetes-admin'))
    node.write_file(KUBELET_CONF, node.kubeconfig(
        server, config['ca_pem'], config['token'],
        f'system:node:{socket.gethostname()}'))
    print('[kubeconfig] Writing "admin.conf" kubeconfig file')
    print('[kubeconfig] Writing "kubelet.conf" kubeconfig file')
    return name


def apiserver_certificate(name, address, cluster_config):
    """This Master's apiserver.crt, for the ClusterConfiguration text
    init stores and a joining Master reads."""
    endpoint, sans, subnet, domain = upgrade.parse_serving_config(
        cluster_config)
    pki.create_apiserver_certificate(*pki.apiserver_alt_names(
        name, address, split_endpoint(endpoint)[0], subnet, domain, sans))


def print_join_commands(host, port, token, ca_pem, key):
    ca_hash = node.ca_cert_hash(ca_pem)
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
        raise node.KubeadmError(
            f'error execution phase preflight: couldn\'t validate the '
            f'identity of the API Server: the bootstrap token "{token}" was '
            f'not of the form "^([a-z0-9]{{6}})\\.([a-z0-9]{{16}})$"')
    token_id, token_secret = match.groups()
    status, secret = api.call('GET', node.secret_path(
        f'bootstrap-token-{token_id}'))
    not_signed = node.KubeadmError(
        f'error execution phase preflight: couldn\'t validate the identity '
        f'of the API Server: could not find a JWS signature in the '
        f'cluster-info ConfigMap for token ID "{token_id}"')
    if status == 404:
        raise not_signed
    if status != 200:
        raise node.KubeadmError(f'error execution phase preflight: couldn\'t '
                                f'validate the identity of the API Server: '
                                f'status {status}: {secret}')
    data = secret.get('data') or {}
    expiration = node.unb64(data.get('expiration'))
    if expiration and expiration < datetime.datetime.now(
            datetime.timezone.utc).strftime('%Y-%m-%dT%H:%M:%SZ'):
        raise not_signed
    if (secret.get('type') != 'bootstrap.kubernetes.io/token'
            or node.unb64(data.get('token-secret')) != token_secret
            or node.unb64(data.get('usage-bootstrap-authentication'))
            != 'true'):
        raise node.KubeadmError(
            'error execution phase preflight: couldn\'t validate the identity '
            'of the API Server: failed to verify JWS signature of received '
            'cluster info object, can\'t trust this API Server')


def check_ca_hash(ca_pem, pinned):
    """The discovered CA must match the --discovery-token-ca-cert-hash."""
    kind, _, value = (pinned or '').partition(':')
    if kind != 'sha256' or not re.fullmatch(r'[0-9a-fA-F]{64}', value):
        raise node.KubeadmError(
            f'error execution phase preflight: invalid discovery token CA '
            f'certificate hash: invalid hash "{pinned}", expected a '
            f'"type:value" format with type sha256 and a 64-digit hex value')
    actual = node.ca_cert_hash(ca_pem)
    if actual != 'sha256:' + value.lower():
        raise node.KubeadmError(
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
        raise node.KubeadmError(
            'error execution phase control-plane-prepare/certs: error '
            'creating PKI assets: failure loading certificate for CA: '
            f'couldn\'t load the certificate file {CA_FILE}: open {CA_FILE}: '
            'no such file or directory')
    try:
        raw = bytes.fromhex(key)
    except ValueError:
        raise node.KubeadmError(prefix + 'error decoding certificate key: '
                                'encoding/hex: invalid byte')
    if len(raw) != 32:
        raise node.KubeadmError(prefix + f'error decoding certificate key: '
                                f'crypto/aes: invalid key size {len(raw)}')
    status, secret = api.call('GET', node.secret_path(node.CERTS_SECRET))
    if status != 200:
        raise node.KubeadmError(prefix + f'error downloading the secret: '
                                f'secrets "{node.CERTS_SECRET}" not found')
    stored = node.unb64((secret.get('data') or {}).get(node.CERT_KEY_HASH))
    if stored != hashlib.sha256(raw).hexdigest():
        raise node.KubeadmError(prefix + 'error decrypting certificate '
                                'ca.crt: cipher: message authentication '
                                'failed')
    return secret


def download_certs(secret, key):
    """Decrypt the etcd CA of the kubeadm-certs Secret into this node's
    /etc/kubernetes/pki/etcd (kubeadm's download-certs phase)."""
    data = secret.get('data') or {}
    files = {}
    for name, path in node.ENCRYPTED_CERTS.items():
        if name not in data:
            raise node.KubeadmError(
                'error execution phase control-plane-prepare/download-certs: '
                'error downloading certs: the Secret does not include the '
                f'required certificate or key - name: {name}, path: {path}')
        files[name] = node.decrypt(key, base64.b64decode(data[name]), name)
    pki.install_files({node.ENCRYPTED_CERTS[name]: data
                       for name, data in files.items()})


def join_from_config(options):
    """The join options a --config JoinConfiguration gives, as the flags
    would; kubeadm refuses other flags next to --config."""
    mixed = sorted(set(options) - WITH_CONFIG)
    if mixed:
        raise node.KubeadmError(f'can not mix \'--config\' with arguments '
                                f'[{" ".join(mixed)}]')
    try:
        config, warnings = kubeadm_config.load_join_configuration(
            options['config'])
    except kubeadm_config.ConfigError as error:
        raise node.KubeadmError(str(error))
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


def discover(host, port, options, api_token, deadline):
    """kubeadm's token discovery: the cluster CA from cluster-info,
    checked against the bootstrap token and the pinned hash; (CA PEM, Api
    of the endpoint, which the stand-in calls with ``api_token``)."""
    if not options.get('token'):
        raise node.KubeadmError(
            'discovery: Invalid value: "": using token-based discovery '
            'without caCertHashes can be unsafe. Set '
            'unsafeSkipCAVerification as true in your kubeadm config file '
            'or pass --discovery-token-unsafe-skip-ca-verification flag to '
            'continue')
    ca_pem = node.discover_cluster_ca(host, port, api_token, deadline)
    api = node.Api(f'https://{host}:{port}', ca_pem, api_token)
    check_token(api, options['token'])
    check_ca_hash(ca_pem, options.get('discovery-token-ca-cert-hash'))
    print(f'[discovery] Cluster info signature and contents are valid and '
          f'TLS certificate validates against pinned roots, will use API '
          f'Server "{host}:{port}"')
    return ca_pem, api


def cmd_join(options, positional):
    """Join this host as a worker or, with --control-plane, a master."""
    if 'config' in options:  # an endpoint given as well is ignored
        options, positional = join_from_config(options)
    if len(positional) != 1:
        raise node.KubeadmError('testbed: kubeadm join needs exactly one '
                                'API server endpoint HOST:PORT')
    require_root()
    control_plane = options.get('control-plane', False)
    address = node.node_ip(options)
    host, port = split_endpoint(positional[0])
    print('[preflight] Running pre-flight checks')
    require_not_member()
    if control_plane:
        node.check_port_free(address)
    config = node.upstream()
    deadline = time.monotonic() + node.timeout_seconds()
    server = f'https://{host}:{port}'
    ca_pem, api = discover(host, port, options, config['token'], deadline)
    name = socket.gethostname().lower()
    if control_plane:
        key = options.get('certificate-key')
        secret = check_certificate_key(api, key)
        print('[download-certs] Downloading the certificates in Secret '
              '"kubeadm-certs" in the "kube-system" Namespace')
        download_certs(secret, key)
    node.write_file(CA_FILE, ca_pem, 0o644)
    if control_plane:
        apiserver_certificate(name, address, upgrade.config_text(api))
        pki.create_member_certificates(name, address)
    node.write_file(KUBELET_CONF, node.kubeconfig(
        server, ca_pem, config['token'],
        f'system:node:{socket.gethostname()}'))
    if control_plane:
        node.write_file(ADMIN_CONF, node.kubeconfig(
            server, ca_pem, config['token'], 'kubernetes-admin'))
        node.start_api_server(address, deadline)
    node.register_node(api, address, control_plane)
    kubelet_service.start()
    if control_plane:
        etcd.join(name, address, node.control_plane_addresses(api), deadline)
    print('\nThis node has joined the cluster'
          + (' and a new control plane instance was created' if control_plane
             else '') + ':\n* Certificate signing request was sent to '
          'apiserver and a response was received.\n* The Kubelet was '
          'informed of the new secure connection details.')


def admin_api():
    """An Api for the cluster in /etc/kubernetes/admin.conf."""
    server, ca_pem, token = node.read_kubeconfig(ADMIN_CONF)
    return node.Api(server, ca_pem, token), ca_pem


def cmd_token(options, positional):
    if positional[:1] == ['delete']:
        token_delete(positional[1:])
        return
    if positional != ['create']:
        raise node.KubeadmError('testbed: only "kubeadm token create" and '
                                '"delete" are supported')
    ttl = parse_duration(options.get('ttl', '24h0m0s'))
    api, _ = admin_api()
    print(node.create_bootstrap_token(api, ttl,
                                      'testbed: kubeadm token create'))


def token_delete(tokens):
    """Delete each bootstrap token (given whole or by its ID) as kubeadm
    does: its Secret; the first that fails ends the command."""
    if not tokens:
        raise node.KubeadmError('missing argument; "token delete" is missing '
                                'token of form "[a-z0-9]{6}"')
    api, _ = admin_api()
    for token in tokens:
        token_id = token.partition('.')[0]
        if not re.fullmatch(r'[a-z0-9]{6}', token_id):
            raise node.KubeadmError(
                'given token didn\'t match pattern "[a-z0-9]{6}" or '
                '"[a-z0-9]{6}\\.[a-z0-9]{16}"')
        api.expect('DELETE', node.secret_path(f'bootstrap-token-{token_id}'),
                   what=f'failed to delete bootstrap token "{token_id}"')
        print(f'bootstrap token "{token_id}" deleted')


def cmd_upload_certs(options, positional):
    if positional:
        raise node.KubeadmError(f'unknown command "{positional[0]}" for '
                                f'"kubeadm init phase upload-certs"')
    if not options.get('upload-certs'):
        print('[upload-certs] Skipping phase. Please see --upload-certs')
        return
    api, ca_pem = admin_api()
    key = node.upload_certs(api, ca_pem)
    print(f'[upload-certs] Using certificate key:\n{key}')


def cmd_reset(options, positional):
    """Undo init/join on this host; the Node object stays, as with
    kubeadm (which does not delete it either)."""
    require_root()
    if not options.get('force'):
        sys.stdout.write('[reset] Are you sure you want to proceed? [y/N]: ')
        sys.stdout.flush()
        if sys.stdin.readline().strip().lower() not in ('y', 'yes'):
            raise node.KubeadmError('aborted reset operation')
    print('[preflight] Running pre-flight checks')
    if etcd.manifest_flags() is not None:
        # kubeadm's remove-etcd-member phase, while etcd still runs.
        warning = etcd.remove_local_member(reset_etcd_addresses())
        if warning:
            print(f'[reset] WARNING: Failed to remove etcd member: {warning}'
                  ', please manually remove this etcd member using etcdctl',
                  file=sys.stderr)
    print('[reset] Stopping the kubelet service')
    kubelet_service.stop()
    if node.stop_api_server():
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
        server, ca_pem, token = node.read_kubeconfig(ADMIN_CONF)
        return node.control_plane_addresses(
            node.Api(server, ca_pem, token, timeout=5))
    except (node.KubeadmError, OSError, ssl.SSLError) as error:
        print(f'[reset] WARNING: cannot list the control-plane Nodes: '
              f'{error}', file=sys.stderr)
        return []


def cmd_version(options, positional):
    output = options.get('output', '')
    if output == 'short':
        print(node.VERSION)
        return
    major, minor = node.VERSION.lstrip('v').split('.')[:2]
    info = {'major': major, 'minor': minor, 'gitVersion': node.VERSION,
            'gitCommit': '0' * 40, 'gitTreeState': 'clean',
            'buildDate': '2026-04-14T00:00:00Z', 'goVersion': 'go1.25.8',
            'compiler': 'gc', 'platform': 'linux/amd64'}
    if output == 'json':
        print(json.dumps({'clientVersion': info}, indent=2))
    elif output == '':
        fields = ', '.join(f'{key[0].upper()}{key[1:]}:"{value}"'
                           for key, value in info.items())
        print(f'kubeadm version: &version.Info{{{fields}}}')
    else:
        raise node.KubeadmError(f'invalid output format: {output}')


def cmd_certs(options, positional):
    """check-expiration and renew all, on a control-plane node (see
    kubeadm_pki.py for which certificates the stand-in has)."""
    require_root()
    if positional == ['check-expiration']:
        sys.stdout.write(pki.check_expiration())
    elif positional == ['renew', 'all']:
        pki.renew_all()
    else:
        raise node.KubeadmError('testbed: only "kubeadm certs '
                                'check-expiration" and "kubeadm certs renew '
                                'all" are supported')


COMMANDS = {('init', 'phase', 'upload-certs'): ('init phase upload-certs',
                                                cmd_upload_certs),
            ('init',): ('init', cmd_init),
            ('join',): ('join', cmd_join),
            ('token',): ('token create', cmd_token),
            ('reset',): ('reset', cmd_reset),
            ('version',): ('version', cmd_version),
            ('certs',): ('certs', cmd_certs),
            ('upgrade', 'plan'): ('upgrade plan', upgrade.cmd_plan),
            ('upgrade', 'apply'): ('upgrade apply', upgrade.cmd_apply),
            ('upgrade', 'node'): ('upgrade node', upgrade.cmd_node)}


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
        raise node.KubeadmError(f'testbed: unsupported kubeadm command: '
                                f'{" ".join(args) or "(none)"}')
    except (node.KubeadmError, etcd.EtcdError) as error:
        print(f'{error}\n{STACK_HINT}', file=sys.stderr)
        return 1
    except (OSError, subprocess.CalledProcessError) as error:
        # An API server that went away mid-command, openssl failing, ...
        print(f'error: {error}\n{STACK_HINT}', file=sys.stderr)
        return 1


if __name__ == '__main__':
    sys.exit(main(sys.argv))
