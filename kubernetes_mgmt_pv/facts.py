"""The facts protocol: what a step looks at, from one remote command.

A gathering script calls the shell function ``fact NAME COMMAND...`` for
each fact; it prints a section: "\\n<boundary> NAME\\n", the command's
stdout, then "\\n<boundary> status <N>\\n" and its stderr. The boundary is
random, so no file content can fake a section. ``gather`` runs such a
script and ``parse_sections`` splits its output into one
``CommandResult`` per fact; pure functions then read those.
"""

import secrets

from kubernetes_mgmt_pv import remote

# The start of every gathering script: its first argument is the
# boundary, the rest are the script's own.
PROLOGUE = r'''boundary=$1
shift
fact() {
    printf '\n%s %s\n' "$boundary" "$1"
    shift
    { err=$("$@" 2>&1 >&3 3>&-); status=$?; } 3>&1
    printf '\n%s status %d\n%s' "$boundary" "$status" "$err"
}
'''


def parse_sections(output, boundary):
    """``{name: CommandResult}`` of each fact in the gathering output."""
    parts = output.split(b'\n' + boundary.encode('ascii') + b' ')[1:]
    sections = {}
    for head, tail in zip(parts[::2], parts[1::2]):
        name, _, stdout = head.partition(b'\n')
        status, _, stderr = tail.partition(b'\n')
        sections[name.decode('utf-8', 'surrogateescape')] = \
            remote.CommandResult(int(status.split()[1]), stdout, stderr)
    return sections


def gather(executor, script, arguments, description, sudo=False):
    """The sections of ``script`` (which starts with ``PROLOGUE``) run
    once on the host with ``arguments``."""
    boundary = 'kubernetes-mgmt-pv-%s' % secrets.token_hex(16)
    argv = ['sh', '-c', script, 'sh', boundary] + [str(a) for a in arguments]
    result = executor.run(argv, sudo=sudo,
                          description='gather facts: %s' % description)
    return parse_sections(result.stdout_bytes, boundary)
