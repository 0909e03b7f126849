"""The v2 package, request and recorder helpers (no Tacker, no hosts)."""

import http.server
import io
import json
import os
import pickle
import shutil
import subprocess
import sys
import threading

import pytest
import yaml

from testbed import tacker_client
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


class _LockedTacker(http.server.BaseHTTPRequestHandler):
    """/vnflcm/v2 answering POSTs 409 ``locked`` times, then 202; the
    instance's operations are ``server.occs``."""

    def do_GET(self):
        self._answer(200, self.server.occs)

    def do_POST(self):
        self.server.posts += 1
        if self.server.posts <= self.server.locked:
            self._answer(409, {'status': 409})
        else:
            self.send_response(202)
            self.send_header('Location', '/vnflcm/v2/vnf_lcm_op_occs/new')
            self.send_header('Content-Length', '0')
            self.end_headers()

    def _answer(self, status, body):
        raw = json.dumps(body).encode()
        self.send_response(status)
        self.send_header('Content-Type', 'application/json')
        self.send_header('Content-Length', str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def log_message(self, *args):
        pass


@pytest.mark.parametrize('occs, locked, sent', [
    # The previous operation is final: the 409s are the conductor's lock.
    ([{'id': 'a', 'vnfInstanceId': 'i', 'operationState': 'COMPLETED'}],
     2, True),
    # The operation acted on (a fail of it) is the only unfinished one.
    ([{'id': 'a', 'vnfInstanceId': 'i', 'operationState': 'FAILED_TEMP'}],
     1, 'a'),
    # Another operation of the instance is unfinished: a real refusal.
    ([{'id': 'b', 'vnfInstanceId': 'i', 'operationState': 'FAILED_TEMP'}],
     1, False),
])
def test_a_request_waits_out_the_lock_but_not_a_refusal(occs, locked, sent):
    server = http.server.ThreadingHTTPServer(('127.0.0.1', 0), _LockedTacker)
    server.occs, server.locked, server.posts = occs, locked, 0
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        api = tacker_v2.V2Api('http://127.0.0.1:%d' % server.server_port)

        def send():
            return api.client.post('/vnflcm/v2/vnf_instances/i/heal', {},
                                   expect=202)
        acting_on = sent if isinstance(sent, str) else None
        if sent:
            assert api.past_the_lock('i', send, acting_on).status == 202
            assert server.posts == locked + 1
        else:
            with pytest.raises(tacker_client.TackerError) as raised:
                api.past_the_lock('i', send, acting_on)
            assert raised.value.status == 409
            assert server.posts == 1
    finally:
        server.shutdown()
        server.server_close()
