#!/usr/bin/env python3
"""The main job through real Tacker: the user guide's lifecycle over
Tacker's REST API.

Starts tacker-server and tacker-conductor (Tacker 16 from the ``.tox/tacker``
virtualenv, where the driver is installed) with private MariaDB and
RabbitMQ, and a fake Keystone/Nova whose Heat is an engine that boots real
SSH test hosts (network namespaces) for the servers of the sample BaseHOT.
Then, as an operator would with ``openstack vim register`` / ``openstack vnf
package`` / ``openstack vnflcm``: register the OpenStack VIM, build the sample
package with ``kubernetes-mgmt-pv package`` and onboard it, create and
instantiate the VNF with samples/requests/instantiate_simple.json, instantiate
the sample CNF (samples/cnf_with_pv) on the cluster's Kubernetes VIM through
/vnflcm/v2 (its pod Running with node agents in the kubelets' place, its claim
Bound to nfs-pv1, a file it writes on the Storage server) and terminate it
(on the v2 cluster, whose request has a default StorageClass, also the CNF's
flavour "dynamic": a StatefulSet whose claim csi-driver-nfs provisions in a
directory of its own on the Storage server, scaled out to a second pod with a
directory of its own, terminated with both directories kept),
scale the Workers out and in, heal a Worker, try to heal the Storage server
while a PersistentVolume is Bound (refused), release the claim, fail that
operation and heal the Storage server, heal the entire VNF, terminate and
delete. The lifecycle runs twice, through both of the driver's front doors:
first Tacker's v1 API (``/vnflcm/v1``, the driver's entry point), then its v2
API (``/vnflcm/v2``, a v2 package whose VNFD runs
Scripts/kubernetes_mgmt_v2.py, the request's vimConnectionInfo naming the
OpenStack VIM). The v2 request's ``offline`` object names the testbed's apt
repository (an internal mirror of pkgs.k8s.io serving two minors;
testbed.lab_upgrade), and before its terminate the v2 cluster is upgraded to
the next Kubernetes minor through ChangeCurrentVnfPackage; before that, a
v2 Worker is powered off (``openstack server stop``) and Tacker heals it by
itself: Prometheus's probe of its kubelet fails, the alert reaches Tacker's
Prometheus plugin through Alertmanager, and Tacker runs a HEAL with
``isAutomaticInvocation`` true (the lab's testbed.monitoring, as the
operator guide's "Auto-heal" sets it up). Then the upgrade to
the next Kubernetes minor through ChangeCurrentVnfPackage (``POST
.../change_vnfpkg`` to a package whose install script installs it, its packages
from that repository); kubectl get nodes then shows the new version. The
requests log in with the key files the lab places in the conductor's
ssh_key_dir, as the samples do. Each LCM operation is printed with its API
version and its result as Tacker reports it (GET
/vnflcm/v{1,2}/vnf_lcm_op_occs/{id}), followed by the checks of the user guide:
df -h and sudo exportfs -v on the Storage server, kubectl get pv and kubectl
get nodes on a Master, and the VIMs.

Run it as root from the repository root, after ``tox -e tacker`` has
created Tacker's virtualenv once::

    .tox/tacker/bin/python -m tools.demo_tacker [--keep DIR]

``--keep DIR`` keeps the work directory (tacker.conf and every log) there.
Everything is torn down at the end; the exit status tells whether every
step did what the user guide says.
"""

import argparse
import os
import shutil
import sys
import tempfile
import time
import uuid

from testbed import cnf_dynamic
from testbed import cnf_package
from testbed import cnf_sample
from testbed import hosts
from testbed import lab_upgrade
from testbed import monitoring
from testbed import nfs
from testbed import polling
from testbed import pv_manifest
from testbed import tacker_lab
from testbed import tacker_service
from testbed import tacker_v2


class Failed(Exception):
    pass


def banner(text):
    print('\n==> %s' % text, flush=True)


def section(title, text):
    print('--- %s ---' % title)
    print(text.rstrip(), flush=True)


def show_op(api, occ):
    error = (occ.get('error') or {}).get('detail')
    print('LCM (API %s) %s %s: %s (%ss)%s' % (
        api, occ['operation'], occ['id'], occ['operationState'],
        occ.get('seconds', '?'), '\n    error: %s' % error if error else ''),
        flush=True)


def operator_checks(lab, instance_id, pvs=True):
    storage = lab.storage_checks(instance_id)
    section('df -h on the Storage server (%s)' % storage['address'],
            '\n'.join(line for line in storage['df'].splitlines()
                      if line.startswith(('Filesystem', '/dev/vd'))))
    section('sudo exportfs -v on the Storage server', storage['exportfs'])
    master = lab.masters()[0]
    section('kubectl get pv on %s (%s)' % (master.name, master.ip),
            lab.kubectl('get', 'pv'))
    section('kubectl get nodes on %s' % master.name,
            lab.kubectl('get', 'nodes'))
    section('GET /v1.0/vims', '\n'.join(
        '%-20s %-10s %s' % (v['name'], v['type'], v['status'])
        for v in lab.vims()))
    if pvs:
        volumes = lab.persistent_volumes()
        wrong = {name: item['status']['phase']
                 for name, item in volumes.items()
                 if item['status']['phase'] != 'Available'}
        if wrong or not volumes:
            raise Failed('PersistentVolumes not Available: %s' % wrong)
        if '/dev/vdb' not in storage['df']:
            raise Failed('/dev/vdb is not mounted on the Storage server')


def print_exports(additional_params):
    """What the request exports to: the testbed's subnet, where the
    sample has the user guide's network."""
    storage = additional_params['k8s_cluster_installation_param'][
        'storage_server']
    section('nfs_server_setup_params of the request', '\n'.join(
        '%s -> export_to %s' % (export['export_dir'], export['export_to'])
        for export in storage['nfs_server_setup_params']))


def expect(occ, state='COMPLETED'):
    if occ['operationState'] != state:
        raise Failed('%s ended %s, expected %s: %s' % (
            occ['operation'], occ['operationState'], state,
            (occ.get('error') or {}).get('detail')))


class V1Door(object):
    """Tacker's v1 API: the driver's entry point, samples/requests."""

    api = 'v1'
    requests = 'samples/requests'  # the sample bodies it sends
    upgrades = False  # ChangeCurrentVnfPackage is v2's
    auto_heals = False  # Tacker v1 has no auto-heal
    storage_classes = False  # only samples/requests-v2 has one

    def __init__(self, lab):
        self.lab = lab

    def package(self, workdir, kubernetes_version=None):
        return self.lab.build_package(workdir, api=self.api)

    def create(self, vnfd_id):
        return self.lab.client.post('/vnflcm/v1/vnf_instances',
                                    {'vnfdId': vnfd_id},
                                    expect=201).body['id']

    def instantiate_request(self, vim_id):
        return self.lab.instantiate_request(vim_id, api=self.api,
                                            login='key')

    def sample_request(self, name):
        return self.lab.sample_request(name, self.api, login='key')

    def lcm(self, instance_id, operation, body):
        return self.lab.lcm(instance_id, operation, body)

    def heal_target(self, instance_id, vdu_id):
        """The id a heal request names for the first VNFC of a VDU."""
        return self.lab.vnfcs(instance_id, vdu_id)[0]['id']

    def heal_request(self, name, target=None):
        request = self.sample_request(name)
        if target:
            request['vnfcInstanceId'] = [target]
        return request

    def fail(self, op_id):
        return self.lab.op_action(op_id, 'fail')

    def delete(self, instance_id):
        self.lab.client.delete('/vnflcm/v1/vnf_instances/%s' % instance_id,
                               expect=204)


class V2Door(V1Door):
    """Tacker's v2 API: the package built with ``--api v2`` (its VNFD runs
    Scripts/kubernetes_mgmt_v2.py), samples/requests-v2 naming the test
    apt repository (a lab_upgrade.LabRepository), where the upgrade finds
    the next minor's packages."""

    api = 'v2'
    requests = 'samples/requests-v2'
    upgrades = True
    auto_heals = True
    storage_classes = True

    def __init__(self, lab, repository):
        super().__init__(lab)
        self.v2 = tacker_v2.V2Api(lab.service.api_url)
        self.repository = repository

    def package(self, workdir, kubernetes_version=None):
        return self.repository.build_package(
            workdir, kubernetes_version=kubernetes_version)

    def instantiate_request(self, vim_id):
        return self.repository.instantiate_request(
            vim_id, 'instantiate_simple.json')

    def create(self, vnfd_id):
        return self.v2.create(vnfd_id, 'kubernetes-pv-v2')['id']

    def lcm(self, instance_id, operation, body):
        return self.v2.lcm(instance_id, operation, body)

    def heal_target(self, instance_id, vdu_id):
        return tacker_v2.vnfcs(self.v2.instance(instance_id),
                               vdu_id)[0]['vnfcInfoId']

    def heal_request(self, name, target=None):
        request = super().heal_request(name, target)
        # v2: the Storage server's volume too (as v1 heals it), and the
        # whole stack re-created for an entire heal.
        request['additionalParams']['all'] = True
        return request

    def fail(self, op_id):
        return self.v2.op_action(op_id, 'fail')

    def delete(self, instance_id):
        self.v2.delete(instance_id)


def cnf_step(lab, workdir, api, instance_id, dynamic):
    """The sample CNF on the cluster's VIM: instantiated through Tacker
    v2, its pod Running and its claim Bound to nfs-pv1, a file its pod
    writes found on the Storage server; then terminated, and nfs-pv1
    made Available again. With ``dynamic`` (a cluster with the v2
    sample's storage class) its flavour "dynamic" too (dynamic_cnf_step).
    Returns the LCM seconds."""
    v2 = tacker_v2.V2Api(lab.service.api_url)
    kube = lab.engine.kubes[lab.stack(instance_id).id]
    storage = lab.host_at(lab.cp_address(instance_id))
    nodes = cnf_sample.workers(lab.engine.testbed.hosts.values(), kube)
    # Onboarded once per API, under two ids (--vnfd-id).
    vnfd_id, package = lab.zip_package(
        cnf_sample.SAMPLE, os.path.join(workdir, api + '-cnf.zip'),
        api='cnf', vnfd_id=str(uuid.uuid4()))
    package = lab.client.onboard_package(package)
    print('CNF package %s (kubernetes-mgmt-pv package --api cnf): %s' % (
        package['id'], package['onboardingState']))
    k8s_vim, = [v for v in lab.vims() if v['type'] == 'kubernetes']
    vim = cnf_package.registered_vim(k8s_vim['id'])
    nfs.start_ganesha(storage)  # the testbed's NFS server: the exports
    seconds = 0
    try:
        with cnf_sample.node_agents(kube, nodes):
            cnf_id = v2.create(vnfd_id, 'cnf-with-pv')['id']
            for operation, body in (
                    ('instantiate', cnf_sample.instantiate_request(vim)),
                    ('terminate', {'terminationType': 'FORCEFUL'})):
                occ = v2.lcm(cnf_id, operation, body)
                show_op('v2', occ)
                expect(occ)
                seconds += occ['seconds']
                if operation == 'instantiate':
                    section('kubectl get deploy,pod,pvc', lab.kubectl(
                        'get', 'deploy,pod,pvc'))
                    pod, stored = cnf_sample.write_through_the_pod(
                        kube, nodes, 'written by %s\n' % cnf_id)
                    section('a file the pod %s wrote, on the Storage server'
                            % pod['metadata']['name'], storage.run(
                                'ls -l %s; cat %s' % (stored, stored)).stdout)
            v2.delete(cnf_id)
            cnf_sample.release_volume(kube, lab.kubectl)
    finally:
        nfs.stop_ganesha(storage)
    if dynamic:
        seconds += dynamic_cnf_step(lab, v2, vnfd_id, instance_id, vim)
    return seconds


def dynamic_cnf_step(lab, v2, vnfd_id, instance_id, vim):
    """The sample CNF's flavour "dynamic" (the StatefulSet db): its claim
    of the default class Bound to a PV csi-driver-nfs made, a file its
    pod writes in the claim's own directory on the Storage server; scaled
    out, the new pod's claim gets a directory of its own; terminated
    (Tacker deletes the claims), both directories stay (on_delete
    retain). Returns the LCM seconds."""
    banner('The sample CNF\'s flavour "dynamic" (a StatefulSet whose '
           'claims the default StorageClass provisions; '
           'samples/requests-cnf-v2/%s, %s)' % (cnf_dynamic.INSTANTIATE,
                                                cnf_dynamic.SCALE_OUT))
    kube = lab.engine.kubes[lab.stack(instance_id).id]
    storage = lab.host_at(lab.cp_address(instance_id))
    nodes = cnf_sample.workers(lab.engine.testbed.hosts.values(), kube)
    section('kubectl get storageclass', lab.kubectl('get', 'storageclass'))
    seconds, written = 0, {}
    with cnf_dynamic.provisioning(lab, instance_id):
        cnf_id = v2.create(vnfd_id, 'db-with-dynamic-pv')['id']
        for ordinal, (operation, body) in enumerate((
                ('instantiate', cnf_sample.instantiate_request(
                    vim, name=cnf_dynamic.INSTANTIATE)),
                ('scale', cnf_sample.request(cnf_dynamic.SCALE_OUT)),
                ('terminate', {'terminationType': 'FORCEFUL'}))):
            occ = v2.lcm(cnf_id, operation, body)
            show_op('v2', occ)
            expect(occ)
            seconds += occ['seconds']
            section('kubectl get statefulset,pod,pvc,pv', lab.kubectl(
                'get', 'statefulset,pod,pvc,pv'))
            if operation != 'terminate':
                text = 'written by %s\n' % cnf_dynamic.pod_name(ordinal)
                written[cnf_dynamic.write_through_the_pod(
                    kube, nodes, ordinal, text)] = text
            section('the claims\' directories on the Storage server',
                    storage.run('cd %s && grep -r . .' % cnf_dynamic.EXPORT)
                    .stdout)
        v2.delete(cnf_id)
    kept = {path: storage.read_file(path) for path in written}
    if kept != written:
        raise Failed('the claims\' files are not all on the Storage server '
                     'after terminate: %s' % kept)
    return seconds


def upgrade_step(lab, workdir, door, instance_id, lcm):
    """ChangeCurrentVnfPackage to the next minor's package: every Node at
    its version afterwards."""
    package_version, version = lab_upgrade.next_minor()
    banner('Tacker %s: upgrade Kubernetes to %s (change_vnfpkg to a package '
           'built with --kubernetes-version %s)' % (
               door.api, version, package_version))
    section('kubectl get nodes on %s' % lab.masters()[0].name,
            lab.kubectl('get', 'nodes'))
    vnfd_id, zip_path = door.package(os.path.join(workdir, 'next-minor'),
                                     kubernetes_version=package_version)
    package = lab.client.onboard_package(zip_path)
    print('package %s: %s, vnfdId %s' % (
        package['id'], package['onboardingState'], package['vnfdId']))
    lcm('upgrade', 'change_vnfpkg',
        lab_upgrade.next_minor_request(lab, vnfd_id))
    operator_checks(lab, instance_id)  # kubectl get nodes among them
    versions = {name: node['status']['nodeInfo']['kubeletVersion']
                for name, node in lab.nodes().items()}
    if set(versions.values()) != {version}:
        raise Failed('Nodes not at %s after the upgrade: %s' % (
            version, versions))


class Lifecycle(object):
    """The user guide's lifecycle through one door: each step prints its
    LCM operations with the operator's checks; ``timings`` keeps their
    seconds."""

    def __init__(self, lab, workdir, door):
        self.lab, self.workdir, self.door = lab, workdir, door
        self.name = 'Tacker %s' % door.api
        self.timings = {}
        self.instance_id = None

    def lcm(self, step, operation, body, state='COMPLETED'):
        occ = self.door.lcm(self.instance_id, operation, body)
        show_op(self.door.api, occ)
        self.timings[step] = occ['seconds']
        expect(occ, state)
        return occ

    def checks(self):
        operator_checks(self.lab, self.instance_id)

    def instantiate(self, vim):
        lab, door = self.lab, self.door
        banner('%s: build the package and onboard it' % self.name)
        vnfd_id, zip_path = door.package(os.path.join(self.workdir,
                                                      door.api))
        package = lab.client.onboard_package(zip_path)
        print('package %s: %s, vnfdId %s' % (
            package['id'], package['onboardingState'], package['vnfdId']))
        banner('%s: create and instantiate the VNF '
               '(%s/instantiate_simple.json)' % (self.name,
                                                 self.door.requests))
        self.instance_id = door.create(vnfd_id)
        print('VNF instance %s' % self.instance_id)
        request = door.instantiate_request(vim['id'])
        print_exports(request['additionalParams'])
        self.lcm('instantiate', 'instantiate', request)
        self.checks()

    def cnf(self):
        banner('%s: a CNF on the cluster\'s Kubernetes VIM, through Tacker '
               'v2 (samples/cnf_with_pv, samples/requests-cnf-v2)'
               % self.name)
        self.timings['cnf'] = cnf_step(
            self.lab, self.workdir, self.door.api, self.instance_id,
            dynamic=self.door.storage_classes)

    def scale(self):
        for direction in ('out', 'in'):
            banner('%s: scale %s the Workers (%s/scale_%s_worker.json)'
                   % (self.name, direction, self.door.requests, direction))
            self.lcm('scale_' + direction, 'scale', self.door.sample_request(
                'scale_%s_worker.json' % direction))
            self.checks()

    def heal_worker(self):
        door = self.door
        banner('%s: heal a Worker (vnfcInstanceId)' % self.name)
        request = door.sample_request('scale_out_worker.json')
        worker = dict(cause='Heal a Worker node', vnfcInstanceId=[
            door.heal_target(self.instance_id, 'workerNode')])
        if 'additionalParams' in request:  # v2: the node logins
            worker['additionalParams'] = request['additionalParams']
        self.lcm('heal_worker', 'heal', worker)
        self.checks()

    def auto_heal(self):
        """v2: a Worker powered off, which Tacker heals by itself."""
        lab, v2, instance_id = self.lab, self.door.v2, self.instance_id
        vnfc = tacker_v2.vnfcs(v2.instance(instance_id), 'workerNode')[0]
        server = vnfc['computeResource']['resourceId']
        banner('%s: openstack server stop %s (Worker %s): no request from '
               'here on' % (self.name, server, lab.engine.hosts[server]))
        known = v2.op_ids(instance_id)
        lab.stop_server(server)
        firing, = polling.wait_until(lambda: [
            alert for alert in lab.monitoring.firing()
            if alert['vnfc_info_id'] == vnfc['vnfcInfoId']],
            'the alert of %s' % vnfc['vnfcInfoId'], 300, first_delay=0.2,
            max_delay=1.0)
        section('Prometheus: alert %s firing' % firing['alertname'],
                '\n'.join('%s=%s' % item for item in sorted(firing.items())))
        occ = v2.automatic_heal(instance_id, known)
        show_op(self.door.api, occ)
        print('isAutomaticInvocation: %s, operationParams: %s' % (
            occ['isAutomaticInvocation'], occ['operationParams']))
        self.timings['auto_heal_worker'] = occ['seconds']
        expect(occ)
        self.checks()

    def heal_storage(self):
        """Refused while nfs-pv1 is Bound; done once the claim is gone."""
        lab, door = self.lab, self.door
        banner('%s: heal the Storage server while nfs-pv1 is Bound: '
               'refused' % self.name)
        lab.ssh(lab.masters()[0], "cat > /tmp/claim.yaml <<'EOF'\n%sEOF\n"
                % pv_manifest.BOUND_CLAIM)
        section('kubectl apply -f claim.yaml',
                lab.kubectl('apply', '-f', '/tmp/claim.yaml'))
        section('kubectl get pv', lab.kubectl('get', 'pv'))
        request = door.heal_request('heal_storage_server.json',
                                    door.heal_target(self.instance_id,
                                                     'storage_server'))
        failed = self.lcm('heal_storage_refused', 'heal', request,
                          state='FAILED_TEMP')
        if 'nfs-pv1' not in failed['error']['detail']:
            raise Failed('the error does not name nfs-pv1')
        banner('%s: release the claim, fail the operation '
               '(POST /vnf_lcm_op_occs/{id}/fail), heal the Storage server'
               % self.name)
        section('kubectl delete pvc data',
                lab.kubectl('delete', 'pvc', 'data'))
        print('fail: %s' % door.fail(failed['id'])['operationState'])
        self.lcm('heal_storage', 'heal', request)
        self.checks()

    def heal_entire(self):
        banner('%s: heal the entire VNF '
               '(%s/heal_entire_cluster.json)' % (self.name,
                                                  self.door.requests))
        self.lcm('heal_entire', 'heal',
                 self.door.heal_request('heal_entire_cluster.json'))
        self.checks()

    def terminate(self):
        lab = self.lab
        banner('%s: terminate and delete' % self.name)
        self.lcm('terminate', 'terminate', {'terminationType': 'FORCEFUL'})
        section('GET /v1.0/vims', '\n'.join(
            '%-20s %-10s %s' % (v['name'], v['type'], v['status'])
            for v in lab.vims()))
        if any(v['type'] == 'kubernetes' for v in lab.vims()):
            raise Failed('the Kubernetes VIM is still registered')
        self.door.delete(self.instance_id)
        print('VNF instance %s deleted' % self.instance_id)


def run(lab, workdir, door, vim):
    """The whole lifecycle through ``door``; the LCM seconds by step."""
    steps = Lifecycle(lab, workdir, door)
    steps.instantiate(vim)
    steps.cnf()
    steps.scale()
    steps.heal_worker()
    if door.auto_heals:
        steps.auto_heal()
    steps.heal_storage()
    steps.heal_entire()
    if door.upgrades:
        upgrade_step(lab, workdir, door, steps.instance_id, steps.lcm)
    steps.terminate()
    return steps.timings


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--keep', metavar='DIR',
                        help='work directory to keep (conf and logs)')
    args = parser.parse_args(argv)
    reason = (hosts.require_testbed() or monitoring.available()
              or tacker_service.TackerService.available())
    if reason:
        print('demo_tacker: cannot run here: %s' % reason, file=sys.stderr)
        return 2
    workdir = args.keep or tempfile.mkdtemp(prefix='demo-tacker-')
    os.makedirs(workdir, exist_ok=True)
    started = time.monotonic()
    banner('Start Tacker (MariaDB, RabbitMQ, tacker-server, '
           'tacker-conductor), the fake Keystone/Heat/Nova and the testbed')
    # The user guide's stock image: the driver installs the NFS packages.
    lab = tacker_lab.TackerLab(workdir=os.path.join(workdir, 'service'),
                               stock_image=True)
    status = 1
    try:
        lab.start()
        print('Tacker API %s, logs in %s (set up in %ss: %s)' % (
            lab.service.api_url, lab.service.log_dir, lab.timings['setup'],
            lab.service.timings), flush=True)
        banner('Register the OpenStack VIM (POST /v1.0/vims)')
        vim = lab.register_openstack_vim()
        print('VIM %s (%s): %s' % (vim['name'], vim['id'], vim['status']))
        timings = {'v1': run(lab, workdir, V1Door(lab), vim)}
        with lab_upgrade.LabRepository(lab) as repository:
            timings['v2'] = run(lab, workdir, V2Door(lab, repository), vim)
        memory = lab.memory()
        banner('Done in %.0fs' % (time.monotonic() - started))
        print('LCM operations (s): %s' % timings)
        print('memory (MB RSS): %s' % memory)
        status = 0
    except Failed as error:
        print('\nFAILED: %s\nlogs: %s' % (error, lab.service.log_dir),
              file=sys.stderr)
    except Exception:
        print('\nlogs: %s' % lab.service.log_dir, file=sys.stderr)
        raise
    finally:
        lab.stop()
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    return status


if __name__ == '__main__':
    sys.exit(main())
