"""Fresh VMs for the install script's node preparation: nothing of
Kubernetes installed, no apt source but those the script adds.

A test host's root is an overlay of the runner's, so it starts with the
runner's kubectl package, apt sources, lists and package cache; ``make``
removes them, as on a VM of an air-gapped site that has only its internal
mirrors. What a host cannot really do is stood in for by commands in
/usr/local/sbin (before /usr/sbin on root's and sudo's PATH) that record
each call in ``CALL_LOG``: ``modprobe`` and ``sysctl`` would change the
runner's own kernel (modules and most sysctls are not per network
namespace), ``swapoff -a`` the runner's swap, and ``systemctl`` needs a
running systemd, which the hosts have not.
"""

import json

CALL_LOG = '/var/log/node-prep-standin.log'
COMMANDS = ('modprobe', 'sysctl', 'swapoff', 'systemctl')
STANDIN = f'''#!/usr/bin/python3
"""testbed stand-in (testbed/fresh_nodes.py): records the call."""
import json, os, sys
with open({CALL_LOG!r}, 'a') as stream:
    stream.write(json.dumps([os.path.basename(sys.argv[0])] + sys.argv[1:])
                 + '\\n')
'''
# A VM of the site has none of these: only its own mirrors' lists.
FORGET_APT = ('rm -rf /etc/apt/sources.list /etc/apt/sources.list.d '
              '/var/lib/apt/lists /var/cache/apt/archives/*.deb '
              '/var/cache/apt/*.bin && mkdir -p /etc/apt/sources.list.d '
              '/var/lib/apt/lists/partial')


def make(host):
    """Turn a freshly booted test host into a VM with nothing of
    Kubernetes: no kubectl, no apt source, list or cached package, and the
    stand-ins of COMMANDS."""
    host.run('dpkg --purge kubectl >/dev/null 2>&1 || true')
    host.run(FORGET_APT)
    for command in COMMANDS:
        path = f'/usr/local/sbin/{command}'
        host.write_file(path, STANDIN)
        host.run(f'chmod 755 {path}')


def calls(host):
    """The stand-ins' calls on a host, oldest first: [command, args...]."""
    text = host.run(f'cat {CALL_LOG} 2>/dev/null || true').stdout
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def package_states(host, names):
    """{package: "<want> <status> <version>"} as dpkg has them; a package
    dpkg does not know is absent."""
    result = host.run("dpkg-query -W -f='${Package} ${db:Status-Want} "
                      "${db:Status-Status} ${Version}\\n' " +
                      ' '.join(names), check=False)
    states = {}
    for line in result.stdout.splitlines():
        name, _, state = line.partition(' ')
        if state.split()[1:2] != ['not-installed']:
            states[name] = state
    return states
