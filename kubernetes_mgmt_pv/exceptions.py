"""Errors raised by the driver.

Every error carries a message meant for the operator reading Tacker's LCM
operation error: it says what failed, where, and why. None of them ever
contains a password, token or proxy credential (see ``redact``).
"""

import dataclasses

from kubernetes_mgmt_pv import redaction


class MgmtDriverError(Exception):
    """Base class of every error the driver raises."""


class ParameterError(MgmtDriverError):
    """An additionalParams value is missing or invalid.

    ``path`` is the JSON path of the offending value, for example
    ``k8s_cluster_installation_param.storage_server.nfs_server_setup_params[1].export_to``.
    """

    def __init__(self, path, reason):
        self.path = path
        self.reason = reason
        super().__init__('%s: %s' % (path, reason))


class ParameterErrors(MgmtDriverError):
    """Several parameter problems, reported together so one fix round
    suffices."""

    def __init__(self, errors):
        self.errors = list(errors)
        lines = ['invalid additionalParams (%d problem%s):' % (
            len(self.errors), '' if len(self.errors) == 1 else 's')]
        lines += ['  - %s' % error for error in self.errors]
        super().__init__('\n'.join(lines))


class UnknownTargetError(MgmtDriverError):
    """An LCM request names what the VNF instance does not have.

    ``unknown`` lists (JSON path in the request, value); ``known`` the
    values it may name. Raised before the hook changes anything, rather
    than acting on the targets it does know.
    """

    def __init__(self, unknown, what, known):
        self.unknown = list(unknown)
        self.known = list(known)
        super().__init__('%s (known: %s); nothing was changed' % (
            '; '.join('%s: %s is not %s' % (path, _shown(value), what)
                      for path, value in self.unknown),
            ', '.join(_shown(value) for value in self.known) or 'none'))


def check_known(entries, known, what):
    """Raise UnknownTargetError for the (JSON path, value) entries whose
    value is not in ``known`` (shown sorted)."""
    known = list(known)
    unknown = [(path, value) for path, value in entries
               if value not in known]
    if unknown:
        raise UnknownTargetError(unknown, what, sorted(set(known), key=str))


def indexed(path, values):
    """(JSON path of each item, item) of the list at ``path``."""
    return [('%s[%d]' % (path, index), value)
            for index, value in enumerate(values)]


def _shown(value, limit=80):
    """A request value quoted, and cut: the request is anyone's text."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + '...'


class RequestRefused(MgmtDriverError):
    """An LCM request the driver refuses because it would change the
    cluster under it: ``problems`` lists (JSON path in the request,
    reason). Raised in a ``_start`` hook, before Tacker changes anything.
    """

    def __init__(self, problems):
        self.problems = list(problems)
        super().__init__('%s; nothing was changed' % '; '.join(
            '%s: %s' % problem for problem in self.problems))


class HeatLookupError(MgmtDriverError):
    """A Heat resource or one of its attributes needed by the driver is
    missing."""


class RemoteConnectError(MgmtDriverError):
    """An SSH connection to a VM could not be established."""


class RemoteCommandError(MgmtDriverError):
    """A remote command exited non-zero, timed out or lost its connection.

    ``description`` is a human summary of the command; stdout/stderr
    explain the failure, cut to what the message shows (the executor cuts
    and redacts them: ``redaction.excerpt``). All three are already
    redacted: this message may reach Tacker's LCM operation error as it
    is. ``reason`` replaces the exit status when the command did not
    finish.
    """

    def __init__(self, host, description, exit_status, stdout='', stderr='',
                 timed_out=False, reason=None):
        self.host = host
        self.description = description
        self.exit_status = exit_status
        self.stdout = redaction.shortened(stdout or '')
        self.stderr = redaction.shortened(stderr or '')
        self.timed_out = timed_out
        if reason:
            what = reason
        elif timed_out:
            what = 'timed out'
        else:
            what = 'failed with exit status %s' % exit_status
        message = '%s: `%s` %s' % (host, description, what)
        detail = (self.stderr or self.stdout).strip()
        if detail:
            message += ': %s' % detail
        super().__init__(message)


class UnsupportedOSError(MgmtDriverError):
    """The VM runs an operating system the driver does not support."""


class StorageSetupError(MgmtDriverError):
    """The storage server could not be brought to the requested state."""


class ClusterInstallError(MgmtDriverError):
    """The Kubernetes cluster could not be installed, joined or reached."""


class NodeStepError(MgmtDriverError):
    """A step failed on some of the nodes it ran on; ``failures`` maps host
    to error."""

    def __init__(self, step, failures):
        self.step = redaction.one_line(step)
        self.failures = dict(failures)
        parts = [str(error) if isinstance(error, StepError) else
                 '%s: %s' % (host, failure_reason(error, host))
                 for host, error in sorted(self.failures.items())]
        self.reason = '; '.join(parts)
        super().__init__('%s failed on %d node(s): %s' % (
            self.step, len(self.failures), self.reason))


class StepError(MgmtDriverError):
    """One step failed on one host: "<step> failed on <host>: <reason>".

    ``cause`` is the original error, whatever its type. The step and host
    are one line each, whatever VM text they quote.
    """

    def __init__(self, step, host, cause):
        self.step = redaction.one_line(step)
        self.host = redaction.one_line(host)
        self.cause = cause
        self.reason = failure_reason(cause, host)
        super().__init__('%s failed on %s: %s' % (self.step, self.host,
                                                  self.reason))


@dataclasses.dataclass(frozen=True)
class Failure(object):
    """Where and why a hook failed: the step and host are None when the
    error names none (a request refused before any step)."""
    reason: str
    step: str = None
    host: str = None


def failure_of(error):
    """The Failure of ``error``, from the step and host it carries (a
    multi-node step: every failed host, comma-separated)."""
    if isinstance(error, NodeStepError):
        return Failure(error.reason, error.step,
                       ', '.join(sorted(error.failures)))
    if isinstance(error, StepError):
        return Failure(error.reason, error.step, error.host)
    if not isinstance(error, MgmtDriverError):
        return Failure(failure_reason(error))  # another library's host
    host = getattr(error, 'host', None)
    return Failure(failure_reason(error, host),
                   getattr(error, 'step', None), host)


def failure_reason(error, host=None):
    """Why ``error`` happened, never empty (``str(EOFError())`` is '').

    A leading "<host>: " is dropped, the caller names the host; an error
    that is not the driver's own shows its type, which explains messages
    such as "timed out" or "SSH session not active".
    """
    text = str(error).strip()
    if host and text.startswith(host + ':'):
        text = text[len(host) + 1:].strip()
    if isinstance(error, MgmtDriverError) and text:
        return text
    name = type(error).__name__
    return '%s: %s' % (name, text) if text else name


class PersistentVolumeError(MgmtDriverError):
    """A PersistentVolume could not be registered or removed."""


class PersistentVolumeInUseError(PersistentVolumeError):
    """A PersistentVolume of the VNF package is Bound to a claim."""

    step = 'PersistentVolume check'

    def __init__(self, names, host=None, claims=()):
        self.names = sorted(names)
        self.host = host  # the Master the PVs were read on
        self.claims = sorted(claims)  # "<namespace>/<name>" of the claims
        super().__init__(
            'PersistentVolume(s) %s are Bound to a PersistentVolumeClaim%s; '
            'delete the claims (and the Pods using them) before healing the '
            'storage server. Nothing was deleted.' % (
                ', '.join(self.names),
                ' (%s)' % ', '.join(self.claims) if self.claims else ''))
