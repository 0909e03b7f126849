"""The v2 package, request and recorder helpers (no Tacker, no hosts)."""

import io
import os
import pickle
import shutil
import subprocess
import sys

import yaml

from testbed import tacker_v2

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
SAMPLE = os.path.join(ROOT, 'samples', 'kubernetes_pv_vnf')


def _copy_sample(tmp_path):
    source = str(tmp_path / 'source')
    shutil.copytree(SAMPLE, source)
    return source


def test_base_hot_reads_defaultuserdata_parameters():
    top = {'resources': {
        'workers': {'type': 'OS::Heat::AutoScalingGroup', 'properties': {
            'min_size': 1, 'max_size': 3, 'desired_capacity': 2,
            'resource': {'type': 'w.yaml', 'properties': {
                'flavor': {'get_param': ['nfv', 'VDU', 'w', 'flavor']},
                'image': {'get_param': ['nfv', 'VDU', 'w', 'image']},
                'net': {'get_param': ['nfv', 'CP', 'w_CP', 'network']}}}}},
        'lone': {'type': 'OS::Nova::Server', 'properties': {
            'flavor': {'get_param': ['nfv', 'VDU', 'lone', 'flavor']}}}}}
    nested = {'w.yaml': {'resources': {
        'w': {'type': 'OS::Nova::Server'},
        'w_CP': {'type': 'OS::Neutron::Port'}}}}
    new_top, _ = tacker_v2.v2_base_hot(top, nested)
    group = new_top['resources']['workers']['properties']
    assert group['desired_capacity'] == {
        'get_param': ['nfv', 'VDU', 'w', 'desired_capacity']}
    member = group['resource']['properties']
    assert member['flavor'] == {
        'get_param': ['nfv', 'VDU', 'w', 'computeFlavourId']}
    assert member['image'] == {'get_param': ['nfv', 'VDU', 'w', 'vcImageId']}
    assert member['net'] == {'get_param': ['nfv', 'CP', 'w_CP', 'network']}
    assert new_top['resources']['lone']['properties']['flavor'] == {
        'get_param': ['nfv', 'VDU', 'lone', 'computeFlavourId']}
    # The input is left as it was.
    assert top['resources']['workers']['properties'][
        'desired_capacity'] == 2


def test_recorder_package_runs_the_script_for_every_v2_hook(tmp_path):
    source = _copy_sample(tmp_path)
    tacker_v2.recorder_transform('/records')(source)
    with open(os.path.join(source, 'Definitions',
                           'sample_kubernetes_df_simple.yaml')) as handle:
        vnf = yaml.safe_load(handle)['topology_template'][
            'node_templates']['VNF']
    hooks = vnf['interfaces']['Vnflcm']
    assert sorted(hooks) == sorted(tacker_v2.V2_HOOKS)
    artifact = vnf['artifacts'][tacker_v2.ARTIFACT]
    assert artifact['file'] == '../Scripts/record_hooks.py'
    assert os.path.isfile(os.path.join(source, 'Scripts',
                                       'record_hooks.py'))
    with open(os.path.join(source, 'Scripts', 'record_dir')) as handle:
        assert handle.read().strip() == '/records'
    assert not os.path.exists(os.path.join(source, 'UserData'))


def test_recorder_keeps_each_dict_private(tmp_path):
    scripts = tmp_path / 'Scripts'
    scripts.mkdir()
    records = tmp_path / 'records'
    records.mkdir()
    shutil.copyfile(tacker_v2.RECORDER, str(scripts / 'record_hooks.py'))
    (scripts / 'record_dir').write_text(str(records) + '\n')
    call = {'operation': 'scale_start', 'request': {'type': 'SCALE_IN'}}
    result = subprocess.run(
        [sys.executable, str(scripts / 'record_hooks.py')],
        input=pickle.dumps(call), capture_output=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout == b''
    assert tacker_v2.recorded_calls(str(records)) == [call]
    name, = os.listdir(str(records))
    assert os.stat(str(records / name)).st_mode & 0o077 == 0


def test_v2_request_has_maps_and_the_fake_keystone():
    class Cloud(object):
        auth_url = 'http://127.0.0.1:5000/v3'
        username, password = 'admin', 'pw'
        project_name = 'admin'
        user_domain_name = project_domain_name = 'Default'
        regions = ('RegionOne',)
    v1 = {'flavourId': 'simple', 'additionalParams': {
        'x': 1, 'lcm-operation-user-data': 'u.py',
        'lcm-operation-user-data-class': 'U'},
        'extVirtualLinks': [{'id': 'l', 'resourceId': 'n', 'extCps': [{
            'cpdId': 'cp', 'cpConfig': [{'cpProtocolData': []}]}]}],
        'vimConnectionInfo': [{'id': 'v', 'vimType': 'openstack'}]}
    v2 = tacker_v2.v2_instantiate_request(v1, Cloud())
    assert v2['additionalParams'] == {'x': 1}
    assert v2['extVirtualLinks'][0]['extCps'][0]['cpConfig'] == {
        'cp_0': {'cpProtocolData': []}}
    vim = v2['vimConnectionInfo'][tacker_v2.VIM_KEY]
    assert vim['vimType'] == tacker_v2.VIM_TYPE
    assert vim['interfaceInfo'] == {'endpoint': Cloud.auth_url}
    assert vim['accessInfo']['project'] == 'admin'
    assert isinstance(v1['vimConnectionInfo'], list)  # not modified


def test_fixtures_carry_no_password(tmp_path):
    calls = [{'operation': 'instantiate_end', 'vnf_instance': {
        'vimConnectionInfo': {'vim1': {'accessInfo': {
            'username': 'admin', 'password': 'secret'}}}},
        'request': {'additionalParams': {'nodes': [{'password': 'pw'}]}}}]
    path, = tacker_v2.save_fixtures(calls, str(tmp_path / 'f'))
    assert os.path.basename(path) == '00-instantiate_end.json'
    text = io.open(path).read()
    assert 'secret' not in text and '"pw"' not in text
    assert '"username": "admin"' in text
