"""The upgrade half of the kubeadm stand-in: ``kubeadm upgrade plan``,
``kubeadm upgrade apply vX.Y.Z`` and ``kubeadm upgrade node``, and the
kube-system/kubeadm-config ConfigMap that ``kubeadm init`` uploads and
they read and write, as real kubeadm does.

What a test observes is real kubeadm's: the cluster's version is the
ClusterConfiguration's kubernetesVersion, which ``apply`` sets after it
upgraded its node's control plane; a Master's control plane (here the API
server forwarder, its static pod manifest naming the image of this
kubeadm's version) restarts at this kubeadm's version; the certificates
are renewed unless ``--certificate-renewal=false``; ``apply`` refuses a
version newer than itself, a downgrade or a jump of more than one minor,
and asks before it proceeds unless ``--yes``. The Node's kubeletVersion
changes only when the kubelet restarts (kubelet.py). etcd keeps its
version (the testbed runs Debian's).
"""

import json
import os
import re
import sys
import time

import kubeadm_node as node
import kubeadm_pki as pki

CONFIG_MAP = 'kubeadm-config'
CONFIG_MAPS = '/api/v1/namespaces/kube-system/configmaps'
ADMIN_CONF = '/etc/kubernetes/admin.conf'
KUBELET_CONF = '/etc/kubernetes/kubelet.conf'
FLAGS = {
    'upgrade plan': {},
    'upgrade apply': {'yes': False, 'force': False, 'dry-run': False,
                      'certificate-renewal': False, 'etcd-upgrade': False,
                      'ignore-preflight-errors': True},
    'upgrade node': {'dry-run': False, 'certificate-renewal': False,
                     'etcd-upgrade': False, 'ignore-preflight-errors': True},
}
_VERSION = re.compile(r'^v(\d+)\.(\d+)\.(\d+)$')
_CLUSTER_VERSION = re.compile(r'^kubernetesVersion: *(\S+)$', re.M)


def parse_version(text):
    match = _VERSION.match(text or '')
    if not match:
        raise node.KubeadmError(f'unable to parse version "{text}"')
    return tuple(int(part) for part in match.groups())


def cluster_configuration(version, endpoint, cert_sans=(),
                          service_subnet=pki.DEFAULT_SERVICE_SUBNET):
    """The ClusterConfiguration kubeadm init stores: what the upgrades
    read, and what a joining Master makes its API server certificate
    with (read_serving_config)."""
    sans = ''.join(f'  - {name}\n' for name in cert_sans)
    return ('apiVersion: kubeadm.k8s.io/v1beta4\n'
            'kind: ClusterConfiguration\n'
            f'kubernetesVersion: {version}\n'
            f'controlPlaneEndpoint: {endpoint}\n'
            + ('apiServer:\n  certSANs:\n' + sans if sans
               else 'apiServer: {}\n') +
            'networking:\n'
            f'  dnsDomain: {pki.DEFAULT_DNS_DOMAIN}\n'
            f'  serviceSubnet: {service_subnet}\n'
            'clusterName: kubernetes\n')


def upload_config(api, text):
    """kubeadm init's upload-config phase (and apply's last step): the
    ClusterConfiguration ``text`` into the kubeadm-config ConfigMap."""
    node.create_or_replace(
        api, CONFIG_MAPS, CONFIG_MAP,
        {'apiVersion': 'v1', 'kind': 'ConfigMap',
         'metadata': {'name': CONFIG_MAP, 'namespace': 'kube-system'},
         'data': {'ClusterConfiguration': text}},
        'error execution phase upload-config/kubeadm: error uploading the '
        'kubeadm ClusterConfiguration')
    print(f'[upload-config] Storing the configuration used in ConfigMap '
          f'"{CONFIG_MAP}" in the "kube-system" Namespace')


def config_text(api):
    """The cluster's stored ClusterConfiguration."""
    _, config_map = api.expect(
        'GET', f'{CONFIG_MAPS}/{CONFIG_MAP}',
        what='[upgrade/config] FATAL: failed to get config map')
    return (config_map.get('data') or {}).get('ClusterConfiguration', '')


def read_config(api):
    """(kubernetesVersion, controlPlaneEndpoint) of the cluster."""
    text = config_text(api)
    version = _CLUSTER_VERSION.search(text)
    endpoint = re.search(r'^controlPlaneEndpoint: *(\S+)$', text, re.M)
    return (version[1] if version else '',
            endpoint[1] if endpoint else '')


def parse_serving_config(text):
    """(controlPlaneEndpoint, certSANs, serviceSubnet, dnsDomain) of a
    ClusterConfiguration, which a Master's API server certificate is made
    with."""
    sans = re.search(r'^  certSANs:\n((?:  - \S+\n)*)', text, re.M)
    fields = {key: re.search(rf'^  {key}: *(\S+)$', text, re.M)
              for key in ('serviceSubnet', 'dnsDomain')}
    endpoint = re.search(r'^controlPlaneEndpoint: *(\S+)$', text, re.M)
    return (endpoint[1] if endpoint else '',
            [line[4:] for line in (sans[1] if sans else '').splitlines()],
            fields['serviceSubnet'][1] if fields['serviceSubnet']
            else pki.DEFAULT_SERVICE_SUBNET,
            fields['dnsDomain'][1] if fields['dnsDomain']
            else pki.DEFAULT_DNS_DOMAIN)


def client(path):
    server, ca_pem, token = node.read_kubeconfig(path)
    return node.Api(server, ca_pem, token)


def manifest_address():
    """The --advertise-address of this Master's API server manifest, or
    None on a node that is no Master."""
    try:
        with open(node.API_SERVER_MANIFEST) as handle:
            manifest = json.load(handle)
    except (OSError, ValueError):
        return None
    for arg in manifest['spec']['containers'][0]['command']:
        if arg.startswith('--advertise-address='):
            return arg.partition('=')[2]
    return None


def restart_control_plane(address, renew):
    """The static pods again at this kubeadm's version (kubeadm waits for
    the kubelet to restart each), the certificates renewed first."""
    if renew:
        pki.renew_all()
    node.stop_api_server()
    node.start_api_server(address, time.monotonic() + node.timeout_seconds())
    print(f'[upgrade/staticpods] Component "kube-apiserver" upgraded '
          f'successfully to {node.VERSION}')


def check_target(target, cluster, own):
    """kubeadm's version skew checks of ``upgrade apply``."""
    wanted, current, itself = (parse_version(target), parse_version(cluster),
                               parse_version(own))
    if wanted > itself:
        raise node.KubeadmError(
            f'[upgrade/version] FATAL: the --version argument is invalid due '
            f'to these fatal errors:\n\n- Specified version to upgrade to '
            f'"{target}" is higher than the kubeadm version "{own}". Upgrade '
            f'kubeadm first using the tool you used to install kubeadm')
    if wanted < current:
        raise node.KubeadmError(
            f'[upgrade/version] FATAL: the --version argument is invalid due '
            f'to these fatal errors:\n\n- Specified version to upgrade to '
            f'"{target}" is lower than the cluster version "{cluster}". '
            f'Downgrades are not supported yet')
    if wanted[:2] > (current[0], current[1] + 1):
        raise node.KubeadmError(
            f'[upgrade/version] FATAL: the --version argument is invalid due '
            f'to these fatal errors:\n\n- Specified version to upgrade to '
            f'"{target}" is too high; kubeadm can upgrade only 1 minor '
            f'version at a time')


def confirm():
    """kubeadm's prompt; EOF or anything but y/Y refuses."""
    sys.stdout.write('[upgrade] Are you sure you want to proceed? [y/N]: ')
    sys.stdout.flush()
    if sys.stdin.readline().strip() not in ('y', 'Y'):
        raise node.KubeadmError('won\'t proceed; the user didn\'t answer '
                                '(Y|y) in order to continue')


def require_root():
    if os.geteuid() != 0:
        raise node.preflight_error(('IsPrivilegedUser',
                                    'user is not running as root'))


def cmd_plan(options, positional):
    require_root()
    api = client(ADMIN_CONF)
    cluster, _ = read_config(api)
    print(f'[upgrade/versions] Cluster version: {cluster}')
    print(f'[upgrade/versions] kubeadm version: {node.VERSION}')
    if parse_version(node.VERSION) > parse_version(cluster):
        print('\nUpgrade to the latest stable version:\n\n'
              'COMPONENT                 NODE      CURRENT   TARGET\n'
              f'kube-apiserver                      {cluster}   '
              f'{node.VERSION}\n\n'
              'You can now apply the upgrade by executing the following '
              f'command:\n\n\tkubeadm upgrade apply {node.VERSION}\n')
    else:
        print('\nAwesome, you\'re up-to-date! Enjoy!')


def cmd_apply(options, positional):
    if len(positional) != 1:
        raise node.KubeadmError('[upgrade/config] FATAL: missing one or '
                                'more required arguments: version')
    require_root()
    target = positional[0]
    address = manifest_address()
    if address is None:
        raise node.KubeadmError(
            '[upgrade/config] FATAL: this is not a control-plane node: no '
            f'{node.API_SERVER_MANIFEST}')
    api = client(ADMIN_CONF)
    cluster, _ = read_config(api)
    print(f'[upgrade/version] You have chosen to change the cluster version '
          f'to "{target}"')
    check_target(target, cluster, node.VERSION)
    if options.get('dry-run'):
        return
    if not options.get('yes') and not options.get('force'):
        confirm()
    restart_control_plane(address, options.get('certificate-renewal', True))
    upload_config(api, _CLUSTER_VERSION.sub(f'kubernetesVersion: {target}',
                                            config_text(api), count=1))
    print(f'\n[upgrade] SUCCESS! A control plane node of your cluster was '
          f'upgraded to "{target}".')


def cmd_node(options, positional):
    if positional:
        raise node.KubeadmError(f'unknown command "{positional[0]}" for '
                                f'"kubeadm upgrade node"')
    require_root()
    address = manifest_address()
    api = client(ADMIN_CONF if address else KUBELET_CONF)
    cluster, _ = read_config(api)
    if parse_version(cluster) > parse_version(node.VERSION):
        raise node.KubeadmError(
            f'[upgrade] FATAL: the cluster version "{cluster}" is higher '
            f'than the kubeadm version "{node.VERSION}"')
    if options.get('dry-run'):
        return
    if address is not None:
        restart_control_plane(address,
                              options.get('certificate-renewal', True))
    print('[upgrade] The configuration for this node was successfully '
          'upgraded!')
