"""Image layers kept between testbeds (testbed.hosts).

Every testbed builds the same base layer (the user, sshd, the stand-in
packages, the runner's package lists cut down) and the same role layers:
three seconds of CPU a testbed, a fifth of a small functional test. A
layer is kept under a key of everything it is built from, the runner's
own packages included, so that a change to any of them builds it anew.
Nothing of one testbed (its client key) goes into a kept layer.
"""

import contextlib
import fcntl
import hashlib
import os
import shutil
import subprocess
import tempfile

CACHE_DIR = os.path.join(tempfile.gettempdir(), 'testbed-images')
# The runner's packages, which every layer starts from.
RUNNER_PACKAGES = ('/var/lib/dpkg/status', '/var/cache/apt/archives',
                   '/var/lib/apt/lists')


def key(*parts):
    """A layer's key: a digest of what it is built from."""
    digest = hashlib.sha256()
    for part in parts:
        digest.update(repr(part).encode() + b'\0')
    return digest.hexdigest()[:32]


def runner_packages():
    """(path, size, mtime) of the runner's package files and directories'
    entries: an installed, purged or downloaded package changes them."""
    state = []
    for path in RUNNER_PACKAGES:
        entries = sorted(os.scandir(path), key=lambda entry: entry.name) \
            if os.path.isdir(path) else [path] if os.path.exists(path) \
            else []
        for entry in entries:
            stat = os.stat(entry)
            state.append((os.fspath(entry), stat.st_size, stat.st_mtime_ns))
    return state


def directory_digest(directory):
    """The names and contents of the files directly in ``directory``."""
    digest = hashlib.sha256()
    for name in sorted(os.listdir(directory)):
        path = os.path.join(directory, name)
        if os.path.isfile(path):
            with open(path, 'rb') as handle:
                digest.update(name.encode() + b'\0' + handle.read())
    return digest.hexdigest()


@contextlib.contextmanager
def _locked(layer_key):
    """One builder of a layer at a time, across processes."""
    os.makedirs(CACHE_DIR, exist_ok=True)
    with open(os.path.join(CACHE_DIR, layer_key + '.lock'), 'a') as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # closing the file releases it
        yield


def _copy(source, target):
    # cp -a keeps overlayfs whiteouts (0:0 character devices) and owners.
    subprocess.run(['cp', '-a', source, target], check=True,
                   capture_output=True)


def upper_dir(layer_key, build, target):
    """Make ``target`` (an overlay upper dir, not there yet) the layer
    ``layer_key``: a copy of the kept one, or ``build(target)``'s work,
    which is then kept."""
    kept = os.path.join(CACHE_DIR, layer_key)
    with _locked(layer_key):
        if os.path.isdir(kept):
            _copy(kept, target)
            return
        build(target)
        partial = kept + '.part'
        shutil.rmtree(partial, ignore_errors=True)
        _copy(target, partial)
        os.rename(partial, kept)


def authorize_key(upper, user, public_key):
    """``user`` of a layer accepts ``public_key``: a testbed's client key,
    added to its copy of a layer, never to a kept one."""
    with open(os.path.join(upper, 'etc', 'passwd')) as passwd:
        uid, gid = next(line.split(':')[2:4] for line in passwd
                        if line.startswith(user + ':'))
    path = os.path.join(upper, 'home', user, '.ssh', 'authorized_keys')
    with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600),
              'w') as handle:
        handle.write(public_key + '\n')
    os.chown(path, int(uid), int(gid))
