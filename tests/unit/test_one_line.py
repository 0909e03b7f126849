"""Fields meant to be one line stay one line whatever VM text they quote:
a VM must not write what looks like another line of the log or the
report."""

import logging

import pytest

from kubernetes_mgmt_pv import exceptions
from kubernetes_mgmt_pv import redaction
from kubernetes_mgmt_pv import step_report
from tests.unit import test_storage_guards as storage

FAKE_LINE = '2026-11-28 12:00:00.000 1 INFO kubernetes_mgmt_pv all fine'


@pytest.mark.parametrize('text, expected', [
    ('/dev/vdc', '/dev/vdc'),
    ('/dev/vdc\n' + FAKE_LINE, '/dev/vdc\\n' + FAKE_LINE),
    ('a\r\nb', 'a\\nb'),
    ('a\rb\x0bc\x0cd\x1ce\x85f', 'abcdef'),
    ('a\u2028b\u2029c', 'a\\u2028b\\u2029c'),
    ('tab\tkept', 'tab\tkept'),
    ('\x1b[2J\x1b[1Agone/srv/caf\udce9', 'gone/srv/caf\ufffd'),
    ('', ''),
])
def test_one_line(text, expected):
    shown = redaction.one_line(text)
    assert shown == expected and len(shown.splitlines()) <= 1


def test_a_report_line_is_one_line_in_every_field(caplog):
    caplog.set_level(logging.INFO, logger='kubernetes_mgmt_pv.step_report')
    outcome = step_report.Report().record(
        '10.0.0.5\n' + FAKE_LINE, 'mount /dev/vdc\n' + FAKE_LINE, True,
        'detail\n' + FAKE_LINE)
    for field in (outcome.host, outcome.step, outcome.detail, str(outcome)):
        assert '\n' not in field
    assert [record.getMessage().count('\n') for record in caplog.records] \
        == [0]


def test_a_failed_step_names_its_step_and_host_in_one_line():
    with pytest.raises(exceptions.StepError) as caught:
        with step_report.step('10.0.0.5\r\n',
                              'format /dev/vdc\n' + FAKE_LINE):
            raise exceptions.MgmtDriverError('blkid failed')
    error = caught.value
    assert error.step == 'format /dev/vdc\\n' + FAKE_LINE
    assert error.host == '10.0.0.5\\n'
    assert str(error).splitlines() == [str(error)]
    found = exceptions.failure_of(exceptions.NodeStepError(
        'mount\n' + FAKE_LINE, {'10.0.0.5': error}))
    assert '\n' not in found.step
    assert exceptions.StepError('check', None, ValueError()).host is None


def test_a_device_the_storage_server_names_stays_in_one_line(caplog):
    """readlink of the volume's by-id link prints a second, fake log line:
    the report of the device and the step it names show both as one."""
    caplog.set_level(logging.INFO, logger='kubernetes_mgmt_pv.step_report')
    gathered = dict(storage.SET_UP)
    gathered['link 0'] = (0, '/dev/vdc\n%s\n' % FAKE_LINE, '')
    gathered['probe 0'] = (2, '', 'blkid: cannot probe\n')
    server = storage.FakeStorageServer(gathered)
    outcomes = step_report.Report()
    with pytest.raises(exceptions.StepError) as caught:
        storage.set_up(server, outcomes)
    located = outcomes.outcomes[0]
    assert located.detail == ('/dev/vdc\\n%s (Nova reported /dev/vdb)'
                              % FAKE_LINE)
    assert caught.value.step == 'format /dev/vdc\\n' + FAKE_LINE
    for record in caplog.records:
        assert '\n' not in record.getMessage()
