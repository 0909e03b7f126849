"""Tacker's v2 VNF LCM API (``/vnflcm/v2``, SOL003 v3) on the testbed.

The same tacker-server and tacker-conductor as the v1 tests
(testbed.tacker_lab) serve ``/vnflcm/v2`` when a request carries
``Version: 2.0.0``; v2 packages are onboarded through the same
``/vnfpkgm/v1`` (``kubernetes-mgmt-pv package --api v2`` builds the
sample's) and the sample's v2 requests are samples/requests-v2. What else
differs, and lives here: the client (``V2Api``), the VNFC ids a v2 heal
names (``vnfcs``), the stack name (``vnf-<instance id>``), an inline
``vimConnectionInfo`` for the fake Keystone, and the test scaffolding that
records what Tacker v2 hands a management script (``recorder_transform``,
testbed/v2_hook_recorder.py).
"""

import json
import os
import pickle
import shutil
import time
import uuid

import yaml

from testbed import polling
from testbed import tacker_client

API_VERSION = '2.0.0'
VIM_TYPE = 'ETSINFV.OPENSTACK_KEYSTONE.V_3'
VIM_KEY = 'vim1'
ARTIFACT = 'mgmt-drivers-kubernetes'
# Every hook of the user guide's flow that v2 can run a script for.
V2_HOOKS = ('instantiate_start', 'instantiate_end', 'scale_start',
            'scale_end', 'heal_start', 'heal_end', 'terminate_start',
            'terminate_end')
RECORDER = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                        'v2_hook_recorder.py')
# The script the sample's v2 VNFD runs (samples/.../v2/Scripts).
DOOR_SCRIPT = 'kubernetes_mgmt_v2.py'
FINAL_STATES = ('COMPLETED', 'FAILED_TEMP', 'FAILED', 'ROLLED_BACK')
# An operation in these states keeps any other of its instance out.
UNFINISHED_STATES = ('STARTING', 'PROCESSING', 'ROLLING_BACK', 'FAILED_TEMP')
# How long the conductor may hold an instance's lock after an operation's
# state is final (it sends the notification meanwhile).
LOCK_RELEASE_TIMEOUT = 120


# -- the package ----------------------------------------------------------

def _load_yaml(path):
    with open(path) as handle:
        return yaml.safe_load(handle)


def _dump_yaml(path, data):
    with open(path, 'w') as handle:
        yaml.safe_dump(data, handle, sort_keys=False)


def _rewrite_interfaces(source, script, hooks):
    """Every flavour's VNF node runs ``../Scripts/<script>`` for
    ``hooks`` (v2 resolves the artifact file from Definitions/)."""
    definitions = os.path.join(source, 'Definitions')
    for name in sorted(os.listdir(definitions)):
        path = os.path.join(definitions, name)
        document = _load_yaml(path)
        nodes = ((document or {}).get('topology_template') or {}).get(
            'node_templates') or {}
        changed = False
        for node in nodes.values():
            if 'interfaces' not in (node or {}):
                continue
            node['interfaces'] = {'Vnflcm': {
                hook: {'implementation': ARTIFACT} for hook in hooks}}
            node['artifacts'] = {ARTIFACT: {
                'description': 'Management script (Tacker v2)',
                'type': 'tosca.artifacts.Implementation.Python',
                'file': '../Scripts/%s' % script}}
            changed = True
        if changed:
            _dump_yaml(path, document)


def recorder_transform(record_dir):
    """A ``transform`` for TackerLab.build_package(api='v2'): a package
    whose every v2 hook (V2_HOOKS) runs testbed.v2_hook_recorder, which
    only records its pickled dict into ``record_dir``, instead of the
    driver's script."""
    def transform(source):
        scripts = os.path.join(source, 'v2', 'Scripts')
        shutil.copyfile(RECORDER, os.path.join(scripts, DOOR_SCRIPT))
        with open(os.path.join(scripts, 'record_dir'), 'w') as handle:
            handle.write(record_dir + '\n')
        _rewrite_interfaces(source, DOOR_SCRIPT, V2_HOOKS)
    return transform


def recorded_calls(record_dir):
    """The dicts the recorder got, oldest first."""
    calls = []
    for name in sorted(n for n in os.listdir(record_dir)
                       if n.endswith('.pickle') and not n.startswith('.')):
        with open(os.path.join(record_dir, name), 'rb') as handle:
            calls.append(pickle.load(handle))
    return calls


# -- the requests ---------------------------------------------------------

def vim_connection_info(cloud):
    """vimConnectionInfo of a v2 request: the fake Keystone."""
    return {VIM_KEY: {
        'vimId': str(uuid.uuid5(uuid.NAMESPACE_URL, cloud.auth_url)),
        'vimType': VIM_TYPE,
        'interfaceInfo': {'endpoint': cloud.auth_url},
        'accessInfo': {
            'username': cloud.username, 'password': cloud.password,
            'project': cloud.project_name,
            'projectDomain': cloud.project_domain_name,
            'userDomain': cloud.user_domain_name,
            'region': cloud.regions[0]}}}


# -- the API --------------------------------------------------------------

class V2Api(object):
    """/vnflcm/v2 as a user calls it (``Version: 2.0.0``)."""
    version = 'v2'  # of its sample requests (samples/requests-cnf-v2)

    def __init__(self, base_url, log=None):
        self.client = tacker_client.TackerClient(
            base_url, headers=dict(tacker_client.HEADERS,
                                   Version=API_VERSION))
        self.log = log or (lambda message: None)

    def create(self, vnfd_id, name):
        return self.client.post('/vnflcm/v2/vnf_instances', {
            'vnfdId': vnfd_id, 'vnfInstanceName': name},
            expect=201).body

    def instance(self, instance_id):
        return self.client.get('/vnflcm/v2/vnf_instances/%s' % instance_id)

    def delete(self, instance_id):
        """DELETE the instance, again while the conductor still holds the
        lock of its last operation (``past_the_lock``)."""
        return self.past_the_lock(instance_id, lambda: self.client.delete(
            '/vnflcm/v2/vnf_instances/%s' % instance_id, expect=204))

    def op_occ(self, op_id):
        return self.client.get('/vnflcm/v2/vnf_lcm_op_occs/%s' % op_id)

    def wait_op(self, op_id, timeout, final=FINAL_STATES):
        def done():
            occ = self.op_occ(op_id)
            return occ if occ['operationState'] in final else None
        return polling.wait_until(done, 'v2 LCM operation %s' % op_id,
                                  timeout, first_delay=0.5, max_delay=3)

    def ops(self, instance_id):
        """The instance's operation occurrences."""
        return [occ for occ in self.client.get('/vnflcm/v2/vnf_lcm_op_occs')
                if occ['vnfInstanceId'] == instance_id]

    def unfinished_ops(self, instance_id):
        """Ids of the instance's operations that keep another out."""
        return {occ['id'] for occ in self.ops(instance_id)
                if occ['operationState'] in UNFINISHED_STATES}

    def past_the_lock(self, instance_id, send, acting_on=None):
        """``send()`` an LCM request of the instance, again while Tacker
        answers 409 only because its conductor still holds the instance's
        lock: the conductor sends an operation's notification after its
        final state (or FAILED_TEMP) is visible. A 409 while another
        operation of the instance is unfinished is a refusal: raised."""
        def attempt():
            try:
                return send()
            except tacker_client.TackerError as error:
                if error.status != 409 or \
                        self.unfinished_ops(instance_id) - {acting_on}:
                    raise
                return None
        return polling.wait_until(
            attempt, 'the lock of VNF instance %s' % instance_id,
            LOCK_RELEASE_TIMEOUT, first_delay=0.2, max_delay=2.0)

    def lcm(self, instance_id, operation, body, timeout=1800):
        """POST an LCM operation, wait for its final state; returns the
        occurrence (with 'seconds')."""
        started = time.monotonic()
        response = self.past_the_lock(instance_id, lambda: self.client.post(
            '/vnflcm/v2/vnf_instances/%s/%s' % (instance_id, operation),
            body, expect=202))
        return self._finished(operation, response, started, timeout)

    def modify(self, instance_id, patch, timeout=600):
        """PATCH the instance (Modify VNF Information: a JSON merge patch,
        where null removes a key), wait for its final state; returns the
        occurrence (with 'seconds')."""
        started = time.monotonic()
        response = self.past_the_lock(instance_id, lambda: self.client.request(
            'PATCH', '/vnflcm/v2/vnf_instances/%s' % instance_id,
            data=json.dumps(patch).encode(),
            content_type='application/merge-patch+json', expect=202))
        return self._finished('modify', response, started, timeout)

    def op_ids(self, instance_id):
        """Ids of every operation of the instance so far."""
        return {occ['id'] for occ in self.ops(instance_id)}

    def automatic_heal(self, instance_id, known, timeout=300):
        """Wait for the HEAL Tacker starts by itself (an op occ of the
        instance not in ``known``, isAutomaticInvocation), then for its
        final state or FAILED_TEMP; the occurrence, with 'seconds' from
        this call."""
        started = time.monotonic()

        def started_by_tacker():
            return [occ for occ in self.ops(instance_id)
                    if occ['id'] not in known]
        new, = polling.wait_until(
            started_by_tacker, 'an automatic heal of %s' % instance_id,
            timeout, first_delay=0.2, max_delay=1.0)
        assert new['operation'] == 'HEAL' and \
            new['isAutomaticInvocation'] is True, new
        occ = self.wait_op(new['id'], timeout)
        occ['seconds'] = round(time.monotonic() - started, 1)
        self.log('v2 automatic heal: %s in %ss'
                 % (occ['operationState'], occ['seconds']))
        return occ

    def _finished(self, operation, response, started, timeout):
        occ = self.wait_op(self.client.op_occ_id(response), timeout)
        occ['seconds'] = round(time.monotonic() - started, 1)
        self.log('v2 %s: %s in %ss%s' % (
            operation, occ['operationState'], occ['seconds'],
            '' if occ['operationState'] == 'COMPLETED' else ' (%s)' % (
                (occ.get('error') or {}).get('detail'))))
        return occ

    def op_action(self, op_id, action, timeout=1800):
        """retry | rollback | fail of a FAILED_TEMP occurrence."""
        response = self.past_the_lock(
            self.op_occ(op_id)['vnfInstanceId'], lambda: self.client.request(
                'POST', '/vnflcm/v2/vnf_lcm_op_occs/%s/%s' % (op_id, action),
                expect=(200, 202)), acting_on=op_id)
        if action == 'fail':
            return response.body
        polling.wait_until(
            lambda: self.op_occ(op_id)['operationState'] != 'FAILED_TEMP',
            '%s of %s to start' % (action, op_id), 60, first_delay=0.2,
            max_delay=1.0)
        return self.wait_op(op_id, timeout)


def redacted(value):
    """A copy of a recorded dict without secrets: every ``password``
    value (VIM accessInfo, the request's SSH passwords) is replaced."""
    if isinstance(value, dict):
        return {key: '<redacted>' if key == 'password' else redacted(item)
                for key, item in value.items()}
    if isinstance(value, list):
        return [redacted(item) for item in value]
    return value


def save_fixtures(calls, directory):
    """Write recorded dicts as JSON files ``NN-<operation>.json``
    (redacted), for the v2 door's unit tests; returns the paths."""
    os.makedirs(directory, exist_ok=True)
    paths = []
    for index, call in enumerate(calls):
        path = os.path.join(directory, '%02d-%s.json'
                            % (index, call['operation']))
        with open(path, 'w') as handle:
            json.dump(redacted(call), handle, indent=1, sort_keys=True,
                      default=str)
        paths.append(path)
    return paths


def vnfcs(instance, vdu_id=None):
    """The VNFCs of a v2 instance, each its vnfcResourceInfo with the id
    a heal request names (``vnfcInfoId``: v2 heals vnfcInfo ids)."""
    info = instance.get('instantiatedVnfInfo') or {}
    by_resource = {vnfc['vnfcResourceInfoId']: vnfc['id']
                   for vnfc in info.get('vnfcInfo') or []}
    return [dict(vnfc, vnfcInfoId=by_resource.get(vnfc['id']))
            for vnfc in info.get('vnfcResourceInfo') or []
            if vdu_id in (None, vnfc['vduId'])]


def stack_name(instance_id):
    """The Heat stack v2 makes for a VNF instance."""
    return 'vnf-%s' % instance_id
