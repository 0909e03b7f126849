"""A small in-memory Kubernetes API server that the real kubectl can talk to.

Tests of the management driver need kubectl to behave as it does against a
cluster: discovery, client-side ``apply`` (strategic merge patches), ``wait``
(list + watch), ``delete`` waiting for finalizers, ``cordon``, ``drain``
(evictions) and ``uncordon``. This server implements that much for the kinds
in ``kinds.RESOURCES``: PersistentVolumes and PersistentVolumeClaims, Nodes,
Namespaces, ServiceAccounts, Secrets, ConfigMaps and Pods of core/v1,
DaemonSets, ReplicaSets and Deployments of apps/v1, PodDisruptionBudgets
of policy/v1 (with the Eviction subresource of Pods), and ClusterRoles and
ClusterRoleBindings of rbac.authorization.k8s.io/v1. Small controllers
(``controllers.CONTROLLERS``) imitate the PV binder, the pv-/pvc-protection
finalizers, the namespace controller, the legacy service-account token
controller, the kubelets (pods bound to an existing Node run and are Ready;
deleted ones terminate after a short grace, except on a Node lost with
lose_node()), the pod garbage collector (pods of a deleted Node go), the
status of ReplicaSets and DaemonSets, and the disruption controller;
the Deployment controller (a ReplicaSet per pod template, rolled over),
the ReplicaSet controller and the scheduler for the ReplicaSets of
Deployments, and the garbage collector (``replication``). A pod with
claims runs once they are Bound (and, on a Node with a node agent, once
it mounted them: testbed.node_agent). Nothing creates pods for a
ReplicaSet or DaemonSet a client made itself. Bearer tokens are
checked and service accounts authorized by their ClusterRoleBindings, as
RBAC does. It follows the requests kubectl was seen to send.

Standard library only; the TLS certificate is made with the ``openssl`` CLI.

The modules, from the bottom up: ``model`` (kinds, errors, requests),
``validation``, ``workloads`` and ``deployments`` (defaults, checks,
statuses and the rules of the Deployment controllers),
``patches`` (patches and selectors), ``bodies`` (JSON and protobuf request
bodies), ``printing`` ("kubectl get" tables), ``kinds`` (the table of kinds
served), ``auth`` (users and RBAC), ``store`` (objects and operations),
``controllers`` and ``replication``, ``handler`` (HTTP), ``server``
(``KubeApiServer``), ``certificates``, ``manifests`` (objects for tests)
and ``kubectl``.
"""

from testbed.kubeapi.kubectl import kubectl_binary
from testbed.kubeapi.kubectl import kubectl_version
from testbed.kubeapi.manifests import owner_reference
from testbed.kubeapi.manifests import pod_manifest
from testbed.kubeapi.model import INITIAL_NAMESPACES
from testbed.kubeapi.model import PROTOBUF
from testbed.kubeapi.server import KubeApiServer

__all__ = ['INITIAL_NAMESPACES', 'KubeApiServer', 'PROTOBUF',
           'kubectl_binary', 'kubectl_version', 'owner_reference',
           'pod_manifest']
