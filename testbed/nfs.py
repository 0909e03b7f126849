"""A real NFS data path for the testbed: nfs-ganesha server, libnfs client.

The runner has no kernel nfsd, so the driver's `/etc/exports` +
`exportfs -ra` only updates the export table.  This module turns the storage
host's *active* exports (`exportfs -v`) into an equivalent nfs-ganesha
NFSv4 configuration and serves it from inside the storage host; workers
read and write through the userspace libnfs tools (`nfs-cp`, `nfs-cat`), so
no kernel NFS client is needed either.
"""

from dataclasses import dataclass
import re
import secrets
import shlex

from testbed import polling

CONFIG = '/etc/ganesha/testbed.conf'
PIDFILE = '/run/ganesha/testbed.pid'
LOGFILE = '/var/log/ganesha-testbed.log'
NFS_PORT = 2049

_CORE = '''NFS_CORE_PARAM {
    Protocols = 4; NFS_Port = 2049;
    Enable_NLM = false; Enable_RQUOTA = false; Enable_UDP = false;
}
NFSV4 { Graceless = true; Only_Numeric_Owners = true; }
LOG { Default_Log_Level = EVENT; }
'''


@dataclass(frozen=True)
class Export:
    """One line of `exportfs -v`: a path exported to one client spec."""

    path: str
    client: str  # e.g. '10.1.2.0/24', '10.1.2.13' or '<world>'
    options: tuple  # e.g. ('sync', 'rw', 'no_root_squash', ...)


def parse_exportfs(text):
    """Parse `exportfs -v` output.

    exportfs puts a long path on its own line with the client on the next
    one, so tokens are read as a stream: a `client(options)` token belongs
    to the last path seen.
    """
    exports = []
    path = None
    for token in text.split():
        match = re.fullmatch(r'(.*)\((.*)\)', token)
        if match:
            exports.append(Export(path, match[1],
                                  tuple(match[2].split(','))))
        else:
            path = token
    return exports


def active_exports(host):
    """The exports the kernel export table of `host` holds right now."""
    return parse_exportfs(host.run('exportfs -v').stdout)


def _client_block(export):
    access = 'RW' if 'rw' in export.options else 'RO'
    if 'all_squash' in export.options:
        squash = 'All_Squash'
    elif 'no_root_squash' in export.options:
        squash = 'No_Root_Squash'
    else:
        squash = 'Root_Squash'
    clients = '*' if export.client == '<world>' else export.client
    # Unquoted: ganesha takes a quoted CIDR for a host name.
    return (f'    CLIENT {{ Clients = {clients}; Access_Type = {access}; '
            f'Squash = {squash}; }}\n')


def ganesha_config(exports):
    """An NFSv4-only ganesha config granting exactly what `exports` grant.

    Each exported path becomes an EXPORT with no default access and one
    CLIENT block per exportfs client, so a client the driver did not export
    to is refused, as with kernel NFS.
    """
    by_path = {}
    for export in exports:
        by_path.setdefault(export.path, []).append(export)
    blocks = [_CORE]
    for export_id, (path, entries) in enumerate(by_path.items(), start=1):
        blocks.append(
            f'EXPORT {{\n'
            f'    Export_Id = {export_id}; Path = "{path}"; '
            f'Pseudo = "{path}";\n'
            f'    Protocols = 4; Transports = TCP; SecType = sys; '
            f'Access_Type = None;\n'
            # kernel NFS squashes to nobody:nogroup (65534); ganesha's
            # default anonymous id is -2, which could not write there.
            f'    Anonymous_Uid = 65534; Anonymous_Gid = 65534;\n'
            f'    FSAL {{ Name = VFS; }}\n'
            + ''.join(_client_block(e) for e in entries)
            + '}\n')
    return ''.join(blocks)


def _check_exportable(host, path):
    """FSAL_VFS cannot export the overlay root fs; fail early and clearly."""
    fstype = host.run(f'findmnt -n -o FSTYPE --target {shlex.quote(path)}'
                      ).stdout.strip()
    if fstype == 'overlay':
        raise ValueError(f'{path} on {host.name} is on the overlay root fs, '
                         'which ganesha cannot export; mount a volume or '
                         'tmpfs there')


def stop_ganesha(storage_host):
    """Kill the ganesha start_ganesha() started, if any, and wait for it."""
    result = storage_host.run(f'cat {PIDFILE} 2>/dev/null', check=False)
    pid = result.stdout.strip()
    if not pid:
        return
    storage_host.run(f'kill -9 {pid} 2>/dev/null; rm -f {PIDFILE}')
    polling.wait_until(lambda: storage_host.run(f'kill -0 {pid} 2>/dev/null',
                                                check=False).returncode,
                       f'ganesha on {storage_host.name} to exit')


def start_ganesha(storage_host, exports=None):
    """(Re)start ganesha in the storage host serving `exports`.

    exports defaults to the host's active exports, i.e. whatever the driver
    configured.  Returns when the server accepts connections.
    """
    if exports is None:
        exports = active_exports(storage_host)
    if not exports:
        raise ValueError(f'{storage_host.name} exports nothing')
    for path in {e.path for e in exports}:
        _check_exportable(storage_host, path)
    stop_ganesha(storage_host)
    storage_host.write_file(CONFIG, ganesha_config(exports))
    storage_host.run(
        'mkdir -p /run/ganesha /var/lib/nfs/ganesha && '
        f'ganesha.nfsd -f {CONFIG} -L {LOGFILE} -N NIV_EVENT -p {PIDFILE}')
    try:
        polling.wait_until(lambda: storage_host.listens(NFS_PORT),
                           f'ganesha on {storage_host.name}')
    except TimeoutError as exc:
        log = storage_host.run(f'tail -n 30 {LOGFILE}', check=False).stdout
        raise RuntimeError(f'{exc}; ganesha log:\n{log}') from None


def nfs_url(server_ip, export_path, filename):
    return f'nfs://{server_ip}{export_path.rstrip("/")}/{filename}?version=4'


def nfs_write(client_host, server_ip, export_path, filename, data):
    """Create `filename` in the export from `client_host` (NFSv4, as root)."""
    local = f'/tmp/nfs-write-{secrets.token_hex(4)}'
    client_host.write_file(local, data)
    url = shlex.quote(nfs_url(server_ip, export_path, filename))
    client_host.run(f'nfs-cp {local} {url}; rc=$?; rm -f {local}; exit $rc')


def nfs_read(client_host, server_ip, export_path, filename):
    """Read `filename` from the export on `client_host` over NFSv4."""
    url = shlex.quote(nfs_url(server_ip, export_path, filename))
    return client_host.run(f'nfs-cat {url}').stdout
