"""The test API server's self-signed TLS certificate, made with the
``openssl`` CLI, and the names it is valid for."""

import ipaddress
import os
import subprocess

from testbed.kubeapi import model


def certificate_names(names) -> list:
    """Names for the certificate, as strings without repeats: IP addresses
    normalised, networks (``ipaddress`` networks, or strings with a "/")
    replaced by their host addresses."""
    result = []
    for name in names:
        if isinstance(name, (ipaddress.IPv4Network, ipaddress.IPv6Network)) \
                or '/' in str(name):
            network = ipaddress.ip_network(name, strict=False)
            if network.num_addresses > model.MAX_SAN_ADDRESSES + 2:
                raise ValueError(f'{network} has too many addresses for the '
                                 f'certificate (at most '
                                 f'{model.MAX_SAN_ADDRESSES})')
            result += [str(address) for address in network.hosts()]
        else:
            try:
                result.append(str(ipaddress.ip_address(name)))
            except ValueError:
                result.append(str(name))
    return list(dict.fromkeys(result))


def make_certificate(workdir: str, sans: list) -> tuple:
    """Make a self-signed CA certificate that is the server's own too."""
    entries = []
    for name in sans:
        try:
            entries.append(f'IP:{ipaddress.ip_address(name)}')
        except ValueError:
            entries.append(f'DNS:{name}')
    config = os.path.join(workdir, 'openssl.cnf')
    with open(config, 'w') as handle:
        handle.write('[req]\n'
                     'distinguished_name = dn\n'
                     'x509_extensions = ext\n'
                     'prompt = no\n'
                     '[dn]\n'
                     'CN = kubeapi-test\n'
                     '[ext]\n'
                     'basicConstraints = critical,CA:TRUE\n'
                     'keyUsage = critical,digitalSignature,keyCertSign\n'
                     'extendedKeyUsage = serverAuth\n'
                     f'subjectAltName = {",".join(entries)}\n')
    cert = os.path.join(workdir, 'cert.pem')
    key = os.path.join(workdir, 'key.pem')
    subprocess.run(['openssl', 'req', '-x509', '-config', config,
                    '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256',
                    '-nodes', '-days', '7', '-keyout', key, '-out', cert],
                   check=True, capture_output=True)
    return cert, key
