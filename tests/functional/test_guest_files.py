"""The administrator's /etc/fstab and /etc/exports on the storage server:
every byte outside the driver's block, the files' mode and owner, and a
symlinked /etc/exports survive instantiate_end and its re-run."""

import base64
import shlex

from kubernetes_mgmt_pv.remote import managed_block

BEGIN = managed_block.BEGIN + b'\n'
END = managed_block.END + b'\n'

FSTAB = (b'# /etc/fstab: static file system information.\r\n'
         b'LABEL=cloudimg-rootfs / ext4 discard,errors=remount-ro 0 1\r\n'
         b"# r\xe9serv\xe9 \xe0 l'administrateur (Latin-1, not UTF-8)\n"
         b'\x0c\n'
         b'# fields\x1cseparated\x1dby\x1econtrol\x85characters\rhere\n'
         b'tmpfs /scratch tmpfs defaults 0 0')  # no final newline
EXPORTS_REAL = '/etc/exports.admin/exports'
EXPORTS_HEAD = (b'# exports of the administrator\r\n'
                b'/srv/admin 127.0.0.1(ro,no_subtree_check)\n'
                b'# caf\xe9\x0c\n')
STALE_BLOCK = BEGIN + b'/volume9/old 10.0.0.0/8(rw)\n' + END
EXPORTS_TAIL = b'# after the block, without final newline'


def write_bytes(host, path, data):
    host.run('base64 -d > %s' % shlex.quote(path),
             input=base64.b64encode(data).decode())


def read_bytes(host, path):
    return base64.b64decode(host.run('base64 < %s' % shlex.quote(path))
                            .stdout)


def mode_and_owner(host, path):
    return host.run('stat -c "%%a %%U:%%G" %s' % path).stdout.strip()


def block_lines(block):
    assert block.startswith(BEGIN) and block.endswith(END), block
    return block[len(BEGIN):-len(END)].decode().splitlines()


def test_administrator_bytes_mode_owner_and_symlink_are_kept(cluster):
    storage = cluster.host('storage')
    write_bytes(storage, '/etc/fstab', FSTAB)
    storage.run('chown daemon:adm /etc/fstab && chmod 640 /etc/fstab')
    storage.run('mkdir -p /srv/admin /etc/exports.admin')
    write_bytes(storage, EXPORTS_REAL,
                EXPORTS_HEAD + STALE_BLOCK + EXPORTS_TAIL)
    storage.run('chown daemon:adm %s && chmod 640 %s && '
                'ln -sfn %s /etc/exports' % ((EXPORTS_REAL,) * 3))

    cluster.instantiate_end()

    fstab = read_bytes(storage, '/etc/fstab')
    # The last line had no newline: it gets one, so the block starts on a
    # line of its own; nothing else before the block changes.
    assert fstab.startswith(FSTAB + b'\n')
    uuids = storage.run('blkid -s UUID -o value ' +
                        ' '.join(storage.volumes)).stdout.split()
    assert block_lines(fstab[len(FSTAB) + 1:]) == [
        'UUID=%s %s ext4 defaults,nofail 0 2' % (uuid, mount)
        for uuid, mount in zip(uuids, cluster.mount_points())]
    assert mode_and_owner(storage, '/etc/fstab') == '640 daemon:adm'

    assert storage.run('readlink /etc/exports').stdout.strip() == \
        EXPORTS_REAL
    exports = read_bytes(storage, EXPORTS_REAL)
    assert exports.startswith(EXPORTS_HEAD)
    assert exports.endswith(END + EXPORTS_TAIL)
    lines = block_lines(exports[len(EXPORTS_HEAD):-len(EXPORTS_TAIL)])
    assert [line.split()[0] for line in lines] == cluster.export_dirs()
    assert mode_and_owner(storage, EXPORTS_REAL) == '640 daemon:adm'
    # Nothing left behind by the atomic replacement (the package's ucf
    # may leave exports.ucf-dist next to an existing /etc/exports).
    assert 'kubernetes-mgmt-pv' not in storage.run(
        'ls -A /etc /etc/exports.admin').stdout
    listed = storage.run('exportfs -v').stdout
    for directory in cluster.export_dirs() + ['/srv/admin']:
        assert directory in listed

    cluster.instantiate_end()

    assert read_bytes(storage, '/etc/fstab') == fstab
    assert read_bytes(storage, EXPORTS_REAL) == exports
    assert storage.run('readlink /etc/exports').stdout.strip() == \
        EXPORTS_REAL
