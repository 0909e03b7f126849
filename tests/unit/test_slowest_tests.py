"""tools/slowest_tests.py: the slowest tests of each env's last run."""

import io
import json

from tools import slowest_tests

REPORT = '''<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" tests="4"
 timestamp="2026-11-26T17:00:00">
<testcase classname="tests.functional.test_ha"
 name="test_vip@tests/functional/test_ha.py" time="40.5"/>
<testcase classname="tests.functional.test_ha"
 name="test_quick[a@b]@tests/functional/test_ha.py" time="0.5"/>
<testcase classname="tests.functional.test_faults"
 name="test_fault[drop]@tests/functional/test_faults.py" time="12.25"/>
<testcase classname="tests.functional.test_faults"
 name="test_cover" time="1.0"/>
</testsuite></testsuites>
'''


def run(tmp_path, *args):
    out = io.StringIO()
    code = slowest_tests.main(['--reports', str(tmp_path), *args], out=out)
    return code, out.getvalue()


def test_tests_are_listed_slowest_first_without_the_xdist_group(tmp_path):
    (tmp_path / 'functional.xml').write_text(REPORT)
    code, text = run(tmp_path, '--top', '2')
    lines = text.splitlines()
    assert code == 0
    assert lines[0].startswith('== functional: 4 tests, 54.2 s')
    assert lines[1].split() == [
        '40.50s', 'tests/functional/test_ha.py::test_vip']
    assert lines[2].split() == [
        '12.25s', 'tests/functional/test_faults.py::test_fault[drop]']
    assert lines[3].strip() == 'by module:'
    assert lines[4].split() == ['41.00s', 'tests/functional/test_ha.py']
    assert lines[5].split() == ['13.25s', 'tests/functional/test_faults.py']


def test_every_report_is_shown_and_a_missing_env_fails(tmp_path):
    (tmp_path / 'functional.xml').write_text(REPORT)
    (tmp_path / 'unit.xml').write_text(REPORT)
    code, text = run(tmp_path)
    assert code == 0
    assert [line.split(':')[0] for line in text.splitlines()
            if line.startswith('==')] == ['== functional', '== unit']
    code, text = run(tmp_path, 'tacker')
    assert code == 1 and text.startswith('== tacker: no report')


def test_no_reports_at_all_says_so(tmp_path):
    code, text = run(tmp_path / 'absent')
    assert code == 1 and 'run tox first' in text


def test_durations_are_written_for_the_envs_named(tmp_path):
    (tmp_path / 'functional.xml').write_text(REPORT)
    (tmp_path / 'unit.xml').write_text(REPORT.replace('functional', 'unit'))
    target = tmp_path / 'durations.json'
    code, text = run(tmp_path, '--write-durations', str(target),
                     'functional', 'tacker')
    assert code == 0
    assert json.loads(target.read_text()) == {
        'tests/functional/test_ha.py::test_vip': 40.5,
        'tests/functional/test_ha.py::test_quick[a@b]': 0.5,
        'tests/functional/test_faults.py::test_fault[drop]': 12.2,
        'tests/functional/test_faults.py::test_cover': 1.0}
    assert text == '4 tests in %s\n' % target
