"""Tacker's v2 VNF LCM API (``/vnflcm/v2``, SOL003 v3) on the testbed.

The same tacker-server and tacker-conductor as the v1 tests
(testbed.tacker_lab) serve ``/vnflcm/v2`` when a request carries
``Version: 2.0.0``; v2 packages are onboarded through the same
``/vnfpkgm/v1``. What differs, and lives here:

* the package: v2 runs the Python file that the VNFD's ``Vnflcm``
  interface names, resolved from ``Definitions/`` (hence
  ``../Scripts/...``), and makes its Heat parameters with Tacker's
  ``DefaultUserData``, whose ``nfv`` keys are ``computeFlavourId``,
  ``vcImageId`` and ``desired_capacity`` (the sample's BaseHOT uses the
  v1 UserData's ``flavor``/``image`` and fixed capacities):
  ``v2_package_transform`` rewrites a copy of the sample accordingly;
* the request: ``vimConnectionInfo`` is a map carried by the request
  (no VIM registration): here the fake Keystone, with its credentials;
  ``cpConfig`` is a map too; no v1 UserData;
* the names: the stack is ``vnf-<instance id>``.
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
RECORDER_SCRIPT = 'record_hooks.py'
# v1 UserData nfv keys -> DefaultUserData's.
_NFV_KEYS = {'flavor': 'computeFlavourId', 'image': 'vcImageId'}
FINAL_STATES = ('COMPLETED', 'FAILED_TEMP', 'FAILED', 'ROLLED_BACK')


# -- the package ----------------------------------------------------------

def _rename_nfv_params(node):
    """get_param [nfv, VDU, <vdu>, flavor|image] -> DefaultUserData's
    names, everywhere in a template."""
    if isinstance(node, dict):
        param = node.get('get_param') if len(node) == 1 else None
        if isinstance(param, list) and len(param) == 4 and \
                param[:2] == ['nfv', 'VDU'] and param[3] in _NFV_KEYS:
            return {'get_param': param[:3] + [_NFV_KEYS[param[3]]]}
        return {key: _rename_nfv_params(value)
                for key, value in node.items()}
    if isinstance(node, list):
        return [_rename_nfv_params(item) for item in node]
    return node


def _servers(template):
    return [name for name, definition in
            (template.get('resources') or {}).items()
            if (definition or {}).get('type') == 'OS::Nova::Server']


def v2_base_hot(top, nested):
    """The BaseHOT of a flavour made for DefaultUserData: renamed nfv
    parameters, and each scaling group's ``desired_capacity`` read from
    ``nfv.VDU.<the member's server>.desired_capacity`` (Tacker computes it
    from the VNFCs and the grant). ``nested``: member file name ->
    template. Returns (top, nested), new dicts."""
    top = _rename_nfv_params(top)
    nested = {name: _rename_nfv_params(template)
              for name, template in nested.items()}
    for name, definition in (top.get('resources') or {}).items():
        if (definition or {}).get('type') != 'OS::Heat::AutoScalingGroup':
            continue
        member = definition['properties']['resource']['type']
        servers = _servers(nested.get(member) or {})
        if len(servers) != 1:
            raise ValueError('scaling group %s: member %s must have one '
                             'server, has %s' % (name, member, servers))
        definition['properties']['desired_capacity'] = {
            'get_param': ['nfv', 'VDU', servers[0], 'desired_capacity']}
    return top, nested


def _load_yaml(path):
    with open(path) as handle:
        return yaml.safe_load(handle)


def _dump_yaml(path, data):
    with open(path, 'w') as handle:
        yaml.safe_dump(data, handle, sort_keys=False)


def _rewrite_base_hot(source):
    base = os.path.join(source, 'BaseHOT')
    for flavour in os.listdir(base):
        directory = os.path.join(base, flavour)
        nested_dir = os.path.join(directory, 'nested')
        tops = [n for n in os.listdir(directory) if n.endswith('.yaml')]
        nested_names = sorted(os.listdir(nested_dir)) if os.path.isdir(
            nested_dir) else []
        nested = {n: _load_yaml(os.path.join(nested_dir, n))
                  for n in nested_names}
        for top_name in tops:
            top, new_nested = v2_base_hot(
                _load_yaml(os.path.join(directory, top_name)), nested)
            _dump_yaml(os.path.join(directory, top_name), top)
        for name, template in (new_nested if tops else {}).items():
            _dump_yaml(os.path.join(nested_dir, name), template)


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


def v2_package_transform(script_source, script_name=None, hooks=V2_HOOKS,
                         extra_files=None):
    """A ``transform`` for TackerLab.build_package: turns the sample's
    source copy into a v2 package running ``script_source`` (copied to
    Scripts/) for ``hooks``. ``extra_files``: package path -> text."""
    script_name = script_name or os.path.basename(script_source)

    def transform(source):
        _rewrite_base_hot(source)
        _rewrite_interfaces(source, script_name, hooks)
        # v1 UserData; DefaultUserData is Tacker's own.
        shutil.rmtree(os.path.join(source, 'UserData'), ignore_errors=True)
        shutil.copyfile(script_source,
                        os.path.join(source, 'Scripts', script_name))
        for path, text in (extra_files or {}).items():
            with open(os.path.join(source, path), 'w') as handle:
                handle.write(text)
    return transform


def recorder_transform(record_dir):
    """The v2 package whose every hook only records its pickled dict
    into ``record_dir`` (testbed.v2_hook_recorder)."""
    return v2_package_transform(
        RECORDER, RECORDER_SCRIPT,
        extra_files={'Scripts/record_dir': record_dir + '\n'})


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


def v2_instantiate_request(v1_request, cloud):
    """The v1 request of the lab (testbed.tacker_lab.instantiate_request)
    in v2 form: vimConnectionInfo and cpConfig as maps, no v1 UserData."""
    request = json.loads(json.dumps(v1_request))
    params = request.setdefault('additionalParams', {})
    params.pop('lcm-operation-user-data', None)
    params.pop('lcm-operation-user-data-class', None)
    for link in request.get('extVirtualLinks', []):
        for ext_cp in link.get('extCps', []):
            configs = ext_cp.get('cpConfig')
            if isinstance(configs, list):
                ext_cp['cpConfig'] = {
                    '%s_%d' % (ext_cp['cpdId'], index): config
                    for index, config in enumerate(configs)}
    request['vimConnectionInfo'] = vim_connection_info(cloud)
    return request


# -- the API --------------------------------------------------------------

class V2Api(object):
    """/vnflcm/v2 as a user calls it (``Version: 2.0.0``)."""

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
        return self.client.delete('/vnflcm/v2/vnf_instances/%s'
                                  % instance_id, expect=204)

    def op_occ(self, op_id):
        return self.client.get('/vnflcm/v2/vnf_lcm_op_occs/%s' % op_id)

    def wait_op(self, op_id, timeout, final=FINAL_STATES):
        def done():
            occ = self.op_occ(op_id)
            return occ if occ['operationState'] in final else None
        return polling.wait_until(done, 'v2 LCM operation %s' % op_id,
                                  timeout, first_delay=0.5, max_delay=3)

    def lcm(self, instance_id, operation, body, timeout=1800):
        """POST an LCM operation, wait for its final state; returns the
        occurrence (with 'seconds')."""
        started = time.monotonic()
        response = self.client.post('/vnflcm/v2/vnf_instances/%s/%s'
                                    % (instance_id, operation), body,
                                    expect=202)
        occ = self.wait_op(self.client.op_occ_id(response), timeout)
        occ['seconds'] = round(time.monotonic() - started, 1)
        self.log('v2 %s: %s in %ss%s' % (
            operation, occ['operationState'], occ['seconds'],
            '' if occ['operationState'] == 'COMPLETED' else ' (%s)' % (
                (occ.get('error') or {}).get('detail'))))
        return occ

    def op_action(self, op_id, action, timeout=1800):
        """retry | rollback | fail of a FAILED_TEMP occurrence."""
        response = self.client.request(
            'POST', '/vnflcm/v2/vnf_lcm_op_occs/%s/%s' % (op_id, action),
            expect=(200, 202))
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
