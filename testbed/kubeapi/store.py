"""The objects of the test API server and what requests do to them:
create, read, list, replace, patch, delete, evict and watch, with the
API server's checks (namespaces terminating, finalizers, preconditions,
disruption budgets)."""

import base64
import contextlib
import copy
import json
import secrets
import time
from typing import Callable, Iterator, Optional
import uuid

from testbed.kubeapi import kinds
from testbed.kubeapi import model
from testbed.kubeapi import patches
from testbed.kubeapi import statefulsets
from testbed.kubeapi import storage_kinds
from testbed.kubeapi import validation
from testbed.kubeapi import workloads


def _check_delete(res: model.Resource, old: dict, options) -> None:
    """Refuse a delete of ``old`` as the API server would: a protected
    name, a failed precondition; or dryRun, which this server lacks."""
    if not isinstance(options, dict):
        raise model.ApiError(400, 'BadRequest',
                             'the body is not DeleteOptions')
    if options.get('propagationPolicy') not in (None, 'Background',
                                                'Foreground'):
        raise model.ApiError(400, 'BadRequest', 'propagationPolicy '
                             f'{options["propagationPolicy"]} is not '
                             'supported by this test server')
    if options.get('dryRun'):
        raise model.ApiError(400, 'BadRequest',
                             'dryRun is not supported by this test server')
    name = old['metadata']['name']
    if name in res.protected:
        raise model.forbidden(res.group_plural, name,
                              f'this {res.singular} may not be deleted',
                              res.details(name))
    preconditions = options.get('preconditions') or {}
    for field in ('uid', 'resourceVersion'):
        wanted, actual = preconditions.get(field), old['metadata'][field]
        if wanted and wanted != actual:
            raise model.conflict(res, name, f'Precondition failed: {field} in '
                                 f'precondition: {wanted}, {field} in object '
                                 f'meta: {actual}')


def _spec_part(obj: dict) -> dict:
    """What a change of bumps metadata.generation: all but the metadata
    and the status."""
    return {key: value for key, value in obj.items()
            if key not in ('metadata', 'status', 'kind', 'apiVersion')}


def _finalizers(obj: dict) -> list:
    """What keeps a deleted object stored: its metadata.finalizers, and a
    Namespace's spec.finalizers (only the namespace controller removes
    those)."""
    return [*(obj['metadata'].get('finalizers') or []),
            *((obj.get('spec') or {}).get('finalizers') or [])]


class Store:
    """The objects of a KubeApiServer and the operations of its HTTP handler;
    mixed into KubeApiServer (the caller holds its condition's lock where
    a method says so)."""

    # -- operations for the HTTP handler (they take the lock)

    def _create(self, res: model.Resource, namespace: Optional[str],
                body) -> dict:
        obj = model.as_object(res, body)
        meta = obj['metadata']
        if not meta.get('name') and meta.get('generateName'):
            meta['name'] = meta['generateName'] + secrets.token_hex(3)[:5]
        if not res.namespaced:
            meta.pop('namespace', None)
        elif meta.setdefault('namespace', namespace) != namespace:
            raise model.ApiError(
                400, 'BadRequest', 'the namespace of the provided object '
                'does not match the namespace sent on the request')
        for key in ('resourceVersion', 'deletionTimestamp',
                    'deletionGracePeriodSeconds'):
            meta.pop(key, None)
        meta.update(uid=str(uuid.uuid4()), creationTimestamp=model.api_time())
        if res.generation:
            meta['generation'] = 1
        if res.finalizer:
            meta['finalizers'] = list(dict.fromkeys(
                [*(meta.get('finalizers') or []), res.finalizer]))
        if res.prepare:
            res.prepare(obj, None)
        if res is kinds.PVC:  # the DefaultStorageClass admission plugin
            with self._cond:
                storage_kinds.admit_claim(obj, list(
                    self._objects[kinds.STORAGE_CLASS].values()))
        if res.new_status:
            obj['status'] = res.new_status(obj)
        else:
            obj.pop('status', None)
        validation.validate_object(res, obj)
        name = meta['name']
        with self._cond:
            if res.namespaced:
                self._check_namespace_open(res, namespace, name)
            if (namespace, name) in self._objects[res]:
                raise model.ApiError(
                    409, 'AlreadyExists',
                    f'{res.group_plural} "{name}" already exists',
                    res.details(name))
            self._created_at[(res, namespace, name)] = time.monotonic()
            return self._commit(res, obj, 'ADDED')

    def _read(self, res: model.Resource, namespace: Optional[str],
              name: str) -> dict:
        with self._cond:
            return self._get(res, namespace, name)

    def _list(self, res: model.Resource, namespace: Optional[str],
              query: dict) -> dict:
        matches = patches.query_selector(query, res)
        try:
            limit = int(query.get('limit') or 0)
            after = json.loads(base64.urlsafe_b64decode(query['continue'])) \
                if query.get('continue') else []
            if not isinstance(after, list):
                raise ValueError(after)
        except ValueError:
            raise model.ApiError(400, 'BadRequest',
                                 'invalid limit or continue parameter')
        with self._cond:
            metadata = {'resourceVersion': str(len(self._events))}
            items = sorted(
                (list(model.sort_key(key)), obj)
                for key, obj in self._objects[res].items()
                if (namespace is None or key[0] == namespace) and matches(obj))
        items = [item for item in items if item[0] > after]
        if limit and len(items) > limit:
            items = items[:limit]
            metadata['continue'] = base64.urlsafe_b64encode(
                json.dumps(items[-1][0]).encode()).decode()
        return {'kind': f'{res.kind}List', 'apiVersion': res.api_version,
                'metadata': metadata, 'items': [obj for _, obj in items]}

    def _replace(self, res: model.Resource, namespace: Optional[str],
                 name: str, body, subresource: Optional[str] = None) -> dict:
        with self._cond:
            old = self._get(res, namespace, name)
            return self._update(res, old, model.as_object(res, body),
                                subresource)

    def _patch(self, res: model.Resource, namespace: Optional[str], name: str,
               content_type: str, body: bytes,
               subresource: Optional[str] = None) -> dict:
        with self._cond:
            old = self._get(res, namespace, name)
            patched = patches.apply_patch(old, content_type, body)
            return self._update(res, old, model.as_object(res, patched),
                                subresource)

    def _scale(self, res: model.Resource, namespace: Optional[str], name: str,
               change: Callable[[dict], dict]) -> dict:
        """A workload's Scale changed by ``change`` (a client's PATCH or
        PUT of it): its replicas set on the workload; the new Scale."""
        with self._cond:
            old = self._get(res, namespace, name)
            new = statefulsets.scaled(old, change(
                statefulsets.scale_of(old)))
            return statefulsets.scale_of(self._update(res, old, new))

    def _delete(self, res: model.Resource, namespace: Optional[str], name: str,
                options: dict) -> dict:
        """Delete now, or mark Terminating until finalizers go and a
        graceful deletion (of a Pod on a node) ends. Deleting a
        Terminating object again can only shorten its grace."""
        with self._cond:
            old = self._get(res, namespace, name)
            _check_delete(res, old, options)
            grace = res.grace(old, options) if res.grace else 0
            if old['metadata'].get('deletionTimestamp'):
                if grace < (old['metadata'].get(
                        'deletionGracePeriodSeconds') or 0):
                    return self._mark_deleted(res, old, grace)
                return old
            if options.get('propagationPolicy') == 'Foreground':
                return self._delete_in_foreground(res, old, grace)
            return self._mark_deleted(res, old, grace)

    def _evict(self, namespace: str, name: str, body) -> dict:
        """The Eviction subresource of a Pod: delete it as DELETE would,
        unless the PodDisruptionBudget that covers it allows no
        disruption (429, as the API server answers)."""
        if (not isinstance(body, dict)
                or body.get('kind', 'Eviction') != 'Eviction'
                or body.get('apiVersion', 'policy/v1') not in (
                    'policy/v1', 'policy/v1beta1')):
            raise model.ApiError(400, 'BadRequest', 'not a Eviction object: '
                                 'the body is not a policy/v1 Eviction')
        if (body.get('metadata') or {}).get('name') != name:
            raise model.ApiError(400, 'BadRequest',
                                 'name in URL does not match name in Eviction '
                                 'object')
        options = body.get('deleteOptions') or {}
        with self._cond:
            pod = self._get(kinds.POD, namespace, name)
            # A pod not running (or already going) disrupts nothing.
            if ((pod.get('status') or {}).get('phase') in (
                    'Pending', *workloads.TERMINAL_PHASES)
                    or pod['metadata'].get('deletionTimestamp')):
                self._delete(kinds.POD, namespace, name, options)
                return model.SUCCESS
            budgets = [budget for budget
                       in self._objects[kinds.POD_DISRUPTION_BUDGET].values()
                       if workloads.budget_covers(budget, pod)]
            if len(budgets) > 1:
                raise model.ApiError(500, '', 'This pod has more than one '
                                     'PodDisruptionBudget, which the eviction '
                                     'subresource does not support.')
            # before counting a disruption
            _check_delete(kinds.POD, pod, options)
            if budgets:
                budget, = budgets
                status = budget['status']
                # An unready pod may go while the budget is met.
                if (workloads.pod_ready(pod) or status.get('currentHealthy', 0)
                        < status.get('desiredHealthy', 0)
                        or status.get('desiredHealthy', 0) <= 0):
                    self._take_disruption(budget, name)
            self._delete(kinds.POD, namespace, name, options)
        return model.SUCCESS

    def _take_disruption(self, budget: dict, pod_name: str) -> None:
        """Check that the budget allows a disruption and count this one,
        or raise the API server's error."""
        meta, status = budget['metadata'], budget['status']
        name, allowed = meta['name'], status.get('disruptionsAllowed', 0)
        if status.get('observedGeneration', 0) < meta.get('generation', 0):
            raise model.too_many_requests(
                f'The disruption budget {name} is still being processed by '
                'the server.', retry_after=10)
        if allowed < 0:
            raise model.forbidden('poddisruptionbudget.policy', name,
                                  'pdb disruptions allowed is negative',
                                  kinds.POD_DISRUPTION_BUDGET.details(name))
        if allowed == 0:
            raise model.too_many_requests(
                f'The disruption budget {name} needs '
                f'{status.get("desiredHealthy", 0)} healthy pods and has '
                f'{status.get("currentHealthy", 0)} currently')
        taken = copy.deepcopy(budget)
        status = taken['status']
        status['disruptionsAllowed'] = allowed - 1
        if allowed == 1:
            status['conditions'] = [
                workloads.allowed_condition(0, meta.get('generation', 0),
                                            condition)
                if condition.get('type') == 'DisruptionAllowed'
                else condition for condition in status.get('conditions', [])]
        status['disruptedPods'] = {**(status.get('disruptedPods') or {}),
                                   pod_name: model.api_time()}
        self._commit(kinds.POD_DISRUPTION_BUDGET, taken)

    @contextlib.contextmanager
    def _watching(self):
        """Count an open watch stream, so stop() can let it end cleanly."""
        with self._cond:
            self._watchers += 1
            self._cond.notify_all()
        try:
            yield
        finally:
            with self._cond:
                self._watchers -= 1
                self._cond.notify_all()

    def _watch(self, res: model.Resource, namespace: Optional[str],
               matches: Callable[[dict], bool], since: int,
               deadline: float) -> Iterator[tuple]:
        """Yield (type, object) events until the deadline or stop().

        Without a resourceVersion (or "0") it starts with ADDED events for
        the current objects, as the API server does.
        """
        def wanted(event_res, obj):
            return (event_res is res and matches(obj)
                    and namespace in (None, obj['metadata'].get('namespace')))

        with self._cond:
            position = min(since, len(self._events))
            current = [] if since else [
                obj for _, obj in sorted(
                    self._objects[res].items(),
                    key=lambda item: model.sort_key(item[0]))]
        for obj in current:
            if wanted(res, obj):
                yield 'ADDED', obj
        while True:
            with self._cond:
                self._cond.wait_for(
                    lambda: self._stopping or len(self._events) > position,
                    timeout=max(0.0, deadline - time.monotonic()))
                batch, position = self._events[position:], len(self._events)
                stopping = self._stopping
            for event_type, event_res, obj in batch:
                if wanted(event_res, obj):
                    yield event_type, obj
            if stopping or time.monotonic() >= deadline:
                return

    # -- store internals (the caller holds self._cond)

    def _get(self, res: model.Resource, namespace: Optional[str],
             name: str) -> dict:
        key = (namespace if res.namespaced else None, name)
        obj = self._objects[res].get(key)
        if obj is None:
            raise model.not_found(res, name)
        return obj

    def _check_namespace_open(self, res: model.Resource, namespace: str,
                              name: str) -> None:
        """Refuse new objects in a missing or terminating namespace."""
        owner = self._objects[kinds.NAMESPACE].get((None, namespace))
        if owner is None:
            raise model.not_found(kinds.NAMESPACE, namespace)
        if owner['metadata'].get('deletionTimestamp'):
            raise model.forbidden(
                res.group_plural, name,
                f'unable to create new content in namespace '
                f'{namespace} because it is being terminated',
                res.details(name))

    def _wake(self) -> None:
        self._changes += 1
        self._cond.notify_all()

    def _commit(self, res: model.Resource, obj: dict,
                event_type: str = 'MODIFIED') -> dict:
        """Store a new version of obj, or drop it if deleted and without
        finalizers; record the watch event; wake watchers and controller."""
        meta = obj['metadata']
        meta['resourceVersion'] = str(len(self._events) + 1)
        key = (meta.get('namespace'), meta['name'])
        if (meta.get('deletionTimestamp') and not _finalizers(obj)
                and not meta.get('deletionGracePeriodSeconds')):
            del self._objects[res][key]
            self._created_at.pop((res, *key), None)
            self._deleting_at.pop((res, *key), None)
            event_type = 'DELETED'
        else:
            self._objects[res][key] = obj
        self._events.append((event_type, res, obj))
        self._wake()
        return obj

    def _update(self, res: model.Resource, old: dict, new: dict,
                subresource: Optional[str] = None) -> dict:
        """Store a client's new version of old (PUT or PATCH) by the API
        server's rules: optimistic concurrency, system metadata kept, and
        the status changed only through the "status" subresource, which
        changes nothing else."""
        meta, old_meta = new['metadata'], old['metadata']
        name = old_meta['name']
        if meta.get('name', name) != name:
            raise model.ApiError(
                400, 'BadRequest',
                f'the name of the object ({meta["name"]}) does '
                f'not match the name on the URL ({name})')
        if meta.get('resourceVersion') not in (
                None, '', old_meta['resourceVersion']):
            raise model.conflict(res, name, 'the object has been modified; '
                                 'please apply your changes to the latest '
                                 'version and try again')
        if subresource == 'status':
            new = {**copy.deepcopy(old), 'status': new.get('status') or {}}
            return old if new == old else self._commit(res, new)
        for key in ('name', 'namespace', 'uid', 'creationTimestamp',
                    'resourceVersion', 'deletionTimestamp',
                    'deletionGracePeriodSeconds',
                    *(('generation',) if res.generation else ())):
            if key in old_meta:
                meta[key] = old_meta[key]
            else:
                meta.pop(key, None)
        if res.new_status:
            new['status'] = copy.deepcopy(old.get('status') or {})
        else:
            new.pop('status', None)
        if res.prepare:
            res.prepare(new, old)
        if res.generation and _spec_part(new) != _spec_part(old):
            meta['generation'] = old_meta.get('generation', 0) + 1
        if new == old:
            return old
        validation.validate_object(res, new, old)
        return self._commit(res, new)

    def _set_status(self, res: model.Resource, obj: dict, **status) -> None:
        updated = copy.deepcopy(obj)
        updated.setdefault('status', {}).update(status)
        self._commit(res, updated)

    def _drop_finalizer(self, res: model.Resource, obj: dict) -> None:
        updated = copy.deepcopy(obj)
        updated['metadata']['finalizers'].remove(res.finalizer)
        self._commit(res, updated)

    def _mark_deleted(self, res: model.Resource, obj: dict,
                      grace: Optional[int] = None) -> dict:
        """Set deletionTimestamp (now plus the grace period, by default the
        kind's for a delete without options)."""
        if grace is None:
            grace = res.grace(obj, {}) if res.grace else 0
        deleted = copy.deepcopy(obj)
        meta = deleted['metadata']
        meta.update(deletionTimestamp=model.api_time(grace),
                    deletionGracePeriodSeconds=grace)
        if grace:
            self._deleting_at.setdefault(
                (res, meta.get('namespace'), meta['name']),
                time.monotonic())
        return self._commit(res, deleted)
