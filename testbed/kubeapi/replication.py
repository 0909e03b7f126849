"""The controllers that make objects for others: the Deployment
controller (a ReplicaSet per pod template, rolled over when the template
changes), the ReplicaSet controller for the ReplicaSets of Deployments
(their Pods), the scheduler for those Pods, and the garbage collector
(dependents of a deleted owner go; a foreground deletion waits for them).

ReplicaSets a client creates by itself keep the pods it made for them:
the tests of drain and of disruption budgets rely on nothing replacing
an evicted pod."""

import copy
from typing import Optional

from testbed.kubeapi import deployments
from testbed.kubeapi import kinds
from testbed.kubeapi import model
from testbed.kubeapi import statefulsets
from testbed.kubeapi import workloads

FOREGROUND = 'foregroundDeletion'


def _alive(obj: dict) -> bool:
    return not obj['metadata'].get('deletionTimestamp')


class Replication:
    """Mixed into KubeApiServer; its methods are entries of
    controllers.CONTROLLERS (the caller holds the server's lock)."""

    def _owned_by(self, res: model.Resource, owner: dict) -> list:
        uid = owner['metadata']['uid']
        return [obj for obj in self._objects[res].values()
                if workloads.controller_uid(obj) == uid]

    def _reconcile_deployments(self, now: float) -> None:
        """The Deployment controller: a ReplicaSet for the current
        template, the replicas moved over to it, and the status."""
        for deployment in list(self._objects[kinds.DEPLOYMENT].values()):
            if not _alive(deployment):
                continue
            owned = self._owned_by(kinds.REPLICA_SET, deployment)
            if not any(deployments.is_current(rs, deployment)
                       for rs in owned):
                revision = 1 + max(
                    (int(rs['metadata'].get('annotations', {}).get(
                        deployments.REVISION, 0)) for rs in owned),
                    default=0)
                meta = deployment['metadata']
                self._create(kinds.REPLICA_SET, meta['namespace'],
                             deployments.replica_set_for(deployment,
                                                         revision))
                owned = self._owned_by(kinds.REPLICA_SET, deployment)
            targets = deployments.scale_targets(deployment, owned)
            for replica_set in owned:
                wanted = targets[replica_set['metadata']['name']]
                if replica_set['spec'].get('replicas') != wanted \
                        and _alive(replica_set):
                    scaled = copy.deepcopy(replica_set)
                    scaled['spec']['replicas'] = wanted
                    scaled['metadata']['generation'] += 1
                    self._commit(kinds.REPLICA_SET, scaled)
            status = deployments.deployment_status(
                deployment, self._owned_by(kinds.REPLICA_SET, deployment))
            if status != deployment.get('status'):
                self._commit(kinds.DEPLOYMENT,
                             {**copy.deepcopy(deployment), 'status': status})

    def _reconcile_replicas(self, now: float) -> None:
        """The ReplicaSet controller, for ReplicaSets of a Deployment: as
        many active pods as replicas (the newest go first)."""
        managed = {deployment['metadata']['uid'] for deployment
                   in self._objects[kinds.DEPLOYMENT].values()}
        for replica_set in list(self._objects[kinds.REPLICA_SET].values()):
            if not _alive(replica_set) or \
                    workloads.controller_uid(replica_set) not in managed:
                continue
            pods = [pod for pod in self._owned_by(kinds.POD, replica_set)
                    if _alive(pod) and pod['status'].get('phase')
                    not in workloads.TERMINAL_PHASES]
            wanted = replica_set['spec'].get('replicas', 1)
            for _ in range(wanted - len(pods)):
                self._create(kinds.POD, replica_set['metadata']['namespace'],
                             deployments.pod_for(replica_set))
            running = sorted(
                (pod for pod in pods if pod['status'].get('phase')
                 == 'Running'),
                key=lambda pod: pod['metadata']['creationTimestamp'],
                reverse=True)
            first_to_go = [pod for pod in pods if pod not in running] \
                + running
            for pod in first_to_go[:max(0, len(pods) - wanted)]:
                self._mark_deleted(kinds.POD, pod)

    def _reconcile_stateful_sets(self, now: float) -> None:
        """The StatefulSet controller (testbed/kubeapi/statefulsets.py):
        the lowest missing ordinal started once every lower one is ready,
        the highest extra ordinal's pod deleted."""
        for stateful_set in list(self._objects[kinds.STATEFUL_SET].values()):
            if not _alive(stateful_set):
                continue
            pods = {statefulsets.ordinal_of(pod, stateful_set): pod
                    for pod in self._owned_by(kinds.POD, stateful_set)
                    if _alive(pod)}
            wanted = stateful_set['spec'].get('replicas', 1)
            missing = next((ordinal for ordinal in range(wanted)
                            if ordinal not in pods), None)
            if missing is not None and all(
                    workloads.pod_ready(pods[ordinal])
                    for ordinal in range(missing)):
                self._start_ordinal(stateful_set, missing)
            extra = sorted((ordinal for ordinal in pods
                            if ordinal is not None and ordinal >= wanted),
                           reverse=True)
            if extra:
                self._mark_deleted(kinds.POD, pods[extra[0]])

    def _start_ordinal(self, stateful_set: dict, ordinal: int) -> None:
        """The claims of one ordinal (those missing), then its pod."""
        namespace = stateful_set['metadata']['namespace']
        for template in stateful_set['spec'].get(
                'volumeClaimTemplates') or []:
            claim = statefulsets.claim_for(stateful_set, template, ordinal)
            if (namespace, claim['metadata']['name']) not in \
                    self._objects[kinds.PVC]:
                self._create(kinds.PVC, namespace, claim)
        self._create(kinds.POD, namespace,
                     statefulsets.pod_for(stateful_set, ordinal))

    def _schedule(self, now: float) -> None:
        """The scheduler, for the pods of Deployments' ReplicaSets and of
        StatefulSets: bind each unbound one to the Node
        deployments.pick_node() picks."""
        managed = {rs['metadata']['uid']
                   for rs in self._objects[kinds.REPLICA_SET].values()
                   if workloads.controller_uid(rs) in {
                       deployment['metadata']['uid'] for deployment
                       in self._objects[kinds.DEPLOYMENT].values()}} | {
            stateful_set['metadata']['uid'] for stateful_set
            in self._objects[kinds.STATEFUL_SET].values()}
        nodes = list(self._objects[kinds.NODE].values())
        for pod in list(self._objects[kinds.POD].values()):
            if (pod['spec'].get('nodeName') or not _alive(pod)
                    or workloads.controller_uid(pod) not in managed):
                continue
            node = deployments.pick_node(pod, nodes, self._active_pods())
            if node is None:
                continue
            bound = copy.deepcopy(pod)
            bound['spec']['nodeName'] = node
            self._commit(kinds.POD, bound)

    def _collect_garbage(self, now: float) -> None:
        """The garbage collector: an object whose owners are all gone is
        deleted; an owner deleted in the foreground has its dependents
        deleted (in the foreground too) and goes once they are gone."""
        present = {obj['metadata']['uid']
                   for res in kinds.RESOURCES
                   for obj in self._objects[res].values()}
        dependents = {}
        for res in kinds.RESOURCES:
            for obj in list(self._objects[res].values()):
                refs = obj['metadata'].get('ownerReferences') or []
                for ref in refs:
                    dependents.setdefault(ref.get('uid'), []).append(
                        (res, obj))
                if refs and _alive(obj) and not any(
                        ref.get('uid') in present for ref in refs):
                    self._mark_deleted(res, obj)
        for res in kinds.RESOURCES:
            for owner in list(self._objects[res].values()):
                meta = owner['metadata']
                if _alive(owner) or FOREGROUND not in (
                        meta.get('finalizers') or []):
                    continue
                waiting = dependents.get(meta['uid'], [])
                for dependent_res, dependent in waiting:
                    if _alive(dependent):
                        self._delete_in_foreground(dependent_res, dependent)
                if not waiting:
                    finished = copy.deepcopy(owner)
                    finished['metadata']['finalizers'].remove(FOREGROUND)
                    self._commit(res, finished)

    def _delete_in_foreground(self, res: model.Resource, obj: dict,
                              grace: Optional[int] = None) -> dict:
        """Mark obj deleted, held by the foreground finalizer until its
        own dependents are gone."""
        held = copy.deepcopy(obj)
        held['metadata']['finalizers'] = [
            *(held['metadata'].get('finalizers') or []), FOREGROUND]
        return self._mark_deleted(res, held, grace)
