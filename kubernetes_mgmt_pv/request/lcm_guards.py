"""Requests of LCM operations the driver does not carry out (change
external connectivity, change current package) that would change the
Kubernetes cluster under it: refused in their ``_start`` hook, before
Tacker changes anything.

Pure functions of plain facts: the k8s_cluster_installation_param in
effect (None: the features are off, nothing to guard) and the instance's
VNFCs as (VDU id, CP descriptor ids).
"""

from kubernetes_mgmt_pv import exceptions

# The CPs each part of k8s_cluster_installation_param names.
_NAMED_CPS = (('master_node', ('ssh_cp_name', 'nic_cp_name',
                               'cluster_cp_name')),
              ('worker_node', ('ssh_cp_name', 'nic_cp_name')),
              ('storage_server', ('ssh_cp_name', 'nic_cp_name')))


def named_cps(root):
    """The CP descriptor ids the parameters name: the nodes' SSH and
    cluster ports, the API server's VIP port, the NFS server's CPs."""
    root = root if isinstance(root, dict) else {}
    names = set()
    for role, keys in _NAMED_CPS:
        node = root.get(role)
        if isinstance(node, dict):
            names.update(node.get(key) for key in keys)
    registrations = root.get('pv_registration_params')
    for item in registrations if isinstance(registrations, list) else ():
        if isinstance(item, dict):
            names.add(item.get('nfs_server_cp'))
    return {name for name in names if isinstance(name, str) and name}


def cluster_parts(root, vnfcs):
    """({CP: its VDU, None when no VNFC has it}, {VDU}) of the cluster: the
    VDUs whose VNFCs have a CP the parameters name, and every CP of them
    (a second port of a Worker is the cluster's too)."""
    named = named_cps(root)
    vdus = {vdu for vdu, cps in vnfcs if named & set(cps)}
    parts = dict.fromkeys(named)
    for vdu, cps in vnfcs:
        if vdu in vdus:
            parts.update(dict.fromkeys(cps, vdu))
    return parts, vdus


def connection_point_problems(touched, root, vnfcs):
    """(JSON path, reason) of each (JSON path, CP descriptor id) of
    ``touched`` that is a CP of the cluster: Tacker would replace that
    port of the cluster's VMs, and with it addresses the cluster, etcd,
    haproxy, the NFS exports and the Kubernetes VIM hold."""
    cps, _ = cluster_parts(root, vnfcs)
    return [(path, '%s is a connection point of the Kubernetes cluster%s: '
                   'replacing its port changes addresses the cluster and '
                   'its Kubernetes VIM hold, which this driver does not '
                   'follow' % (cp, ' (VDU %s)' % cps[cp] if cps[cp] else ''))
            for path, cp in touched if cp in cps]


def replaced_vdu_problems(targets, root, vnfcs):
    """(JSON path, reason) of each (JSON path, VDU id) of ``targets``, the
    VDUs whose servers a change of the current package replaces, that is
    the cluster's: new servers would come up outside the cluster."""
    _, vdus = cluster_parts(root, vnfcs)
    return [(path, 'VDU %s runs the Kubernetes cluster: new servers '
                   'would come up outside it; the driver upgrades the '
                   'cluster in place, give "vdu_params": []' % vdu)
            for path, vdu in targets if vdu in vdus]


def refuse(problems):
    """Raise RequestRefused naming every problem, if there is one."""
    if problems:
        raise exceptions.RequestRefused(problems)
