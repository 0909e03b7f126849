"""The sample CNF (samples/cnf_with_pv) on the cluster of a lifecycle
module's VNF instance (v1 or v2), through /vnflcm/v2: its Deployment's
pod mounts a claim bound to the driver's nfs-pv1, really (node agents on
the Workers, ganesha on the Storage server). It keeps the cluster's
Kubernetes VIM in use, so the cluster VNF's terminate and entire heal are
refused while it runs."""

import contextlib
import uuid

from testbed import cnf_sample
from testbed import nfs
from testbed import tacker_v2

DEPLOYMENT = cnf_sample.DEPLOYMENT


def _completed(occ, operation):
    assert occ['operation'] == operation
    assert occ['operationState'] == 'COMPLETED', occ.get('error')


def _check_the_data_path(lab, kube, storage, workers):
    """kubectl shows the pod Running and the claim Bound; a file written
    through the pod's mount on its Worker is on the Storage server."""
    table = lab.kubectl('get', 'deploy,pod,pvc')
    pod, stored = cnf_sample.write_through_the_pod(kube, workers,
                                                   'kept by the CNF\n')
    assert storage.read_file(stored) == 'kept by the CNF\n'
    claim = kube.get('pvc', cnf_sample.CLAIM)
    assert (claim['status']['phase'], claim['spec']['volumeName']) == (
        'Bound', cnf_sample.VOLUME), claim
    rows = {line.split()[0]: line.split() for line in table.splitlines()
            if line.strip()}
    assert rows['pod/' + pod['metadata']['name']][2] == 'Running', table
    assert rows['persistentvolumeclaim/' + cnf_sample.CLAIM][1:3] == [
        'Bound', cnf_sample.VOLUME], table
    return pod


@contextlib.contextmanager
def on_the_cluster(lab, v2, cluster_instance_id, tmp_path, vim):
    """The sample CNF instantiated on the cluster of the VNF instance
    ``cluster_instance_id`` through ``vim``, a vimConnectionInfo entry;
    yields its id, then terminates and deletes it (and makes nfs-pv1
    Available again, as an operator reuses a Retained PV), so that the
    cluster VNF can go."""
    kube = lab.engine.kubes[lab.stack(cluster_instance_id).id]
    storage = lab.host_at(lab.cp_address(cluster_instance_id))
    workers = cnf_sample.workers(lab.engine.testbed.hosts.values(), kube)
    assert workers, kube.objects('node')
    vnfd_id = str(uuid.uuid4())
    source = cnf_sample.source(str(tmp_path / 'cnf'), vnfd_id)
    lab.client.onboard_package(lab.zip_package(
        source, str(tmp_path / 'cnf.zip'), api='cnf'))
    nfs.start_ganesha(storage)
    occ = None
    with cnf_sample.node_agents(kube, workers):
        cnf_id = v2.create(vnfd_id, 'cnf-on-the-cluster')['id']
        try:
            occ = v2.lcm(cnf_id, 'instantiate',
                         cnf_sample.instantiate_request(vim), timeout=600)
            _completed(occ, 'INSTANTIATE')
            pod = _check_the_data_path(lab, kube, storage, workers)
            assert [v['computeResource']['resourceId'] for v in
                    tacker_v2.vnfcs(v2.instance(cnf_id))] == [
                pod['metadata']['name']]
            yield cnf_id
        finally:
            if occ and occ['operationState'] == 'FAILED_TEMP':
                v2.op_action(occ['id'], 'fail')
            if v2.instance(cnf_id)['instantiationState'] == 'INSTANTIATED':
                _completed(v2.lcm(cnf_id, 'terminate',
                                  {'terminationType': 'FORCEFUL'}),
                           'TERMINATE')
            v2.delete(cnf_id)
            cnf_sample.release_volume(kube, lab.kubectl)
            nfs.stop_ganesha(storage)
    assert kube.get('deployment', DEPLOYMENT) is None
    assert kube.get('pvc', cnf_sample.CLAIM) is None
