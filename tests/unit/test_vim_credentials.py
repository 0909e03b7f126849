"""Whether a reused Kubernetes VIM gets the cluster's credentials: a table,
no Tacker (tests/tacker_integration runs the update in Tacker)."""

import pytest

from kubernetes_mgmt_pv.doors import tacker_compat

TOKEN, CA = 'token-of-the-cluster', '-----BEGIN CERTIFICATE-----\nnew\n'


@pytest.mark.parametrize('stored, changed', [
    ({'bearer_token': TOKEN, 'ssl_ca_cert': CA}, ()),
    # Extra fields Tacker keeps (auth_url, region, username 'None') do not
    # count.
    ({'bearer_token': TOKEN, 'ssl_ca_cert': CA, 'auth_url': 'https://x',
      'username': 'None', 'password': None, 'region': None}, ()),
    # A cluster rebuilt at the same address: new token, new CA, or both.
    ({'bearer_token': 'old-token', 'ssl_ca_cert': CA}, ('bearer_token',)),
    ({'bearer_token': TOKEN, 'ssl_ca_cert': 'old CA'}, ('ssl_ca_cert',)),
    ({'bearer_token': 'old-token', 'ssl_ca_cert': 'old CA'},
     ('bearer_token', 'ssl_ca_cert')),
    # A VIM without a CA, or with the one Tacker writes as 'None'.
    ({'bearer_token': TOKEN}, ('ssl_ca_cert',)),
    ({'bearer_token': TOKEN, 'ssl_ca_cert': 'None'}, ('ssl_ca_cert',)),
    # Changed by hand to user and password: the token replaces them.
    ({'username': 'admin', 'password': 'pw', 'ssl_ca_cert': CA},
     ('bearer_token',)),
    # Unreadable (its key gone from Barbican): everything is replaced.
    (None, ('bearer_token', 'ssl_ca_cert')),
])
def test_changed_credentials(stored, changed):
    assert tacker_compat.changed_credentials(stored, TOKEN, CA) == changed


@pytest.mark.parametrize('stored_ca, cluster_ca, changed', [
    (None, None, ()),
    ('None', None, ()),
    ('', None, ()),
    (None, '', ()),
    (CA, None, ('ssl_ca_cert',)),
    (CA, CA + '\n', ('ssl_ca_cert',)),  # not the same bytes
])
def test_an_absent_ca_is_absent_however_tacker_wrote_it(stored_ca,
                                                        cluster_ca, changed):
    stored = {'bearer_token': TOKEN, 'ssl_ca_cert': stored_ca}
    assert tacker_compat.changed_credentials(stored, TOKEN,
                                             cluster_ca) == changed
