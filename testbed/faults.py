"""Fault injection for the functional tests.

Three kinds of faults, each removable so that a re-run runs clean:

* a command that fails: ``CommandFault`` puts a wrapper script named like
  the command in ``/usr/local/sbin`` of a test host. That directory comes
  first both in the login ``PATH`` of the SSH sessions (pam_env reads
  ``/etc/environment``) and in sudo's ``secure_path``, so the driver's
  ``mkfs`` or ``sudo -n -- mkfs`` runs the wrapper. The wrapper counts the
  calls whose arguments contain ``match``, lets the others through to the
  real command, and for the chosen ones (``first`` .. ``first+count-1``)

  - ``ERROR``: prints a message on stderr and exits non-zero without
    running the real command;
  - ``DROP_BEFORE``: cuts the SSH connection the command came through
    (SIGKILL to the ``sshd`` processes among its ancestors: the privileged
    monitor and the user's session process), without running the command;
  - ``DROP_AFTER``: runs the real command, then cuts the connection, so the
    change is made but the driver never learns its exit status.

* an HTTP error from the test Kubernetes API server or the Keystone/Heat
  fake: ``Faults.http`` arms their ``fail_requests`` and clears it again.

The wrapper looks the real command up when it runs, in the ``PATH``
without ``/usr/local``, so a command that a package installs during the
run (``exportfs``) can be wrapped before it exists.

Wrappers and their counters are written and read from the runner through
``/proc/<host PID 1>/root``, never with a command inside the host, so the
test's own inspection cannot trip or count a fault.
"""

import os
import secrets
import shlex

from kubernetes_mgmt_pv.remote import host_lock
from testbed import polling
from testbed import standins

WRAPPER_DIR = '/usr/local/sbin'
STATE_DIR = '/run/testbed-faults'
MARKER = '# testbed fault wrapper'
REAL_DIRS = ('/usr/sbin', '/usr/bin', '/sbin', '/bin')
SAFE_PATH = ':'.join(REAL_DIRS)

ERROR = 'error'
DROP_BEFORE = 'drop-before'
DROP_AFTER = 'drop-after'
ACTIONS = (ERROR, DROP_BEFORE, DROP_AFTER)

_WRAPPER = r'''#!/bin/sh
{marker} {fault_id}: {description}
# The wrapper's own tools must not find the wrappers again.
caller_path=$PATH
PATH={safe_path}
export PATH
real=$(command -v {command}) || {{
    echo "testbed fault wrapper: {command}: command not found" >&2
    exit 127
}}
state={state}
case " $* " in
    {pattern}) ;;
    *) PATH=$caller_path; exec "$real" "$@" ;;
esac
printf '%s\n' "$*" >> "$state.calls"
n=$(wc -l < "$state.calls")
if [ "$n" -lt {first} ] || [ "$n" -gt {last} ]; then
    PATH=$caller_path
    exec "$real" "$@"
fi
printf '%s\n' "$*" >> "$state.hits"

drop_connection() {{
    # Kill every sshd process above this one: the session the command
    # came through, not the listener (PID 1) nor other sessions.
    pids=
    p=$$
    while [ "$p" -gt 1 ]; do
        comm=$(cat "/proc/$p/comm" 2>/dev/null) || break
        case $comm in sshd*) pids="$pids $p" ;; esac
        p=$(sed 's/.*) //' "/proc/$p/stat" | cut -d' ' -f2) || break
    done
    if [ -z "$pids" ]; then
        echo "testbed fault wrapper: no sshd session above $$" >&2
        exit 97
    fi
    echo "$pids" >> "$state.dropped"
    if [ "$(id -u)" -eq 0 ]; then
        kill -KILL $pids
    else
        sudo -n kill -KILL $pids
    fi
}}

{action}
'''

_ACTIONS = {
    ERROR: 'echo {message} >&2\nexit {status}',
    DROP_BEFORE: 'drop_connection\nexit 255',
    DROP_AFTER: ('PATH=$caller_path "$real" "$@"\nstatus=$?\n'
                 'drop_connection\nexit $status'),
}


def host_root(host):
    """The host's root directory as the runner sees it."""
    return '/proc/%d/root' % host.running_pid()


class CommandFault(object):
    """A fault on the calls of one command on one test host.

    ``match``: only calls whose arguments (joined by spaces) contain this
    string count; ``first``/``count``: which of the counted calls fault
    (count=None: every one from ``first`` on). Use arm()/disarm(), or a
    ``Faults`` set that disarms everything at the end.
    """

    def __init__(self, host, command, action=ERROR, match=None, first=1,
                 count=1, message=None, status=1):
        if action not in ACTIONS:
            raise ValueError('action must be one of %s' % (ACTIONS,))
        if '/' in command or not command:
            raise ValueError('command must be a bare name: %r' % command)
        self.host = host
        self.command = command
        self.action = action
        self.match = match
        self.first = first
        self.count = count
        self.status = status
        self.id = '%s-%s' % (command, secrets.token_hex(4))
        self.message = message or 'injected fault %s: %s failed' % (
            self.id, command)
        self.armed = False
        self._root = None
        self._calls = []
        self._hits = []
        self._dropped = False

    def __repr__(self):
        return '<CommandFault %s %s on %s%s>' % (
            self.action, self.command, self.host.name,
            ' matching %r' % self.match if self.match else '')

    # -- paths as the runner sees them

    def _wrapper(self):
        return self._root + WRAPPER_DIR + '/' + self.command

    def _state(self, suffix):
        return '%s%s/%s.%s' % (self._root, STATE_DIR, self.id, suffix)

    # -- arming

    def arm(self):
        self._root = host_root(self.host)
        wrapper = self._wrapper()
        if os.path.lexists(wrapper):
            raise FileExistsError('%s: %s already exists (one fault per '
                                  'command and host)' % (self.host.name,
                                                         WRAPPER_DIR + '/'
                                                         + self.command))
        state_dir = self._root + STATE_DIR
        os.makedirs(state_dir, exist_ok=True)
        os.chmod(state_dir, 0o777)
        for suffix in ('calls', 'hits', 'dropped'):
            with open(self._state(suffix), 'w'):
                pass
            # Commands run without sudo append as the login user.
            os.chmod(self._state(suffix), 0o666)
        pattern = '*%s*' % shlex.quote(self.match) if self.match else '*'
        last = 10 ** 9 if self.count is None else self.first + self.count - 1
        script = _WRAPPER.format(
            marker=MARKER, fault_id=self.id,
            description='%s%s' % (self.action, ' matching %r' % self.match
                                  if self.match else ''),
            safe_path=SAFE_PATH, command=shlex.quote(self.command),
            state=shlex.quote(STATE_DIR + '/' + self.id), pattern=pattern,
            first=int(self.first), last=int(last),
            action=_ACTIONS[self.action].format(
                message=shlex.quote(self.message), status=int(self.status)))
        temporary = wrapper + '.' + self.id
        with open(temporary, 'w') as stream:
            stream.write(script)
        os.chmod(temporary, 0o755)
        os.rename(temporary, wrapper)  # never a half-written wrapper
        self.armed = True
        return self

    def _read_state(self):
        if self._root is None:
            return
        try:
            for suffix, target in (('calls', self._calls),
                                   ('hits', self._hits)):
                with open(self._state(suffix)) as stream:
                    target[:] = stream.read().splitlines()
            with open(self._state('dropped')) as stream:
                self._dropped = bool(stream.read().strip())
        except FileNotFoundError:
            pass  # the host is gone (replaced); keep what was read last

    def disarm(self):
        """Remove the wrapper (if it is still ours) and the counters."""
        if not self.armed:
            return
        self._read_state()
        self.armed = False
        wrapper = self._wrapper()
        try:
            with open(wrapper) as stream:
                ours = ('%s %s:' % (MARKER, self.id)) in stream.read()
            if ours:
                os.unlink(wrapper)
        except FileNotFoundError:
            pass
        for suffix in ('calls', 'hits', 'dropped'):
            try:
                os.unlink(self._state(suffix))
            except FileNotFoundError:
                pass

    # -- what happened

    @property
    def calls(self):
        """Argument strings of the matching calls so far."""
        if self.armed:
            self._read_state()
        return list(self._calls)

    @property
    def hits(self):
        """Argument strings of the calls that faulted."""
        if self.armed:
            self._read_state()
        return list(self._hits)

    @property
    def dropped(self):
        """True once the wrapper has cut a connection."""
        if self.armed:
            self._read_state()
        return self._dropped


class HttpFault(object):
    """Requests a fake server answers with an HTTP error (``fail_requests``
    of ``testbed.kubeapi.KubeApiServer`` or
    ``testbed.openstack_api.FakeOpenStack``)."""

    def __init__(self, server, method, path, count=1, status=500,
                 message=None, skip=0):
        self.server = server
        self.method = method
        self.path = path
        self.count = count
        self.status = status
        self.skip = skip
        self.message = message or 'injected fault: HTTP %d for %s %s' % (
            status, method, path)
        self._record = None

    def __repr__(self):
        return '<HttpFault %d for %s %s>' % (self.status, self.method,
                                             self.path)

    def arm(self):
        if hasattr(self.server, 'kubeconfig'):  # the Kubernetes API server
            self._record = self.server.fail_requests(
                self.method, self.path, count=self.count, code=self.status,
                message=self.message, skip=self.skip)
        else:
            if self.skip:
                raise ValueError('the OpenStack fake cannot skip requests')
            self._record = self.server.fail_requests(
                self.method, self.path, count=self.count, status=self.status,
                message=self.message)
        return self

    def disarm(self):
        if self._record is not None:
            self.server.clear_failures()
            self._record.remaining = 0

    @property
    def hits(self):
        return list(self._record.hits) if self._record else []


class Faults(object):
    """The faults of one scenario; ``clear()`` (or leaving the ``with``
    block) removes every one of them."""

    def __init__(self):
        self._faults = []

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.clear()

    def __iter__(self):
        return iter(list(self._faults))

    def command(self, host, command, **kwargs):
        fault = CommandFault(host, command, **kwargs)
        self._faults.append(fault)
        return fault.arm()

    def http(self, server, method, path, **kwargs):
        fault = HttpFault(server, method, path, **kwargs)
        self._faults.append(fault)
        return fault.arm()

    @property
    def hits(self):
        return [hit for fault in self._faults for hit in fault.hits]

    def clear(self):
        errors = []
        for fault in self._faults:
            try:
                fault.disarm()
            except OSError as error:  # remove the others all the same
                errors.append(error)
        if errors:
            raise errors[0]


# The driver's step lock on a host: a run of kubeadm or of the install
# script holds it.
STEP_LOCK = host_lock.LOCK_FILE


class EarlierRun(object):
    """A run of a driver step still going on a host, as a hook cut off by
    its deadline leaves one behind: a command holding the step lock (the
    real flock, as the driver takes it) until ``finish()`` or the end of
    the ``with`` block; ``finished`` is then its end (epoch seconds)."""

    def __init__(self, host):
        self.host = host
        self.fifo = '%s/earlier-run-%s' % (STATE_DIR, secrets.token_hex(4))
        self.finished = None

    def __enter__(self):
        directory = shlex.quote(STEP_LOCK.rpartition('/')[0])
        fifo = shlex.quote(self.fifo)
        self.host.run('mkdir -p -m 0700 %s %s && mkfifo %s' % (
            directory, STATE_DIR, fifo))
        self.host.run(
            'setsid -f flock %s sh -c %s </dev/null >/dev/null 2>&1' % (
                shlex.quote(STEP_LOCK), shlex.quote(
                    'read line < %s; date +%%s.%%N > %s.done' % (fifo,
                                                                 fifo))))
        polling.wait_until(lambda: self.host.run(
            'flock -n %s true' % shlex.quote(STEP_LOCK),
            check=False).returncode != 0, 'the earlier run to take the lock')
        return self

    def __exit__(self, *exc_info):
        self.finish()

    def waited_for(self):
        """Whether a later run waits for this one (a flock is waiting)."""
        return self.host.run("pgrep -f '^flock -w '",
                             check=False).returncode == 0

    def finish(self):
        if self.finished is None:
            fifo = shlex.quote(self.fifo)
            self.host.run('echo done > %s' % fifo)
            polling.wait_until(lambda: self.host.run(
                'cat %s.done' % fifo, check=False).stdout.strip(),
                'the earlier run to end')
            self.finished = float(self.host.run('cat %s.done' % fifo).stdout)
        return self.finished


def leftover_wrappers(host):
    """Fault wrappers still present on a host (should be none)."""
    directory = host_root(host) + WRAPPER_DIR
    found = []
    for name in sorted(os.listdir(directory)):
        path = os.path.join(directory, name)
        try:
            with open(path, errors='replace') as stream:
                if MARKER in stream.read(4096):
                    found.append(WRAPPER_DIR + '/' + name)
        except (IsADirectoryError, FileNotFoundError):
            continue
    return found


def busy_processes(host):
    """PIDs of the host's processes other than its PID 1 (sshd) and its
    services (a member's kubelet, a running Master's API server
    stand-in): the remains of SSH sessions, e.g. a command still
    finishing after its connection was cut."""
    directory = host_root(host) + '/proc'
    return sorted(int(name) for name in os.listdir(directory)
                  if name.isdigit() and name != '1' and
                  not _is_service(os.path.join(directory, name)))


_SERVICES = (standins.API_SERVER.encode(), b'/usr/bin/kubelet\0--kube')


def _is_service(process):
    try:
        with open(process + '/cmdline', 'rb') as stream:
            command = stream.read()
    except OSError:  # gone meanwhile
        return False
    return any(service in command for service in _SERVICES)
