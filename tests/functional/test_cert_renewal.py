"""Certificate renewal end to end: kubeadm's certificates on a Master
(real x509 files of the kubeadm stand-in, used by its real etcd) brought
near their expiry, then a hook renews them."""

import datetime

import pytest

from testbed import standins
from testbed import virtual_vnf
from tests.functional.conftest import skip_without_testbed


@pytest.fixture
def simple():
    skip_without_testbed()
    with virtual_vnf.VirtualCluster(masters=1, workers=1, volumes=1,
                                    install_cluster=True) as virtual:
        virtual.instantiate_end()
        yield virtual


def certs_calls(virtual, name):
    return [' '.join(argv[1:]) for argv in virtual.kubeadm_calls(name)
            if argv[1] == 'certs']


def static_pod_pids(master):
    """The PIDs of the Master's API server and etcd "static pods"."""
    return master.run('cat %s /run/etcd.pid' %
                      standins.API_SERVER_PID).stdout.split()


def test_a_scale_out_renews_certificates_expiring_in_10_days(simple):
    master = simple.host('master1')
    # Fresh certificates (a year) are only read at instantiate.
    assert certs_calls(simple, 'master1') == ['certs check-expiration']
    standins.expire_certificates(master, 10)
    now = datetime.datetime.utcnow()
    soon = standins.certificate_expiry(master)
    assert soon and all(
        datetime.timedelta(days=9) < date - now < datetime.timedelta(days=11)
        for date in soon.values())
    pids = static_pod_pids(master)

    new = simple.add_node('worker')
    simple.scale_end([new])

    assert certs_calls(simple, 'master1')[1:] == [
        'certs check-expiration', 'certs renew all',
        'certs check-expiration']
    renewed = standins.certificate_expiry(master)
    assert renewed.keys() == soon.keys()
    assert all(datetime.timedelta(days=364) < date - now <
               datetime.timedelta(days=366) for date in renewed.values())
    # The control plane was restarted on the renewed certificates, and
    # its API answers: the new Worker is a Ready Node.
    after = static_pod_pids(master)
    assert len(after) == 2 and not set(after) & set(pids)
    assert virtual_vnf.node_readiness(master) == dict.fromkeys(
        ['master1', 'worker1', 'worker2'], 'True')
    # The login user's copy of admin.conf follows admin.conf.
    assert master.run('cmp /etc/kubernetes/admin.conf '
                      '/home/ubuntu/.kube/config',
                      check=False).returncode == 0
    # A further hook finds them fresh and leaves them.
    simple.instantiate_end()
    assert certs_calls(simple, 'master1')[4:] == ['certs check-expiration']
