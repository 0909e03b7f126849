"""The etcd certificates of the kubeadm stand-in, as kubeadm makes them:
the etcd CA, and each member's server, peer and healthcheck-client
certificates plus the API server's etcd client certificate, under
/etc/kubernetes/pki (openssl CLI). Installed as
/usr/lib/testbed/kubeadm_pki.py next to kubeadm_etcd.py, whose paths it
uses.
"""

import ipaddress
import os
import subprocess
import tempfile

import kubeadm_etcd as etcd


def _openssl_config(common_name, extensions):
    lines = ['[req]', 'distinguished_name = dn', 'x509_extensions = ext',
             'prompt = no', '[dn]', f'CN = {common_name}', '[ext]']
    lines += [f'{key} = {value}' for key, value in extensions]
    return '\n'.join(lines) + '\n'


def _new_certificate(cert, key, common_name, extensions, days, ca=None):
    """A new RSA 2048 key and a certificate for it, self-signed or signed
    by ca=(cert path, key path); the key is written 0600."""
    os.makedirs(os.path.dirname(cert), exist_ok=True)
    with tempfile.NamedTemporaryFile('w', suffix='.cnf') as config:
        config.write(_openssl_config(common_name, extensions))
        config.flush()
        args = ['openssl', 'req', '-x509', '-new', '-config', config.name,
                '-newkey', 'rsa:2048', '-nodes', '-keyout', key,
                '-days', str(days), '-out', cert]
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


def install_ca(cert_pem, key_pem):
    """Write an etcd CA downloaded from the kubeadm-certs Secret."""
    os.makedirs(etcd.ETCD_PKI, exist_ok=True)
    for path, data, mode in ((etcd.CA_CERT, cert_pem, 0o644),
                             (etcd.CA_KEY, key_pem, 0o600)):
        with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC,
                          mode), 'wb') as handle:
            handle.write(data)
        os.chmod(path, mode)


def read_ca():
    """(cert PEM, key PEM) of the etcd CA, for upload-certs."""
    try:
        with open(etcd.CA_CERT, 'rb') as cert, open(etcd.CA_KEY, 'rb') as key:
            return cert.read(), key.read()
    except OSError as error:
        raise etcd.EtcdError(f'error execution phase upload-certs: failed to '
                             f'load the etcd CA: open {error.filename}: '
                             f'{error.strerror.lower()}')


def create_member_certificates(name, address):
    """etcd/server, etcd/peer, etcd/healthcheck-client and
    apiserver-etcd-client, signed by the etcd CA."""
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
        print(f'[certs] Generating "etcd/{kind}" certificate and key')
        print(f'[certs] etcd/{kind} serving cert is signed for DNS names '
              f'[{" ".join(dns)}] and IPs [{" ".join(ips)}]')
        _new_certificate(cert, key, name, leaf + both, 365, ca)
    for label, cert, key, cn in (
            ('etcd/healthcheck-client', etcd.HEALTHCHECK_CERT,
             etcd.HEALTHCHECK_KEY, 'kube-etcd-healthcheck-client'),
            ('apiserver-etcd-client', etcd.APISERVER_CLIENT_CERT,
             etcd.APISERVER_CLIENT_KEY, 'kube-apiserver-etcd-client')):
        print(f'[certs] Generating "{label}" certificate and key')
        _new_certificate(cert, key, cn, leaf + client, 365, ca)
