"""Check mode: what instantiate_end would change on each host, changing
nothing, like Ansible's ``--check``.

It logs in to every VM of the VNF, gathers the same facts and makes the
same plans as the hooks (``ClusterWorkflow.check_install``,
``PvWorkflow.check_deploy``), and describes them here, per host. The
install converges: a heal of the entire VNF or a scale-out reaches the
same state, so the plan also says what those would do to the VMs. The
VIM registration (Tacker's side) is not checked.
"""

import dataclasses

from kubernetes_mgmt_pv.cluster import cluster_feature
from kubernetes_mgmt_pv.cluster import cluster_workflow
from kubernetes_mgmt_pv import config
from kubernetes_mgmt_pv import exceptions
from kubernetes_mgmt_pv.openstack import heat
from kubernetes_mgmt_pv.remote import dpkg
from kubernetes_mgmt_pv.remote import remote
from kubernetes_mgmt_pv.request import param_model
from kubernetes_mgmt_pv import step_report
from kubernetes_mgmt_pv.storage import manifests
from kubernetes_mgmt_pv.storage import nfs_client
from kubernetes_mgmt_pv.storage import server_steps
from kubernetes_mgmt_pv.storage import storage_workflow


@dataclasses.dataclass(frozen=True)
class Change(object):
    """One change a hook would make on one host."""
    host: str
    change: str


@dataclasses.dataclass(frozen=True)
class CheckResult(object):
    hosts: tuple  # (address, role) of every VM, in the topology's order
    changes: tuple  # Change

    def of(self, host):
        return [change.change for change in self.changes
                if change.host == host]


# -- descriptions of the plans (pure) ---------------------------------------

def preparation_changes(prepared):
    """What a ``cluster_sequence.Preparation`` changes on its VM."""
    found = []
    if prepared.host_name:
        found.append('set the host name %s (was %s)' % (
            prepared.host_name, prepared.was_named))
    if prepared.hosts_file is not None:
        found.append('update %s' % cluster_workflow.HOSTS_FILE)
    if prepared.reset:
        found.append('kubeadm reset (%s)' % prepared.reset)
    return found


def install_changes(sequence):
    """The Changes of a ``cluster_sequence.InstallSequence``."""
    plan = sequence.plan
    leader = plan.leader.address
    changes = [Change(prepared.node.address, text)
               for prepared in sequence.preparations
               for text in preparation_changes(prepared)]
    if plan.stale_api_nodes:
        changes.append(Change(leader, 'delete the stale Node(s) %s' %
                              ', '.join(plan.stale_api_nodes)))
    if not plan.leader_joined:
        changes.append(Change(leader, 'initialise the cluster (install '
                                      'script as its first Master)'))
    if sequence.remove_stale_etcd:
        changes.append(Change(leader, 'remove the etcd members left by '
                                      'earlier VMs of the joining Masters'))
    changes += [Change(node.address, 'join the cluster as a Master')
                for node in plan.join_masters]
    changes += [Change(node.address, 'join the cluster as a Worker')
                for node in plan.join_workers]
    return changes


def ha_changes(host, plan):
    """The Changes of an ``ha.Plan`` on a Master."""
    if plan.install:
        return [Change(host, 'install %s, then configure them' %
                       ' '.join(plan.install))]
    changes = []
    for service in plan.services:
        if service.content is not None:
            changes.append(Change(host, 'write %s' % service.path))
        if service.action is not None:
            changes.append(Change(host, '%s %s' % (service.action,
                                                   service.service)))
    return changes


def volume_changes(volume):
    found = []
    if volume.mkfs:
        found.append('format %s (%s)' % (volume.point.device,
                                         server_steps.NEW_FILESYSTEM))
    if volume.mount:
        found.append('mount %s on %s' % (volume.point.device,
                                         volume.point.mount_to))
    return found


def server_changes(host, plan):
    """The Changes of a ``server_steps.ServerPlan`` on the storage server (a
    step decided after another change is named as following it)."""
    found = [text for volume in plan.volumes
             for text in volume_changes(volume)]
    found += [text for pending, text in (
        (plan.fstab_after_format,
         'update %s with the new filesystems' % server_steps.FSTAB_FILE),
        (plan.fstab is not None, 'update %s' % server_steps.FSTAB_FILE),
        (plan.install, 'install %s' % ' '.join(plan.install)),
        (plan.restat_directories, 'create and chown the export '
                                  'directories missing on the new mounts'),
    ) if pending]
    found += ['create %s' % directory for directory in plan.create]
    found += ['chown %s %s' % (server_steps.EXPORT_OWNER, directory)
              for directory in plan.chown]
    found += [text for pending, text in (
        (plan.reread_exports, 'update %s and export after the '
                              'installation' % server_steps.EXPORTS_FILE),
        (plan.exports is not None, 'update %s' % server_steps.EXPORTS_FILE),
        (plan.reexport and not plan.reread_exports, 'exportfs -ra'),
    ) if pending]
    return [Change(host, text) for text in found]


def client_changes(host, client_facts):
    """The NFS client packages a Master or Worker lacks."""
    missing = dpkg.missing_packages(nfs_client.CLIENT_PACKAGES,
                                    client_facts.statuses)
    return [Change(host, 'install %s' % ' '.join(missing))] if missing \
        else []


def registration_changes(host, plan):
    """The Changes of a ``pv.RegistrationPlan``, on the Master kubectl
    runs on."""
    changes = [Change(host, 'delete PersistentVolume %s (its NFS source '
                            'changed)' % name) for name in plan.recreate]
    changes += [Change(host, 'apply PersistentVolume %s' % manifest.name)
                for manifest, _ in plan.apply]
    return changes


def deploy_changes(check):
    """The Changes of a ``storage_workflow.DeployCheck``."""
    changes = [change for address, found in check.clients.items()
               for change in client_changes(address, found)]
    changes += server_changes(check.storage, check.server)
    if check.registration is not None:
        changes += registration_changes(check.registrar, check.registration)
    return changes


def render(result):
    """The text of a CheckResult: each host, then what would change."""
    lines = []
    for host, role in result.hosts:
        changes = result.of(host)
        lines.append('%s (%s): %s' % (host, role, '%d change(s)' % len(
            changes) if changes else 'no change'))
        lines += ['    %s' % change for change in changes]
    lines.append('%d change(s) pending on %d host(s)' % (
        len(result.changes), len({c.host for c in result.changes})))
    return lines


# -- the check ----------------------------------------------------------------

def _recorded(report):
    """Changes a plan recorded on the way (the etcd client)."""
    return [Change(outcome.host, '%s: %s' % (outcome.step, outcome.detail))
            for outcome in report.outcomes if outcome.changed]


def check(params, pv_manifests, script, stack, conf=None, project=None):
    """The CheckResult of instantiate_end for a VNF whose ``params``
    (param_model.ClusterParams), ``pv_manifests`` and install ``script``
    (bytes, None without the cluster feature) are given, its Heat stack
    read through ``stack`` (heat.HeatStack); ``project``: the VNF
    instance's project id, whose key directory ssh_key_per_project uses."""
    conf = conf or config.options()

    def key_project():
        return project
    report = step_report.Report()
    changes = []
    with remote.SessionPool(conf=conf) as pool:
        pool.hide(*heat.vim_secrets(stack.client))
        nodes = None
        if params.script_path is not None:
            flow = cluster_workflow.ClusterWorkflow(
                params, stack, script, conf=conf, sessions=pool,
                key_project=key_project)
            nodes = flow.topology.nodes
            with flow.sessions() as sessions:
                sequence, ha_plans = flow.check_install(sessions, report)
            changes += install_changes(sequence)
            changes += [change for host, plan in ha_plans.items()
                        for change in ha_changes(host, plan)]
        if params.pv_enabled:
            flow = storage_workflow.PvWorkflow(
                params, pv_manifests, stack, conf=conf, sessions=pool,
                key_project=key_project)
            nodes = nodes or flow.topology.nodes
            with flow.sessions() as sessions:
                changes += deploy_changes(flow.check_deploy(sessions,
                                                            report))
    changes += _recorded(report)
    hosts = tuple((node.address, node.role) for node in nodes or ())
    order = {host: index for index, (host, _) in enumerate(hosts)}
    return CheckResult(hosts, tuple(sorted(
        dict.fromkeys(changes), key=lambda c: order.get(c.host, len(order)))))


def load(package_dir, request, access_info, stack_id):
    """(params, pv_manifests, script, stack) of a VNF from its package
    directory, the Instantiate request body (a dict), the OpenStack VIM's
    access_info and the Heat stack id (the instance's instanceId),
    checked as the hooks check them."""
    for name, value in (('request', request), ('vim', access_info)):
        if not isinstance(value, dict):
            raise exceptions.ParameterErrors([exceptions.ParameterError(
                name, 'must be a JSON object')])
    params = param_model.parse(request.get('additionalParams') or {})
    if params.script_path is None and not params.pv_enabled:
        raise exceptions.ParameterErrors([
            exceptions.ParameterError(
                'additionalParams.' + param_model.ROOT,
                'has neither script_path nor storage_server: the driver '
                'changes nothing on this VNF')])
    script = None
    if params.script_path is not None:
        script = cluster_feature.read_package_file(
            package_dir, params.script_path, param_model.ROOT + '.script_path')
    loaded = manifests.load(package_dir, params.pv_registrations) \
        if params.pv_enabled else []
    client = heat.build_heat_client(access_info)
    return params, loaded, script, heat.HeatStack(client, stack_id)
