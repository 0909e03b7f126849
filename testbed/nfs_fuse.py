#!/usr/bin/python3
"""An NFS mount without a kernel NFS client: a FUSE file system backed by
libnfs, for the testbed's node agent (testbed/node_agent.py).

The test hosts have neither a kernel NFS client nor a kubelet, but FUSE
works. The node agent runs this, with Debian's python3 (python3-fusepy)
inside a Worker, where the kubelet would mount a pod's NFS volume:

    nfs_fuse.py SERVER EXPORT MOUNTPOINT [OPTION,OPTION...]

OPTIONs are the PersistentVolume's mountOptions; parse_options() says
which are honoured. Known limit: libnfs 4.0's NFSv4 WRITE to a file
opened without creating it fails (ERANGE), so a file can be created and
written, and read anywhere, but not rewritten in place. It stays in the
foreground until unmounted (``umount MOUNTPOINT``). It imports nothing of
the testbed, so the agent can copy it into a host.
"""

import ctypes
import errno
import os
import stat
import sys

NFS_V4 = 4
# The mountOptions of a StorageClass whose volumes this client mounts
# (a class's default, nfsvers=4.1, is refused).
V4_0_MOUNT_OPTIONS = ('nfsvers=4',)
# mountOptions a kernel client would take that change nothing here.
_NEUTRAL = {'hard', 'soft', 'intr', 'nointr', 'noatime', 'relatime',
            'nodiratime', 'tcp', 'proto=tcp', 'sync', 'async', 'rw'}


class OptionError(ValueError):
    """A mount option this client cannot honour."""


def parse_options(options) -> dict:
    """{'version': 4, 'read_only': bool} from a PV's mountOptions (each an
    item, or comma-separated): nfsvers/vers 4 or 4.0 and ro/rw are
    honoured, the kernel client's neutral ones accepted; any other one is
    refused, naming it, rather than silently ignored."""
    parsed = {'version': NFS_V4, 'read_only': False}
    for item in options:
        for option in filter(None, str(item).split(',')):
            option = option.strip()
            key, _, value = option.partition('=')
            if key in ('nfsvers', 'vers'):
                if value not in ('4', '4.0'):
                    raise OptionError(
                        f'mount option {option}: this NFS client (libnfs) '
                        'and the testbed\'s NFS server speak NFSv4.0 only')
            elif option == 'ro':
                parsed['read_only'] = True
            elif option not in _NEUTRAL:
                raise OptionError(f'mount option {option} is not supported '
                                  'by the testbed\'s NFS client')
    return parsed


class _Stat(ctypes.Structure):
    _fields_ = [(name, ctypes.c_uint64) for name in (
        'dev', 'ino', 'mode', 'nlink', 'uid', 'gid', 'rdev', 'size',
        'blksize', 'blocks', 'atime', 'mtime', 'ctime', 'atime_nsec',
        'mtime_nsec', 'ctime_nsec', 'used')]


class _DirEntry(ctypes.Structure):
    pass


# Only the leading fields of libnfs's struct nfsdirent are read.
_DirEntry._fields_ = [('next', ctypes.POINTER(_DirEntry)),
                      ('name', ctypes.c_char_p)]


class _TimeVal(ctypes.Structure):
    _fields_ = [('sec', ctypes.c_long), ('usec', ctypes.c_long)]


def _library():
    lib = ctypes.CDLL('libnfs.so.13', use_errno=True)
    pointer, c_int, u64 = ctypes.c_void_p, ctypes.c_int, ctypes.c_uint64
    handle = ctypes.POINTER(ctypes.c_void_p)
    signatures = {
        'nfs_init_context': ([], pointer),
        'nfs_destroy_context': ([pointer], None),
        'nfs_get_error': ([pointer], ctypes.c_char_p),
        'nfs_set_version': ([pointer, c_int], c_int),
        'nfs_mount': ([pointer, ctypes.c_char_p, ctypes.c_char_p], c_int),
        'nfs_stat64': ([pointer, ctypes.c_char_p, ctypes.POINTER(_Stat)],
                       c_int),
        'nfs_open': ([pointer, ctypes.c_char_p, c_int, handle], c_int),
        'nfs_create': ([pointer, ctypes.c_char_p, c_int, c_int, handle],
                       c_int),
        'nfs_close': ([pointer, pointer], c_int),
        'nfs_pread': ([pointer, pointer, u64, u64, ctypes.c_char_p], c_int),
        'nfs_pwrite': ([pointer, pointer, u64, u64, ctypes.c_char_p], c_int),
        'nfs_fsync': ([pointer, pointer], c_int),
        'nfs_truncate': ([pointer, ctypes.c_char_p, u64], c_int),
        'nfs_unlink': ([pointer, ctypes.c_char_p], c_int),
        'nfs_mkdir': ([pointer, ctypes.c_char_p], c_int),
        'nfs_rmdir': ([pointer, ctypes.c_char_p], c_int),
        'nfs_rename': ([pointer, ctypes.c_char_p, ctypes.c_char_p], c_int),
        'nfs_chmod': ([pointer, ctypes.c_char_p, c_int], c_int),
        'nfs_chown': ([pointer, ctypes.c_char_p, c_int, c_int], c_int),
        'nfs_utimes': ([pointer, ctypes.c_char_p,
                        ctypes.POINTER(_TimeVal)], c_int),
        'nfs_opendir': ([pointer, ctypes.c_char_p, handle], c_int),
        'nfs_readdir': ([pointer, pointer], ctypes.POINTER(_DirEntry)),
        'nfs_closedir': ([pointer, pointer], None),
    }
    for name, (args, result) in signatures.items():
        function = getattr(lib, name)
        function.argtypes, function.restype = args, result
    return lib


def _checked(result: int) -> int:
    """libnfs returns -errno on failure."""
    if result < 0:
        from fusepy import FuseOSError
        raise FuseOSError(-result)
    return result


def operations(server: str, export: str, read_only: bool):
    """The fusepy Operations of one NFS export, through one libnfs
    context (fusepy runs them one at a time: nothreads)."""
    from fusepy import FuseOSError
    from fusepy import Operations

    lib = _library()
    context = lib.nfs_init_context()
    lib.nfs_set_version(context, NFS_V4)
    if lib.nfs_mount(context, server.encode(), export.encode()) < 0:
        raise OSError(f'nfs_mount {server}:{export}: '
                      f'{lib.nfs_get_error(context).decode()}')

    def path_of(path):
        return path.encode()

    class NfsFileSystem(Operations):
        def _writable(self):
            if read_only:
                raise FuseOSError(errno.EROFS)

        def destroy(self, path):
            lib.nfs_destroy_context(context)

        def getattr(self, path, fh=None):
            st = _Stat()
            _checked(lib.nfs_stat64(context, path_of(path),
                                    ctypes.byref(st)))
            return {'st_mode': st.mode, 'st_nlink': st.nlink,
                    'st_uid': st.uid, 'st_gid': st.gid, 'st_size': st.size,
                    'st_atime': st.atime + st.atime_nsec / 1e9,
                    'st_mtime': st.mtime + st.mtime_nsec / 1e9,
                    'st_ctime': st.ctime + st.ctime_nsec / 1e9}

        def readdir(self, path, fh):
            handle = ctypes.c_void_p()
            _checked(lib.nfs_opendir(context, path_of(path),
                                     ctypes.byref(handle)))
            names = []
            try:
                while True:
                    entry = lib.nfs_readdir(context, handle)
                    if not entry:
                        break
                    names.append(entry.contents.name.decode())
            finally:
                lib.nfs_closedir(context, handle)
            return names

        def open(self, path, flags):
            if flags & (os.O_WRONLY | os.O_RDWR):
                self._writable()
            handle = ctypes.c_void_p()
            _checked(lib.nfs_open(context, path_of(path),
                                  flags & ~(os.O_CREAT | os.O_EXCL),
                                  ctypes.byref(handle)))
            return handle.value

        def create(self, path, mode, fi=None):
            self._writable()
            handle = ctypes.c_void_p()
            _checked(lib.nfs_create(context, path_of(path),
                                    os.O_RDWR | os.O_CREAT,
                                    stat.S_IMODE(mode),
                                    ctypes.byref(handle)))
            return handle.value

        def read(self, path, size, offset, fh):
            buffer = ctypes.create_string_buffer(size)
            count = _checked(lib.nfs_pread(context, fh, offset, size,
                                           buffer))
            return buffer.raw[:count]

        def write(self, path, data, offset, fh):
            self._writable()
            return _checked(lib.nfs_pwrite(context, fh, offset, len(data),
                                           data))

        def fsync(self, path, datasync, fh):
            return _checked(lib.nfs_fsync(context, fh))

        def release(self, path, fh):
            return _checked(lib.nfs_close(context, fh))

        def truncate(self, path, length, fh=None):
            self._writable()
            return _checked(lib.nfs_truncate(context, path_of(path), length))

        def unlink(self, path):
            self._writable()
            return _checked(lib.nfs_unlink(context, path_of(path)))

        def mkdir(self, path, mode):
            self._writable()
            return _checked(lib.nfs_mkdir(context, path_of(path)))

        def rmdir(self, path):
            self._writable()
            return _checked(lib.nfs_rmdir(context, path_of(path)))

        def rename(self, old, new):
            self._writable()
            return _checked(lib.nfs_rename(context, path_of(old),
                                           path_of(new)))

        def chmod(self, path, mode):
            self._writable()
            return _checked(lib.nfs_chmod(context, path_of(path),
                                          stat.S_IMODE(mode)))

        def chown(self, path, uid, gid):
            self._writable()
            return _checked(lib.nfs_chown(context, path_of(path), uid, gid))

        def utimens(self, path, times=None):
            self._writable()
            atime, mtime = times or (None, None)
            if atime is None:
                return 0  # "now": the server sets it on the write
            values = (_TimeVal * 2)(
                _TimeVal(int(atime), int(atime % 1 * 1e6)),
                _TimeVal(int(mtime), int(mtime % 1 * 1e6)))
            return _checked(lib.nfs_utimes(context, path_of(path), values))

    return NfsFileSystem()


def main(argv) -> int:
    if len(argv) not in (3, 4):
        print(__doc__, file=sys.stderr)
        return 2
    server, export, mountpoint = argv[:3]
    try:
        options = parse_options(argv[3:])
    except OptionError as error:
        print(f'nfs_fuse: {error}', file=sys.stderr)
        return 2
    from fusepy import FUSE
    FUSE(operations(server, export, options['read_only']), mountpoint,
         foreground=True, nothreads=True, allow_other=True,
         ro=options['read_only'], fsname=f'{server}:{export}',
         subtype='nfs')
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
