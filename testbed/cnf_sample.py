"""The sample CNF (samples/cnf_with_pv) on a testbed cluster: its v1 or
v2 requests on a given VIM, node agents on the cluster's Workers, and the
data path of its pod (a file written through the pod's mount, found on
the Storage server). For tests/tacker_rest and tools/demo_tacker.py."""

import contextlib
import json
import os

from testbed import node_agent

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SAMPLE = os.path.join(ROOT, 'samples', 'cnf_with_pv')
REQUESTS = os.path.join(ROOT, 'samples', 'requests-cnf-%s')
DEPLOYMENT, CLAIM, VOLUME = 'web', 'web-data', 'nfs-pv1'


def request(name, version='v2'):
    """The sample request body ``name`` (create.json, terminate.json) of
    Tacker's ``version`` (v1 or v2) of the VNF LCM API."""
    with open(os.path.join(REQUESTS % version, name)) as handle:
        return json.load(handle)


def create_request(vnfd_id, version='v2'):
    """The sample's create request for the VNFD ``vnfd_id``."""
    return dict(request('create.json', version), vnfdId=vnfd_id)


def instantiate_request(vim, version='v2', name='instantiate.json'):
    """The sample's instantiate request ``name`` on ``vim``: in v2 the
    entry "vim1" of vimConnectionInfo is ``vim``; in v1 the list's one
    entry keeps its "id" and takes the fields of ``vim``."""
    body = request(name, version)
    if version == 'v2':
        body['vimConnectionInfo'] = {'vim1': vim}
    else:
        entry, = body['vimConnectionInfo']
        body['vimConnectionInfo'] = [dict(entry, **vim)]
    return body


def workers(hosts, kube):
    """{Node name: Worker host} for the Workers (of ``hosts``) that are
    Nodes of ``kube``."""
    return nodes(hosts, kube, roles=('worker',))


def nodes(hosts, kube, roles=('master', 'worker')):
    """{Node name: host} for the hosts of ``roles`` (of ``hosts``) that
    are Nodes of ``kube``, matched by InternalIP (the driver renames Nodes
    whose VMs share a host name)."""
    by_address = {}
    for node in kube.objects('node'):
        for address in node['status'].get('addresses') or []:
            if address.get('type') == 'InternalIP':
                by_address[address['address']] = node['metadata']['name']
    return {by_address.get(host.cluster_ip) or by_address[host.ip]: host
            for host in hosts if host.role in roles and (
                host.ip in by_address or host.cluster_ip in by_address)}


@contextlib.contextmanager
def node_agents(kube, nodes):
    """A node agent on each host of ``nodes`` ({Node name: host})."""
    with contextlib.ExitStack() as stack:
        yield [stack.enter_context(node_agent.NodeAgent(kube, host, name))
               for name, host in nodes.items()]


def running_pod(kube):
    """The Deployment's one pod, which must be Running."""
    pods = [pod for pod in kube.objects('pod')
            if pod['metadata']['name'].startswith(DEPLOYMENT + '-')]
    assert [pod['status']['phase'] for pod in pods] == ['Running'], pods
    return pods[0]


def write_through_the_pod(kube, nodes, text):
    """Write "<pod name>.txt" through the pod's mount on its Worker
    (``nodes``: {Node name: host}; a new file: testbed/nfs_fuse.py cannot
    rewrite one); returns the pod and the file's path on the Storage
    server."""
    pod = running_pod(kube)
    name = pod['metadata']['name'] + '.txt'
    mount = node_agent.volume_path(pod['metadata']['uid'], VOLUME)
    nodes[pod['spec']['nodeName']].write_file(f'{mount}/{name}', text)
    export = kube.get('pv', VOLUME)['spec']['nfs']['path']
    return pod, f'{export}/{name}'


def release_volume(kube, kubectl):
    """Make nfs-pv1 Available again once the CNF's claim is gone, as an
    administrator reuses a Retained PV: remove its claimRef with
    ``kubectl`` (a function running kubectl on a Master)."""
    if (kube.get('pv', VOLUME) or {}).get('spec', {}).get('claimRef'):
        kubectl('patch', 'pv', VOLUME, '--type=json', '-p',
                '[{"op": "remove", "path": "/spec/claimRef"}]')
