"""The sample CNF's flavour "dynamic" (samples/cnf_with_pv: the
StatefulSet db, each pod's claim from the cluster's default StorageClass)
on a testbed cluster built from samples/requests-v2/instantiate_simple.json
(its class nfs-dynamic provisions in /volume/nfs/dynamic): what the claims
need there in a real cluster's place (nfs-ganesha on the Storage server,
csi-driver-nfs's controller stand-in, node agents in the Workers'
kubelets' place), and the data path (a file each pod writes, in its
claim's directory on the Storage server). For tests/tacker_rest and
tools/demo_tacker.py.
"""

import contextlib

from testbed import cnf_sample
from testbed import csi_nfs
from testbed import nfs
from testbed import node_agent

STATEFUL_SET, TEMPLATE = 'db', 'data'  # the VDU "db", its claim template
NAMESPACE = 'default'
CLASS, EXPORT = 'nfs-dynamic', '/volume/nfs/dynamic'  # the sample's class
INSTANTIATE, SCALE_OUT = 'instantiate_dynamic.json', 'scale_out_dynamic.json'


def pod_name(ordinal):
    return f'{STATEFUL_SET}-{ordinal}'


def claim_name(ordinal):
    """The claim the StatefulSet made for its pod ``ordinal``."""
    return f'{TEMPLATE}-{STATEFUL_SET}-{ordinal}'


def claim_dir(ordinal):
    """The claim's directory on the Storage server (the class's subDir
    <namespace>/<claim>)."""
    return f'{EXPORT}/{NAMESPACE}/{claim_name(ordinal)}'


@contextlib.contextmanager
def provisioning(lab, instance_id):
    """ganesha on the Storage server of the cluster VNF ``instance_id``,
    csi-driver-nfs's controller (acting for its pod, on whichever Node it
    runs) and a node agent on every Worker, until the block ends."""
    kube = lab.engine.kubes[lab.stack(instance_id).id]
    storage = lab.host_at(lab.cp_address(instance_id))
    hosts = lab.engine.testbed.hosts.values()
    nodes = cnf_sample.nodes(hosts, kube)
    nfs.start_ganesha(storage)
    try:
        with csi_nfs.Provisioner(kube, nodes.get), \
                cnf_sample.node_agents(kube, cnf_sample.workers(hosts, kube)):
            yield
    finally:
        nfs.stop_ganesha(storage)


def running_pods(kube):
    """{ordinal: pod} of the StatefulSet's pods that are Running."""
    prefix = STATEFUL_SET + '-'
    return {int(pod['metadata']['name'][len(prefix):]): pod
            for pod in kube.objects('pod', NAMESPACE)
            if pod['metadata']['name'].startswith(prefix) and
            pod['metadata']['name'][len(prefix):].isdigit() and
            pod['status'].get('phase') == 'Running'}


def write_through_the_pod(kube, nodes, ordinal, text):
    """Write "<pod name>.txt" through the CSI mount of pod ``ordinal`` on
    its Worker (``nodes``: {Node name: host}); returns the file's path on
    the Storage server, in the claim's directory."""
    pod = running_pods(kube)[ordinal]
    volume = kube.get('pvc', claim_name(ordinal), NAMESPACE)['spec'][
        'volumeName']
    mount = node_agent.volume_path(pod['metadata']['uid'], volume,
                                   node_agent.CSI)
    name = pod['metadata']['name'] + '.txt'
    nodes[pod['spec']['nodeName']].write_file(f'{mount}/{name}', text)
    return f'{claim_dir(ordinal)}/{name}'
