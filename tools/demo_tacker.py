#!/usr/bin/env python3
"""The main job through real Tacker: the user guide's lifecycle over
Tacker's REST API.

Starts tacker-server and tacker-conductor (Tacker 16 from the ``.tox/tacker``
virtualenv, where the driver is installed) with private MariaDB and
RabbitMQ, and a fake Keystone/Nova whose Heat is an engine that boots real
SSH test hosts (network namespaces) for the servers of the sample BaseHOT.
Then, as an operator would with ``openstack vim register`` / ``openstack
vnf package`` / ``openstack vnflcm``: register the OpenStack VIM, build
the sample package with ``kubernetes-mgmt-pv package`` and onboard it,
create and instantiate the VNF with samples/requests/instantiate_simple
.json, scale the Workers out and in, heal a Worker, try to heal the Storage
server while a PersistentVolume is Bound (refused), release the claim,
fail that operation and heal the Storage server, heal the entire VNF,
terminate and delete. Each LCM operation is printed with its result as
Tacker reports it (GET /vnflcm/v1/vnf_lcm_op_occs/{id}), followed by the
checks of the user guide: df -h and sudo exportfs -v on the Storage
server, kubectl get pv and kubectl get nodes on a Master, and the VIMs.

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

from testbed import hosts
from testbed import pv_manifest
from testbed import tacker_lab
from testbed import tacker_service


class Failed(Exception):
    pass


def banner(text):
    print('\n==> %s' % text, flush=True)


def section(title, text):
    print('--- %s ---' % title)
    print(text.rstrip(), flush=True)


def show_op(lab, occ):
    error = (occ.get('error') or {}).get('detail')
    print('LCM %s %s: %s (%ss)%s' % (
        occ['operation'], occ['id'], occ['operationState'],
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


def run(lab, workdir):
    timings = {}

    def lcm(name, operation, body, state='COMPLETED'):
        occ = lab.lcm(instance_id, operation, body)
        show_op(lab, occ)
        timings[name] = occ['seconds']
        expect(occ, state)
        return occ

    banner('Register the OpenStack VIM (POST /v1.0/vims)')
    vim = lab.register_openstack_vim()
    print('VIM %s (%s): %s' % (vim['name'], vim['id'], vim['status']))

    banner('Build the sample package (kubernetes-mgmt-pv package) and '
           'onboard it')
    vnfd_id, zip_path = lab.build_package(workdir)
    package = lab.client.onboard_package(zip_path)
    print('package %s: %s, vnfdId %s' % (
        package['id'], package['onboardingState'], package['vnfdId']))

    banner('Create and instantiate the VNF '
           '(samples/requests/instantiate_simple.json)')
    instance_id = lab.client.post('/vnflcm/v1/vnf_instances',
                                  {'vnfdId': vnfd_id}, expect=201).body['id']
    print('VNF instance %s' % instance_id)
    request = lab.instantiate_request(vim['id'])
    print_exports(request['additionalParams'])
    lcm('instantiate', 'instantiate', request)
    operator_checks(lab, instance_id)

    banner('Scale out the Workers (samples/requests/scale_out_worker.json)')
    lcm('scale_out', 'scale', lab.sample_request('scale_out_worker.json'))
    operator_checks(lab, instance_id)

    banner('Scale in the Workers (samples/requests/scale_in_worker.json)')
    lcm('scale_in', 'scale', lab.sample_request('scale_in_worker.json'))
    operator_checks(lab, instance_id)

    banner('Heal a Worker (vnfcInstanceId)')
    worker = lab.vnfcs(instance_id, 'workerNode')[0]
    lcm('heal_worker', 'heal', {'vnfcInstanceId': [worker['id']],
                                'cause': 'Heal a Worker node'})
    operator_checks(lab, instance_id)

    banner('Heal the Storage server while nfs-pv1 is Bound: refused')
    lab.ssh(lab.masters()[0], "cat > /tmp/claim.yaml <<'EOF'\n%sEOF\n"
            % pv_manifest.BOUND_CLAIM)
    section('kubectl apply -f claim.yaml',
            lab.kubectl('apply', '-f', '/tmp/claim.yaml'))
    section('kubectl get pv', lab.kubectl('get', 'pv'))
    storage = lab.vnfcs(instance_id, 'storage_server')[0]
    request = lab.sample_request('heal_storage_server.json')
    request['vnfcInstanceId'] = [storage['id']]
    failed = lcm('heal_storage_refused', 'heal', request,
                 state='FAILED_TEMP')
    if 'nfs-pv1' not in failed['error']['detail']:
        raise Failed('the error does not name nfs-pv1')

    banner('Release the claim, fail the operation '
           '(POST /vnf_lcm_op_occs/{id}/fail), heal the Storage server')
    section('kubectl delete pvc data', lab.kubectl('delete', 'pvc', 'data'))
    print('rollback of a heal: HTTP %s (Tacker rolls back only '
          'instantiate and scale)' % lab.client.request(
              'POST', '/vnflcm/v1/vnf_lcm_op_occs/%s/rollback'
              % failed['id']).status)
    print('fail: %s' % lab.op_action(failed['id'], 'fail')['operationState'])
    lcm('heal_storage', 'heal', request)
    operator_checks(lab, instance_id)

    banner('Heal the entire VNF (samples/requests/heal_entire_cluster.json)')
    lcm('heal_entire', 'heal', lab.sample_request('heal_entire_cluster.json'))
    operator_checks(lab, instance_id)

    banner('Terminate and delete')
    lcm('terminate', 'terminate', {'terminationType': 'FORCEFUL'})
    section('GET /v1.0/vims', '\n'.join(
        '%-20s %-10s %s' % (v['name'], v['type'], v['status'])
        for v in lab.vims()))
    if any(v['type'] == 'kubernetes' for v in lab.vims()):
        raise Failed('the Kubernetes VIM is still registered')
    lab.client.delete('/vnflcm/v1/vnf_instances/%s' % instance_id,
                      expect=204)
    print('VNF instance %s deleted' % instance_id)
    return timings


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--keep', metavar='DIR',
                        help='work directory to keep (conf and logs)')
    args = parser.parse_args(argv)
    reason = (hosts.require_testbed()
              or tacker_service.TackerService.available())
    if reason:
        print('demo_tacker: cannot run here: %s' % reason, file=sys.stderr)
        return 2
    workdir = args.keep or tempfile.mkdtemp(prefix='demo-tacker-')
    os.makedirs(workdir, exist_ok=True)
    started = time.monotonic()
    banner('Start Tacker (MariaDB, RabbitMQ, tacker-server, '
           'tacker-conductor), the fake Keystone/Heat/Nova and the testbed')
    lab = tacker_lab.TackerLab(workdir=os.path.join(workdir, 'service'))
    status = 1
    try:
        lab.start()
        print('Tacker API %s, logs in %s (set up in %ss: %s)' % (
            lab.service.api_url, lab.service.log_dir, lab.timings['setup'],
            lab.service.timings), flush=True)
        timings = run(lab, workdir)
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
