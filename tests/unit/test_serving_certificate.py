"""Whether the Masters' API server certificates name the VIM's URL host:
the certificate's names (a real X.509 certificate, and VM text that is
not one), the TLS host match, and the refusal naming cluster_fip_name."""

import datetime
import ipaddress

from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives import serialization
from cryptography import x509
from cryptography.x509.oid import NameOID
import pytest

from kubernetes_mgmt_pv.cluster import serving_certificate as sc
from kubernetes_mgmt_pv import exceptions

FIP_PATH = 'k8s_cluster_installation_param.master_node.cluster_fip_name'


def certificate(dns=(), ips=(), with_sans=True):
    """A PEM certificate valid for ``dns`` and ``ips``."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME,
                                         'kube-apiserver')])
    now = datetime.datetime.now(datetime.timezone.utc)
    builder = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
               .public_key(key.public_key()).serial_number(1)
               .not_valid_before(now)
               .not_valid_after(now + datetime.timedelta(days=1)))
    if with_sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(
            [x509.DNSName(n) for n in dns] +
            [x509.IPAddress(ipaddress.ip_address(a)) for a in ips]),
            critical=False)
    return builder.sign(key, hashes.SHA256()).public_bytes(
        serialization.Encoding.PEM)


KUBEADM_NAMES = (('master1', 'kubernetes', 'kubernetes.default'),
                 ('10.96.0.1', '10.0.0.11', '10.0.0.100'))


@pytest.mark.parametrize('pem, names', [
    (certificate(*KUBEADM_NAMES), KUBEADM_NAMES),
    (certificate(('*.example.test',), ('2001:db8::1',)),
     (('*.example.test',), ('2001:db8::1',))),
    (certificate(with_sans=False), ((), ())),
    (b'-----BEGIN CERTIFICATE-----\nnot one\n-----END CERTIFICATE-----\n',
     None),
    (b'', None),
    (b'x' * (sc.MAX_PEM_BYTES + 1), None),
])
def test_certificate_names(pem, names):
    assert sc.certificate_names(pem) == names


@pytest.mark.parametrize('names, host, named', [
    (KUBEADM_NAMES, '10.0.0.100', True),
    (KUBEADM_NAMES, '10.0.0.12', False),
    (KUBEADM_NAMES, 'master1', True),
    (KUBEADM_NAMES, 'MASTER1.', True),
    # An address is matched against the IP addresses only.
    ((('192.0.2.7',), ()), '192.0.2.7', False),
    (((), ('2001:db8::1',)), '2001:DB8:0::1', True),
    ((('*.example.test',), ()), 'api.example.test', True),
    ((('*.example.test',), ()), 'example.test', False),
    ((('*.example.test',), ()), 'a.api.example.test', False),
    (((), ('not an address',)), '10.0.0.1', False),
])
def test_names_host(names, host, named):
    assert sc.names_host(names, host) is named


def test_a_url_every_certificate_names_passes():
    assert sc.unnamed_problem('https://10.0.0.100:16443', {
        '10.0.0.11': KUBEADM_NAMES, '10.0.0.12': KUBEADM_NAMES}) is None
    assert sc.unnamed_problem('https://[2001:db8::1]:6443', {
        '10.0.0.11': ((), ('2001:db8::1',))}) is None


def test_a_floating_ip_one_certificate_lacks_names_cluster_fip_name():
    with_fip = (KUBEADM_NAMES[0], KUBEADM_NAMES[1] + ('198.51.100.7',))
    with pytest.raises(exceptions.ParameterErrors) as caught:
        sc.check_vim_url('https://198.51.100.7:16443', {
            '10.0.0.11': with_fip, '10.0.0.12': KUBEADM_NAMES,
            '10.0.0.13': None}, 'vip_FIP')
    error, = caught.value.errors
    assert error.path == FIP_PATH
    for part in ("'vip_FIP'", '198.51.100.7', '2 of 3 Master(s)',
                 'Master 10.0.0.12: it names master1, kubernetes',
                 'Master 10.0.0.13: not a readable certificate',
                 'heal the entire cluster', '--apiserver-cert-extra-sans',
                 'apiServer.certSANs', 'no VIM was registered'):
        assert part in error.reason, error.reason
    assert 'Master 10.0.0.11' not in error.reason


def test_an_endpoint_the_certificate_lacks_is_an_install_error():
    with pytest.raises(exceptions.ClusterInstallError,
                       match='does not name 10.0.0.200, the host of the '
                             'VIM.s URL https://10.0.0.200:16443') as caught:
        sc.check_vim_url('https://10.0.0.200:16443',
                         {'10.0.0.11': KUBEADM_NAMES})
    assert 'cluster_fip_name' not in str(caught.value)


def test_an_error_quotes_a_capped_number_of_names():
    many = (tuple('name%d' % n for n in range(40)), ())
    _, reason = sc.unnamed_problem('https://10.0.0.1:6443',
                                   {'10.0.0.11': many})
    assert 'name14, name15 and 24 more' in reason
    assert 'name16' not in reason
