"""The shell scripts in kubernetes_mgmt_pv/scripts/: shellcheck-clean, and
each gathering script is the prologue and then its files."""

import glob
import os
import shutil
import subprocess

import pytest

from kubernetes_mgmt_pv.cluster import ha
from kubernetes_mgmt_pv.remote import facts
from kubernetes_mgmt_pv.storage import export_access
from kubernetes_mgmt_pv.storage import nfs_client
from kubernetes_mgmt_pv.storage import server_steps

SCRIPTS = sorted(glob.glob(os.path.join(
    os.path.dirname(facts.__file__), 'scripts', '*.sh')))


def test_every_script_is_shellcheck_clean():
    shellcheck = shutil.which('shellcheck')
    if shellcheck is None:
        pytest.skip('shellcheck is not installed')
    assert SCRIPTS
    result = subprocess.run([shellcheck, '-s', 'sh'] + SCRIPTS,
                            capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    for path in SCRIPTS:
        with open(path) as stream:
            assert 'shellcheck disable' not in stream.read(), path


@pytest.mark.parametrize('script, names', [
    (server_steps._GATHER, ['storage_facts.sh']),
    (ha._GATHER, ['running.sh', 'ha_facts.sh']),
    (nfs_client._GATHER, ['nfs_client_facts.sh']),
    (export_access._RESOLVE, ['export_access_facts.sh']),
])
def test_gathering_scripts_start_with_the_prologue(script, names):
    assert script == facts.PROLOGUE + ''.join(
        facts.read_script(name) for name in names)
    assert 'fact() {' in facts.PROLOGUE
