"""Server-side printing: the "kubectl get" tables of each kind."""

import datetime
from typing import Optional

from testbed.kubeapi import model
from testbed.kubeapi import validation


def age(obj: dict) -> str:
    created = datetime.datetime.strptime(
        obj['metadata']['creationTimestamp'], '%Y-%m-%dT%H:%M:%SZ'
    ).replace(tzinfo=datetime.timezone.utc)
    seconds = max(0, int((datetime.datetime.now(datetime.timezone.utc)
                          - created).total_seconds()))
    for limit, unit, size in ((120, 's', 1), (10800, 'm', 60),
                              (172800, 'h', 3600)):
        if seconds < limit:
            return f'{seconds // size}{unit}'
    return f'{seconds // 86400}d'


def _status_column(obj: dict) -> str:
    if obj['metadata'].get('deletionTimestamp'):
        return 'Terminating'
    return (obj.get('status') or {}).get('phase', '')


def _modes(modes) -> str:
    return ','.join(validation.ACCESS_MODES.get(mode, mode)
                    for mode in modes or [])


def pv_cells(pv: dict) -> list:
    spec = pv.get('spec') or {}
    ref = spec.get('claimRef')
    return [pv['metadata']['name'],
            (spec.get('capacity') or {}).get('storage', ''),
            _modes(spec.get('accessModes')),
            spec.get('persistentVolumeReclaimPolicy', ''),
            _status_column(pv),
            f'{ref.get("namespace")}/{ref.get("name")}' if ref else '',
            spec.get('storageClassName', ''),
            spec.get('volumeAttributesClassName') or '<unset>',
            (pv.get('status') or {}).get('reason', ''),
            age(pv),
            spec.get('volumeMode', '')]


def pvc_cells(pvc: dict) -> list:
    spec, status = pvc.get('spec') or {}, pvc.get('status') or {}
    return [pvc['metadata']['name'],
            _status_column(pvc),
            spec.get('volumeName', ''),
            (status.get('capacity') or {}).get('storage', ''),
            _modes(status.get('accessModes')),
            spec.get('storageClassName', ''),
            spec.get('volumeAttributesClassName') or '<unset>',
            age(pvc),
            spec.get('volumeMode', '')]


def node_cells(node: dict) -> list:
    """As kubectl's node printer: status from the Ready condition, roles
    from the node-role.kubernetes.io/<role> labels."""
    status, labels = node.get('status') or {}, model.labels(node)
    ready = [condition.get('status') for condition
             in status.get('conditions') or []
             if condition.get('type') == 'Ready']
    state = (['Ready' if ready[-1] == 'True' else 'NotReady'] if ready
             else ['Unknown'])
    if (node.get('spec') or {}).get('unschedulable'):
        state.append('SchedulingDisabled')
    roles = {key.split('/', 1)[1] for key in labels
             if key.startswith('node-role.kubernetes.io/')
             and key.split('/', 1)[1]}
    if labels.get('kubernetes.io/role'):
        roles.add(labels['kubernetes.io/role'])
    info = status.get('nodeInfo') or {}

    def address(kind):
        return next((entry.get('address') for entry
                     in status.get('addresses') or []
                     if entry.get('type') == kind), '<none>')

    return [node['metadata']['name'], ','.join(state),
            ','.join(sorted(roles)) or '<none>', age(node),
            info.get('kubeletVersion', ''),
            address('InternalIP'), address('ExternalIP'),
            info.get('osImage') or '<unknown>',
            info.get('kernelVersion') or '<unknown>',
            info.get('containerRuntimeVersion') or '<unknown>']


def namespace_cells(namespace: dict) -> list:
    return [namespace['metadata']['name'], _status_column(namespace),
            age(namespace)]


def service_account_cells(account: dict) -> list:
    return [account['metadata']['name'],
            str(len(account.get('secrets') or [])), age(account)]


def secret_cells(secret: dict) -> list:
    return [secret['metadata']['name'], secret.get('type', ''),
            str(len(secret.get('data') or {})), age(secret)]


def config_map_cells(config_map: dict) -> list:
    return [config_map['metadata']['name'],
            str(len(config_map.get('data') or {})
                + len(config_map.get('binaryData') or {})),
            age(config_map)]


def cluster_role_cells(role: dict) -> list:
    return [role['metadata']['name'], role['metadata']['creationTimestamp']]


def binding_cells(binding: dict) -> list:
    ref, subjects = binding.get('roleRef') or {}, binding.get('subjects') or []

    def names(kind):
        return ','.join(
            f'{subject.get("namespace")}/{subject.get("name")}'
            if kind == 'ServiceAccount' else subject.get('name', '')
            for subject in subjects if subject.get('kind') == kind)

    return [binding['metadata']['name'],
            f'{ref.get("kind", "")}/{ref.get("name", "")}', age(binding),
            names('User'), names('Group'), names('ServiceAccount')]


def pod_cells(pod: dict) -> list:
    """As kubectl's pod printer: ready containers, the phase (or
    Terminating), restarts; wide: IP and node."""
    spec, status = pod.get('spec') or {}, pod.get('status') or {}
    containers = status.get('containerStatuses') or []
    state = status.get('reason') or status.get('phase', '')
    if pod['metadata'].get('deletionTimestamp'):
        state = 'Terminating'
    return [pod['metadata']['name'],
            f'{sum(bool(c.get("ready")) for c in containers)}/'
            f'{len(spec.get("containers") or [])}',
            state, str(sum(c.get('restartCount', 0) for c in containers)),
            age(pod), status.get('podIP') or '<none>',
            spec.get('nodeName') or '<none>',
            status.get('nominatedNodeName') or '<none>', '<none>']


def _selector_text(selector: Optional[dict]) -> str:
    """A LabelSelector as kubectl writes it (metav1.FormatLabelSelector)."""
    selector = selector or {}
    terms = [f'{key}={value}' for key, value
             in sorted((selector.get('matchLabels') or {}).items())]
    for expression in selector.get('matchExpressions') or []:
        key, operator = expression.get('key'), expression.get('operator')
        values = ','.join(expression.get('values') or [])
        terms.append({'In': f'{key} in ({values})',
                      'NotIn': f'{key} notin ({values})', 'Exists': key,
                      'DoesNotExist': f'!{key}'}.get(operator, key))
    return ','.join(terms) or '<none>'


def _template_cells(workload: dict) -> list:
    """The wide columns of a workload: containers, images, selector."""
    spec = workload.get('spec') or {}
    containers = ((spec.get('template') or {}).get('spec') or {}).get(
        'containers') or []
    return [','.join(c.get('name', '') for c in containers),
            ','.join(c.get('image', '') for c in containers),
            _selector_text(spec.get('selector'))]


def replica_set_cells(replica_set: dict) -> list:
    spec, status = replica_set.get('spec') or {}, \
        replica_set.get('status') or {}
    return [replica_set['metadata']['name'], str(spec.get('replicas', 0)),
            str(status.get('replicas', 0)),
            str(status.get('readyReplicas', 0)), age(replica_set),
            *_template_cells(replica_set)]


def deployment_cells(deployment: dict) -> list:
    spec, status = deployment.get('spec') or {}, \
        deployment.get('status') or {}
    return [deployment['metadata']['name'],
            f'{status.get("readyReplicas", 0)}/{spec.get("replicas", 0)}',
            str(status.get('updatedReplicas', 0)),
            str(status.get('availableReplicas', 0)), age(deployment),
            *_template_cells(deployment)]


def stateful_set_cells(stateful_set: dict) -> list:
    spec, status = stateful_set.get('spec') or {}, \
        stateful_set.get('status') or {}
    containers = ((spec.get('template') or {}).get('spec') or {}).get(
        'containers') or []
    return [stateful_set['metadata']['name'],
            f'{status.get("readyReplicas", 0)}/{spec.get("replicas", 0)}',
            age(stateful_set), ','.join(c.get('name', '') for c in containers),
            ','.join(c.get('image', '') for c in containers)]


def daemon_set_cells(daemon_set: dict) -> list:
    status = daemon_set.get('status') or {}
    node_selector = (((daemon_set.get('spec') or {}).get('template') or {})
                     .get('spec') or {}).get('nodeSelector') or {}
    return [daemon_set['metadata']['name'],
            *(str(status.get(key, 0)) for key in (
                'desiredNumberScheduled', 'currentNumberScheduled',
                'numberReady', 'updatedNumberScheduled', 'numberAvailable')),
            ','.join(f'{key}={value}' for key, value
                     in sorted(node_selector.items())) or '<none>',
            age(daemon_set), *_template_cells(daemon_set)]


def budget_cells(budget: dict) -> list:
    spec = budget.get('spec') or {}
    return [budget['metadata']['name'],
            *(str(spec[key]) if spec.get(key) is not None else 'N/A'
              for key in ('minAvailable', 'maxUnavailable')),
            str((budget.get('status') or {}).get('disruptionsAllowed', 0)),
            age(budget)]


def table(res: model.Resource, objects: list, metadata: dict) -> dict:
    """Render objects as the meta.k8s.io Table that "kubectl get" prints."""
    columns = ([(name, 0) for name in res.columns]
               + [(name, 1) for name in res.wide_columns])  # 1: -o wide
    cells = res.cells or (lambda obj: [obj['metadata']['name'], age(obj)])
    return {
        'kind': 'Table', 'apiVersion': 'meta.k8s.io/v1',
        'metadata': metadata,
        'columnDefinitions': [
            {'name': name, 'type': 'string',
             'format': 'name' if name == 'Name' else '', 'description': '',
             'priority': priority}
            for name, priority in columns],
        'rows': [{'cells': cells(obj),
                  'object': {'kind': 'PartialObjectMetadata',
                             'apiVersion': 'meta.k8s.io/v1',
                             'metadata': obj['metadata']}}
                 for obj in objects],
    }
