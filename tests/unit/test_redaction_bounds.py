"""Redaction of a VM's text is linear in its length, and an error redacts
and keeps only the part of a command's output it shows.

A VM can print 16 MiB on a failed command: each hostile shape below made
a pattern of ``redaction`` restart its scan at every word (quadratic: 1
MiB took hours). Each shape is redacted in a child process, whose CPU
time is measured, so that a quadratic redaction fails the test at its
deadline instead of holding the test run.
"""

import json
import subprocess
import sys
import time

import pytest

from kubernetes_mgmt_pv import exceptions
from kubernetes_mgmt_pv import redaction

MIB = 1024 * 1024
SECRETS = ('hunter2-Secret', 'p@ss w!')
# Text of about 1 MiB: repeated units, and shapes that near-miss a secret.
SHAPES = {
    'a-': 'a-', 'a.': 'a.', 'one-long-word': 'a', 'scheme-separators': '://',
    'schemes': 'a://', 'proxy-names': 'proxy=', 'proxy-values': 'proxy=a',
    'token-names': 'token=', 'bearer-words': 'bearer ', 'at-signs': '@',
    'user-info': 'x:y@', 'escape-sequences': '\x1b[0', 'spaces': ' ',
    'secret-prefixes': 'hunter2-Secre ', 'secret-words': 'hunter2-Secret-',
}
_CHILD = '''
import json, sys, time
from kubernetes_mgmt_pv import redaction
unit, secrets, function = json.loads(sys.stdin.read())
text = unit * (%d // len(unit))
started = time.process_time()
getattr(redaction, function)(text, secrets)
print(time.process_time() - started)
''' % MIB


def cpu_seconds(unit, function='redact', deadline=30, secrets=SECRETS):
    """CPU time of ``redaction.<function>`` over 1 MiB of ``unit``."""
    child = subprocess.run(
        [sys.executable, '-c', _CHILD], check=True, timeout=deadline,
        input=json.dumps([unit, secrets, function]), capture_output=True,
        text=True)
    return float(child.stdout)


@pytest.mark.parametrize('unit', SHAPES.values(), ids=SHAPES)
def test_a_mebibyte_of_hostile_text_is_redacted_in_linear_time(unit):
    assert cpu_seconds(unit) < 1.0


@pytest.mark.parametrize('unit', ['a-', 'proxy=', 'a://'])
def test_an_excerpt_of_hostile_text_costs_its_shown_part(unit):
    assert cpu_seconds(unit, 'excerpt') < 0.2


def test_a_secret_a_vm_made_huge_is_not_looked_for():
    """A join value a hostile Master printed, 16 MiB long: no secret of
    the driver's is that long."""
    assert cpu_seconds('0 ', secrets=['0' * 16 * MIB]) < 1.0


def test_sixteen_mebibytes_of_output_leave_a_short_error():
    started = time.process_time()
    shown = redaction.excerpt('a-' * 8 * MIB + '\nE: the real error\n')
    assert time.process_time() - started < 1.0
    assert shown.endswith('E: the real error\n')
    assert len(shown) <= redaction.OUTPUT_HEAD + redaction.OUTPUT_TAIL + 40


def test_short_output_is_redacted_whole():
    text = 'pw hunter2-Secret\n' * 10
    shown = redaction.excerpt(text, SECRETS)
    assert shown == redaction.redact(text, SECRETS) and 'Secret' not in shown


def test_an_excerpt_keeps_the_first_and_the_last_lines():
    lines = ['line %d' % number for number in range(10000)]
    shown = redaction.excerpt('\n'.join(lines))
    assert shown.startswith('line 0\nline 1\n')
    assert shown.endswith('line 9998\nline 9999')
    assert 'line 5000\n' not in shown and 'left out' in shown


@pytest.mark.parametrize('secret', SECRETS + ('long-' * 200 + 'pw',))
@pytest.mark.parametrize('where', ['head', 'tail'])
def test_a_secret_cut_by_the_excerpt_never_shows_in_part(secret, where):
    """The secret starts at offsets all around the cut (every one near
    its ends): no piece of it of four characters shows."""
    cut = (redaction.OUTPUT_HEAD if where == 'head'
           else -redaction.OUTPUT_TAIL)
    pieces = {secret[i:i + 4] for i in range(len(secret) - 3)}
    edges = set(range(-len(secret) - 2, -len(secret) + 8)) | set(
        range(-8, 3))
    for shift in sorted(edges | set(range(-len(secret), 0, 37))):
        filler = 'x ' * 4000
        if where == 'head':
            start = cut + shift
            text = filler[:start] + ' ' + secret + ' ' + filler
        else:
            text = filler + ' ' + secret + ' ' + filler[:-cut + shift]
        shown = redaction.excerpt(text, (secret,))
        assert not [piece for piece in pieces if piece in shown], shift


@pytest.mark.parametrize('text', [
    'x ' * 100 + 'http://admin:' + 'p' * 9000 + '@host/ ' + 'y ' * 3000,
    'y ' * 3000 + 'http://admin:' + 'p' * 9000 + '@host/ ' + 'x ' * 100,
    'x ' * 240 + 'Authorization: Bearer ' + 'Q' * 60 + ' ' + 'y ' * 3000,
    'y ' * 3000 + 'Authorization: Bearer ' + 'Q' * 60 + ' ' + 'x ' * 740,
    'x ' * 245 + 'HTTP_PROXY=admin:' + 'p' * 20 + '@proxy ' + 'y ' * 3000,
])
def test_credentials_cut_by_the_excerpt_never_show_in_part(text):
    shown = redaction.excerpt(text)
    assert 'pppp' not in shown and 'QQQQ' not in shown


def test_a_command_error_keeps_only_what_it_shows():
    error = exceptions.RemoteCommandError(
        '10.0.0.5', 'apt-get install x', 100, 'out\n' * 100000,
        'noise\n' * 100000 + 'E: boom')
    limit = redaction.OUTPUT_HEAD + redaction.OUTPUT_TAIL + 40
    assert len(error.stdout) <= limit and len(error.stderr) <= limit
    assert str(error).endswith('E: boom') and len(str(error)) < 2200
