"""What an operator sees of auto-heal through Tacker v2: the instance's
probe targets in the monitoring directory, Prometheus probing them, and
the HEAL Tacker runs by itself once a VM is powered off (Nova's
os-stop)."""

import json
import os

from testbed import polling

LABELS = {'receiver_type': 'tacker', 'function_type': 'auto_heal'}


def instance_files(lab, instance_id):
    """The instance's files in the monitoring directory."""
    return [name for name in lab.monitoring.target_files()
            if name.startswith(instance_id + '.')]


def check_monitored(lab, instance, enabled=True):
    """The instance's one file lists each of its VNFCs (vnfcInfo ids, as
    Tacker's plugin looks them up) with the plugin's labels; while
    enabled, Prometheus probes every one of them and they answer."""
    name = instance['id'] + ('.json' if enabled else '.json.paused')
    assert instance_files(lab, instance['id']) == [name]
    with open(os.path.join(lab.monitoring.targets_dir, name)) as stream:
        groups = json.load(stream)
    vnfcs = {vnfc['id']: vnfc['vduId'] for vnfc in
             instance['instantiatedVnfInfo']['vnfcInfo']}
    assert {group['labels']['vnfc_info_id']: group['labels']['vdu_id']
            for group in groups} == vnfcs
    for group in groups:
        assert dict(group['labels'], **LABELS) == group['labels']
        assert group['labels']['vnf_instance_id'] == instance['id']
    if enabled:
        polling.wait_until(
            lambda: lab.monitoring.probed(instance['id']) == dict.fromkeys(
                vnfcs, True), 'every VM of %s probed and answering'
            % instance['id'], 30, first_delay=0.2, max_delay=1.0)


def power_off_until_healed(lab, v2, instance_id, vnfcs):
    """Power the VMs of ``vnfcs`` off and wait for the HEAL Tacker starts
    by itself, to its end (or FAILED_TEMP); its occurrence."""
    known = v2.op_ids(instance_id)
    for vnfc in vnfcs:
        lab.stop_server(vnfc['computeResource']['resourceId'])
    return v2.automatic_heal(instance_id, known)


def check_outage_refused_then_recovered(lab, v2, instance_id, vnfcs,
                                        words):
    """Power the VMs of ``vnfcs`` off: the heal Tacker starts by itself
    ends FAILED_TEMP with the driver's refusal (``words``, the option to
    change), its VMs unchanged. The operator fails it and pauses
    auto-heal (isAutohealEnabled false): the targets are set aside and
    no longer probed. Then the operator heals the VMs (a request with
    only their ids) and resumes auto-heal: every VM probed again."""
    occ = power_off_until_healed(lab, v2, instance_id, vnfcs)
    assert occ['operationState'] == 'FAILED_TEMP', occ
    detail = occ['error']['detail']
    assert words in detail and 'auto_heal_max_unhealthy' in detail, detail
    servers = {vnfc['id']: vnfc['computeResource']['resourceId']
               for vnfc in vnfcs}
    info = v2.instance(instance_id)['instantiatedVnfInfo']
    assert {vnfc['id']: vnfc['computeResource']['resourceId']
            for vnfc in info['vnfcResourceInfo']
            if vnfc['id'] in servers} == servers
    assert v2.op_action(occ['id'], 'fail')['operationState'] == 'FAILED'
    _switch(v2, instance_id, False)
    check_monitored(lab, v2.instance(instance_id), enabled=False)
    polling.wait_until(lambda: not lab.monitoring.probed(instance_id),
                       'the probes of a paused instance to stop', 30,
                       first_delay=0.2, max_delay=1.0)
    healed = v2.lcm(instance_id, 'heal', {'vnfcInstanceId': [
        vnfc['vnfcInfoId'] for vnfc in vnfcs]})
    assert healed['operationState'] == 'COMPLETED', healed.get('error')
    _switch(v2, instance_id, True)
    check_monitored(lab, v2.instance(instance_id))


def _switch(v2, instance_id, enabled):
    """PATCH the instance's isAutohealEnabled."""
    occ = v2.modify(instance_id, {'vnfConfigurableProperties': {
        'isAutohealEnabled': enabled}})
    assert occ['operationState'] == 'COMPLETED', occ.get('error')
