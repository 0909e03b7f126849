"""The testbed's servers keep serving in a process that imported Tacker,
as the tacker env's workers do (tests/tacker_integration, then a
tests/tacker_rest module on the same worker): Tacker's imports rebind the
``http`` package's ``server`` attribute to an eventlet copy whose servers
run on green threads that never get to run."""

import subprocess
import sys

import pytest

from testbed import hosts
from tests.tacker_integration.support import ROOT

# In a child process, so that a server that never answers fails the test
# at the timeout instead of hanging this worker in its shutdown.
AFTER_TACKERS_IMPORTS = '''
import http, sys, urllib.request
from tacker.conductor import conductor_server
assert http.server is not sys.modules['http.server'], \\
    'Tacker no longer rebinds http.server: the test proves nothing'
from testbed import apt_repo
opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
with apt_repo.AptRepository() as repository:
    with opener.open(repository.url + 'InRelease', timeout=10) as reply:
        print(reply.status)
'''


def test_the_apt_repository_answers_after_tackers_imports():
    reason = hosts.require_testbed()
    if reason:
        pytest.skip(reason)
    result = subprocess.run([sys.executable, '-c', AFTER_TACKERS_IMPORTS],
                            cwd=ROOT, capture_output=True, text=True,
                            timeout=60)
    assert (result.returncode, result.stdout) == (0, '200\n'), \
        result.stderr[-2000:]
