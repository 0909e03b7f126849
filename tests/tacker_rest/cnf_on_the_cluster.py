"""The sample CNF (samples/cnf_with_pv) on the cluster of a lifecycle
module's VNF instance (v1 or v2), through /vnflcm/v2 (or /vnflcm/v1,
with V1Api and the v1 sample requests): its Deployment's
pod mounts a claim bound to the driver's nfs-pv1, really (node agents on
the Workers, ganesha on the Storage server). It keeps the cluster's
Kubernetes VIM in use, so the cluster VNF's terminate and entire heal are
refused while it runs. A heal of the Worker running its pod moves the
pod, and its file, to another Worker."""

import contextlib
import shlex
import uuid

from testbed import cnf_sample
from testbed import nfs
from testbed import node_agent
from testbed import tacker_v2

DEPLOYMENT = cnf_sample.DEPLOYMENT
KEPT = 'kept by the CNF\n'  # the file the pod wrote at instantiate


class V1Api(object):
    """The calls on_the_cluster makes, through the lab's /vnflcm/v1 (what
    testbed.tacker_v2.V2Api makes through /vnflcm/v2)."""
    version = 'v1'

    def __init__(self, lab):
        self.lab = lab
        self.lcm = lab.lcm
        self.instance = lab.instance
        self.op_action = lab.op_action

    def create(self, vnfd_id, name):
        """POST the v1 sample's create request for ``vnfd_id``."""
        body = dict(cnf_sample.create_request(vnfd_id, self.version),
                    vnfInstanceName=name)
        return self.lab.client.post('/vnflcm/v1/vnf_instances', body,
                                    expect=201).body

    def delete(self, instance_id):
        return self.lab.client.delete('/vnflcm/v1/vnf_instances/%s'
                                      % instance_id, expect=204)


def _completed(occ, operation):
    assert occ['operation'] == operation
    assert occ['operationState'] == 'COMPLETED', occ.get('error')


def _check_the_data_path(lab, kube, storage, workers):
    """kubectl shows the pod Running and the claim Bound; a file written
    through the pod's mount on its Worker is on the Storage server."""
    table = lab.kubectl('get', 'deploy,pod,pvc')
    pod, stored = cnf_sample.write_through_the_pod(kube, workers, KEPT)
    assert storage.read_file(stored) == KEPT
    claim = kube.get('pvc', cnf_sample.CLAIM)
    assert (claim['status']['phase'], claim['spec']['volumeName']) == (
        'Bound', cnf_sample.VOLUME), claim
    rows = {line.split()[0]: line.split() for line in table.splitlines()
            if line.strip()}
    assert rows['pod/' + pod['metadata']['name']][2] == 'Running', table
    assert rows['persistentvolumeclaim/' + cnf_sample.CLAIM][1:3] == [
        'Bound', cnf_sample.VOLUME], table
    return pod


def onboard_sample(lab, tmp_path):
    """The sample CNF built and onboarded under a VNFD id of its own (a
    module onboards it once per API); returns that id."""
    vnfd_id, package = lab.zip_package(
        cnf_sample.SAMPLE, str(tmp_path / 'cnf.zip'), api='cnf',
        vnfd_id=str(uuid.uuid4()))
    lab.client.onboard_package(package)
    return vnfd_id


@contextlib.contextmanager
def on_the_cluster(lab, api, cluster_instance_id, vnfd_id, vim):
    """The sample CNF (onboarded as ``vnfd_id``), flavour "simple",
    instantiated on the cluster of the VNF instance
    ``cluster_instance_id`` through ``vim``, a vimConnectionInfo entry,
    with the sample requests of ``api`` (a V2Api, or a V1Api); yields its
    id, then terminates and deletes it (and makes nfs-pv1 Available
    again, as an operator reuses a Retained PV), so that the cluster VNF
    can go."""
    version = api.version
    kube = lab.engine.kubes[lab.stack(cluster_instance_id).id]
    storage = lab.host_at(lab.cp_address(cluster_instance_id))
    workers = cnf_sample.workers(lab.engine.testbed.hosts.values(), kube)
    assert workers, kube.objects('node')
    nfs.start_ganesha(storage)
    occ = None
    with cnf_sample.node_agents(kube, workers):
        cnf_id = api.create(vnfd_id, 'cnf-on-the-cluster')['id']
        try:
            occ = api.lcm(cnf_id, 'instantiate',
                          cnf_sample.instantiate_request(vim, version),
                          timeout=600)
            _completed(occ, 'INSTANTIATE')
            pod = _check_the_data_path(lab, kube, storage, workers)
            assert [v['computeResource']['resourceId'] for v in
                    tacker_v2.vnfcs(api.instance(cnf_id))] == [
                pod['metadata']['name']]
            yield cnf_id
        finally:
            if occ and occ['operationState'] == 'FAILED_TEMP':
                api.op_action(occ['id'], 'fail')
            if api.instance(cnf_id)['instantiationState'] == 'INSTANTIATED':
                _completed(api.lcm(cnf_id, 'terminate', cnf_sample.request(
                    'terminate.json', version)), 'TERMINATE')
            api.delete(cnf_id)
            cnf_sample.release_volume(kube, lab.kubectl)
            # A heal may have replaced the Storage server meanwhile.
            nfs.stop_ganesha(lab.host_at(lab.cp_address(cluster_instance_id)))
    assert kube.get('deployment', DEPLOYMENT) is None
    assert kube.get('pvc', cnf_sample.CLAIM) is None


def _schedulable(node):
    ready = {c['type']: c['status']
             for c in node['status'].get('conditions') or []}
    return ready.get('Ready') == 'True' and not node['spec'].get(
        'unschedulable')


def kept_file(kube, pod):
    """The path, on the Storage server, of the file the pod wrote at
    instantiate (``<pod name>.txt`` in nfs-pv1's export)."""
    export = kube.get('pv', cnf_sample.VOLUME)['spec']['nfs']['path']
    return '%s/%s.txt' % (export, pod['metadata']['name'])


def heal_the_pods_worker(lab, instance_id, heal):
    """Heal the Worker running the CNF's pod with ``heal(host)`` (an LCM
    heal, through Tacker, of that Worker's VNFC; returns its occurrence):
    the driver's drain evicts the pod, its ReplicaSet's replacement runs
    on another Worker that was Ready and schedulable, whose node agent
    mounted nfs-pv1 there, and the file the pod wrote at instantiate is
    read through that mount and on the Storage server's volume. The pod
    must be the one the CNF's instantiate started. Returns the new pod
    and the file's path on the Storage server."""
    kube = lab.engine.kubes[lab.stack(instance_id).id]
    pod, stored, host, others = the_pods_worker(lab, instance_id)
    _completed(heal(host), 'HEAL')
    assert ('POST', '/api/v1/namespaces/default/pods/%s/eviction'
            % pod['metadata']['name']) in kube.request_log
    return pod_back_with_its_file(lab, instance_id, pod, stored, others)


def the_pods_worker(lab, instance_id):
    """(the CNF's pod, its file on the Storage server, the test host of
    its Worker, the other Workers it may move to)."""
    kube = lab.engine.kubes[lab.stack(instance_id).id]
    storage = lab.host_at(lab.cp_address(instance_id))
    workers = cnf_sample.workers(lab.engine.testbed.hosts.values(), kube)
    pod = cnf_sample.running_pod(kube)
    stored = kept_file(kube, pod)
    assert storage.read_file(stored) == KEPT
    healed = pod['spec']['nodeName']
    others = {name for name in workers if name != healed
              and _schedulable(kube.get('node', name))}
    assert others, kube.objects('node')  # somewhere for the pod to go
    return pod, stored, workers[healed], others


def pod_back_with_its_file(lab, instance_id, pod, stored, others):
    """The pod's replacement Running on one of ``others``, nfs-pv1
    mounted there, the file read through it and on the Storage server,
    the claim Bound; returns the new pod and the file's path."""
    kube = lab.engine.kubes[lab.stack(instance_id).id]
    old_uid = pod['metadata']['uid']
    assert kube.wait_for(lambda: [
        (p['metadata']['uid'] != old_uid, p['status']['phase'])
        for p in kube.objects('pod')
        if p['metadata']['name'].startswith(DEPLOYMENT + '-')] == [
            (True, 'Running')], timeout=120), kube.objects('pod')
    moved = cnf_sample.running_pod(kube)
    assert moved['spec']['nodeName'] in others, moved['spec']
    host = cnf_sample.workers(lab.engine.testbed.hosts.values(),
                              kube)[moved['spec']['nodeName']]
    mount = node_agent.volume_path(moved['metadata']['uid'],
                                   cnf_sample.VOLUME)
    source = host.run('findmnt -n -o SOURCE %s' % shlex.quote(mount))
    nfs_source = kube.get('pv', cnf_sample.VOLUME)['spec']['nfs']
    assert source.stdout.strip() == '%s:%s' % (nfs_source['server'],
                                               nfs_source['path'])
    assert host.read_file('%s/%s' % (mount, stored.rsplit('/', 1)[1])) \
        == KEPT
    assert lab.host_at(lab.cp_address(instance_id)).read_file(stored) == \
        KEPT
    claim = kube.get('pvc', cnf_sample.CLAIM)
    assert claim['status']['phase'] == 'Bound', claim
    return moved, stored
