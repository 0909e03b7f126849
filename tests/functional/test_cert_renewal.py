"""Certificate renewal end to end: kubeadm's certificates on a Master
(real x509 files of the kubeadm stand-in, used by its real etcd) brought
near their expiry, then a hook renews them. The single-Master tests share
one cluster, in file order; the HA test has a cluster of its own."""

import datetime

import pytest

from kubernetes_mgmt_pv import exceptions
from testbed import faults
from testbed import standins
from testbed import virtual_vnf
from tests.functional.conftest import skip_without_testbed


def installed(masters):
    skip_without_testbed()
    with virtual_vnf.VirtualCluster(masters=masters, workers=1, volumes=1,
                                    install_cluster=True) as virtual:
        virtual.instantiate_end()
        yield virtual


@pytest.fixture(scope='module')
def simple():
    yield from installed(1)


@pytest.fixture
def ha():
    yield from installed(3)


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


def renewed_for_a_year(master):
    now = datetime.datetime.utcnow()
    return all(datetime.timedelta(days=364) < date - now <
               datetime.timedelta(days=366)
               for date in standins.certificate_expiry(master).values())


def test_a_renewal_cut_off_before_its_restart_is_finished_by_the_next_hook(
        simple):
    master = simple.host('master1')
    standins.expire_certificates(master, 10)
    pids = static_pod_pids(master)
    with faults.Faults() as injected:
        fault = injected.command(master, 'kubeadm', action=faults.DROP_AFTER,
                                 match='certs renew')
        with pytest.raises(exceptions.MgmtDriverError) as raised:
            simple.instantiate_end()
        assert fault.dropped, str(raised.value)
    assert master.ip in str(raised.value)
    # Renewed on disk; the control plane still runs on the old ones.
    assert renewed_for_a_year(master)
    assert static_pod_pids(master) == pids
    calls = certs_calls(simple, 'master1')

    simple.instantiate_end()

    # The next hook restarted that Master's control plane, and renewed
    # nothing again.
    assert certs_calls(simple, 'master1')[len(calls):] == [
        'certs check-expiration']
    restarted = static_pod_pids(master)
    assert len(restarted) == 2 and not set(restarted) & set(pids)
    # The Worker the scale-out above added is a Node too.
    assert virtual_vnf.node_readiness(master) == dict.fromkeys(
        ['master1', 'worker1', 'worker2'], 'True')
    # Finished: a further hook restarts nothing.
    simple.instantiate_end()
    assert static_pod_pids(master) == restarted


def test_a_restart_failed_on_the_second_master_is_finished_there_alone(ha):
    names = ('master1', 'master2', 'master3')
    for name in names:
        standins.expire_certificates(ha.host(name), 10)
    master2 = ha.host('master2')
    with faults.Faults() as injected:
        fault = injected.command(master2, 'crictl', match='rmp')
        with pytest.raises(exceptions.MgmtDriverError) as raised:
            ha.instantiate_end()
        assert fault.hits, str(raised.value)
    assert master2.ip in str(raised.value)
    assert 'control plane restart' in str(raised.value)
    assert [renewed_for_a_year(ha.host(name)) for name in names] == [
        True, True, False]
    pids = {name: static_pod_pids(ha.host(name)) for name in names}
    calls = {name: len(certs_calls(ha, name)) for name in names}

    ha.instantiate_end()

    assert {name: certs_calls(ha, name)[calls[name]:] for name in names} == {
        'master1': ['certs check-expiration'],
        'master2': ['certs check-expiration'],
        'master3': ['certs check-expiration', 'certs renew all',
                    'certs check-expiration']}
    restarted = {name: set(static_pod_pids(ha.host(name))) & set(pids[name])
                 == set() for name in names}
    assert restarted == {'master1': False, 'master2': True, 'master3': True}
    assert all(renewed_for_a_year(ha.host(name)) for name in names)
