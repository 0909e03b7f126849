"""The kubeadm stand-in's CreateOrUpdate calls (kubeadm_node.
create_or_replace) retry a failed request as kubeadm 1.30+ does: a POST
cut by a VIP that moved is sent again; a certificate it cannot verify is
final."""

import ssl
import sys

import pytest

from testbed.tests.standins_support import load_kubeadm_module

SECRET = {'metadata': {'name': 's', 'namespace': 'kube-system'}}
PATH = '/api/v1/namespaces/kube-system/secrets'


class Answers:
    """An Api whose call() gives the queued answers in turn (an exception
    is raised)."""

    def __init__(self, *answers):
        self.answers = list(answers)
        self.calls = []

    def call(self, method, path, body=None):
        self.calls.append((method, path))
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


@pytest.fixture
def node(monkeypatch):
    load_kubeadm_module()  # puts the stand-ins' directory on sys.path
    module = sys.modules['kubeadm_node']
    monkeypatch.setattr(module, 'API_CALL_RETRY_INTERVAL', 0)
    return module


def test_a_cut_post_is_sent_again(node):
    api = Answers(OSError('Remote end closed connection without response'),
                  (500, {'message': 'etcdserver: leader changed'}),
                  (201, {}))
    node.create_or_replace(api, PATH, 's', SECRET, 'upload')
    assert api.calls == [('POST', PATH)] * 3


def test_the_last_failure_is_reported_after_the_timeout(node, monkeypatch):
    monkeypatch.setattr(node, 'API_CALL_TIMEOUT', 0)
    api = Answers((503, {'message': 'unavailable'}))
    with pytest.raises(node.KubeadmError) as caught:
        node.create_or_replace(api, PATH, 's', SECRET, 'upload')
    assert str(caught.value) == 'upload: unavailable'


def test_an_unverified_certificate_is_not_retried(node):
    error = ssl.SSLCertVerificationError('verify failed')
    error.verify_message = 'unable to get local issuer certificate'
    api = Answers(error, (201, {}))
    with pytest.raises(node.KubeadmError):
        node.create_or_replace(api, PATH, 's', SECRET, 'upload')
    assert len(api.calls) == 1
