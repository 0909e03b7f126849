"""The checks of the user guide's lifecycle, shared by its v1 and v2 runs.

After each operation an operator checks ``df -h`` and ``sudo exportfs
-v`` on the Storage server (over SSH), ``kubectl get pv`` and ``kubectl
get nodes`` on a Master, and the Kubernetes VIM the driver registers.
"""

import re

import pytest

PV_NAMES = ('nfs-pv1', 'nfs-pv2', 'nfs-pv3')
EXPORTS = ('/volume/nfs/pv1', '/volume/nfs/pv2', '/volume/nfs/pv3')
K8S_VIM = 'kubernetes_vim'  # vim_name of the sample request


class Session(object):
    """What the steps learned, and which of them passed."""

    def __init__(self):
        self.done = set()
        self.nodes = {}  # step -> {Node's InternalIP: Ready?}
        self.ops = {}  # step -> operation occurrence

    def need(self, *steps):
        missing = [step for step in steps if step not in self.done]
        if missing:
            pytest.skip('needs the earlier step(s) %s' % ', '.join(missing))


def ready_nodes(lab):
    """{InternalIP: Ready?} of the Nodes: the VMs' host names are not
    the testbed's (Nova gives group members one name; the driver renames
    them)."""
    ready = {}
    for node in lab.nodes().values():
        status = node.get('status', {})
        conditions = {c['type']: c['status']
                      for c in status.get('conditions', [])}
        address, = [a['address'] for a in status.get('addresses', [])
                    if a['type'] == 'InternalIP']
        ready[address] = conditions.get('Ready') == 'True'
    return ready


def record_nodes(lab, s, step):
    """kubectl get nodes, kept for the cluster-half checks at the end."""
    try:
        s.nodes[step] = ready_nodes(lab)
    except Exception as error:  # noqa: BLE001 - checked at the end
        s.nodes[step] = error
    return s.nodes[step]


def nodes_at(s, step):
    """The Nodes recorded after ``step`` (fails if kubectl failed)."""
    s.need(step)
    nodes = s.nodes.get(step)
    if isinstance(nodes, Exception):
        pytest.fail('kubectl get nodes failed after %s: %s' % (step, nodes))
    return nodes


def check_storage_and_pvs(lab, instance_id):
    """The user guide's checks after instantiate and after each heal."""
    checks = lab.storage_checks(instance_id)
    # df -h: the Cinder volume (/dev/vdb) is mounted on /volume.
    assert re.search(r'^/dev/vdb\s.*\s/volume$', checks['df'], re.M), \
        checks['df']
    # sudo exportfs -v: every export_dir of the request.
    for export in EXPORTS:
        assert re.search(r'^%s\s' % re.escape(export), checks['exportfs'],
                         re.M), checks['exportfs']
    # kubectl get pv: every PV Available, at the Storage server's address.
    listing = lab.kubectl('get', 'pv')
    volumes = lab.persistent_volumes()
    for name in PV_NAMES:
        assert name in listing
        assert volumes[name]['status']['phase'] == 'Available', listing
        assert volumes[name]['spec']['nfs']['server'] == checks['address']
    return checks


def k8s_vims(lab):
    return [vim for vim in lab.vims() if vim['type'] == 'kubernetes']
