"""The controllers of the test API server, one table entry each
(``CONTROLLERS``), run after every change: the kubelets and the pod
garbage collector, the PV binder and protection finalizers, the legacy
service-account token controller, graceful deletion, workload status, the
disruption controller and the namespace controller."""

import copy
import secrets
import time
from typing import Optional

from testbed.kubeapi import daemonsets
from testbed.kubeapi import kinds
from testbed.kubeapi import model
from testbed.kubeapi import patches
from testbed.kubeapi import replication
from testbed.kubeapi import workloads
from testbed import node_lifecycle


class Controllers:
    """The controllers of a KubeApiServer, mixed into it; ``CONTROLLERS``
    says which run, in which order."""

    def _control(self) -> None:
        """Controller thread: reconcile after every change, or when a
        delayed action is due. Its own changes cause another pass, until a
        pass changes nothing."""
        with self._cond:
            while not self._stopping:
                seen = self._changes
                due = self._reconcile()
                timeout = None if due is None else max(
                    0.0, due - time.monotonic())
                self._cond.wait_for(
                    lambda: self._stopping or self._changes != seen, timeout)

    def _reconcile(self) -> Optional[float]:
        """One pass of every controller of ``CONTROLLERS``.

        Returns the monotonic time at which the next delayed action is due.
        """
        now = time.monotonic()
        dues = [reconcile(self, now) for reconcile in CONTROLLERS]
        return min((due for due in dues if due is not None), default=None)

    def _reconcile_pods(self, now: float) -> None:
        """The kubelets and the pod garbage collector: a Pending pod bound
        to an existing Node runs (Ready); a pod that ran on a Node that is
        gone is deleted at once."""
        for pod in list(self._objects[kinds.POD].values()):
            node_name = (pod.get('spec') or {}).get('nodeName')
            if not node_name or pod['metadata'].get('deletionTimestamp'):
                continue
            node = self._objects[kinds.NODE].get((None, node_name))
            if node is None:
                if pod['status'].get('startTime'):
                    self._mark_deleted(kinds.POD, pod, 0)
            elif pod['status'].get('phase') == 'Pending' and \
                    not node_lifecycle.kubelet_gone(node) and \
                    self._volumes_ready(pod, node_name):
                self._start(pod, node)

    def _volumes_ready(self, pod: dict, node_name: str) -> bool:
        """Whether the kubelet has the pod's volumes: each claim Bound
        and, on a Node with a node agent, the agent's mounts done."""
        namespace = pod['metadata']['namespace']
        for name in workloads.claim_names(pod):
            claim = self._objects[kinds.PVC].get((namespace, name))
            if claim is None or claim['status'].get('phase') != 'Bound':
                return False
        return node_name not in self._agent_nodes or \
            pod['metadata']['uid'] in self._mounted_pods

    def _start(self, pod: dict, node: dict) -> None:
        host_ip = next((entry.get('address') for entry
                        in (node.get('status') or {}).get('addresses') or []
                        if entry.get('type') == 'InternalIP'), '')
        if pod['spec'].get('hostNetwork') and host_ip:
            pod_ip = host_ip
        else:
            self._pod_addresses += 1
            pod_ip = (f'10.244.{self._pod_addresses // 250}.'
                      f'{self._pod_addresses % 250 + 2}')
        now = model.api_time()
        running = copy.deepcopy(pod)
        running['status'].update(
            phase='Running', startTime=now, podIP=pod_ip,
            podIPs=[{'ip': pod_ip}],
            conditions=[{'type': kind, 'status': 'True',
                         'lastTransitionTime': now}
                        for kind in ('PodReadyToStartContainers',
                                     'Initialized', 'Ready',
                                     'ContainersReady', 'PodScheduled')],
            containerStatuses=[{
                'name': container['name'], 'image': container['image'],
                'imageID': '', 'ready': True, 'started': True,
                'restartCount': 0,
                'containerID': f'containerd://{secrets.token_hex(32)}',
                'state': {'running': {'startedAt': now}}, 'lastState': {}}
                for container in pod['spec']['containers']])
        if host_ip:
            running['status'].update(hostIP=host_ip,
                                     hostIPs=[{'ip': host_ip}])
        self._commit(kinds.POD, running)

    def _reconcile_terminating(self, now: float) -> Optional[float]:
        """The kubelets again: a gracefully deleted object goes pod_grace
        after its deletion began (or stays while finalizers hold it).

        Returns the monotonic time at which the next one is due.
        """
        next_due = None
        for res in kinds.RESOURCES:
            if res.grace is None:
                continue
            for key, obj in list(self._objects[res].items()):
                meta = obj['metadata']
                if not (meta.get('deletionTimestamp')
                        and meta.get('deletionGracePeriodSeconds')) or \
                        self._kubelet_gone(res, obj) or \
                        meta['uid'] in self._mounted_pods:
                    continue
                due = self._deleting_at.get((res, *key), now) \
                    + self.pod_grace
                if due > now:
                    next_due = min(due, next_due or due)
                    continue
                finished = copy.deepcopy(obj)
                finished['metadata']['deletionGracePeriodSeconds'] = 0
                self._commit(res, finished)
        return next_due

    def _kubelet_gone(self, res: model.Resource, obj: dict) -> bool:
        """A pod whose Node is lost: nothing confirms its end."""
        node = self._objects[kinds.NODE].get(
            (None, (obj.get('spec') or {}).get('nodeName')))
        return res is kinds.POD and node is not None and \
            node_lifecycle.kubelet_gone(node)

    def _active_pods(self) -> list:
        return [pod for pod in self._objects[kinds.POD].values()
                if not pod['metadata'].get('deletionTimestamp')
                and pod['status'].get('phase')
                not in workloads.TERMINAL_PHASES]

    def _reconcile_owners(self, now: float) -> None:
        """The ReplicaSet and DaemonSet controllers' status of the active
        pods each controls."""
        owned = {}
        for pod in self._active_pods():
            owned.setdefault(workloads.controller_uid(pod), []).append(pod)
        for res in kinds.RESOURCES:
            if res.owned_status is None:
                continue
            for obj in list(self._objects[res].values()):
                if obj['metadata'].get('deletionTimestamp'):
                    continue
                status = res.owned_status(
                    obj, owned.get(obj['metadata']['uid'], []))
                if status != obj.get('status'):
                    self._commit(res, {**copy.deepcopy(obj),
                                       'status': status})

    def _reconcile_budgets(self, now: float) -> None:
        """The disruption controller: each PodDisruptionBudget's healthy,
        desired and expected pods and the disruptions it allows."""
        pods = list(self._objects[kinds.POD].values())
        replicas = {replica_set['metadata']['uid']:
                    replica_set['spec'].get('replicas', 1)
                    for replica_set
                    in self._objects[kinds.REPLICA_SET].values()}
        budgets = self._objects[kinds.POD_DISRUPTION_BUDGET]
        for budget in list(budgets.values()):
            meta, spec = budget['metadata'], budget.get('spec') or {}
            if meta.get('deletionTimestamp'):
                continue
            selected = workloads.budget_pods(budget, pods)
            going = {pod['metadata']['name'] for pod in selected
                     if pod['metadata'].get('deletionTimestamp')}
            # Evicted pods not yet marked deleted (the eviction here marks
            # them at once, so this only forgets the ones that went).
            disrupted = {
                name: when for name, when
                in (budget['status'].get('disruptedPods') or {}).items()
                if name not in going and any(
                    pod['metadata']['name'] == name for pod in selected)}
            healthy = sum(
                1 for pod in selected
                if pod['metadata']['name'] not in going | set(disrupted)
                and workloads.pod_ready(pod))
            expected = workloads.expected_pods(spec, selected, replicas)
            desired = workloads.desired_healthy(spec, expected)
            allowed = healthy - desired if expected > 0 else 0
            allowed = max(allowed, 0)
            old_conditions = budget['status'].get('conditions') or []
            old = next((condition for condition in old_conditions
                        if condition.get('type') == 'DisruptionAllowed'),
                       None)
            status = {'observedGeneration': meta.get('generation', 1),
                      'disruptionsAllowed': allowed,
                      'currentHealthy': healthy, 'desiredHealthy': desired,
                      'expectedPods': expected,
                      'conditions': [workloads.allowed_condition(
                          allowed, meta.get('generation', 1), old)]}
            if disrupted:
                status['disruptedPods'] = disrupted
            if status != budget['status']:
                self._commit(kinds.POD_DISRUPTION_BUDGET,
                             {**copy.deepcopy(budget), 'status': status})

    def _reconcile_volumes(self, now: float) -> Optional[float]:
        """The PV binder and the pv-/pvc-protection controllers.

        Returns the monotonic time at which the next Pending PV is due.
        """
        volumes = self._objects[kinds.PV]
        for pvc in list(self._objects[kinds.PVC].values()):
            meta, phase = pvc['metadata'], pvc['status'].get('phase')
            if meta.get('deletionTimestamp'):
                if model.PVC_PROTECTION in meta.get('finalizers', []) and \
                        not self._claim_in_use(pvc):
                    self._drop_finalizer(kinds.PVC, pvc)
            elif phase == 'Pending':
                volume = self._find_volume(pvc)
                if volume is not None:
                    self._bind(volume, pvc)
            elif phase == 'Bound' and (
                    None, pvc['spec'].get('volumeName')) not in volumes:
                self._set_status(kinds.PVC, pvc, phase='Lost')

        next_due = None
        for pv in list(volumes.values()):
            meta, phase = pv['metadata'], pv['status'].get('phase')
            ref = pv['spec'].get('claimRef')
            if (meta.get('deletionTimestamp') and phase != 'Bound'
                    and model.PV_PROTECTION in meta.get('finalizers', [])):
                self._drop_finalizer(kinds.PV, pv)
            elif phase == 'Pending':
                if meta['name'] in self._stuck_pending:
                    continue
                due = self._created_at.get(
                    (kinds.PV, None, meta['name']), now) + self.available_delay
                if due > now:
                    next_due = min(due, next_due or due)
                    continue
                self._set_status(kinds.PV, pv, phase='Available')
            elif phase == 'Bound' and not self._claim_exists(ref):
                self._reclaim(pv)
            elif ref is None and phase != 'Available':
                self._set_status(kinds.PV, pv, phase='Available')
        return next_due

    def _claim_in_use(self, pvc: dict) -> bool:
        """Whether a pod that has not finished mounts the claim (which
        pvc-protection waits for)."""
        meta = pvc['metadata']
        return any(
            pod['metadata']['namespace'] == meta['namespace']
            and pod['status'].get('phase') not in workloads.TERMINAL_PHASES
            and meta['name'] in workloads.claim_names(pod)
            for pod in self._objects[kinds.POD].values())

    def _claim_exists(self, ref: Optional[dict]) -> bool:
        if not ref:
            return False
        claim = self._objects[kinds.PVC].get(
            (ref.get('namespace'), ref.get('name')))
        return claim is not None and ref.get('uid') in (
            None, claim['metadata']['uid'])

    def _reclaim(self, pv: dict) -> None:
        """Apply the reclaim policy of a Bound PV whose claim is gone."""
        policy = pv['spec'].get('persistentVolumeReclaimPolicy')
        if policy == 'Retain':
            self._set_status(kinds.PV, pv, phase='Released')
        elif policy == 'Recycle':
            recycled = copy.deepcopy(pv)
            del recycled['spec']['claimRef']
            recycled['status']['phase'] = 'Available'
            self._commit(kinds.PV, recycled)
        elif pv['spec'].get('csi'):  # its CSI provisioner deletes it
            self._set_status(kinds.PV, pv, phase='Released')
        else:  # Delete: a static NFS volume has no deleter plugin
            self._set_status(kinds.PV, pv, phase='Failed', message=(
                'error getting deleter volume plugin for volume '
                f'"{pv["metadata"]["name"]}": no deletable volume plugin '
                'matched'))

    def _find_volume(self, pvc: dict) -> Optional[dict]:
        """The smallest Available PV that satisfies the claim, as the
        binder chooses it."""
        spec, meta = pvc['spec'], pvc['metadata']
        wanted = model.parse_quantity(spec['resources']['requests']['storage'])
        candidates = []
        for pv in self._objects[kinds.PV].values():
            pv_spec, ref = pv['spec'], pv['spec'].get('claimRef')
            if (pv['status'].get('phase') != 'Available'
                    or pv['metadata'].get('deletionTimestamp')):
                continue
            if ref and (ref.get('namespace') != meta['namespace']
                        or ref.get('name') != meta['name']
                        or ref.get('uid') not in (None, meta['uid'])):
                continue  # reserved for another claim
            capacity = model.parse_quantity(pv_spec['capacity']['storage'])
            if (spec.get('volumeName') in (None, '', pv['metadata']['name'])
                    and (pv_spec.get('storageClassName') or '')
                    == (spec.get('storageClassName') or '')
                    and pv_spec.get('volumeMode') == spec.get('volumeMode')
                    and set(spec['accessModes']) <= set(
                        pv_spec['accessModes'])
                    and patches.selects(spec.get('selector'), model.labels(pv))
                    and capacity >= wanted):
                candidates.append((capacity, pv['metadata']['name'], pv))
        if not candidates:
            return None
        return min(candidates, key=lambda candidate: candidate[:2])[2]

    def _bind(self, pv: dict, pvc: dict) -> None:
        meta = pvc['metadata']
        volume = copy.deepcopy(pv)
        volume['spec']['claimRef'] = {
            'kind': 'PersistentVolumeClaim', 'namespace': meta['namespace'],
            'name': meta['name'], 'uid': meta['uid'], 'apiVersion': 'v1',
            'resourceVersion': meta['resourceVersion']}
        volume['status']['phase'] = 'Bound'
        self._commit(kinds.PV, volume)
        claim = copy.deepcopy(pvc)
        claim['spec']['volumeName'] = pv['metadata']['name']
        claim['status'] = {'phase': 'Bound',
                           'accessModes': pv['spec']['accessModes'],
                           'capacity': pv['spec']['capacity']}
        self._commit(kinds.PVC, claim)

    def _reconcile_tokens(self, now: float) -> Optional[float]:
        """The legacy token controller: give each service-account token
        Secret whose ServiceAccount exists a new token, token_delay after
        the Secret's creation.

        Returns the monotonic time at which the next Secret is due.
        """
        next_due = None
        for key, secret in list(self._objects[kinds.SECRET].items()):
            meta = secret['metadata']
            annotations = meta.get('annotations') or {}
            account = self._objects[kinds.SERVICE_ACCOUNT].get(
                (key[0], annotations.get(model.SERVICE_ACCOUNT_NAME)))
            if (secret.get('type') != model.SERVICE_ACCOUNT_TOKEN
                    or account is None or meta.get('deletionTimestamp')
                    or (secret.get('data') or {}).get('token')):
                continue
            due = self._created_at.get((kinds.SECRET, *key),
                                       now) + self.token_delay
            if due > now:
                next_due = min(due, next_due or due)
                continue
            token = secrets.token_urlsafe(32)
            self._tokens[token] = key
            filled = copy.deepcopy(secret)
            filled['data'] = {**(secret.get('data') or {}),
                              'token': model.b64(token),
                              'ca.crt': model.b64(self.ca_pem),
                              'namespace': model.b64(key[0])}
            filled['metadata']['annotations'] = {
                **annotations,
                model.SERVICE_ACCOUNT_UID: account['metadata']['uid']}
            self._commit(kinds.SECRET, filled)
        return next_due

    def _reconcile_namespaces(self, now: float) -> None:
        """The namespace controller: a deleted namespace turns
        Terminating, its objects are deleted, and once they are gone, so
        is the namespace."""
        for namespace in list(self._objects[kinds.NAMESPACE].values()):
            meta = namespace['metadata']
            if not meta.get('deletionTimestamp'):
                continue
            if namespace['status'].get('phase') != 'Terminating':
                self._set_status(kinds.NAMESPACE, namespace,
                                 phase='Terminating')
                continue  # the next pass sees the new version
            contents = [(res, obj) for res in kinds.RESOURCES if res.namespaced
                        for (owner, _), obj in list(self._objects[res].items())
                        if owner == meta['name']]
            for res, obj in contents:
                if not obj['metadata'].get('deletionTimestamp'):
                    self._mark_deleted(res, obj)
            if not contents:
                finished = copy.deepcopy(namespace)
                finished['spec']['finalizers'] = []
                self._commit(kinds.NAMESPACE, finished)


# The controllers, in the order each pass runs them. Each is called with
# the server (its lock held) and the monotonic time of the pass, and
# returns when its next delayed action is due (None: nothing is waiting).
CONTROLLERS = (
    replication.Replication._collect_garbage,  # the garbage collector
    replication.Replication._reconcile_deployments,  # Deployments
    replication.Replication._reconcile_replicas,  # their ReplicaSets' pods
    replication.Replication._reconcile_stateful_sets,  # StatefulSets
    replication.Replication._schedule,  # the scheduler, for those pods
    daemonsets.DaemonSets._reconcile_daemon_sets,  # DaemonSets' pods
    Controllers._reconcile_pods,  # kubelets, pod garbage collector
    Controllers._reconcile_volumes,  # PV binder, protection finalizers
    Controllers._reconcile_tokens,  # legacy service-account tokens
    Controllers._reconcile_terminating,  # graceful deletion by kubelets
    Controllers._reconcile_owners,  # ReplicaSet and DaemonSet status
    Controllers._reconcile_budgets,  # the disruption controller
    Controllers._reconcile_namespaces,  # the namespace controller
)
