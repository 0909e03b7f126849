"""Print the slowest tests of the last run of each tox env.

Every pytest env of tox.ini writes a JUnit report to .tox/reports/ENV.xml
(each run replaces its env's file); this reads them and prints, per env,
the run's test count and summed test time, the slowest tests (setup, call
and teardown together, so a module fixture counts for the module's first
test) and the modules by summed time.

With --write-durations FILE it writes every test's time instead, as
{test id: seconds}: testbed/test_durations.json, by which the xdist runs
hand out their longest groups first (testbed/run_groups.py).

Usage: python tools/slowest_tests.py [--top N] [--reports DIR]
                                     [--write-durations FILE] [ENV ...]
"""

import argparse
import collections
import json
import os
import re
import sys
import time
import xml.etree.ElementTree as ElementTree

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REPORTS = os.path.join(ROOT, '.tox', 'reports')
# pytest-xdist's loadgroup appends "@GROUP" to a test's node id.
XDIST_GROUP = re.compile(r'@[^@\[\]]*$')


def read_report(path):
    """(tests, started) of a JUnit file: tests as (seconds, test id)."""
    root = ElementTree.parse(path).getroot()
    suites = [root] if root.tag == 'testsuite' else root.iter('testsuite')
    tests, started = [], None
    for suite in suites:
        started = started or suite.get('timestamp')
        for case in suite.iter('testcase'):
            module = case.get('classname', '').replace('.', '/')
            name = XDIST_GROUP.sub('', case.get('name', ''))
            tests.append((float(case.get('time') or 0),
                          '%s.py::%s' % (module, name)))
    return tests, started


def module_totals(tests):
    """[(seconds, module)] summed per module (class names folded in)."""
    totals = collections.Counter()
    for seconds, test_id in tests:
        module = test_id.split('::', 1)[0]
        while not os.path.exists(os.path.join(ROOT, module)) and \
                module.count('/') > 1:
            # classname "pkg.test_x.TestClass": drop the class part.
            module = module.rsplit('/', 1)[0] + '.py'
        totals[module] += seconds
    return sorted(((s, m) for m, s in totals.items()), reverse=True)


def print_env(env, path, top, out):
    tests, started = read_report(path)
    stamp = started or time.strftime(
        '%Y-%m-%dT%H:%M:%S', time.localtime(os.path.getmtime(path)))
    total = sum(seconds for seconds, _ in tests)
    out.write('== %s: %d tests, %.1f s of test time, run of %s\n'
              % (env, len(tests), total, stamp))
    for seconds, test_id in sorted(tests, reverse=True)[:top]:
        out.write('%9.2fs  %s\n' % (seconds, test_id))
    out.write('   by module:\n')
    for seconds, module in module_totals(tests)[:top]:
        out.write('%9.2fs  %s\n' % (seconds, module))
    out.write('\n')


def write_durations(paths, target):
    """{test id: seconds, rounded} of every report, one test a line."""
    durations = {}
    for path in paths:
        durations.update((test_id, round(seconds, 1))
                         for seconds, test_id in read_report(path)[0])
    with open(target, 'w') as handle:
        json.dump(durations, handle, indent=0, sort_keys=True)
        handle.write('\n')
    return len(durations)


def main(argv=None, out=sys.stdout):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('envs', nargs='*', metavar='ENV',
                        help='tox envs to show (default: every report)')
    parser.add_argument('--top', type=int, default=25)
    parser.add_argument('--reports', default=REPORTS,
                        help='directory of ENV.xml files (%(default)s)')
    parser.add_argument('--write-durations', metavar='FILE',
                        help="write each test's seconds to FILE (JSON)")
    args = parser.parse_args(argv)
    envs = args.envs or sorted(
        name[:-len('.xml')] for name in os.listdir(args.reports)
        if name.endswith('.xml')) if os.path.isdir(args.reports) else []
    if not envs:
        out.write('no reports in %s: run tox first\n' % args.reports)
        return 1
    if args.write_durations:
        paths = [os.path.join(args.reports, env + '.xml') for env in envs]
        count = write_durations([path for path in paths
                                 if os.path.exists(path)],
                                args.write_durations)
        out.write('%d tests in %s\n' % (count, args.write_durations))
        return 0
    missing = 0
    for env in envs:
        path = os.path.join(args.reports, env + '.xml')
        if not os.path.exists(path):
            out.write('== %s: no report (%s)\n\n' % (env, path))
            missing += 1
            continue
        print_env(env, path, args.top, out)
    return 1 if missing else 0


if __name__ == '__main__':
    sys.exit(main())
