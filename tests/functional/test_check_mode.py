"""``kubernetes-mgmt-pv plan`` on real hosts: on a configured cluster it
says "no change" for every host, a pending change is named on its host,
and either way every host is byte-identical afterwards."""

import json
import shlex

import pytest

from kubernetes_mgmt_pv.doors import cli
from testbed import virtual_vnf
from tests.functional.conftest import skip_without_testbed

# What the driver manages on the VMs, and what would show a change it
# made: files (hashed), mounts, exports, daemons, packages, kubeadm runs.
MANAGED = ('/etc/exports', '/etc/fstab', '/etc/hosts', '/etc/hostname',
           '/etc/haproxy', '/etc/keepalived', '/etc/kubernetes',
           '/var/lib/kubelet', '/usr/local/lib/kubernetes-mgmt-pv',
           '/etc/cloud/cloud.cfg.d', '/var/lib/dpkg/status',
           '/var/log/dpkg.log', '/var/log/kubeadm-standin.log')
STATE = ('for path in %s; do if [ -e "$path" ]; then '
         'find "$path" -type f -exec sha256sum {} +; fi; done | sort; '
         'findmnt -rn -o TARGET,SOURCE | sort; '
         'exportfs -v 2>/dev/null || true; '
         'for root in /volume*; do [ -d "$root" ] && '
         'find "$root" -maxdepth 3 -printf "%%p %%u:%%g %%m\\n"; done | '
         'sort; pidof haproxy keepalived || true'
         % ' '.join(shlex.quote(path) for path in MANAGED))


@pytest.fixture
def configured():
    """Storage, 2 Masters (HA: haproxy, keepalived, etcd) and a Worker,
    the cluster installed and the PVs registered by the driver."""
    skip_without_testbed()
    with virtual_vnf.VirtualCluster(masters=2, workers=1, volumes=1,
                                    install_cluster=True,
                                    **virtual_vnf.STOCK_IMAGE) as virtual:
        virtual.instantiate_end()
        yield virtual


def host_states(virtual):
    states = {name: host.run(STATE).stdout
              for name, host in virtual.testbed.hosts.items()}
    for name, state in states.items():  # the files are really looked at
        assert ' /etc/hosts\n' in state and ' /etc/fstab\n' in state, name
        if name.startswith('master') and virtual.master_count > 1:
            assert ' /etc/haproxy/haproxy.cfg\n' in state, name
    states['PersistentVolumes'] = {
        name: volume['metadata'].get('resourceVersion')
        for name, volume in virtual_vnf.persistent_volumes(
            virtual.host('master1')).items()}
    return states


def run_plan(virtual, tmp_path, capsys):
    """``plan`` as an operator runs it: (exit status, {host: changes})."""
    request, vim = tmp_path / 'request.json', tmp_path / 'vim.json'
    request.write_text(json.dumps({
        'flavourId': 'simple',
        'additionalParams': virtual.additional_params()}))
    vim.write_text(json.dumps(virtual.openstack.access_info()))
    capsys.readouterr()
    status = cli.main(['plan', '--package', virtual.package_dir,
                       '--request', str(request), '--vim', str(vim),
                       '--stack-id', virtual.stack_id, '--format', 'json'])
    output = capsys.readouterr()
    assert virtual.openstack.password not in output.out + output.err
    hosts = json.loads(output.out)['hosts'] if output.out else []
    return status, {entry['host']: entry['changes'] for entry in hosts}


def test_a_configured_cluster_plans_no_change_and_stays_identical(
        configured, tmp_path, capsys):
    before = host_states(configured)
    status, changes = run_plan(configured, tmp_path, capsys)
    assert (status, changes) == (0, {
        host.ip: [] for host in configured.testbed.hosts.values()})
    assert host_states(configured) == before


def test_pending_changes_are_named_on_their_host(configured, tmp_path,
                                                 capsys):
    """A new Worker not joined yet (a scale-out whose scale_end did not
    run) and an export an administrator took back: the plan names both,
    changes nothing, and once instantiate_end ran again has none left."""
    storage = configured.host('storage')
    export_dir = configured.export_dirs()[0]
    storage.run('exportfs -u %s:%s' % (configured.testbed.subnet,
                                       shlex.quote(export_dir)))
    worker = configured.add_node('worker')
    before = host_states(configured)
    status, changes = run_plan(configured, tmp_path, capsys)
    assert status == cli.CHANGES_PENDING
    assert changes[storage.ip] == ['exportfs -ra']
    assert 'join the cluster as a Worker' in changes[worker.ip]
    assert 'install nfs-common' in changes[worker.ip]
    for host in configured.nodes():
        if host is not worker:  # the others only learn its name
            assert changes[host.ip] == ['update /etc/hosts'], host.name
    assert host_states(configured) == before

    configured.instantiate_end()
    assert run_plan(configured, tmp_path, capsys)[0] == 0
