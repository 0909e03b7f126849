"""The kubeadm stand-in's certificate expiry reads (kubeadm_pki.not_after):
the same notAfter openssl prints, for UTCTime and GeneralizedTime."""

import datetime
import subprocess
import sys

import pytest

from testbed.tests.standins_support import load_kubeadm_module


@pytest.mark.parametrize('days', [400, 40000])  # UTCTime, GeneralizedTime
def test_not_after_is_what_openssl_reads(tmp_path, days):
    load_kubeadm_module()  # puts the stand-ins' directory on sys.path
    cert = tmp_path / 'c.crt'
    subprocess.run(['openssl', 'req', '-x509', '-newkey', 'rsa:2048',
                    '-nodes', '-keyout', str(tmp_path / 'k.key'), '-out',
                    str(cert), '-days', str(days), '-subj', '/CN=pki'],
                   check=True, capture_output=True)
    printed = subprocess.run(['openssl', 'x509', '-noout', '-enddate',
                              '-in', str(cert)], check=True,
                             capture_output=True, text=True).stdout
    expected = datetime.datetime.strptime(
        printed.strip().partition('=')[2], '%b %d %H:%M:%S %Y %Z').replace(
            tzinfo=datetime.timezone.utc)
    assert sys.modules['kubeadm_pki'].not_after(str(cert)) == expected
