"""One run at a time of the steps that must not run twice at once on a
host: kubeadm init, join, reset and upgrade, the certificates' renewal
and the install script's package changes.

A hook that hits its deadline or a command timeout leaves its remote
command running; a retry must not start the same command beside it. Such
a step runs under an exclusive ``flock`` (util-linux) on a lock file in
the host's /run: the shell that holds the lock waits for its command and
gives the command no copy of the lock, so the lock is released exactly
when the earlier run ends (or the host reboots). A later run waits for
it at most ``wait`` seconds, says on stderr that it waited, and fails
with BUSY_STATUS when the earlier run is still going. Once it holds the
lock, the command runs at most its own ``run`` seconds (coreutils
``timeout``, which ends the command's whole process group), so waiting
never lengthens the time the step itself may take.
"""

import re

from oslo_log import log as logging

from kubernetes_mgmt_pv import exceptions

LOG = logging.getLogger(__name__)

# The driver's runtime directory on a host: gone at a reboot, as every
# process that held its lock and every restart it records.
RUN_DIR = '/run/kubernetes-mgmt-pv'
LOCK_FILE = RUN_DIR + '/steps.lock'
BUSY_STATUS = 75  # EX_TEMPFAIL
TIMED_OUT_STATUS = 124  # coreutils timeout's, when the time ran out
# Seconds a command that ignores SIGTERM at its time limit has left.
_KILL_AFTER = 10
_MARK = 'kubernetes-mgmt-pv host lock:'
# $1 lock file, $2 seconds to wait, $3 seconds to run, then the command.
GUARD_SCRIPT = r'''
lock=$1 wait=$2 run=$3
shift 3
mkdir -p -m 0700 "${lock%/*}" && exec 9>>"$lock" || exit 2
if ! flock -n 9; then
    started=$(date +%s)
    if ! flock -w "$wait" 9; then
        echo "''' + _MARK + r''' busy after ${wait}s" >&2
        exit ''' + str(BUSY_STATUS) + r'''
    fi
    echo "''' + _MARK + r''' waited $(( $(date +%s) - started ))s" >&2
fi
timeout -k ''' + str(_KILL_AFTER) + r''' "$run" "$@" 9>&-
'''
_WAITED = re.compile(r'^' + re.escape(_MARK) + r' waited (\d{1,9})s$', re.M)
_BUSY = re.compile(r'^' + re.escape(_MARK) + r' busy after \d{1,9}s$', re.M)


def guarded_argv(argv, wait, run):
    """``argv`` run under the host's step lock, waiting for an earlier
    holder at most ``wait`` seconds, then running at most ``run``."""
    return ['sh', '-c', GUARD_SCRIPT, 'sh', LOCK_FILE,
            '%d' % max(1, int(wait)), '%d' % max(1, int(run))] + list(argv)


def lock_outcome(result):
    """(seconds waited for an earlier run or None, whether it was still
    running when the wait ended) of a guarded run's CommandResult."""
    waited = _WAITED.search(result.stderr)
    busy = result.exit_status == BUSY_STATUS and \
        _BUSY.search(result.stderr) is not None
    return (int(waited[1]) if waited else None), busy


def run_exclusive(executor, argv, description, timeout, check=True,
                  **kwargs):
    """``executor.run(argv, sudo=True, ...)`` under the host's step lock.

    An earlier run still holding it is waited for as long as the step
    itself may take (``timeout``), and logged; if it is still running
    then, ``exceptions.ClusterInstallError`` names the step and nothing
    is started. The command itself runs at most ``timeout`` seconds
    after it got the lock: a command timed out raises
    ``RemoteCommandError``, as the executor's own timeout does.
    """
    result = executor.run(guarded_argv(argv, timeout, timeout), sudo=True,
                          check=False,
                          timeout=2 * timeout + _KILL_AFTER + 5,
                          description=description, **kwargs)
    waited, busy = lock_outcome(result)
    if busy:
        raise exceptions.ClusterInstallError(
            'an earlier run of %s (or of another step that must not run '
            'beside it) is still running on %s after waiting %ds for it; '
            'not started twice: let it finish, then retry' % (
                description, executor.host, int(timeout)))
    if waited is not None:
        LOG.warning('%s: waited %ds for an earlier run of %s (or of another '
                    'step that must not run beside it) to finish before '
                    'starting it', executor.host, waited, description)
    if result.exit_status == TIMED_OUT_STATUS:
        raise exceptions.RemoteCommandError(
            executor.host, description, None, timed_out=True,
            reason='timed out after %ds' % timeout)
    if check and not result.ok:
        raise executor.failure(description, result)
    return result
