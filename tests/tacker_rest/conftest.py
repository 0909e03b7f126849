"""Fixtures for the whole lifecycle through real Tacker's REST API.

One TackerLab per test session: real tacker-server and tacker-conductor
(with MariaDB and RabbitMQ, all private; testbed/tacker_lab.py), the
fake Keystone/Nova and the Heat engine that boots testbed hosts
(testbed/heat_engine.py). Tacker runs in its own processes from the
``.tox/tacker`` virtualenv; this process never imports Tacker.

Skipped unless this machine can run it: root (network namespaces), the
testbed's tools, iptables (the security groups' filter), MariaDB and
RabbitMQ installed (testbed/install-deps.sh) and Tacker's virtualenv
(``tox -e tacker`` creates it).

When a test fails, its report names the work directory and shows the end
of every service log; ``TACKER_REST_KEEP=1`` keeps the directory (logs,
tacker.conf) after the session.
"""

import os
import shutil
import tempfile

import pytest

from testbed import hosts
from testbed import monitoring
from testbed import security_groups
from testbed import tacker_lab
from testbed import tacker_service

LAB_KEY = pytest.StashKey()


def _skip_reason():
    return hosts.require_testbed() or \
        security_groups.BridgeFilter.unavailable() or \
        tacker_service.TackerService.available() or monitoring.available()


@pytest.fixture(scope='session')
def lab(request):
    reason = _skip_reason()
    if reason:
        pytest.skip(reason)
    workdir = tempfile.mkdtemp(prefix='tacker-rest-')
    lines = []

    def log(message):
        lines.append(message)
        print(message, flush=True)
    the_lab = tacker_lab.TackerLab(workdir=workdir, log=log)
    request.config.stash[LAB_KEY] = the_lab
    try:
        the_lab.start()
    except BaseException:
        pytest.fail('Tacker did not start; logs in %s:\n%s' % (
            the_lab.service.log_dir, the_lab.service.log_tails()))
    the_lab.lines = lines
    yield the_lab
    try:
        the_lab.stop()
    finally:
        if os.environ.get('TACKER_REST_KEEP'):
            print('tacker-rest: kept %s' % workdir)
        else:
            shutil.rmtree(workdir, ignore_errors=True)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.when != 'call' or not report.failed:
        return
    the_lab = item.config.stash.get(LAB_KEY, None)
    if the_lab is None or the_lab.service.workdir is None:
        return
    text = ['work directory: %s (logs in %s; set TACKER_REST_KEEP=1 to '
            'keep it)' % (the_lab.workdir, the_lab.service.log_dir)]
    if the_lab.engine.errors:
        text.append('Heat engine errors:\n' + '\n'.join(
            trace for _, trace in the_lab.engine.errors))
    text.append('Heat engine history:\n' + '\n'.join(
        '%8.2fs %s' % entry for entry in the_lab.engine.history[-30:]))
    text.append(the_lab.service.log_tails(lines=25))
    report.sections.append(('tacker logs', '\n\n'.join(text)))
