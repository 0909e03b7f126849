"""The facts protocol: what a step looks at, from one remote command.

A gathering script calls the shell function ``fact NAME COMMAND...`` for
each fact; it prints a section: "\\n<boundary> NAME\\n", the command's
stdout, then "\\n<boundary> status <N>\\n" and its stderr. The boundary is
random, so no file content can fake a section. ``gather`` runs such a
script and ``parse_sections`` splits its output into one
``CommandResult`` per fact; pure functions then read those.

The shell scripts are the package's ``scripts/*.sh`` files, so shellcheck
checks them as they run.
"""

import importlib.resources
import secrets


class CommandResult(object):
    """Exit status and output of one remote command, exactly as printed.

    It lives here, not in ``remote``, so the modules that only read
    results do not import paramiko.
    """

    def __init__(self, exit_status, stdout_bytes, stderr_bytes):
        self.exit_status = exit_status
        self.stdout_bytes = stdout_bytes
        self.stdout = stdout_bytes.decode('utf-8', 'surrogateescape')
        self.stderr = stderr_bytes.decode('utf-8', 'surrogateescape')

    @property
    def ok(self):
        return self.exit_status == 0


def read_script(name):
    """The text of ``scripts/<name>`` shipped in this package."""
    resource = importlib.resources.files(__package__) / 'scripts' / name
    return resource.read_text(encoding='utf-8')


# The start of every gathering script: its first argument is the
# boundary, the rest are the script's own; it defines ``fact``.
PROLOGUE = read_script('facts_prologue.sh')


def script(*names):
    """A gathering script: ``PROLOGUE`` and then the named files."""
    return PROLOGUE + ''.join(read_script(name) for name in names)


def parse_sections(output, boundary):
    """``{name: CommandResult}`` of each fact in the gathering output."""
    parts = output.split(b'\n' + boundary.encode('ascii') + b' ')[1:]
    sections = {}
    for head, tail in zip(parts[::2], parts[1::2]):
        name, _, stdout = head.partition(b'\n')
        status, _, stderr = tail.partition(b'\n')
        sections[name.decode('utf-8', 'surrogateescape')] = \
            CommandResult(int(status.split()[1]), stdout, stderr)
    return sections


def gather(executor, script, arguments, description, sudo=False):
    """The sections of ``script`` (which starts with ``PROLOGUE``) run
    once on the host with ``arguments``."""
    boundary = 'kubernetes-mgmt-pv-%s' % secrets.token_hex(16)
    argv = ['sh', '-c', script, 'sh', boundary] + [str(a) for a in arguments]
    result = executor.run(argv, sudo=sudo,
                          description='gather facts: %s' % description)
    return parse_sections(result.stdout_bytes, boundary)


# What ``sudo -n`` prints when the user's sudo needs a password: sudo's
# own words, and those of sudo-rs, Ubuntu's sudo since 25.10.
_SUDO_WANTS_PASSWORD = ('a password is required',
                        'interactive authentication is required')


def sudo_wants_password(result):
    """Whether ``sudo -n`` refused a command for want of a password."""
    return result.exit_status == 1 and any(
        words in result.stderr for words in _SUDO_WANTS_PASSWORD)
