"""The checks of the user guide's lifecycle, shared by its v1 and v2 runs.

After each operation an operator checks ``df -h`` and ``sudo exportfs
-v`` on the Storage server (over SSH), ``kubectl get pv`` and ``kubectl
get nodes`` on a Master, and the Kubernetes VIM the driver registers.
"""

import json
import re

import pytest

from testbed import faults
from testbed import tacker_lab
from testbed import tacker_v2

STATE_KEY = 'kubernetesMgmtPv'  # the driver's state in v2 metadata
PV_NAMES = ('nfs-pv1', 'nfs-pv2', 'nfs-pv3')
EXPORTS = ('/volume/nfs/pv1', '/volume/nfs/pv2', '/volume/nfs/pv3')


def k8s_vim_name(instance_id):
    """The name of the cluster's Kubernetes VIM: the sample requests give
    no vim_name (a second VNF would collide), so it is the instance's."""
    return 'kubernetes_vim_%s' % instance_id


def check_v2_vims(lab, v2, s):
    """vimConnectionInfo: only the OpenStack VIM; the Kubernetes VIM in
    the registry, its id in metadata."""
    instance = v2.instance(s.instance_id)
    vims = instance['vimConnectionInfo']
    assert list(vims) == [tacker_v2.VIM_KEY]
    assert vims[tacker_v2.VIM_KEY]['vimId'] == s.vim_id
    assert vims[tacker_v2.VIM_KEY]['vimType'] == tacker_v2.VIM_TYPE
    registered = k8s_vims(lab)
    assert [v['name'] for v in registered] == [k8s_vim_name(s.instance_id)]
    saved = instance['metadata'][STATE_KEY]
    assert saved['vim']['id'] == registered[0]['id']
    assert 'password' not in repr(saved)
    return registered[0]


def check_volume_mounted_and_exported(lab, instance_id):
    """On the Storage server, ``df -h``: the Cinder volume (/dev/vdb) is
    mounted on /volume; ``sudo exportfs -v``: every export_dir of the
    request. Returns what they printed."""
    found = lab.storage_checks(instance_id)
    assert re.search(r'^/dev/vdb\s.*\s/volume$', found['df'], re.M), \
        found['df']
    for path in EXPORTS:
        assert re.search(r'^%s\s' % re.escape(path), found['exportfs'],
                         re.M), found['exportfs']
    return found


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
    checks = check_volume_mounted_and_exported(lab, instance_id)
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


def shown_passwords(document, path='$'):
    """JSON paths of ``document`` (a GET's JSON) showing a node password of
    the testbed: any value equal to one, except a user name (the test
    user's name is its password) and any key naming a password."""
    passwords = set(tacker_lab.PASSWORDS.values())
    found = []
    if isinstance(document, dict):
        for key, value in document.items():
            here = '%s.%s' % (path, key)
            if 'password' in str(key).lower() and value:
                found.append(here)
            elif key != 'username':
                found += shown_passwords(value, here)
    elif isinstance(document, list):
        for index, value in enumerate(document):
            found += shown_passwords(value, '%s[%d]' % (path, index))
    elif document in passwords:
        found.append(path)
    return found


def check_no_password_shown(client, base, instance_id, op_ids):
    """GET of the VNF instance and of each of its LCM operation
    occurrences (every one of ``op_ids`` among them) shows no node
    password: the requests logged in with key files only."""
    listed = [occ['id'] for occ in client.get(base + '/vnf_lcm_op_occs')
              if occ['vnfInstanceId'] == instance_id]
    assert set(op_ids) <= set(listed), (op_ids, listed)
    documents = {'vnf_instances/%s' % instance_id: client.get(
        '%s/vnf_instances/%s' % (base, instance_id))}
    for op_id in listed:
        documents['vnf_lcm_op_occs/%s' % op_id] = client.get(
            '%s/vnf_lcm_op_occs/%s' % (base, op_id))
    shown = {name: shown_passwords(document)
             for name, document in documents.items()}
    assert not any(shown.values()), {k: v for k, v in shown.items() if v}
    # Tacker shows the requests' additionalParams: they named key files.
    assert '"ssh_key"' in json.dumps(documents)


def _failing_new_workers(lab, injected):
    """Every Worker VM Heat boots from now on fails the query of its NFS
    client package: only the persistent-volume part asks, after the
    cluster part has installed (or joined) it and registered the VIM.
    Returns the boot hook, to remove."""
    def arm(host):
        if host.role == 'worker':
            injected.command(host, 'dpkg-query', match='nfs-common',
                             count=None)
    lab.engine.boot_hooks.append(arm)
    return arm


def fails_after_the_cluster_part(lab, v2, s, operation, body):
    """Run ``operation`` with the new Workers failing; its occurrence,
    FAILED_TEMP, and the hosts the fault hit (faults cleared again)."""
    with faults.Faults() as injected:
        hook = _failing_new_workers(lab, injected)
        try:
            occ = v2.lcm(s.instance_id, operation, body)
        finally:
            lab.engine.boot_hooks.remove(hook)
        assert occ['operationState'] == 'FAILED_TEMP', occ
        hit = [fault.host for fault in injected if fault.hits]
    assert hit, 'no Worker failed the injected dpkg-query'
    return occ, hit


def node_plugin_waited_for(lab, kube, address, since):
    """After request ``since`` of the cluster's API server ``kube`` the
    hook watched csi-driver-nfs's node plugin roll out (kubectl rollout
    status), and its pod runs on the Node at ``address``."""
    assert ('GET', '/apis/apps/v1/namespaces/kube-system/daemonsets/'
            'csi-nfs-node') in kube.request_log[since:]
    node, = [name for name, item in lab.nodes().items() if address in [
        a['address'] for a in item['status']['addresses']]]
    assert [pod['status']['phase'] for pod in kube.objects(
        'pod', 'kube-system') if pod['spec'].get('nodeName') == node and
        pod['metadata']['name'].startswith('csi-nfs-node-')] == ['Running']
