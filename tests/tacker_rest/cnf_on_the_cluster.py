"""A v2 CNF on the cluster of a lifecycle module's VNF instance (v1 or
v2): it keeps the cluster's Kubernetes VIM in use, so the cluster VNF's
terminate and entire heal are refused while it runs."""

import contextlib
import uuid

from testbed import cnf_package
from testbed import tacker_v2


def _completed(occ, operation):
    assert occ['operation'] == operation
    assert occ['operationState'] == 'COMPLETED', occ.get('error')


@contextlib.contextmanager
def on_the_cluster(lab, v2, cluster_instance_id, tmp_path, vim):
    """A v2 CNF (one Pod) instantiated on the cluster of the VNF instance
    ``cluster_instance_id`` through ``vim``, a vimConnectionInfo entry;
    yields its id, then terminates and deletes it, so that the cluster
    VNF can go."""
    kube = lab.engine.kubes[lab.stack(cluster_instance_id).id]
    node = sorted(lab.nodes())[0]
    vnfd_id = str(uuid.uuid4())
    source = str(tmp_path / 'cnf')
    cnf_package.source(source, vnfd_id, lab.sample_path('Definitions'),
                       node)
    lab.client.onboard_package(cnf_package.name_artifacts(lab.zip_package(
        source, str(tmp_path / 'cnf.zip'))))
    cnf_id, occ = v2.create(vnfd_id, 'cnf-on-the-cluster')['id'], None
    try:
        occ = v2.lcm(cnf_id, 'instantiate',
                     cnf_package.instantiate_request(vim), timeout=600)
        _completed(occ, 'INSTANTIATE')
        pod = kube.get('pod', cnf_package.POD)
        assert (pod['spec']['nodeName'], pod['status']['phase']) == (
            node, 'Running')
        assert [v['computeResource']['resourceId'] for v in
                tacker_v2.vnfcs(v2.instance(cnf_id))] == [cnf_package.POD]
        yield cnf_id
    finally:
        if occ and occ['operationState'] == 'FAILED_TEMP':
            v2.op_action(occ['id'], 'fail')
        if v2.instance(cnf_id)['instantiationState'] == 'INSTANTIATED':
            _completed(v2.lcm(cnf_id, 'terminate',
                              {'terminationType': 'FORCEFUL'}), 'TERMINATE')
        v2.delete(cnf_id)
    assert kube.get('pod', cnf_package.POD) is None
