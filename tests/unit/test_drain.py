"""Why a kubectl drain failed, from its error output (as kubectl prints
it against the test API server), and the error the operator reads."""

import resource

import pytest

from kubernetes_mgmt_pv.cluster import drain

BLOCKED = "Cannot evict pod as it would violate the pod's disruption budget."
SERVER_ERROR = 'Internal error occurred: etcdserver: leader changed'
# One pod's eviction answered 500, the other's refused by a budget (429)
# until the timeout: kubectl 1.32's output.
MIXED = (
    'Warning: ignoring DaemonSet-managed Pods: kube-system/proxy-1\n'
    'error when evicting pods/"web-2" -n "default" (will retry after 5s): '
    '%s\n'
    'There are pending pods in node "worker-1" when an error occurred: '
    '[error when evicting pods/"web-1" -n "default": %s, error when '
    'evicting pods/"web-2" -n "default": global timeout reached: 3s]\n'
    'pod/web-1\npod/web-2\n'
    'error: unable to drain node "worker-1" due to error: [error when '
    'evicting pods/"web-1" -n "default": %s, error when evicting '
    'pods/"web-2" -n "default": global timeout reached: 3s], continuing '
    'command...\n'
    'There are pending nodes to be drained:\n worker-1\n'
    'error when evicting pods/"web-1" -n "default": %s\n'
    'error when evicting pods/"web-2" -n "default": global timeout '
    'reached: 3s\n') % (BLOCKED, SERVER_ERROR, SERVER_ERROR, SERVER_ERROR)
ONLY_500 = (
    'There are pending pods in node "worker-1" when an error occurred: '
    'error when evicting pods/"web-1" -n "default": %s\npod/web-1\n'
    'error: unable to drain node "worker-1" due to error: error when '
    'evicting pods/"web-1" -n "default": %s, continuing command...\n'
    'There are pending nodes to be drained:\n worker-1\n'
    'error when evicting pods/"web-1" -n "default": %s\n'
    % (SERVER_ERROR, SERVER_ERROR, SERVER_ERROR))
ONLY_429 = (
    'error when evicting pods/"db" -n "shop" (will retry after 5s): %s\n'
    'error when evicting pods/"db" -n "shop" (will retry after 5s): %s\n'
    'error: unable to drain node "w1" due to error: error when evicting '
    'pods/"db" -n "shop": global timeout reached: 5s, continuing '
    'command...\n' % (BLOCKED, BLOCKED))
NO_CONTROLLER = (
    'error: unable to drain node "w1" due to error: cannot delete Pods '
    'that declare no controller (use --force to override): default/bare, '
    'kube-system/debug, continuing command...\n')
THROTTLED = (
    'error when evicting pods/"web" -n "default" (will retry after 5s): '
    'Too many requests, please try again later.\n'
    'error when evicting pods/"web" -n "default": global timeout '
    'reached: 5s\n')
TERMINATING = (
    'error: unable to drain node "w1" due to error: error when waiting '
    'for pod "web-1" in namespace "shop" to terminate: global timeout '
    'reached: 5s, continuing command...\n')


@pytest.mark.parametrize('stderr, expected', [
    (ONLY_500, drain.DrainOutcome(
        server_errors=(('default/web-1', SERVER_ERROR),))),
    (ONLY_429, drain.DrainOutcome(timed_out=True,
                                  budget_refused=('shop/db',))),
    (MIXED, drain.DrainOutcome(
        timed_out=True, budget_refused=('default/web-2',),
        server_errors=(('default/web-1', SERVER_ERROR),))),
    (NO_CONTROLLER, drain.DrainOutcome(
        need_force=('default/bare', 'kube-system/debug'))),
    # A 429 of the API server's rate limits is no budget's.
    (THROTTLED, drain.DrainOutcome(timed_out=True,
                                   unfinished=('default/web',))),
    (TERMINATING, drain.DrainOutcome(timed_out=True,
                                     unfinished=('shop/web-1',))),
    # kubectl before 1.20 named the pod only.
    ('error when waiting for pod "web-1" terminating: global timeout '
     'reached: 5s\n', drain.DrainOutcome(timed_out=True,
                                         unfinished=('web-1',))),
    ('error: the server was unable to return a response\n',
     drain.DrainOutcome()),
    # Names that are no Kubernetes names are not taken.
    ('error when evicting pods/"a\\" b" -n "x": boom\n', drain.DrainOutcome()),
])
def test_the_outcome_of_a_drain_is_classified(stderr, expected):
    outcome = drain.classify(stderr)
    assert _causes(outcome) == _causes(expected)
    assert outcome.last_line == stderr.strip().splitlines()[-1].strip()


def _causes(outcome):
    return (outcome.timed_out, outcome.budget_refused, outcome.server_errors,
            outcome.need_force, outcome.unfinished)


def _error(stderr, budgets=()):
    return str(drain.failure('w1', drain.classify(stderr), 5, budgets))


def test_a_server_error_names_the_pod_and_not_drain_force():
    error = _error(ONLY_500)
    assert error.startswith('kubectl drain of Node w1 failed: ')
    assert 'pod default/web-1 with a server error' in error
    assert SERVER_ERROR in error
    assert 'drain_force' not in error and 'blocked by' not in error
    assert 'PodDisruptionBudget' not in error


def test_a_budget_refusal_names_the_budget_and_drain_force():
    error = _error(ONLY_429, ['shop/db-budget'])
    assert error.startswith('kubectl drain of Node w1 did not finish '
                            'within 5s: blocked by pod(s) shop/db '
                            '(PodDisruptionBudget shop/db-budget allows no '
                            'disruption) (drain_force deletes such pods '
                            'regardless)')
    assert 'server error' not in error


def test_both_causes_are_told_apart():
    error = _error(MIXED, ['default/web-pdb'])
    assert 'blocked by pod(s) default/web-2 (PodDisruptionBudget ' \
        'default/web-pdb allows no disruption)' in error
    assert 'pod default/web-1 with a server error' in error
    assert 'web-1 (' not in error  # the budget is not web-1's


def test_pods_without_a_controller_point_to_drain_force():
    error = _error(NO_CONTROLLER)
    assert 'blocked by pod(s) default/bare, kube-system/debug, which have ' \
        'no controller (drain_force deletes such pods regardless)' in error


def test_throttled_evictions_name_no_budget():
    error = _error(THROTTLED, ['default/web-pdb'])
    assert 'did not finish within 5s' in error
    assert 'default/web not gone in time' in error
    assert 'PodDisruptionBudget' not in error and 'drain_force' not in error


def test_an_unknown_failure_ends_with_kubectl_last_line():
    error = _error('error: the server was unable to return a response\n')
    assert error == ('kubectl drain of Node w1 failed: error: the server was '
                     'unable to return a response; the node stays in the '
                     'cluster, cordoned')


def test_what_the_vm_prints_is_capped_and_one_line():
    pods = ''.join('error when evicting pods/"p%d" -n "ns": boom %s\n'
                   % (index, 'x' * 1000) for index in range(100))
    outcome = drain.classify(pods + 'last\u2028line\x1b[2J' + 'y' * 9000)
    assert len(outcome.server_errors) == drain.MAX_PODS
    assert all(len(message) <= drain.MAX_MESSAGE
               for _, message in outcome.server_errors)
    assert len(outcome.last_line) <= drain.MAX_MESSAGE
    error = str(drain.failure('w1', outcome, 5))
    assert '\n' not in error and '\u2028' not in error \
        and '\x1b' not in error


@pytest.mark.parametrize('hostile', [
    'error when evicting pods/"' + 'a' * (1 << 20),
    'error when evicting pods/"a" -n "b": ' + ', error whe' * (1 << 17),
    '(use --force to override): ' + 'a/' * (1 << 19),
    'error when waiting for pod "' + 'a/' * (1 << 19),
    'error when evicting pods/"a" -n "b" (will retry after ' * (1 << 14),
])
def test_classifying_hostile_output_takes_linear_time(hostile):
    started = resource.getrusage(resource.RUSAGE_SELF).ru_utime
    drain.classify(hostile)
    assert resource.getrusage(resource.RUSAGE_SELF).ru_utime - started < 2.0
