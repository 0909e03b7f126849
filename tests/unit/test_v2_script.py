"""The v2 package script run as Tacker v2 runs it: a process of its own,
one pickle in on stdin, only the result pickle on stdout, one line on
stderr when it fails."""

import os
import pickle
import stat
import subprocess
import sys
import textwrap
import time

import pytest

from kubernetes_mgmt_pv.doors import v2_mapping
from tests.unit import v2_dicts as v2

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, 'samples', 'kubernetes_pv_vnf', 'v2',
                      'Scripts', 'kubernetes_mgmt_v2.py')


@pytest.fixture
def tacker_conf(tmp_path):
    def write(**options):
        options.setdefault('v2_log_file', str(tmp_path / 'log' / 'v2.log'))
        path = tmp_path / 'tacker.conf'
        path.write_text('[kubernetes_mgmt_pv]\n' + ''.join(
            '%s = %s\n' % item for item in options.items()))
        return str(path)
    write.log = tmp_path / 'log' / 'v2.log'
    return write


def run_script(script_dict, conf, script=SCRIPT):
    env = dict(os.environ, PYTHONPATH=ROOT,
               KUBERNETES_MGMT_PV_TACKER_CONF=conf)
    return subprocess.run([sys.executable, script],
                          input=pickle.dumps(script_dict),
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          env=env, timeout=120)


def noisy_script(tmp_path, body):
    """A script that runs the door with v2_hook.run replaced by ``body``
    (the tests' stand-in for a hook)."""
    path = tmp_path / 'noisy.py'
    path.write_text(textwrap.dedent('''\
        import sys
        from kubernetes_mgmt_pv.doors import tacker_v2
        from kubernetes_mgmt_pv.doors import v2_hook

        def run(script_dict, secrets, progress):
        %s
        v2_hook.run = run
        sys.exit(tacker_v2.main())
        ''') % textwrap.indent(textwrap.dedent(body), '    '))
    return str(path)


def test_a_hook_without_features_round_trips(tacker_conf):
    """instantiate_end then terminate_start through the real driver,
    with both features off (no host to reach)."""
    request = v2.instantiate_request(params={})
    out = run_script(v2.script_dict('instantiate_end', request),
                     tacker_conf())
    assert (out.returncode, out.stderr) == (0, b'')
    result = pickle.loads(out.stdout)
    state = result['vnf_instance']['metadata'][v2_mapping.STATE_KEY]
    assert state['params'] == {}
    assert result['user_script_err_handling_data'][v2_mapping.STATE_KEY] \
        == {'done': ['instantiate_end']}
    out = run_script(v2.script_dict('terminate_start', {},
                                    result['vnf_instance']), tacker_conf())
    assert (out.returncode, out.stderr) == (0, b'')
    assert 'vnf_instance' in pickle.loads(out.stdout)


def test_an_undeclared_operation_hands_back_nothing(tacker_conf):
    out = run_script(v2.script_dict('modify_information_start', {}),
                     tacker_conf())
    assert (out.returncode, out.stderr) == (0, b'')
    assert 'vnf_instance' not in pickle.loads(out.stdout)


def pv_only_package(root, manifest=True):
    """A new VNF package directory with (or without) the PV manifest of
    v2.install_params()."""
    path = root / 'Files' / 'kubernetes'
    path.mkdir(parents=True)
    if manifest:
        (path / 'nfs-pv1.yaml').write_text(
            'apiVersion: v1\nkind: PersistentVolume\nmetadata:\n'
            '  name: nfs-pv1\nspec:\n  capacity: {storage: 1Gi}\n'
            '  accessModes: [ReadWriteOnce]\n  nfs:\n'
            '    server: 0.0.0.0\n    path: /volume/nfs/pv1\n')
    return str(root)


@pytest.mark.parametrize('manifest', [True, False])
def test_a_package_change_with_persistent_volumes_only(tmp_path, tacker_conf,
                                                       manifest):
    """No script_path: nothing to upgrade; the hook checks the new
    package's PV manifests through the real driver and says so."""
    params = v2.install_params()
    del params['script_path']
    inst = v2.vnf_instance(metadata={v2_mapping.STATE_KEY: {
        'contractVersion': 2, 'params': v2_mapping.saved_params(params),
        'openstackVimId': v2.OPENSTACK_VIM_ID}})
    request = {'vnfdId': 'new-vnfd', 'additionalParams': v2.logins()}
    out = run_script(v2.script_dict(
        'change_current_package_end', request, inst,
        package_dir=pv_only_package(tmp_path / 'new', manifest)),
        tacker_conf())
    log = tacker_conf.log.read_text()
    if manifest:
        assert (out.returncode, out.stderr) == (0, b'')
        result = pickle.loads(out.stdout)
        assert result['vnf_instance']['metadata'] == inst['metadata']
        assert 'nothing upgraded' in log
    else:
        assert out.returncode == 1
        assert b'pv_registration_params[0].pv_manifest_file_path' in \
            out.stderr
    assert 'TypeError' not in log


def test_a_failure_is_one_line_without_secret_or_traceback(tacker_conf):
    params = v2.install_params()
    del params['script_path']  # no Tacker here to check the VIM registry
    params['master_node']['ssh_cp_name'] = 'not a name \u2026 ' + v2.PASSWORD
    out = run_script(v2.script_dict('instantiate_end',
                                    v2.instantiate_request(params)),
                     tacker_conf())
    assert out.returncode == 1
    # Tacker shows "instantiate_end failed: " + repr(stderr): one ASCII
    # line, no newline, not naming the hook again.
    line = out.stderr.decode('ascii')
    assert '\n' not in line and line.isprintable()
    assert line.startswith('invalid additionalParams (1 problem): - '
                           'k8s_cluster_installation_param.master_node.'
                           'ssh_cp_name: '), line
    assert 'Traceback' not in line and v2.PASSWORD not in line
    handback = pickle.loads(out.stdout)
    assert 'vnf_instance' not in handback
    failure = handback['user_script_err_handling_data'][
        v2_mapping.STATE_KEY]['failure']
    assert failure == {
        'reason': line, 'logFile': str(tacker_conf.log),
        'retry': 'a retry sends this request again and is refused the same '
                 'way: fail the operation and send a corrected request'}
    log = tacker_conf.log.read_text()
    assert 'Traceback' in log and v2.PASSWORD not in log
    assert stat.S_IMODE(os.stat(tacker_conf.log).st_mode) == 0o600


def test_a_step_failure_names_step_and_host_once(tmp_path, tacker_conf):
    script = noisy_script(tmp_path, '''\
        from kubernetes_mgmt_pv import exceptions
        progress.setdefault('done', []).append('heal_start')
        raise exceptions.StepError('kubeadm join', '10.0.0.7',
                                   OSError('refused\\n'))
        ''')
    data = {v2_mapping.STATE_KEY: {'failure': {'reason': 'an old one'}}}
    out = run_script(v2.script_dict('heal_end', {}, data=data),
                     tacker_conf(), script=script)
    assert out.returncode == 1
    assert out.stderr == b'kubeadm join failed on 10.0.0.7: OSError: refused'
    entry = pickle.loads(out.stdout)['user_script_err_handling_data'][
        v2_mapping.STATE_KEY]
    assert entry == {'done': ['heal_start'], 'failure': {
        'step': 'kubeadm join', 'host': '10.0.0.7',
        'reason': 'OSError: refused', 'logFile': str(tacker_conf.log),
        'retry': 'a retry skips heal_start (done) and runs heal_end again; '
                 'each step changes only what differs'}}


def test_a_retry_that_succeeds_drops_the_old_failure(tmp_path, tacker_conf):
    script = noisy_script(tmp_path, '''\
        progress.setdefault('done', []).append('heal_end')
        return {}
        ''')
    data = {v2_mapping.STATE_KEY: {'failure': {'reason': 'an old one'}}}
    out = run_script(v2.script_dict('heal_end', {}, data=data),
                     tacker_conf(), script=script)
    assert (out.returncode, out.stderr) == (0, b'')
    assert pickle.loads(out.stdout)['user_script_err_handling_data'] == {
        v2_mapping.STATE_KEY: {'done': ['heal_end']}}


def test_an_unwritable_log_fails_the_hook_before_it_runs(tmp_path,
                                                         tacker_conf):
    """A log path that is a symbolic link: refused, the target left alone
    and the hook not run."""
    target = tmp_path / 'elsewhere'
    target.write_text('')
    (tmp_path / 'v2.log').symlink_to(target)
    script = noisy_script(tmp_path, '''\
        open(%r, 'w').write('ran')
        ''' % str(tmp_path / 'ran'))
    out = run_script(v2.script_dict('scale_end', {}),
                     tacker_conf(v2_log_file=str(tmp_path / 'v2.log')),
                     script=script)
    assert out.returncode == 1
    assert out.stderr.decode() == (
        'the log file %s cannot be written: it is a symbolic link; set '
        'v2_log_file in the [kubernetes_mgmt_pv] section of tacker.conf to '
        'a file the conductor\'s user may write' % (tmp_path / 'v2.log'))
    assert target.read_text() == ''
    assert not (tmp_path / 'ran').exists()
    assert 'logFile' not in pickle.loads(out.stdout)[
        'user_script_err_handling_data'][v2_mapping.STATE_KEY]['failure']


def test_stdout_holds_only_the_pickle_whatever_the_hook_prints(
        tmp_path, tacker_conf):
    script = noisy_script(tmp_path, '''\
        import logging, os, subprocess, warnings
        print('print to stdout')
        sys.stdout.flush()
        os.write(1, b'raw fd 1\\n')
        os.write(2, b'raw fd 2\\n')
        sys.stderr.write('stderr\\n')
        warnings.warn('a warning')
        subprocess.run(['echo', 'child output'])
        secrets.append('hook-Secret')
        logging.getLogger('x').info('logged hook-Secret')
        return {'vnf_instance': script_dict['vnf_instance']}
        ''')
    out = run_script(v2.script_dict('scale_end', {}), tacker_conf(),
                     script=script)
    assert (out.returncode, out.stderr) == (0, b'')
    assert pickle.loads(out.stdout)['vnf_instance']['id'] == v2.INSTANCE_ID
    assert len(pickle.dumps(pickle.loads(out.stdout))) == len(out.stdout)
    log = tacker_conf.log.read_text()
    for noise in ('print to stdout', 'raw fd 1', 'raw fd 2', 'stderr',
                  'a warning', 'child output', 'logged ***'):
        assert noise in log
    assert 'hook-Secret' not in log


def test_the_deadline_fails_the_hook_cleanly(tmp_path, tacker_conf):
    script = noisy_script(tmp_path, '''\
        import time
        time.sleep(60)
        ''')
    started = time.monotonic()
    out = run_script(v2.script_dict('heal_end', {}),
                     tacker_conf(v2_hook_deadline=1), script=script)
    assert time.monotonic() - started < 30
    assert out.returncode == 1
    lines = out.stderr.decode().splitlines()
    assert len(lines) == 1 and 'v2_hook_deadline' in lines[0]
    assert not out.stderr.endswith(b'\n') and 'heal_end' not in lines[0]
    failure = pickle.loads(out.stdout)['user_script_err_handling_data'][
        v2_mapping.STATE_KEY]['failure']
    assert failure == {
        'reason': lines[0], 'logFile': str(tacker_conf.log),
        'retry': 'a retry runs heal_end again; each step changes only what '
                 'differs'}


def test_a_hook_done_at_the_deadline_is_not_reported_failed(
        tmp_path, tacker_conf):
    """The hook returns just before the deadline and the hand-back takes
    past it (pickling the result is slowed): its result stands."""
    script = noisy_script(tmp_path, '''\
        import pickle, time
        dumps = pickle.dumps
        def slow_dumps(*args, **kwargs):
            time.sleep(2)
            return dumps(*args, **kwargs)
        pickle.dumps = slow_dumps
        time.sleep(0.8)
        return {'vnf_instance': {'id': 'done'}}
        ''')
    out = run_script(v2.script_dict('heal_end', {}),
                     tacker_conf(v2_hook_deadline=1), script=script)
    assert (out.returncode, out.stderr) == (0, b'')
    assert pickle.loads(out.stdout)['vnf_instance'] == {'id': 'done'}


def test_an_unreadable_configuration_is_one_line(tmp_path):
    out = run_script(v2.script_dict('heal_end', {}),
                     str(tmp_path / 'missing.conf'))
    assert out.returncode == 1
    assert len(out.stderr.decode().splitlines()) == 1


def test_hook_processes_share_the_log_without_interleaving(tmp_path,
                                                           tacker_conf):
    """Hooks of several VNFs run at once, each its own process, all
    appending to v2_log_file: every record stays whole."""
    script = noisy_script(tmp_path, '''\
        import logging, os
        for n in range(200):
            logging.getLogger('x').info(
                'BEGIN %d %d\\n%s\\nEND %d', os.getpid(), n, 'x' * 3000,
                os.getpid())
        return {}
        ''')
    env = dict(os.environ, PYTHONPATH=ROOT,
               KUBERNETES_MGMT_PV_TACKER_CONF=tacker_conf())
    processes = [subprocess.Popen(
        [sys.executable, script], stdin=subprocess.PIPE,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        for _ in range(4)]
    for process in processes:
        process.communicate(pickle.dumps(v2.script_dict('scale_end', {})),
                            timeout=120)
        assert process.returncode == 0
    lines = tacker_conf.log.read_text().splitlines()
    begins = [line for line in lines if ' BEGIN ' in line]
    assert len(begins) == 800
    for index, line in enumerate(lines):
        if ' BEGIN ' in line:
            pid = line.split(' BEGIN ')[1].split()[0]
            assert lines[index + 1] == 'x' * 3000
            assert lines[index + 2] == 'END ' + pid
