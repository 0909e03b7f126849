"""Pods, workloads (ReplicaSets and DaemonSets) and PodDisruptionBudgets:
what the API server defaults and checks, when pods may go, and the
status their controllers give them."""

import copy
import json
import re
from typing import Optional

from testbed.kubeapi import model
from testbed.kubeapi import patches
from testbed.kubeapi import validation


# Pods: what the API server defaults and checks, and when they may go.
_POD_SPEC_DEFAULTS = {
    'restartPolicy': 'Always', 'terminationGracePeriodSeconds': 30,
    'dnsPolicy': 'ClusterFirst', 'serviceAccountName': 'default',
    'securityContext': {}, 'schedulerName': 'default-scheduler',
    'enableServiceLinks': True, 'priority': 0,
    'preemptionPolicy': 'PreemptLowerPriority'}
_RESTART_POLICIES = ('Always', 'OnFailure', 'Never')
_POD_UPDATE_FORBIDDEN = (
    'Forbidden: pod updates may not change fields other than '
    '`spec.containers[*].image`,`spec.initContainers[*].image`,'
    '`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to '
    'existing tolerations),`spec.terminationGracePeriodSeconds` (allow it '
    'to be set to 1 if it was previously negative)')
TERMINAL_PHASES = ('Succeeded', 'Failed')


def _containers(spec) -> list:
    if not isinstance(spec, dict):
        return []
    return [container for key in ('initContainers', 'containers')
            for container in spec.get(key) or []
            if isinstance(container, dict)]


def prepare_pod(obj: dict, old: Optional[dict]) -> None:
    """Default a Pod's spec (or a workload's pod template) as the API
    does."""
    spec = obj.setdefault('spec', {})
    if not isinstance(spec, dict):
        return
    for key, value in _POD_SPEC_DEFAULTS.items():
        spec.setdefault(key, copy.deepcopy(value))
    for container in _containers(spec):
        image = str(container.get('image') or '')
        tagged = ':' in image.rsplit('/', 1)[-1] or '@' in image
        container.setdefault('imagePullPolicy', 'IfNotPresent'
                             if tagged and not image.endswith(':latest')
                             else 'Always')
        container.setdefault('terminationMessagePath',
                             '/dev/termination-log')
        container.setdefault('terminationMessagePolicy', 'File')
        container.setdefault('resources', {})
    for volume in spec.get('volumes') or []:
        if isinstance(volume, dict) and 'emptyDir' in volume \
                and volume['emptyDir'] is None:
            volume['emptyDir'] = {}


def _pod_spec_errors(spec, prefix: str = 'spec') -> list:
    if not isinstance(spec, dict):
        return [validation.required(prefix)]
    containers = spec.get('containers') or []
    errors = [] if containers else [
        validation.required(f'{prefix}.containers')]
    names = set()
    for index, container in enumerate(containers):
        field = f'{prefix}.containers[{index}]'
        if not isinstance(container, dict):
            errors.append(validation.required(field))
            continue
        name = container.get('name')
        if not name:
            errors.append(validation.required(f'{field}.name'))
        elif name in names:
            errors.append((f'{field}.name', 'FieldValueDuplicate',
                           f'Duplicate value: "{name}"'))
        names.add(name)
        if not container.get('image'):
            errors.append(validation.required(f'{field}.image'))
    volumes = set()
    for index, volume in enumerate(spec.get('volumes') or []):
        name = volume.get('name') if isinstance(volume, dict) else None
        if not name:
            errors.append(
                validation.required(f'{prefix}.volumes[{index}].name'))
        elif name in volumes:
            errors.append((f'{prefix}.volumes[{index}].name',
                           'FieldValueDuplicate',
                           f'Duplicate value: "{name}"'))
        volumes.add(name)
    policy = spec.get('restartPolicy')
    if policy not in _RESTART_POLICIES:
        errors.append((f'{prefix}.restartPolicy', 'FieldValueNotSupported',
                       f'Unsupported value: "{policy}": supported values: '
                       '"Always", "OnFailure", "Never"'))
    return errors


def _pod_fixed_spec(spec: dict) -> dict:
    """The part of a Pod's spec that may not change after creation."""
    fixed = {key: value for key, value in spec.items()
             if key not in ('activeDeadlineSeconds', 'tolerations')}
    for key in ('initContainers', 'containers'):
        if key in fixed:
            fixed[key] = [{k: v for k, v in container.items()
                           if k != 'image'} if isinstance(container, dict)
                          else container for container in fixed[key]]
    return fixed


def pod_errors(obj: dict, old: Optional[dict]) -> list:
    spec = obj.get('spec') or {}
    errors = _pod_spec_errors(spec)
    if old and isinstance(spec, dict) and _pod_fixed_spec(spec) != \
            _pod_fixed_spec(old.get('spec') or {}):
        errors.append(('spec', 'FieldValueForbidden', _POD_UPDATE_FORBIDDEN))
    return errors


def _qos_class(spec: dict) -> str:
    resources = [container.get('resources') or {}
                 for container in _containers(spec)]
    if not any(res.get('requests') or res.get('limits')
               for res in resources):
        return 'BestEffort'
    if all(all((res.get('limits') or {}).get(kind) is not None
               and (res.get('requests') or {}).get(
                   kind, res['limits'][kind]) == res['limits'][kind]
               for kind in ('cpu', 'memory')) for res in resources):
        return 'Guaranteed'
    return 'Burstable'


def pod_status(obj: dict) -> dict:
    """A new Pod waits (Pending) until the controller, as its node's
    kubelet, runs it."""
    return {'phase': 'Pending', 'qosClass': _qos_class(obj['spec'])}


def pod_grace(pod: dict, options: dict) -> int:
    """Seconds of a Pod's graceful deletion: none for a pod that no
    kubelet runs (unbound, or finished), else the DeleteOptions' or the
    pod's terminationGracePeriodSeconds."""
    spec = pod.get('spec') or {}
    if (not spec.get('nodeName')
            or (pod.get('status') or {}).get('phase') in TERMINAL_PHASES):
        return 0
    grace = options.get('gracePeriodSeconds')
    if grace is None or int(grace) < 0:
        grace = spec.get('terminationGracePeriodSeconds', 30)
    return max(0, int(grace))


def claim_names(pod: dict) -> list:
    """The PersistentVolumeClaims the pod's volumes name."""
    return [((volume or {}).get('persistentVolumeClaim') or {}).get(
        'claimName') for volume in (pod.get('spec') or {}).get('volumes')
        or [] if (volume or {}).get('persistentVolumeClaim')]


def pod_ready(pod: dict) -> bool:
    return any(condition.get('type') == 'Ready'
               and condition.get('status') == 'True'
               for condition in (pod.get('status') or {}).get('conditions')
               or [])


def controller_uid(obj: dict) -> Optional[str]:
    """The uid of the object's controller (its ownerReference with
    controller: true)."""
    return next((ref.get('uid') for ref
                 in obj['metadata'].get('ownerReferences') or []
                 if ref.get('controller')), None)


# Workloads (ReplicaSets and DaemonSets): a selector and a pod template.

def prepare_template(obj: dict) -> dict:
    spec = obj.setdefault('spec', {})
    template = spec.get('template')
    if isinstance(template, dict):
        prepare_pod(template, None)
    return spec


def prepare_replica_set(obj: dict, old: Optional[dict]) -> None:
    prepare_template(obj).setdefault('replicas', 1)


def prepare_daemon_set(obj: dict, old: Optional[dict]) -> None:
    spec = prepare_template(obj)
    spec.setdefault('updateStrategy', {
        'type': 'RollingUpdate',
        'rollingUpdate': {'maxUnavailable': 1, 'maxSurge': 0}})
    spec.setdefault('revisionHistoryLimit', 10)


def _selector_errors(field: str, selector) -> list:
    if not isinstance(selector, dict):
        return []
    errors = []
    for index, expression in enumerate(
            selector.get('matchExpressions') or []):
        operator = (expression or {}).get('operator')
        values = (expression or {}).get('values') or []
        where = f'{field}.matchExpressions[{index}]'
        if operator not in ('In', 'NotIn', 'Exists', 'DoesNotExist'):
            errors.append((f'{where}.operator', 'FieldValueInvalid',
                           f'Invalid value: "{operator}": not a valid '
                           'selector operator'))
        elif (operator in ('In', 'NotIn')) != bool(values):
            errors.append((f'{where}.values', 'FieldValueForbidden'
                           if values else 'FieldValueRequired',
                           'Forbidden: may not be specified when `operator`'
                           ' is \'Exists\' or \'DoesNotExist\'' if values
                           else 'Required value: must be specified when '
                           '`operator` is \'In\' or \'NotIn\''))
    return errors


def workload_errors(obj: dict, old: Optional[dict]) -> list:
    spec = obj.get('spec') or {}
    selector = spec.get('selector')
    template = spec.get('template') or {}
    errors = []
    if not isinstance(selector, dict) or not (
            selector.get('matchLabels') or selector.get('matchExpressions')):
        errors.append(validation.required('spec.selector'))
    else:
        errors += _selector_errors('spec.selector', selector)
        labels = (template.get('metadata') or {}).get('labels') or {}
        if not errors and not patches.selects(selector, labels):
            errors.append(('spec.template.metadata.labels',
                           'FieldValueInvalid',
                           f'Invalid value: {json.dumps(labels)}: '
                           '`selector` does not match template `labels`'))
    errors += _pod_spec_errors(template.get('spec'), 'spec.template.spec')
    replicas = spec.get('replicas', 0)
    if not isinstance(replicas, int) or replicas < 0:
        errors.append(('spec.replicas', 'FieldValueInvalid',
                       f'Invalid value: {json.dumps(replicas)}: must be '
                       'greater than or equal to 0'))
    if old and selector != (old.get('spec') or {}).get('selector'):
        errors.append(validation.immutable('spec.selector', selector))
    return errors


def replica_set_status(replica_set: dict, pods: list) -> dict:
    selector = replica_set['spec'].get('selector')
    ready = sum(map(pod_ready, pods))
    return {'replicas': len(pods),
            'fullyLabeledReplicas': sum(
                patches.selects(selector, model.labels(pod)) for pod in pods),
            'readyReplicas': ready, 'availableReplicas': ready,
            'observedGeneration': replica_set['metadata']['generation']}


def daemon_set_status(daemon_set: dict, pods: list) -> dict:
    """As the DaemonSet controller would report its pods: the desired
    ones are those there (testbed/kubeapi/daemonsets.py places one on
    every Node it may run on in the same pass, or the test placed
    them)."""
    ready = sum(map(pod_ready, pods))
    return {'currentNumberScheduled': len(pods),
            'desiredNumberScheduled': len(pods), 'numberMisscheduled': 0,
            'numberReady': ready, 'numberAvailable': ready,
            'updatedNumberScheduled': len(pods),
            'observedGeneration': daemon_set['metadata']['generation']}


def zero_status(obj: dict) -> dict:
    return dict.fromkeys(
        ('replicas',) if obj['kind'] in ('ReplicaSet', 'Deployment') else
        ('currentNumberScheduled', 'desiredNumberScheduled',
         'numberMisscheduled', 'numberReady'), 0)


# PodDisruptionBudgets.

_PERCENT = re.compile(r'[0-9]+%')
_UNHEALTHY_POD_EVICTION_POLICIES = ('IfHealthyBudget', 'AlwaysAllow')


def _int_or_percent_problem(value) -> Optional[str]:
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        return 'must be an integer or a percentage'
    if isinstance(value, int):
        return 'must be greater than or equal to 0' if value < 0 else None
    if not _PERCENT.fullmatch(value):
        return ("a valid percent string must be a numeric string followed "
                "by an ending '%' (e.g. '1%',  or '93%', regex used for "
                "validation is '[0-9]+%')")
    return 'must not be greater than 100%' if int(value[:-1]) > 100 else None


def budget_errors(obj: dict, old: Optional[dict]) -> list:
    spec = obj.get('spec') or {}
    errors = []
    if spec.get('minAvailable') is not None and \
            spec.get('maxUnavailable') is not None:
        errors.append(('spec', 'FieldValueInvalid',
                       f'Invalid value: {json.dumps(spec)}: minAvailable '
                       'and maxUnavailable cannot be both set'))
    for key in ('minAvailable', 'maxUnavailable'):
        value = spec.get(key)
        problem = None if value is None else _int_or_percent_problem(value)
        if problem:
            errors.append((f'spec.{key}', 'FieldValueInvalid',
                           f'Invalid value: {json.dumps(value)}: {problem}'))
    errors += _selector_errors('spec.selector', spec.get('selector'))
    policy = spec.get('unhealthyPodEvictionPolicy')
    if policy is not None and policy not in _UNHEALTHY_POD_EVICTION_POLICIES:
        errors.append(('spec.unhealthyPodEvictionPolicy',
                       'FieldValueNotSupported',
                       f'Unsupported value: "{policy}": supported values: '
                       '"AlwaysAllow", "IfHealthyBudget"'))
    return errors


def budget_status(obj: dict) -> dict:
    return dict.fromkeys(('disruptionsAllowed', 'currentHealthy',
                          'desiredHealthy', 'expectedPods'), 0)


def _scaled(value, total: int) -> int:
    """An int-or-percent of ``total``, a percentage rounded up."""
    if isinstance(value, str):
        return -(-int(value[:-1]) * total // 100)
    return int(value)


def budget_pods(budget: dict, pods) -> list:
    """The pods a budget's selector picks, as the disruption controller
    lists them: a missing selector picks none, an empty one all."""
    selector = (budget.get('spec') or {}).get('selector')
    if not isinstance(selector, dict):
        return []
    return [pod for pod in pods
            if pod['metadata']['namespace'] == budget['metadata']['namespace']
            and patches.selects(selector, model.labels(pod))]


def budget_covers(budget: dict, pod: dict) -> bool:
    """Whether an eviction of the pod must ask this budget: its selector,
    if not empty, matches the pod."""
    selector = (budget.get('spec') or {}).get('selector') or {}
    return bool(selector.get('matchLabels') or selector.get(
        'matchExpressions')) and bool(budget_pods(budget, [pod]))


def expected_pods(spec: dict, pods: list, replicas: dict) -> int:
    """How many pods a budget expects: with an integer minAvailable, the
    pods it selects; otherwise the scale of their controllers (a
    ReplicaSet's replicas; for another controller, its pods here). Pods
    without a controller do not count, as in the disruption controller."""
    if isinstance(spec.get('minAvailable'), int) and \
            spec.get('maxUnavailable') is None:
        return len(pods)
    scale = {}
    for pod in pods:
        uid = controller_uid(pod)
        if uid is not None:
            scale[uid] = replicas.get(uid, scale.get(uid, 0) + 1)
    return sum(scale.values())


def desired_healthy(spec: dict, expected: int) -> int:
    if spec.get('maxUnavailable') is not None:
        return max(0, expected - _scaled(spec['maxUnavailable'], expected))
    if spec.get('minAvailable') is not None:
        return _scaled(spec['minAvailable'], expected)
    return 0


def allowed_condition(allowed: int, generation: int,
                      old: Optional[dict]) -> dict:
    status = 'True' if allowed > 0 else 'False'
    changed = not old or old.get('status') != status
    return {'type': 'DisruptionAllowed', 'status': status,
            'reason': 'SufficientPods' if allowed > 0 else 'InsufficientPods',
            'message': '', 'observedGeneration': generation,
            'lastTransitionTime': model.api_time() if changed
            else old.get('lastTransitionTime')}


def pending_status(obj: dict) -> dict:
    return {'phase': 'Pending'}


def active_status(obj: dict) -> dict:
    return {'phase': 'Active'}


def client_status(obj: dict) -> dict:
    """Keep the status a client created the object with (as kubelet
    registers its Node with its conditions)."""
    return copy.deepcopy(obj.get('status') or {})
