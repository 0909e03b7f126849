"""The sample CNF's flavour "dynamic" (the StatefulSet db, its claims
from the cluster's default StorageClass; testbed/cnf_dynamic.py) as a v2
CNF on the cluster of a lifecycle module's VNF instance: its LCM through
/vnflcm/v2, and what an operator checks of its claims (Bound to a PV
csi-driver-nfs made in the claim's own directory) and of its data (a
file each pod writes, found in that directory on the Storage server).
"""

import contextlib

from testbed import cnf_dynamic as dynamic
from testbed import cnf_sample
from testbed import tacker_v2


class DbCnf(object):
    """One instance of the flavour, of the VNFD ``vnfd_id``, on the
    cluster of the VNF instance ``cluster_instance_id``."""

    def __init__(self, lab, v2, cluster_instance_id, vnfd_id):
        self.lab, self.v2 = lab, v2
        self.cluster_instance_id = cluster_instance_id
        self.id = v2.create(vnfd_id, 'db-on-the-cluster')['id']
        self.written = {}  # path on the Storage server -> text

    @property
    def kube(self):
        return self.lab.engine.kubes[self.lab.stack(
            self.cluster_instance_id).id]

    @property
    def storage(self):
        return self.lab.host_at(self.lab.cp_address(self.cluster_instance_id))

    def lcm(self, operation, body):
        return self.v2.lcm(self.id, operation, body)

    def instantiate(self, vim):
        return self.lcm('instantiate', cnf_sample.instantiate_request(
            vim, name=dynamic.INSTANTIATE))

    def instantiated(self):
        return self.v2.instance(self.id)['instantiationState'] == \
            'INSTANTIATED'

    def vnfc_pods(self):
        """The pods Tacker shows as the instance's VNFCs, sorted."""
        return sorted(vnfc['computeResource']['resourceId'] for vnfc in
                      tacker_v2.vnfcs(self.v2.instance(self.id)))

    def claims(self):
        """{claim name: its PV's name} of the StatefulSet's claims."""
        prefix = dynamic.claim_name('')
        return {claim['metadata']['name']: claim['spec'].get('volumeName')
                for claim in self.kube.objects('pvc', dynamic.NAMESPACE)
                if claim['metadata']['name'].startswith(prefix)}

    def check_pod(self, ordinal):
        """Pod db-<ordinal>'s claim Bound to a PV of the class, whose
        volume is the claim's own directory of the class's export; a file
        written through the pod's mount is there on the Storage
        server."""
        kube, storage = self.kube, self.storage
        name = dynamic.claim_name(ordinal)
        claim = kube.get('pvc', name, dynamic.NAMESPACE)
        assert claim['status'].get('phase') == 'Bound', claim
        volume = kube.get('pv', claim['spec']['volumeName'])
        assert volume['spec']['storageClassName'] == dynamic.CLASS, volume
        assert volume['spec']['csi']['volumeHandle'].split('#')[:3] == [
            storage.ip, dynamic.EXPORT.strip('/'),
            '%s/%s' % (dynamic.NAMESPACE, name)], volume
        text = 'kept by %s\n' % dynamic.pod_name(ordinal)
        stored = dynamic.write_through_the_pod(kube, cnf_sample.workers(
            self.lab.engine.testbed.hosts.values(), kube), ordinal, text)
        assert storage.read_file(stored) == text
        self.written[stored] = text

    def stored_files(self):
        """{path: text} of the files written so far, as the Storage server
        has them now."""
        storage = self.storage
        return {path: storage.read_file(path) for path in self.written}


@contextlib.contextmanager
def on_the_cluster(lab, v2, cluster_instance_id, vnfd_id):
    """A DbCnf created, with what its claims need on the cluster
    (cnf_dynamic.provisioning); at the end terminated if it still is
    instantiated, and deleted."""
    with dynamic.provisioning(lab, cluster_instance_id):
        cnf = DbCnf(lab, v2, cluster_instance_id, vnfd_id)
        try:
            yield cnf
        finally:
            if cnf.instantiated():
                cnf.lcm('terminate', {'terminationType': 'FORCEFUL'})
            v2.delete(cnf.id)
