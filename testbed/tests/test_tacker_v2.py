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
    assert artifact['file'] == '../Scripts/kubernetes_mgmt_v2.py'
    scripts = os.path.join(source, 'v2', 'Scripts')
    with open(os.path.join(scripts, 'kubernetes_mgmt_v2.py')) as handle:
        with open(tacker_v2.RECORDER) as recorder:
            assert handle.read() == recorder.read()
    with open(os.path.join(scripts, 'record_dir')) as handle:
        assert handle.read().strip() == '/records'


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


def test_inline_vim_is_the_fake_keystone():
    class Cloud(object):
        auth_url = 'http://127.0.0.1:5000/v3'
        username, password = 'admin', 'pw'
        project_name = 'admin'
        user_domain_name = project_domain_name = 'Default'
        regions = ('RegionOne',)
    vim = tacker_v2.vim_connection_info(Cloud())[tacker_v2.VIM_KEY]
    assert vim['vimType'] == tacker_v2.VIM_TYPE
    assert vim['interfaceInfo'] == {'endpoint': Cloud.auth_url}
    assert vim['accessInfo']['project'] == 'admin'
    assert vim['accessInfo']['region'] == 'RegionOne'


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
