"""A v2 hook process reads tacker.conf as tacker-conductor does, without
importing the conductor (seconds per hook): the [keystone_authtoken]
service credentials the conductor declares for itself are declared by the
door identically, so Tacker's own declaration still loads after it."""

import subprocess
import sys
import textwrap

import pytest

pytest.importorskip('tacker.sol_refactored')

PROBE = textwrap.dedent('''
    import sys
    from oslo_config import cfg
    from kubernetes_mgmt_pv.doors import tacker_compat
    tacker_compat.load_tacker_config(['--config-file', sys.argv[1]])
    print('imported:', 'tacker.conductor.conductor_server' in sys.modules)
    print('auth_url:', cfg.CONF.keystone_authtoken.auth_url)
    print('username:', cfg.CONF.keystone_authtoken.username)
    from tacker.conductor import conductor_server
    group = cfg.CONF._groups['keystone_authtoken']._opts
    print('identical:', all(group[opt.dest]['opt'] == opt
                            for opt in conductor_server.OPTS))
    print('same names:', sorted(o.dest for o in conductor_server.OPTS) ==
          sorted(name for name, _, _ in
                 tacker_compat._CONDUCTOR_SERVICE_CREDENTIALS))
''')


def test_service_credentials_are_read_without_the_conductor(tmp_path):
    conf = tmp_path / 'tacker.conf'
    conf.write_text('[keystone_authtoken]\n'
                    'auth_url = http://127.0.0.1:5000/v3\n'
                    'username = tacker-service\n')
    done = subprocess.run([sys.executable, '-c', PROBE, str(conf)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        'imported: False',
        'auth_url: http://127.0.0.1:5000/v3',
        'username: tacker-service',
        'identical: True',
        'same names: True']


PATHS = textwrap.dedent('''
    import sys
    from kubernetes_mgmt_pv.doors import tacker_compat
    tacker_compat.load_tacker_config(['--config-file', sys.argv[1]])
    print(tacker_compat.tacker_paths())
''')


@pytest.mark.parametrize('default, expected', [
    ('', "(None, '/var/lib/tacker')"),  # Tacker's own state_path default
    ('state_path = /opt/stack/data/tacker\n',
     "(None, '/opt/stack/data/tacker')"),
    ('log_dir = /var/log/tacker\nstate_path = /srv/tacker\n',
     "('/var/log/tacker', '/srv/tacker')"),
])
def test_the_v2_log_directories_are_tackers(tmp_path, default, expected):
    """The hook log's default directories, as Tacker declares them."""
    conf = tmp_path / 'tacker.conf'
    conf.write_text('[DEFAULT]\n' + default)
    done = subprocess.run([sys.executable, '-c', PATHS, str(conf)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == expected
