"""The etcd certificates of the kubeadm stand-in, as kubeadm makes them:
the etcd CA, and each member's server, peer and healthcheck-client
certificates plus the API server's etcd client certificate, under
/etc/kubernetes/pki (openssl CLI). Installed as
/usr/lib/testbed/kubeadm_pki.py next to kubeadm_etcd.py, whose paths it
uses.

It also answers ``kubeadm certs check-expiration`` (kubeadm's table, for
the certificates the stand-in has: the etcd family, which the real etcd
uses, and the cluster CA) and ``kubeadm certs renew all`` (each leaf
signed again with its own key for a year). Run as a program,
``kubeadm_pki.py reissue DAYS`` signs them again to expire in DAYS days,
so a test can bring their expiry near.
"""

import base64
import datetime
import ipaddress
import os
import re
import subprocess
import sys
import tempfile

import kubeadm_etcd as etcd


def _openssl_config(common_name, extensions):
    lines = ['[req]', 'distinguished_name = dn', 'x509_extensions = ext',
             'prompt = no', '[dn]', f'CN = {common_name}', '[ext]']
    lines += [f'{key} = {value}' for key, value in extensions]
    return '\n'.join(lines) + '\n'


def _new_certificate(cert, key, common_name, extensions, days, ca=None,
                     keep_key=False):
    """A new ECDSA P-256 key (the existing one with ``keep_key``, as
    kubeadm renews) and a certificate for it, self-signed or signed by ca=(cert
    path, key path); the key is written 0600."""
    os.makedirs(os.path.dirname(cert), exist_ok=True)
    with tempfile.NamedTemporaryFile('w', suffix='.cnf') as config:
        config.write(_openssl_config(common_name, extensions))
        config.flush()
        new_key = ['-key', key] if keep_key else \
            ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256',
             '-nodes', '-keyout', key]
        args = ['openssl', 'req', '-x509', '-new', '-config', config.name,
                *new_key, '-days', str(days), '-out', cert]
        if ca:
            args += ['-CA', ca[0], '-CAkey', ca[1]]
        old = os.umask(0o077)
        try:
            subprocess.run(args, check=True, capture_output=True)
        finally:
            os.umask(old)
    os.chmod(key, 0o600)
    os.chmod(cert, 0o644)


def have_ca():
    return os.path.exists(etcd.CA_CERT) and os.path.exists(etcd.CA_KEY)


def create_ca():
    """etcd/ca, unless one is there already (as kubeadm's certs phase)."""
    if have_ca():
        print('[certs] Using existing etcd/ca certificate authority')
        return
    print('[certs] Generating "etcd/ca" certificate and key')
    _new_certificate(etcd.CA_CERT, etcd.CA_KEY, 'etcd-ca', [
        ('basicConstraints', 'critical,CA:TRUE'),
        ('keyUsage', 'critical,digitalSignature,keyEncipherment,keyCertSign'),
        ('subjectKeyIdentifier', 'hash')], days=3650)


def install_files(files):
    """Write the CA files downloaded from the kubeadm-certs Secret
    ({path: PEM bytes}): keys 0600, certificates 0644."""
    for path, data in files.items():
        mode = 0o600 if path.endswith('.key') else 0o644
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC,
                          mode), 'wb') as handle:
            handle.write(data)
        os.chmod(path, mode)


def read_files(paths):
    """The bytes of each CA file, for upload-certs."""
    contents = []
    for path in paths:
        try:
            with open(path, 'rb') as handle:
                contents.append(handle.read())
        except OSError as error:
            raise etcd.EtcdError(f'error execution phase upload-certs: '
                                 f'failed to load the CA: open '
                                 f'{error.filename}: '
                                 f'{error.strerror.lower()}')
    return contents


def create_member_certificates(name, address, days=365, keep_keys=False,
                               quiet=False):
    """etcd/server, etcd/peer, etcd/healthcheck-client and
    apiserver-etcd-client, signed by the etcd CA."""
    say = (lambda text: None) if quiet else print
    ca = (etcd.CA_CERT, etcd.CA_KEY)
    ip = ipaddress.ip_address(address)
    dns = sorted({'localhost', name})
    ips = [str(ip), '127.0.0.1', '::1']
    sans = ','.join([f'DNS:{d}' for d in dns] + [f'IP:{i}' for i in ips])
    leaf = [('basicConstraints', 'critical,CA:FALSE'),
            ('keyUsage', 'critical,digitalSignature,keyEncipherment'),
            ('authorityKeyIdentifier', 'keyid')]
    both = [('extendedKeyUsage', 'serverAuth,clientAuth'),
            ('subjectAltName', sans)]
    client = [('extendedKeyUsage', 'clientAuth')]
    for kind, cert, key in (('server', etcd.SERVER_CERT, etcd.SERVER_KEY),
                            ('peer', etcd.PEER_CERT, etcd.PEER_KEY)):
        say(f'[certs] Generating "etcd/{kind}" certificate and key')
        say(f'[certs] etcd/{kind} serving cert is signed for DNS names '
            f'[{" ".join(dns)}] and IPs [{" ".join(ips)}]')
        _new_certificate(cert, key, name, leaf + both, days, ca, keep_keys)
    for label, cert, key, cn in (
            ('etcd/healthcheck-client', etcd.HEALTHCHECK_CERT,
             etcd.HEALTHCHECK_KEY, 'kube-etcd-healthcheck-client'),
            ('apiserver-etcd-client', etcd.APISERVER_CLIENT_CERT,
             etcd.APISERVER_CLIENT_KEY, 'kube-apiserver-etcd-client')):
        say(f'[certs] Generating "{label}" certificate and key')
        _new_certificate(cert, key, cn, leaf + client, days, ca, keep_keys)


# --- the API server's serving certificate ------------------------------------

CLUSTER_CA = etcd.PKI_DIR + '/ca.crt'
CLUSTER_CA_KEY = etcd.PKI_DIR + '/ca.key'
APISERVER_CERT = etcd.PKI_DIR + '/apiserver.crt'
APISERVER_KEY = etcd.PKI_DIR + '/apiserver.key'
DEFAULT_SERVICE_SUBNET = '10.96.0.0/12'
DEFAULT_DNS_DOMAIN = 'cluster.local'
_DNS_LABEL = re.compile(r'[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?')


def is_dns_name(name):
    """An RFC 1123 subdomain, or one with a leading "*." (kubeadm's
    IsDNS1123Subdomain / IsWildcardDNS1123Subdomain)."""
    labels = name.split('.')
    if labels[0] == '*' and len(labels) > 1:
        labels = labels[1:]
    return len(name) <= 253 and all(_DNS_LABEL.fullmatch(label)
                                    for label in labels)


def apiserver_alt_names(node_name, advertise_address, endpoint_host,
                        service_subnet=DEFAULT_SERVICE_SUBNET,
                        dns_domain=DEFAULT_DNS_DOMAIN, cert_sans=()):
    """(DNS names, IP addresses) of the API server's certificate by
    kubeadm's rules (its GetAPIServerAltNames): the node name, the
    kubernetes Service's names, the Service network's first address, the
    advertise address, the controlPlaneEndpoint host, then the certSANs
    (--apiserver-cert-extra-sans); a SAN that is neither an IP address
    nor a DNS name is left out with kubeadm's warning."""
    dns = [node_name, 'kubernetes', 'kubernetes.default',
           'kubernetes.default.svc', f'kubernetes.default.svc.{dns_domain}']
    first_subnet = service_subnet.split(',')[0]
    ips = [ipaddress.ip_network(first_subnet, strict=False)[1],
           ipaddress.ip_address(advertise_address)]
    for index, name in enumerate([endpoint_host, *cert_sans]):
        try:
            ips.append(ipaddress.ip_address(name))
        except ValueError:
            if is_dns_name(name):
                dns.append(name)
            elif index:
                print(f'W0101 00:00:00.000000 [certificates] WARNING: '
                      f'\'{name}\' was not added to the \'apiserver\' SAN, '
                      f'because it is not a valid IP or RFC-1123 compliant '
                      f'DNS entry', file=sys.stderr)
    return (list(dict.fromkeys(dns)),
            list(dict.fromkeys(str(ip) for ip in ips)))


def create_apiserver_certificate(dns, ips, days=365):
    """apiserver.crt and .key, signed by the cluster CA for ``dns`` and
    ``ips`` (apiserver_alt_names), as kubeadm's certs phase makes them."""
    print('[certs] Generating "apiserver" certificate and key')
    print(f'[certs] apiserver serving cert is signed for DNS names '
          f'[{" ".join(dns)}] and IPs [{" ".join(ips)}]')
    sans = ','.join([f'DNS:{name}' for name in dns]
                    + [f'IP:{ip}' for ip in ips])
    _new_certificate(APISERVER_CERT, APISERVER_KEY, 'kube-apiserver', [
        ('basicConstraints', 'critical,CA:FALSE'),
        ('keyUsage', 'critical,digitalSignature,keyEncipherment'),
        ('extendedKeyUsage', 'serverAuth'),
        ('authorityKeyIdentifier', 'keyid'),
        ('subjectAltName', sans)], days, (CLUSTER_CA, CLUSTER_CA_KEY))


# --- kubeadm certs -----------------------------------------------------------

# (kubeadm's name, file, its CA, what `renew all` says it renewed), in
# kubeadm's order.
LEAVES = (
    ('apiserver-etcd-client', etcd.APISERVER_CLIENT_CERT, 'etcd-ca',
     'certificate the apiserver uses to access etcd'),
    ('etcd-healthcheck-client', etcd.HEALTHCHECK_CERT, 'etcd-ca',
     'certificate for liveness probes to healthcheck etcd'),
    ('etcd-peer', etcd.PEER_CERT, 'etcd-ca',
     'certificate for etcd nodes to communicate with each other'),
    ('etcd-server', etcd.SERVER_CERT, 'etcd-ca',
     'certificate for serving etcd'),
)
AUTHORITIES = (('ca', CLUSTER_CA), ('etcd-ca', etcd.CA_CERT))


def _der_items(data, start, end):
    """(tag, first byte of content, end of content) of each DER item in
    data[start:end]."""
    while start < end:
        tag, length = data[start], data[start + 1]
        start += 2
        if length & 0x80:  # long form: the next (length & 0x7f) bytes
            count = length & 0x7f
            length = int.from_bytes(data[start:start + count], 'big')
            start += count
        yield tag, start, start + length
        start += length


def not_after(cert):
    """The certificate's notAfter (UTC, aware), read from its DER:
    Certificate > tbsCertificate > validity (the item after the issuer)
    > notAfter; one read, where an openssl process a certificate made
    every check-expiration cost ~0.2 s of CPU."""
    with open(cert) as pem:
        body = pem.read().split('-----')[2]
    der = base64.b64decode(body)
    _, start, end = next(_der_items(der, 0, len(der)))
    _, start, end = next(_der_items(der, start, end))
    fields = list(_der_items(der, start, end))
    if fields[0][0] == 0xa0:  # [0] version
        fields = fields[1:]
    _, start, end = fields[3]  # serial, signature, issuer, validity
    tag, start, end = list(_der_items(der, start, end))[1]
    text = der[start:end].decode('ascii')
    layout = '%y%m%d%H%M%SZ' if tag == 0x17 else '%Y%m%d%H%M%SZ'
    return datetime.datetime.strptime(text, layout).replace(
        tzinfo=datetime.timezone.utc)


def short_duration(seconds):
    """kubeadm's residual time (apimachinery's ShortHumanDuration)."""
    if seconds < -1:
        return '<invalid>'
    if seconds < 0:
        return '0s'
    if seconds < 60:
        return f'{int(seconds)}s'
    minutes = int(seconds // 60)
    if minutes < 60:
        return f'{minutes}m'
    hours = int(seconds // 3600)
    if hours < 48:
        return f'{hours}h'
    if hours < 24 * 365 * 2:
        return f'{hours // 24}d'
    return f'{hours // (24 * 365)}y'


def _tabulate(rows):
    """Go's tabwriter as kubeadm sets it up (minwidth 10, padding 3)."""
    widths = [max(10, max(len(row[i]) for row in rows) + 3)
              for i in range(len(rows[0]) - 1)]
    return [''.join(cell.ljust(width) for cell, width in zip(row, widths))
            + row[-1] for row in rows]


def check_expiration(now=None):
    """The text `kubeadm certs check-expiration` prints."""
    now = now or datetime.datetime.now(datetime.timezone.utc)

    def dates(cert):
        expires = not_after(cert)
        return (expires.strftime('%b %d, %Y %H:%M UTC'),
                short_duration((expires - now).total_seconds()))

    leaves = [['CERTIFICATE', 'EXPIRES', 'RESIDUAL TIME',
               'CERTIFICATE AUTHORITY', 'EXTERNALLY MANAGED']]
    leaves += [[name, *dates(cert), ca, 'no']
               for name, cert, ca, _ in LEAVES if os.path.exists(cert)]
    cas = [['CERTIFICATE AUTHORITY', 'EXPIRES', 'RESIDUAL TIME',
            'EXTERNALLY MANAGED']]
    cas += [[name, *dates(cert), 'no'] for name, cert in AUTHORITIES
            if os.path.exists(cert)]
    return ('[check-expiration] Reading configuration from the cluster...\n'
            '[check-expiration] FYI: You can look at this config file with '
            '\'kubectl -n kube-system get cm kubeadm-config -o yaml\'\n\n'
            + '\n'.join(_tabulate(leaves)) + '\n\n'
            + '\n'.join(_tabulate(cas)) + '\n')


def member():
    """(name, address) of this node's etcd member, from its manifest."""
    flags = etcd.manifest_flags()
    if not flags:
        raise etcd.EtcdError('testbed: no etcd manifest on this node: no '
                             'certificates to renew')
    url = flags['advertise-client-urls'].split(',')[0]
    host = url.split('//', 1)[1].rsplit(':', 1)[0].strip('[]')
    return flags['name'], host


def renew_all(days=365):
    """`kubeadm certs renew all`: every leaf signed again, same keys."""
    name, address = member()
    create_member_certificates(name, address, days, keep_keys=True,
                               quiet=True)
    print('[renew] Reading configuration from the cluster...')
    print('[renew] FYI: You can look at this config file with \'kubectl -n '
          'kube-system get cm kubeadm-config -o yaml\'\n')
    for _, _, _, what in LEAVES:
        print(f'{what} renewed')
    print('\nDone renewing certificates. You must restart the '
          'kube-apiserver, kube-controller-manager, kube-scheduler and '
          'etcd, so that they can use the new certificates.')


def main(args):
    if len(args) != 2 or args[0] != 'reissue' or not args[1].isdigit():
        print('usage: kubeadm_pki.py reissue DAYS', file=sys.stderr)
        return 2
    name, address = member()
    create_member_certificates(name, address, int(args[1]), keep_keys=True,
                               quiet=True)
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
