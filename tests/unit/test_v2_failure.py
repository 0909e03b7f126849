"""What Tacker v2 shows of a failed hook: the stderr line (Tacker's
error.detail) and the failure fields (error.userScriptErrHandlingData)."""

import pytest

from kubernetes_mgmt_pv.doors import v2_failure
from kubernetes_mgmt_pv import exceptions


@pytest.mark.parametrize('text, expected', [
    ('plain', 'plain'),
    ('two\nlines\r\n\tand  tabs \n', 'two lines and tabs'),
    ('wait\u2026 caf\u00e9', 'wait... cafe'),
    ('\u201cquoted\u201d \u30c6', '?quoted? ?'),
    ('escape \x1b[31m red', 'escape ?[31m red'),
    ('', ''),
])
def test_ascii_line(text, expected):
    line = v2_failure.ascii_line(text)
    assert line == expected
    assert line.isascii() and '\n' not in line


@pytest.mark.parametrize('error, step, host, reason', [
    (exceptions.StepError('kubeadm join', '10.0.0.7', OSError('refused')),
     'kubeadm join', '10.0.0.7', 'OSError: refused'),
    (exceptions.NodeStepError('NFS client installation', {
        '10.0.0.8': exceptions.MgmtDriverError('apt locked'),
        '10.0.0.7': exceptions.MgmtDriverError('10.0.0.7: no space')}),
     'NFS client installation', '10.0.0.7, 10.0.0.8',
     '10.0.0.7: no space; 10.0.0.8: apt locked'),
    (exceptions.RemoteCommandError('10.0.0.9', 'exportfs -ra', 1,
                                   stderr='bad export'),
     None, '10.0.0.9', '`exportfs -ra` failed with exit status 1: bad '
                       'export'),
    (exceptions.PersistentVolumeInUseError(['nfs-pv1'], '10.0.0.5'),
     'PersistentVolume check', '10.0.0.5', None),
    (exceptions.ParameterErrors([exceptions.ParameterError('a.b', 'bad')]),
     None, None, 'invalid additionalParams (1 problem):\n  - a.b: bad'),
    (EOFError(), None, None, 'EOFError'),
    # Another library's attributes are no step or host of the driver.
    (type('LibraryError', (Exception,), {'host': ('h', 1), 'step': 3})('x'),
     None, None, 'LibraryError: x'),
])
def test_failure_of_reads_the_errors_own_step_and_host(error, step, host,
                                                       reason):
    found = exceptions.failure_of(error)
    assert (found.step, found.host) == (step, host)
    assert found.reason == (reason or str(error))


@pytest.mark.parametrize('error, line', [
    (exceptions.StepError('kubeadm join', '10.0.0.7',
                          OSError('refused \u2026\n')),
     'kubeadm join failed on 10.0.0.7: OSError: refused ...'),
    (exceptions.PersistentVolumeInUseError(['nfs-pv1'], '10.0.0.5'),
     'PersistentVolume check failed on 10.0.0.5: PersistentVolume(s) '
     'nfs-pv1 are Bound to a PersistentVolumeClaim; delete the claims (and '
     'the Pods using them) before healing the storage server. Nothing was '
     'deleted.'),
    (exceptions.RemoteCommandError('10.0.0.9', 'exportfs -ra', 1),
     '10.0.0.9: `exportfs -ra` failed with exit status 1'),
    (exceptions.ParameterErrors([exceptions.ParameterError('a.b', 'bad')]),
     'invalid additionalParams (1 problem): - a.b: bad'),
    # The hook boundary's "<hook> failed: ": Tacker names the hook.
    (exceptions.MgmtDriverError('scale_end failed: boom'), 'boom'),
    (exceptions.MgmtDriverError('login as ubuntu with pw-Secret\nrefused'),
     'login as ubuntu with *** refused'),
])
def test_the_error_line_names_step_and_host_not_the_hook(error, line):
    found = v2_failure.failure('scale_end', error, ['pw-Secret'])
    assert v2_failure.error_line(found) == line
    assert not line.startswith('scale_end')


def test_secrets_are_hidden_in_step_and_host_too():
    found = v2_failure.failure('heal_end', exceptions.StepError(
        'login pw-Secret', 'pw-Secret', OSError('x')), ['pw-Secret'])
    assert 'pw-Secret' not in repr(found)


@pytest.mark.parametrize('operation, error, done, expected', [
    ('heal_end', OSError(), ['heal_start'],
     'a retry skips heal_start (done) and runs heal_end again; each step '
     'changes only what differs'),
    ('heal_start', OSError(), [],
     'a retry runs heal_start again; each step changes only what differs'),
    ('scale_end', OSError(), [],
     'a retry runs scale_end again; each step changes only what differs'),
    ('scale_end', exceptions.ParameterErrors([]), ['scale_start'],
     'a retry sends this request again and is refused the same way: fail '
     'the operation and send a corrected request'),
    ('heal_start', exceptions.UnknownTargetError([], 'a VNFC', []), [],
     'a retry sends this request again and is refused the same way: fail '
     'the operation and send a corrected request'),
])
def test_retry_note(operation, error, done, expected):
    assert v2_failure.retry_note(operation, error, done) == expected


@pytest.mark.parametrize('found, log_file, expected', [
    (exceptions.Failure('r', 's', 'h'), '/l', {
        'step': 's', 'host': 'h', 'reason': 'r', 'logFile': '/l',
        'retry': 'again'}),
    (exceptions.Failure('r'), None, {'reason': 'r', 'retry': 'again'}),
])
def test_failure_fields_only_with_content(found, log_file, expected):
    assert v2_failure.failure_fields(found, log_file, 'again') == expected
