"""What a failed ``kubectl drain`` says, as a pure function of its error
output, and the error that sends the operator to the right fix.

kubectl retries an eviction the API server refuses with HTTP 429 (a
PodDisruptionBudget allows no disruption) until the drain's timeout, and
gives up at once on any other error (a server error, HTTP 500): only the
first is a budget's doing, which ``drain_force`` bypasses. The output comes
from a VM (the Master's kubectl): every pattern here is linear in its
length, names must be Kubernetes names, and what is kept is capped.
"""

import dataclasses
import re

from kubernetes_mgmt_pv.cluster import budgets as budget_listing
from kubernetes_mgmt_pv import exceptions

# Most pods and server messages an error names; characters kept of one.
MAX_PODS = 20
MAX_MESSAGE = 200

_NAME = r'[a-z0-9][-a-z0-9.]{0,252}'
_NAMESPACE = r'[a-z0-9][-a-z0-9]{0,62}'
# A message runs to the end of its line, the aggregate's "]" or its next
# error; no control characters.
_MESSAGE = r'(?:(?!, error when )[^\x00-\x1f\x7f\]]){0,%d}' % MAX_MESSAGE
_EVICTION = re.compile(
    r'error when evicting pods/"(?P<name>%s)" -n "(?P<namespace>%s)"'
    r'(?P<retried> \(will retry after [0-9]{1,9}s\))?: (?P<message>%s)'
    % (_NAME, _NAMESPACE, _MESSAGE))
_WAIT = re.compile(
    r'error when waiting for pod "(?:(?P<namespace>%s)/)?(?P<name>%s)"'
    r'(?: in namespace "(?P<namespace2>%s)")?'
    % (_NAMESPACE, _NAME, _NAMESPACE))
# "cannot delete Pods that declare no controller (use --force to
# override): ns/a, ns/b" (other kinds end in "; cannot delete ...").
_FORCE_ONLY = re.compile(r'\(use --force to override\): (?P<list>[^\n\];]'
                         r'{0,8192})')
_POD = re.compile(r'(%s)/(%s)' % (_NAMESPACE, _NAME))
_TIMED_OUT = re.compile(r'global timeout reached|timed out waiting')
_BUDGET = 'disruption budget'


@dataclasses.dataclass(frozen=True)
class DrainOutcome(object):
    """Why a drain failed, by pod (namespace/name), each list capped."""
    timed_out: bool = False
    budget_refused: tuple = ()  # evictions a PodDisruptionBudget refused
    server_errors: tuple = ()  # (pod, message) evictions the server failed
    need_force: tuple = ()  # pods without a controller
    unfinished: tuple = ()  # evicted or retried, not gone in time
    last_line: str = ''


def _capped(items):
    return tuple(dict.fromkeys(items))[:MAX_PODS]


def classify(stderr):
    """The DrainOutcome of kubectl drain's error output."""
    budget, errors, unfinished = [], {}, []
    timed_out = False
    for match in _EVICTION.finditer(stderr):
        pod = '%s/%s' % (match.group('namespace'), match.group('name'))
        message = _one_line(match.group('message'))
        if match.group('retried'):
            if _BUDGET in message:
                budget.append(pod)
        elif _TIMED_OUT.search(message):
            timed_out = True
            unfinished.append(pod)
        else:
            errors.setdefault(pod, message)
    for match in _WAIT.finditer(stderr):
        timed_out = True
        namespace = match.group('namespace') or match.group('namespace2')
        unfinished.append('%s/%s' % (namespace, match.group('name'))
                          if namespace else match.group('name'))
    force = [pod.group(0) for listed in _FORCE_ONLY.finditer(stderr)
             for pod in _POD.finditer(listed.group('list'))]
    lines = [line for line in stderr[-4096:].splitlines() if line.strip()]
    return DrainOutcome(
        timed_out=timed_out or bool(_TIMED_OUT.search(stderr[-4096:])),
        budget_refused=_capped(budget),
        server_errors=tuple(errors.items())[:MAX_PODS],
        need_force=_capped(force),
        unfinished=_capped(pod for pod in unfinished
                           if pod not in budget and pod not in errors),
        last_line=_one_line(lines[-1]) if lines else 'no message')


def _one_line(text):
    return ''.join(c if c.isprintable() else ' '
                   for c in text[-MAX_MESSAGE:]).strip()


def failure(name, outcome, timeout, budgets=()):
    """The error of the drain of Node ``name`` that ended as ``outcome``;
    ``budgets``: the PodDisruptionBudgets found covering its
    budget-refused pods. drain_force is named only where it helps: pods a
    budget protects and pods without a controller."""
    clauses = []
    if outcome.budget_refused:
        clauses.append('blocked by pod(s) %s (%s)' % (
            ', '.join(outcome.budget_refused),
            'PodDisruptionBudget %s allows no disruption' % ', '.join(budgets)
            if budgets else 'a PodDisruptionBudget refused their eviction'))
    if outcome.need_force:
        clauses.append('blocked by pod(s) %s, which have no controller'
                       % ', '.join(outcome.need_force))
    if clauses:
        clauses[-1] += ' (drain_force deletes such pods regardless)'
    clauses += ['the API server failed the eviction of pod %s with a '
                'server error, not a disruption budget: %s' % (pod, message)
                for pod, message in outcome.server_errors]
    if outcome.unfinished:
        clauses.append('pod(s) %s not gone in time'
                       % ', '.join(outcome.unfinished))
    return exceptions.ClusterInstallError(
        'kubectl drain of Node %s %s: %s; the node stays in the cluster, '
        'cordoned' % (
            name, 'did not finish within %ds' % timeout if outcome.timed_out
            else 'failed', '; '.join(clauses) or outcome.last_line))


def budgets_of(kubectl, pods):
    """The PodDisruptionBudgets that block ``pods`` (a failed drain's
    budget_refused), read with ``kubectl`` (a MasterKubectl), for the
    error: kubectl drain names the pods, not the budgets."""
    if not pods:
        return []
    listings = [kubectl.run(['get', kind, '-A', '-o', 'json'], check=False)
                for kind in ('pods', 'poddisruptionbudgets')]
    if not all(result.ok for result in listings):
        return []
    return budget_listing.blocking_budgets(listings[0].stdout,
                                           listings[1].stdout, pods)
