"""What Tacker v2 shows of a failed hook, as pure functions.

Tacker v2 sets the LcmOpOcc's ``error.detail`` to ``"<hook> failed: "``
followed by the repr of the script's stderr bytes, and keeps the
``user_script_err_handling_data`` the script hands back as
``error.userScriptErrHandlingData``. So the script writes one line of
printable ASCII (a repr shows nothing else as it is) naming the step and
the host, not the hook, which Tacker names; and hands back the same
failure as fields, with its log file and what a retry will do.
"""

import unicodedata

from kubernetes_mgmt_pv import exceptions
from kubernetes_mgmt_pv import redaction

# The failure's entry in the door's user_script_err_handling_data.
FAILURE_KEY = 'failure'
# Errors of the request itself: Tacker's retry sends the same request.
_REQUEST_ERRORS = (exceptions.ParameterError, exceptions.ParameterErrors,
                   exceptions.UnknownTargetError, exceptions.RequestRefused)


def ascii_line(text):
    """``text`` as one line of printable ASCII: whitespace runs become one
    space, other characters their compatibility form (an ellipsis three
    dots, accents dropped) or ``?``."""
    chars = []
    for char in unicodedata.normalize('NFKD', ' '.join(text.split())):
        if not unicodedata.combining(char):
            chars.append(char if ' ' <= char <= '~' else '?')
    return ' '.join(''.join(chars).split())


def failure(operation, error, secrets=()):
    """The exceptions.Failure of ``error`` in ASCII, secrets hidden, the
    hook's own name left out of the reason (Tacker names the hook)."""
    found = exceptions.failure_of(error)

    def clean(text):
        return ascii_line(redaction.redact(text, secrets)) if text else None
    reason = clean(found.reason) or type(error).__name__
    prefix = '%s failed: ' % operation
    if reason.startswith(prefix):
        reason = reason[len(prefix):]
    return exceptions.Failure(reason, clean(found.step), clean(found.host))


def error_line(found):
    """The stderr line: "<step> failed on <host>: <reason>", or what of
    step and host the failure has."""
    if found.step and found.host:
        return '%s failed on %s: %s' % (found.step, found.host, found.reason)
    if found.host:
        return '%s: %s' % (found.host, found.reason)
    return found.reason


def retry_note(operation, error, done):
    """What Tacker's retry of the operation will do, ``done`` the hooks of
    this operation that finished."""
    if isinstance(error, _REQUEST_ERRORS):
        return ('a retry sends this request again and is refused the same '
                'way: fail the operation and send a corrected request')
    start = operation[:-len('_end')] + '_start'
    if operation.endswith('_end') and start in done:
        return ('a retry skips %s (done) and runs %s again; each step '
                'changes only what differs' % (start, operation))
    return ('a retry runs %s again; each step changes only what differs'
            % operation)


def failure_fields(found, log_file, retry):
    """The failure as user_script_err_handling_data keeps it: only the
    fields that have content."""
    fields = {'step': found.step, 'host': found.host,
              'reason': found.reason, 'logFile': log_file, 'retry': retry}
    return {key: value for key, value in fields.items() if value}
