"""Whether the Masters' API server certificates name the host of the
VIM's URL.

Tacker checks the VIM's URL (the VIP or the one Master on its port, or
the floating IP of ``cluster_fip_name``) against the certificate the API
server presents, as every TLS client does: a host the certificate does
not name makes the VIM unusable. kubeadm names the controlPlaneEndpoint
in it, and the install script adds the floating IP (its ``-e``) only when
it creates the cluster. So the driver reads each Master's certificate and
refuses, before anything is registered in Tacker, a URL one of them does
not name.

The certificate is a VM's file: at most MAX_PEM_BYTES of it are read, and
it is parsed as an X.509 certificate, never trusted further.
"""

import ipaddress
import urllib.parse

from cryptography import x509

from kubernetes_mgmt_pv import exceptions
from kubernetes_mgmt_pv.request import param_model
from kubernetes_mgmt_pv import step_report

APISERVER_CERT = '/etc/kubernetes/pki/apiserver.crt'
MAX_PEM_BYTES = 64 * 1024
# head reads one byte more, so that a longer file is told from a full one.
READ_ARGV = ['head', '-c', str(MAX_PEM_BYTES + 1), APISERVER_CERT]
# How many of a certificate's names an error quotes, and of each name.
MAX_SHOWN_NAMES = 16
MAX_NAME_CHARS = 253
FIP_PATH = param_model.MASTER_PATH + '.cluster_fip_name'


def certificate_names(pem):
    """(DNS names, IP addresses) the PEM certificate (bytes) is valid for,
    or None when it is no certificate or longer than MAX_PEM_BYTES."""
    if len(pem) > MAX_PEM_BYTES:
        return None
    try:
        certificate = x509.load_pem_x509_certificate(pem)
        names = certificate.extensions.get_extension_for_class(
            x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return (), ()
    except ValueError:
        return None
    return (tuple(names.get_values_for_type(x509.DNSName)),
            tuple(str(address) for address in
                  names.get_values_for_type(x509.IPAddress)))


def read_names(executor):
    """certificate_names of the apiserver.crt of the Master ``executor``
    is logged in to."""
    with step_report.step(executor.host, 'API server certificate'):
        result = executor.run(READ_ARGV, sudo=True)
    return certificate_names(result.stdout_bytes)


def names_host(names, host):
    """Whether a certificate with ``names`` (certificate_names) is valid
    for ``host`` as a TLS client checks it: an address against the IP
    addresses only, a DNS name against the DNS names (case-insensitive, a
    "*." wildcard standing for one label)."""
    dns, addresses = names
    try:
        wanted = ipaddress.ip_address(host)
    except ValueError:
        host = host.lower().rstrip('.')
        return any(_dns_match(name.lower(), host) for name in dns)
    for address in addresses:
        try:
            if ipaddress.ip_address(address) == wanted:
                return True
        except ValueError:
            continue
    return False


def _dns_match(pattern, host):
    if pattern.startswith('*.'):
        label, _, rest = host.partition('.')
        return bool(label) and rest == pattern[2:]
    return pattern == host


def url_host(url):
    """The host of a URL, an IPv6 address without its brackets."""
    return urllib.parse.urlsplit(url).hostname


def _shown(names):
    if names is None:
        return 'not a readable certificate'
    shown = [name[:MAX_NAME_CHARS] for group in names for name in group]
    more = len(shown) - MAX_SHOWN_NAMES
    return 'it names %s%s' % (', '.join(shown[:MAX_SHOWN_NAMES]) or 'nothing',
                              ' and %d more' % more if more > 0 else '')


def unnamed_problem(url, names_by_master, fip_name=None):
    """Why the VIM's ``url`` would fail Tacker's TLS check, or None.

    ``names_by_master``: {Master address: certificate_names or None}.
    ``fip_name``: the cluster_fip_name resource when the URL's host is its
    floating IP. Returns (JSON path or None, reason)."""
    host = url_host(url)
    missing = sorted(master for master, names in names_by_master.items()
                     if names is None or not names_host(names, host))
    if not missing:
        return None
    details = '; '.join('Master %s: %s' % (master,
                                           _shown(names_by_master[master]))
                        for master in missing)
    where = ('the API server certificate (%s) of %d of %d Master(s) does '
             'not name %s, the host of the VIM\'s URL %s (%s): Tacker\'s TLS '
             'check of the VIM would fail, so no VIM was registered' % (
                 APISERVER_CERT, len(missing), len(names_by_master), host,
                 url, details))
    if fip_name:
        return FIP_PATH, (
            'the floating IP of %r: %s. kubeadm puts the floating IP into '
            'the certificate only when the cluster is created (the install '
            'script\'s -e, passed to kubeadm init as '
            '--apiserver-cert-extra-sans), so this cluster was created '
            'with another floating IP or before cluster_fip_name was set. '
            'Fix: heal the entire cluster, or on each Master add %s to '
            'apiServer.certSANs of the kubeadm-config ConfigMap, move '
            'apiserver.crt and apiserver.key out of /etc/kubernetes/pki, '
            'run "kubeadm init phase certs apiserver --config FILE" with '
            'that ClusterConfiguration and restart kube-apiserver; then '
            'run the operation again' % (fip_name, where, host))
    return None, (
        '%s. kubeadm names the control-plane endpoint in it, so this '
        'cluster was created with another endpoint. Fix: heal the entire '
        'cluster' % where)


def check_vim_url(url, names_by_master, fip_name=None):
    """Raise the unnamed_problem of the VIM's URL: a ParameterError at
    cluster_fip_name for its floating IP, else a ClusterInstallError."""
    problem = unnamed_problem(url, names_by_master, fip_name)
    if problem is None:
        return
    path, reason = problem
    if path:
        raise exceptions.ParameterErrors([exceptions.ParameterError(path,
                                                                    reason)])
    raise exceptions.ClusterInstallError(reason)
