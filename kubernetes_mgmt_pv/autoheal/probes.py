"""What Prometheus probes for one VNF instance: a pure function of the
instance's VNFCs and their addresses, rendered as a Prometheus file_sd
document.

Each VM is one target, probed by blackbox-exporter's tcp_connect: a
Master's or Worker's kubelet port, which stops answering both when the VM
is powered off and when its kubelet stops; the Storage server's SSH port
(it has no kubelet). The labels are those Tacker's Prometheus plugin
reads from a firing alert (``receiver_type``, ``function_type``,
``vnf_instance_id``, ``vnfc_info_id``); an alert rule keeps a target's
labels, so one rule serves every instance.
"""

import dataclasses
import ipaddress
import json
import re

KUBELET_PORT = 10250
SSH_PORT = 22
MASTER, WORKER, STORAGE = 'master', 'worker', 'storage'
PORTS = {MASTER: KUBELET_PORT, WORKER: KUBELET_PORT, STORAGE: SSH_PORT}
# Tacker's ids are UUIDs; a VNFC id is "<VDU id>-<server id>". Both reach
# a file name and Prometheus labels: nothing else is let through.
_ID = re.compile(r'[A-Za-z0-9][A-Za-z0-9_.:-]{0,254}\Z')


@dataclasses.dataclass(frozen=True)
class ProbedVm(object):
    """One VM of the instance, as Tacker and the cluster know it."""
    vnfc_info_id: str
    vdu_id: str
    role: str  # MASTER, WORKER or STORAGE
    address: str


def check_id(value, what):
    """``value`` if it may name a file and a label value; ValueError."""
    if not isinstance(value, str) or not _ID.match(value):
        raise ValueError('%s %r is not an id of letters, digits and '
                         '"_.:-"' % (what, value))
    return value


def _target(vm):
    address = ipaddress.ip_address(vm.address)
    host = '[%s]' % address if address.version == 6 else str(address)
    return '%s:%d' % (host, PORTS[vm.role])


def groups(instance_id, vms):
    """The file_sd target groups of ``vms``, one per VM, in VNFC id
    order so that an unchanged instance renders the same bytes."""
    check_id(instance_id, 'VNF instance id')
    return [{'targets': [_target(vm)],
             'labels': {'receiver_type': 'tacker',
                        'function_type': 'auto_heal',
                        'vnf_instance_id': instance_id,
                        'vnfc_info_id': check_id(vm.vnfc_info_id,
                                                 'VNFC id'),
                        'vdu_id': check_id(vm.vdu_id, 'VDU id'),
                        'node_role': vm.role}}
            for vm in sorted(vms, key=lambda vm: vm.vnfc_info_id)]


def document(instance_id, vms):
    """The file_sd file's bytes."""
    return (json.dumps(groups(instance_id, vms), indent=1, sort_keys=True)
            + '\n').encode()


def is_enabled(vnf_configurable_properties):
    """Tacker acts on the alerts of an instance only while its
    isAutohealEnabled is true; the driver probes it only then too."""
    return (vnf_configurable_properties or {}).get('isAutohealEnabled') \
        is True
