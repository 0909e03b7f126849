"""The kinds the test API server serves (``RESOURCES``, the table every
request is routed by), the objects a new server starts with, and the
discovery documents."""


from testbed.kubeapi import deployments
from testbed.kubeapi import model
from testbed.kubeapi import printing
from testbed.kubeapi import statefulsets
from testbed.kubeapi import storage_kinds
from testbed.kubeapi import validation
from testbed.kubeapi import workloads


def resource_for(kind: str) -> model.Resource:
    for res in RESOURCES:
        if kind.lower() in (res.plural, res.singular, res.group_plural,
                            *res.short_names):
            return res
    raise ValueError(f'unknown kind {kind!r}')


PV = model.Resource(
    '', 'persistentvolumes', 'PersistentVolume', False, ('pv',),
    prepare=validation.prepare_pv, check=validation.pv_errors,
    new_status=workloads.pending_status,
    finalizer=model.PV_PROTECTION,
    columns=('Name', 'Capacity', 'Access Modes', 'Reclaim Policy', 'Status',
             'Claim', 'StorageClass', 'VolumeAttributesClass', 'Reason',
             'Age'),
    wide_columns=('VolumeMode',), cells=printing.pv_cells)
PVC = model.Resource(
    '', 'persistentvolumeclaims', 'PersistentVolumeClaim', True, ('pvc',),
    prepare=validation.prepare_pvc, check=validation.pvc_errors,
    new_status=workloads.pending_status,
    finalizer=model.PVC_PROTECTION,
    columns=('Name', 'Status', 'Volume', 'Capacity', 'Access Modes',
             'StorageClass', 'VolumeAttributesClass', 'Age'),
    wide_columns=('VolumeMode',), cells=printing.pvc_cells)
NODE = model.Resource(
    '', 'nodes', 'Node', False, ('no',), new_status=workloads.client_status,
    fields=('spec.unschedulable',),
    columns=('Name', 'Status', 'Roles', 'Age', 'Version'),
    wide_columns=('Internal-IP', 'External-IP', 'OS-Image', 'Kernel-Version',
                  'Container-Runtime'),
    cells=printing.node_cells)
NAMESPACE = model.Resource(
    '', 'namespaces', 'Namespace', False, ('ns',), name_rule='label',
    prepare=validation.prepare_namespace, new_status=workloads.active_status,
    protected=frozenset({'default', 'kube-system', 'kube-public'}),
    columns=('Name', 'Status', 'Age'), cells=printing.namespace_cells)
SERVICE_ACCOUNT = model.Resource(
    '', 'serviceaccounts', 'ServiceAccount', True, ('sa',),
    columns=('Name', 'Secrets', 'Age'), cells=printing.service_account_cells)
SECRET = model.Resource(
    '', 'secrets', 'Secret', True, prepare=validation.prepare_secret,
    check=validation.secret_errors, columns=('Name', 'Type', 'Data', 'Age'),
    cells=printing.secret_cells)
CONFIG_MAP = model.Resource(
    '', 'configmaps', 'ConfigMap', True, ('cm',),
    check=validation.config_map_errors,
    columns=('Name', 'Data', 'Age'), cells=printing.config_map_cells)
POD = model.Resource(
    '', 'pods', 'Pod', True, ('po',), prepare=workloads.prepare_pod,
    check=workloads.pod_errors, new_status=workloads.pod_status,
    grace=workloads.pod_grace,
    evictable=True,
    fields=('spec.nodeName', 'spec.restartPolicy', 'spec.schedulerName',
            'spec.serviceAccountName', 'status.phase', 'status.podIP',
            'status.nominatedNodeName'),
    columns=('Name', 'Ready', 'Status', 'Restarts', 'Age'),
    wide_columns=('IP', 'Node', 'Nominated Node', 'Readiness Gates'),
    cells=printing.pod_cells)
_WORKLOAD_WIDE_COLUMNS = ('Containers', 'Images', 'Selector')
DAEMON_SET = model.Resource(
    model.APPS_GROUP, 'daemonsets', 'DaemonSet', True, ('ds',),
    prepare=workloads.prepare_daemon_set, check=workloads.workload_errors,
    new_status=workloads.zero_status, generation=True,
    owned_status=workloads.daemon_set_status,
    columns=('Name', 'Desired', 'Current', 'Ready', 'Up-to-date',
             'Available', 'Node Selector', 'Age'),
    wide_columns=_WORKLOAD_WIDE_COLUMNS, cells=printing.daemon_set_cells)
REPLICA_SET = model.Resource(
    model.APPS_GROUP, 'replicasets', 'ReplicaSet', True, ('rs',),
    prepare=workloads.prepare_replica_set, check=workloads.workload_errors,
    new_status=workloads.zero_status, generation=True, scalable=True,
    owned_status=workloads.replica_set_status,
    columns=('Name', 'Desired', 'Current', 'Ready', 'Age'),
    wide_columns=_WORKLOAD_WIDE_COLUMNS, cells=printing.replica_set_cells)
DEPLOYMENT = model.Resource(
    model.APPS_GROUP, 'deployments', 'Deployment', True, ('deploy',),
    prepare=deployments.prepare_deployment, check=workloads.workload_errors,
    new_status=workloads.zero_status, generation=True, scalable=True,
    columns=('Name', 'Ready', 'Up-to-date', 'Available', 'Age'),
    wide_columns=_WORKLOAD_WIDE_COLUMNS, cells=printing.deployment_cells)
STATEFUL_SET = model.Resource(
    model.APPS_GROUP, 'statefulsets', 'StatefulSet', True, ('sts',),
    prepare=statefulsets.prepare_stateful_set,
    check=workloads.workload_errors, new_status=statefulsets.new_status,
    generation=True, scalable=True,
    owned_status=statefulsets.stateful_set_status,
    columns=('Name', 'Ready', 'Age'),
    wide_columns=('Containers', 'Images'),
    cells=printing.stateful_set_cells)
POD_DISRUPTION_BUDGET = model.Resource(
    model.POLICY_GROUP, 'poddisruptionbudgets', 'PodDisruptionBudget', True,
    ('pdb',), check=workloads.budget_errors,
    new_status=workloads.budget_status,
    generation=True,
    columns=('Name', 'Min Available', 'Max Unavailable',
             'Allowed Disruptions', 'Age'),
    cells=printing.budget_cells)
CLUSTER_ROLE = model.Resource(
    model.RBAC_GROUP, 'clusterroles', 'ClusterRole', False,
    name_rule='path segment', check=validation.cluster_role_errors,
    columns=('Name', 'Created At'), cells=printing.cluster_role_cells)
CLUSTER_ROLE_BINDING = model.Resource(
    model.RBAC_GROUP, 'clusterrolebindings', 'ClusterRoleBinding', False,
    name_rule='path segment', check=validation.binding_errors,
    columns=('Name', 'Role', 'Age'),
    wide_columns=('Users', 'Groups', 'ServiceAccounts'),
    cells=printing.binding_cells)

STORAGE_CLASS = storage_kinds.STORAGE_CLASS
CSI_DRIVER = storage_kinds.CSI_DRIVER

RESOURCES = (PV, PVC, NODE, NAMESPACE, SERVICE_ACCOUNT, SECRET, CONFIG_MAP,
             POD, DAEMON_SET, REPLICA_SET, DEPLOYMENT, STATEFUL_SET,
             POD_DISRUPTION_BUDGET,
             CLUSTER_ROLE, CLUSTER_ROLE_BINDING, storage_kinds.ROLE,
             storage_kinds.ROLE_BINDING, STORAGE_CLASS, CSI_DRIVER)
# (group, version, plural) -> resource, to route resource requests.
ROUTES = {(res.group, res.version, res.plural): res for res in RESOURCES}


def initial_objects() -> list:
    """(resource, body) of the objects a new server starts with."""
    return [
        *[(NAMESPACE, {'metadata': {'name': name}})
          for name in model.INITIAL_NAMESPACES],
        (CLUSTER_ROLE, {
            'metadata': {
                'name': model.CLUSTER_ADMIN,
                'labels': {'kubernetes.io/bootstrapping': 'rbac-defaults'},
                'annotations': {
                    'rbac.authorization.kubernetes.io/autoupdate': 'true'}},
            'rules': [{'apiGroups': ['*'], 'resources': ['*'],
                       'verbs': ['*']},
                      {'nonResourceURLs': ['*'], 'verbs': ['*']}]})]


def discovery_entries(res: model.Resource) -> list:
    """The entries of a resource (and its subresources) in discovery."""
    entry = {'name': res.plural, 'singularName': res.singular,
             'namespaced': res.namespaced, 'kind': res.kind,
             'verbs': ['create', 'delete', 'get', 'list', 'patch', 'update',
                       'watch']}
    if res.short_names:
        entry['shortNames'] = list(res.short_names)
    entries = [entry]
    if res.evictable:
        # drain finds the Eviction API (and its version) here.
        entries.append({'name': f'{res.plural}/eviction',
                        'singularName': '', 'namespaced': res.namespaced,
                        'group': model.POLICY_GROUP, 'version': 'v1',
                        'kind': 'Eviction', 'verbs': ['create']})
    if res.scalable:
        entries.append({'name': f'{res.plural}/scale', 'singularName': '',
                        'namespaced': res.namespaced,
                        'group': 'autoscaling', 'version': 'v1',
                        'kind': 'Scale', 'verbs': ['get', 'patch', 'update']})
    if res.new_status is not None:
        entries.append({'name': f'{res.plural}/status', 'singularName': '',
                        'namespaced': res.namespaced, 'kind': res.kind,
                        'verbs': ['get', 'patch', 'update']})
    return entries


def api_group(group: str) -> dict:
    versions = [{'groupVersion': f'{group}/{version}', 'version': version}
                for version in dict.fromkeys(
                    res.version for res in RESOURCES if res.group == group)]
    return {'name': group, 'versions': versions,
            'preferredVersion': versions[0]}
