"""Reading kubeadm certs check-expiration and the renewal decision."""

import datetime

import pytest

from kubernetes_mgmt_pv.cluster import cert_renewal
from kubernetes_mgmt_pv.cluster import certificates
from kubernetes_mgmt_pv import exceptions
from kubernetes_mgmt_pv.remote import facts

UTC = datetime.timezone.utc
NOW = datetime.datetime(2026, 11, 26, 12, 0, tzinfo=UTC)

# As kubeadm 1.35 prints it (one certificate missing, one expired).
KUBEADM_OUTPUT = """\
[check-expiration] Reading configuration from the cluster...
[check-expiration] FYI: You can look at this config file with \
'kubectl -n kube-system get cm kubeadm-config -o yaml'

CERTIFICATE                EXPIRES                  RESIDUAL TIME   \
CERTIFICATE AUTHORITY   EXTERNALLY MANAGED
admin.conf                 Nov 20, 2027 09:15 UTC   358d            \
ca                      no
apiserver                  Dec 06, 2026 09:15 UTC   9d              \
ca                      no
apiserver-etcd-client      Nov 20, 2027 09:15 UTC   358d            \
etcd-ca                 no
etcd-server                Nov 01, 2026 09:15 UTC   <invalid>       \
etcd-ca                 no
!MISSING! front-proxy-client
super-admin.conf           Nov 20, 2027 09:15 UTC   358d            \
                        no

CERTIFICATE AUTHORITY   EXPIRES                  RESIDUAL TIME   \
EXTERNALLY MANAGED
ca                      Nov 18, 2035 09:15 UTC   8y              no
etcd-ca                 Nov 18, 2035 09:15 UTC   8y              no
"""


def at(text):
    return datetime.datetime.strptime(text, '%Y-%m-%d %H:%M').replace(
        tzinfo=UTC)


def test_kubeadms_table_is_read_leaves_and_authorities_apart():
    expiry = certificates.parse_expiration(KUBEADM_OUTPUT)
    assert expiry.leaves == {
        'admin.conf': at('2027-11-20 09:15'),
        'apiserver': at('2026-12-06 09:15'),
        'apiserver-etcd-client': at('2027-11-20 09:15'),
        'etcd-server': at('2026-11-01 09:15'),
        'super-admin.conf': at('2027-11-20 09:15')}
    assert expiry.authorities == {'ca': at('2035-11-18 09:15'),
                                  'etcd-ca': at('2035-11-18 09:15')}
    assert expiry.earliest() == ('etcd-server', at('2026-11-01 09:15'))


@pytest.mark.parametrize('text', [
    '',
    'error: unknown command "certs" for "kubeadm"\n',
    # rows whose fields are not kubeadm's are skipped, not trusted
    'apiserver  Feb 30, 2027 09:15 UTC  9d  ca  no\n',
    'apiserver  Dec 06, 2026 09:15 CET  9d  ca  no\n',
    'api server  Dec 06, 2026 09:15 UTC  9d  ca  no\n',
    '$(reboot)  Dec 06, 2026 09:15 UTC  9d  ca  no\n',
    'apiserver  Dec 06, 2026 09:15 UTC  9d  ca  no; rm -rf /\n',
    'x' * 300 + '  Dec 06, 2026 09:15 UTC  9d  ca  no\n',
])
def test_output_that_is_not_kubeadms_lists_nothing(text):
    assert certificates.parse_expiration(text) is None


def test_the_output_read_is_capped():
    row = 'cert-%d  Dec 06, 2026 09:15 UTC  9d  ca  no\n'
    many = ''.join(row % number for number in range(1000))
    assert len(certificates.parse_expiration(many).leaves) == \
        certificates.MAX_ROWS
    late = ' ' * certificates.MAX_OUTPUT_CHARS + '\n' + row % 1
    assert certificates.parse_expiration(late) is None


def expiry(**leaves):
    return certificates.Expiry(
        leaves={name.replace('_', '-'): at(date)
                for name, date in leaves.items()},
        authorities={'ca': at('2035-11-18 09:15')})


FRESH = expiry(apiserver='2027-11-20 09:15', etcd_server='2027-11-20 09:15')
IN_10_DAYS = expiry(apiserver='2027-11-20 09:15',
                    etcd_server='2026-12-06 12:00')
AT_LIMIT = expiry(apiserver='2027-01-25 12:00')  # exactly 60 days
AFTER_LIMIT = expiry(apiserver='2027-01-25 12:01')
EXPIRED = expiry(apiserver='2026-10-01 00:00')
NO_LEAVES = certificates.Expiry(leaves={}, authorities={
    'ca': at('2035-11-18 09:15')})


@pytest.mark.parametrize('expiries, days, renew, unknown', [
    ({'m1': FRESH, 'm2': FRESH}, 60, (), ()),
    ({'m1': FRESH, 'm2': IN_10_DAYS}, 60, ('m2',), ()),
    ({'m1': IN_10_DAYS, 'm2': FRESH, 'm3': IN_10_DAYS}, 60, ('m1', 'm3'),
     ()),
    ({'m1': AT_LIMIT}, 60, ('m1',), ()),
    ({'m1': AFTER_LIMIT}, 60, (), ()),
    ({'m1': EXPIRED}, 60, ('m1',), ()),
    ({'m1': IN_10_DAYS}, 9, (), ()),
    ({'m1': IN_10_DAYS}, 10, ('m1',), ()),
    ({'m1': EXPIRED}, 0, (), ()),  # 0: read, never renewed
    ({'m1': None, 'm2': IN_10_DAYS}, 60, ('m2',), ('m1',)),
    ({'m1': NO_LEAVES}, 60, (), ('m1',)),
    ({}, 60, (), ()),
])
def test_which_masters_renew(expiries, days, renew, unknown):
    plan = certificates.renewal_plan(expiries, NOW, days)
    assert plan.renew == renew
    assert plan.unknown == unknown
    assert set(plan.reasons) == set(renew)
    for address in renew:
        assert plan.reasons[address] == expiries[address].earliest()


@pytest.mark.parametrize('expiries, unfinished, renew, restart', [
    # Renewed on disk, not restarted: the dates alone say nothing is due.
    ({'m1': FRESH}, {'m1'}, (), ('m1',)),
    # The restart failed on the second of three: only it restarts; the
    # third, never reached, renews (which restarts it).
    ({'m1': FRESH, 'm2': FRESH, 'm3': IN_10_DAYS}, {'m2'}, ('m3',),
     ('m2',)),
    # Due again anyway: renewing restarts it, once.
    ({'m1': IN_10_DAYS}, {'m1'}, ('m1',), ()),
    # Unreadable dates do not hide an unfinished restart.
    ({'m1': None, 'm2': FRESH}, {'m1'}, (), ('m1',)),
    ({'m1': FRESH, 'm2': FRESH}, set(), (), ()),
])
def test_an_unfinished_renewal_restarts_its_control_plane(
        expiries, unfinished, renew, restart):
    plan = certificates.renewal_plan(expiries, NOW, 60, unfinished)
    assert (plan.renew, plan.restart) == (renew, restart)


def test_an_unfinished_renewal_restarts_even_with_renewal_off():
    plan = certificates.renewal_plan({'m1': EXPIRED}, NOW, 0, {'m1'})
    assert (plan.renew, plan.restart) == ((), ('m1',))


@pytest.mark.parametrize('stdout, unfinished', [
    (cert_renewal.UNFINISHED_LINE + '\n' + KUBEADM_OUTPUT, True),
    (KUBEADM_OUTPUT, False),
    (KUBEADM_OUTPUT + cert_renewal.UNFINISHED_LINE + '\n', False),
])
def test_the_expiry_read_tells_an_unfinished_renewal(stdout, unfinished):
    class Master(object):
        def run(self, argv, **kwargs):
            assert argv[-3:] == certificates.CHECK_ARGV
            assert cert_renewal.UNFINISHED_MARKER in argv[2]
            return facts.CommandResult(0, stdout.encode(), b'')

    expiry, found = cert_renewal.read_state(Master())
    assert found is unfinished
    assert expiry.earliest() == ('etcd-server', at('2026-11-01 09:15'))


class FakeKubectl(object):
    """Answers /readyz after ``failures`` refusals."""

    def __init__(self, failures):
        self.failures = failures
        self.calls = 0

    def run(self, args, check=True, timeout=None):
        assert args == ['get', '--raw', '/readyz'] and not check
        self.calls += 1
        ok = self.calls > self.failures
        return facts.CommandResult(0 if ok else 1, b'ok' if ok else b'',
                                   b'' if ok else b'connection refused')


class FakeClock(object):
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds


def test_the_api_wait_ends_when_the_api_server_answers():
    kubectl, clock = FakeKubectl(failures=3), FakeClock()
    cert_renewal.wait_for_api(kubectl, 60, clock=clock, sleep=clock.sleep)
    assert kubectl.calls == 4
    assert clock.now < 2


def test_the_api_wait_fails_at_its_timeout_naming_the_last_error():
    kubectl, clock = FakeKubectl(failures=10 ** 6), FakeClock()
    with pytest.raises(exceptions.ClusterInstallError,
                       match='within 30s.*connection refused'):
        cert_renewal.wait_for_api(kubectl, 30, clock=clock,
                                  sleep=clock.sleep)
    assert 30 <= clock.now < 33
