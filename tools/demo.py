#!/usr/bin/env python3
"""The main job: a Kubernetes cluster with persistent volumes, end to end,
locally.

Brings up a storage server (with a Cinder-like volume), one Master and two
Workers as real SSH hosts in network namespaces, then drives the driver's
hooks exactly as Tacker calls them: instantiate_end (the sample install
script builds the cluster on kubeadm stand-ins, the VIM is registered,
then the storage server, NFS clients and PVs), a heal of the storage
server, a heal of the entire cluster and terminate_end. After each step it
prints what an operator would check (kubectl get nodes, the VIM, df -h,
sudo exportfs -v, kubectl get pv). Everything is torn down at the end; the
exit status tells whether every step succeeded.

Run it with ``make demo`` (which installs what it needs first), as root.
"""

import logging
import sys
import time

from testbed import hosts
from testbed import virtual_vnf


def banner(text):
    print('\n==> %s' % text, flush=True)


def show(host, title, command):
    print('--- %s on %s (%s) ---' % (title, host.name, host.ip))
    print(host.run(command).stdout.rstrip(), flush=True)


def cluster_checks(cluster):
    master = cluster.nodes('master')[0]
    print('--- kubectl get nodes on %s (%s) ---' % (master.name, master.ip))
    print(virtual_vnf.kubectl(master, 'get', 'nodes').rstrip())
    for name, access in cluster.vims.items():
        print('--- VIM %s: %s (ServiceAccount token, cluster CA) ---'
              % (name, access.url), flush=True)
    table = virtual_vnf.kubectl(master, 'get', 'nodes', '--no-headers')
    if len(table.splitlines()) != 3 or any(
            line.split()[1] != 'Ready' for line in table.splitlines()):
        raise SystemExit('Nodes not all Ready:\n%s' % table)
    if len(cluster.vims) != 1:
        raise SystemExit('expected one registered VIM, got %s'
                         % sorted(cluster.vims))


def operator_checks(cluster):
    storage, master = cluster.host('storage'), cluster.nodes('master')[0]
    show(storage, 'df -h', 'df -h | grep -E "^Filesystem|/volume"')
    show(storage, 'sudo exportfs -v', 'exportfs -v')
    print('--- kubectl get pv on %s (%s) ---' % (master.name, master.ip))
    print(virtual_vnf.kubectl(master, 'get', 'pv').rstrip(), flush=True)


def expect_pvs_available(cluster):
    storage_ip = cluster.host('storage').ip
    volumes = virtual_vnf.persistent_volumes(cluster.nodes('master')[0])
    bad = {name: (v['status'].get('phase'), v['spec']['nfs']['server'])
           for name, v in volumes.items()
           if (v['status'].get('phase'), v['spec']['nfs']['server'])
           != ('Available', storage_ip)}
    if len(volumes) != 3 or bad:
        raise SystemExit('PersistentVolumes not as expected: %s' % volumes)


def step(title, action):
    banner(title)
    started = time.monotonic()
    action()
    print('    done in %.1fs' % (time.monotonic() - started), flush=True)


def _quiet_logs():
    logging.basicConfig(level=logging.WARNING, format='    %(message)s')
    logging.getLogger('kubernetes_mgmt_pv.step_report').setLevel(logging.INFO)
    # The test hosts share one host key that the driver accepts with a
    # warning on every login (host_key_policy = warn): not news here.
    logging.getLogger(
        'kubernetes_mgmt_pv.remote.ssh_client').setLevel(logging.ERROR)


def _show(cluster):
    for host in cluster.testbed.hosts.values():
        print('    %-8s %-7s %s' % (host.name, host.role, host.ip))
    print('    exports of the request (nfs_server_setup_params):')
    for export in cluster.additional_params()[
            'k8s_cluster_installation_param']['storage_server'][
            'nfs_server_setup_params']:
        print('      %s -> export_to %s' % (export['export_dir'],
                                            export['export_to']))


def _heals(cluster):
    storage_vnfc = cluster.vnfcs['storage'].vnfc_id

    def heal_storage():
        cluster.heal_start([storage_vnfc])
        print('    heal_start deleted the PVs; Heat re-creates the '
              'storage server VM with a new address')
        cluster.replace_host('storage', same_ip=False)
        cluster.heal_end([storage_vnfc])
    step('heal of the storage server (SOL002 vnfcInstanceId)',
         heal_storage)
    operator_checks(cluster)
    expect_pvs_available(cluster)

    def heal_everything():
        cluster.heal_start()
        print('    heal_start deleted the PVs and the VIM; Heat '
              're-creates every VM')
        cluster.replace_everything()
        cluster.heal_end()
    step('heal of the entire cluster (SOL003, no vnfcInstanceId)',
         heal_everything)
    cluster_checks(cluster)
    operator_checks(cluster)
    expect_pvs_available(cluster)


def main():
    reason = hosts.require_testbed()
    if reason:
        print('demo: cannot build the test hosts here: %s' % reason,
              file=sys.stderr)
        return 2
    _quiet_logs()
    virtual_vnf.use_test_options()

    banner('Bringing up storage server + 1 Master + 2 Workers '
           '(network namespaces, real sshd, loop-device volume)')
    with virtual_vnf.VirtualCluster(masters=1, workers=2, volumes=1,
                                    install_cluster=True,
                                    **virtual_vnf.STOCK_IMAGE) as cluster:
        _show(cluster)
        step('instantiate_end: Kubernetes cluster, VIM, storage server, '
             'NFS clients, PVs', cluster.instantiate_end)
        cluster_checks(cluster)
        operator_checks(cluster)
        expect_pvs_available(cluster)
        _heals(cluster)

        def terminate():
            cluster.terminate_end()
            if cluster.vims:
                raise SystemExit('the VIM survived terminate_end')
            print('    the VIM is deleted')
        step('terminate_end', terminate)

        banner('Tearing down the test hosts')
    print('\nDemo finished: every hook succeeded.')
    return 0


if __name__ == '__main__':
    sys.exit(main())
