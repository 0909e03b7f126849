"""The Kubernetes minor upgrade of a cluster, free of Tacker: what the
v2 door runs for ChangeCurrentVnfPackage when the new VNF package's
install script installs the next minor.

Every decision is taken by ``upgrade_plan`` from facts read first; this
module only sequences the steps, one node at a time, so that a re-run
after a failure anywhere converges.
"""


def upgrade_cluster(workflow, new_script, drain_force=None,
                    check_only=False):
    """Upgrade the cluster of ``workflow`` in place to the Kubernetes
    version the new package's install script installs.

    ``workflow``: a ``cluster_workflow.ClusterWorkflow`` of the hook (the
    VNF instance's parameters, its Heat stack, the hook's SessionPool;
    its own ``script`` is not used). ``new_script``: the bytes of the new
    VNF package's install script; its ``K8S_PACKAGE_VERSION`` is the
    target, and it is uploaded to every node before that node's packages
    change (its ``-U`` upgrade mode switches the apt source to the new
    minor's repository and installs the held packages). ``drain_force``:
    None takes the driver's ``drain_force`` option; True lets a Worker's
    drain delete pods that a PodDisruptionBudget protects.
    ``check_only``: gather the facts and refuse or plan, changing nothing
    (for a ``change_current_package_start`` hook).

    Order: the first Master ``kubeadm upgrade apply``, the other Masters
    ``kubeadm upgrade node``, then each Worker drained (Eviction API),
    upgraded, its kubelet restarted and uncordoned; each node Ready at the
    target version before the next starts. A node already at the target
    version is skipped. Afterwards the certificates are checked (kubeadm
    renewed them) and admin.conf copied again.

    Returns ``(upgrade_plan.UpgradePlan, step_report.Report)``.

    Raises, before any change:
      ``exceptions.ParameterErrors`` when ``new_script`` names no
      K8S_PACKAGE_VERSION;
      ``exceptions.NodeStepError`` with step ``'upgrade check'`` and
      ``failures`` {host address: ClusterInstallError(reason)}: a jump of
      more than one minor or a downgrade (host: the Master asked), a Node
      not Ready, an unhealthy etcd, a PodDisruptionBudget that allows no
      eviction without ``drain_force``. Its message ends "nothing was
      changed".
    Raises, during the upgrade:
      ``exceptions.StepError`` (``step``, ``host``, ``reason``), e.g.
      step ``'kubeadm upgrade node'`` on the second Master; the nodes
      before it are upgraded, a re-run continues from that node.
      ``exceptions.RemoteConnectError`` when a node cannot be logged in.
    """
    raise NotImplementedError('upgrade_cluster is being written')
