"""A signed apt repository for the test hosts: an air-gapped site's
internal mirror of pkgs.k8s.io.

It is a flat repository (``deb [signed-by=KEY] URL /``, as pkgs.k8s.io
is) holding the kubeadm and kubelet stand-ins (testbed/standins), a
kubectl package with the real kubectl binary of the script's minor
version (the driver runs kubectl on the Masters), and Debian's containerd
and runc from the runner's apt cache (testbed/install-deps.sh downloads
them) or, for a look-alike of another guest image (testbed.guest_images),
the containerd stand-in at that image's containerd version, in place of
the image's own archive. ``Packages`` is written by dpkg-scanpackages;
``Release`` by ``write_release``, signed with a throwaway GnuPG key into
``InRelease`` and ``Release.gpg``.

It serves two minors, each at its own path as pkgs.k8s.io does
(``k8s/v1.36/`` and ``k8s/v1.37/``, one key): the install script's and
the next (``standins.next_minor``), which has only kubeadm, kubelet and
kubectl, for the upgrade to the next minor's package. ``versions`` adds
the kubeadm, kubelet and kubectl of other versions, each in its minor's
repository (several patch releases of one minor side by side, as
pkgs.k8s.io has them): a cluster upgraded through several minors and
patches.

The HTTP server listens on an address of a bridge of its own, which no
test host has a route to until ``route_from`` gives it one: a host
without the route reaches the repository only through a proxy on the
runner. Every request is logged, so tests see what each host fetched.
"""

import email.utils
import fcntl
import functools
import glob
import hashlib
# The classes of the module itself: Tacker's imports rebind the `http`
# package's `server` attribute to an eventlet copy whose servers run on
# green threads, which never run in a test process (conftest of
# tests/tacker_integration).
from http.server import SimpleHTTPRequestHandler
from http.server import ThreadingHTTPServer
import os
import re
import secrets
import shutil
import subprocess
import tempfile
import threading
import warnings

from testbed import hosts
from testbed.kubeapi import kubectl
from testbed import standins
from testbed import subnets

# Debian's packages the install script installs besides the stand-ins.
DEBIAN_PACKAGES = ('containerd', 'runc')
APT_ARCHIVES = '/var/cache/apt/archives'
KEY_NAME = 'testbed apt repository <apt@testbed.invalid>'


# The kubectl packages built so far, shared by every run on this machine.
KUBECTL_DEB_CACHE = os.path.join(tempfile.gettempdir(),
                                 'testbed-kubectl-debs')


def _run(args, **kwargs):
    """Run a build command; a failure shows its output."""
    result = subprocess.run(args, capture_output=True, **kwargs)
    if result.returncode:
        raise hosts.CommandError(result.returncode, args, result.stdout,
                                 result.stderr)
    return result


class SigningKey(object):
    """A GnuPG key in a home directory of its own; ``close`` stops the
    agent GnuPG started for it and removes the directory."""

    def __init__(self):
        self.home = tempfile.mkdtemp(prefix='testbed-gnupg-')
        try:
            self._gpg('--quick-generate-key', KEY_NAME, 'ed25519', 'sign',
                      'never')
            self.public_armored = self._gpg('--armor', '--export',
                                            KEY_NAME).stdout
        except BaseException:
            self.close()
            raise

    def _gpg(self, *args):
        return _run(['gpg', '--homedir', self.home, '--batch', '--yes',
                     '--pinentry-mode', 'loopback', '--passphrase', '',
                     *args])

    def sign(self, release):
        """InRelease and Release.gpg next to the Release file."""
        directory = os.path.dirname(release)
        self._gpg('--local-user', KEY_NAME, '--clearsign', '--output',
                  os.path.join(directory, 'InRelease'), release)
        self._gpg('--local-user', KEY_NAME, '--armor', '--detach-sign',
                  '--output', os.path.join(directory, 'Release.gpg'),
                  release)

    def close(self):
        subprocess.run(['gpgconf', '--homedir', self.home, '--kill', 'all'],
                       capture_output=True)
        shutil.rmtree(self.home, ignore_errors=True)


def kubectl_for(minor):
    """The real kubectl binary of a minor version ('v1.35'), from the Cloud
    SDK's versioned ones; the newest older one when the runner has none of
    that minor (the Cloud SDK lags behind upstream), with a warning: the
    driver uses only kubectl commands that every supported release has."""
    wanted = int(minor.lstrip('v').split('.')[1])
    found = {}
    for path in glob.glob(os.path.join(kubectl.GCLOUD_KUBECTL_DIR,
                                       'kubectl.1.*')):
        match = re.search(r'\.1\.(\d+)$', path)
        if match and os.access(path, os.X_OK):
            found[int(match[1])] = path
    older = [number for number in found if number <= wanted]
    if not older:
        raise RuntimeError(f'no kubectl {minor} or older in '
                           f'{kubectl.GCLOUD_KUBECTL_DIR}')
    best = max(older)
    if best != wanted:
        warnings.warn(f'no kubectl {minor} on this machine: the test apt '
                      f'repository serves kubectl 1.{best} as {minor}')
    return found[best]


def build_kubectl(outdir, version, binary):
    """kubectl_<version>_amd64.deb in ``outdir``, holding ``binary`` as
    /usr/bin/kubectl. The 50 MB package is built once per binary and
    version on this machine, under a lock, and hard-linked from there:
    builds side by side that hard-linked the binary itself made tar in
    dpkg-deb fail (the file's links changed while it read it)."""
    info = os.stat(binary)
    os.makedirs(KUBECTL_DEB_CACHE, exist_ok=True)
    cached = os.path.join(KUBECTL_DEB_CACHE, (
        f'kubectl_{version}_{info.st_dev}-{info.st_ino}-{info.st_size}-'
        f'{info.st_mtime_ns}.deb'))
    with open(os.path.join(KUBECTL_DEB_CACHE, 'lock'), 'a') as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not os.path.exists(cached):
            _build_kubectl_deb(cached + '.part', version, binary)
            os.rename(cached + '.part', cached)
    deb = os.path.join(outdir, f'kubectl_{version}_amd64.deb')
    try:
        os.link(cached, deb)
    except OSError:
        shutil.copy(cached, deb)
    return deb


def _build_kubectl_deb(deb, version, binary):
    with tempfile.TemporaryDirectory(prefix='kubectl-deb-') as root:
        target = os.path.join(root, 'usr', 'bin', 'kubectl')
        os.makedirs(os.path.dirname(target))
        shutil.copy(binary, target)
        os.makedirs(os.path.join(root, 'DEBIAN'))
        with open(os.path.join(root, 'DEBIAN', 'control'), 'w') as stream:
            stream.write(f'Package: kubectl\nVersion: {version}\n'
                         'Architecture: amd64\n'
                         'Maintainer: testbed <testbed@localhost>\n'
                         'Section: admin\nPriority: optional\n'
                         'Description: kubectl for the testbed\n'
                         ' The real kubectl binary of the runner.\n')
        _run(['dpkg-deb', '--root-owner-group', '-Znone', '--build', root,
              deb])


def debian_debs():
    """The runner's cached .debs of DEBIAN_PACKAGES (newest of each)."""
    found = []
    for name in DEBIAN_PACKAGES:
        paths = sorted(glob.glob(os.path.join(APT_ARCHIVES,
                                              f'{name}_*_amd64.deb')))
        if not paths:
            raise RuntimeError(f'{name} is not in {APT_ARCHIVES}: run '
                               'testbed/install-deps.sh')
        found.append(paths[-1])
    return found


def populate(directory, image=None, version=None):
    """Put every package of the repository into ``directory``: with a
    guest ``image``, its containerd is the stand-in at its version. A
    ``version`` other than the install script's: its kubeadm, kubelet and
    kubectl only (the next minor's repository)."""
    extra = version is None
    version = version or standins.k8s_package_version()
    wanted = ('kubeadm', 'kubelet') + (('containerd',) if image and extra
                                       else ())
    containerd = image.containerd_version if image \
        else standins.CONTAINERD_VERSION
    with tempfile.TemporaryDirectory(prefix='standin-debs-') as built:
        for deb in standins.build_packages(built, version, containerd):
            if os.path.basename(deb).split('_')[0] in wanted:
                shutil.copy(deb, directory)
    minor = re.match(r'\d+\.\d+', version).group()
    build_kubectl(directory, version, kubectl_for('v' + minor))
    for deb in [] if image or not extra else debian_debs():
        shutil.copy(deb, directory)


def minor_path(package_version):
    """'v1.36' of '1.36.4-1.1'."""
    return 'v' + re.match(r'\d+\.\d+', package_version).group()


def write_index(directory, key):
    """Packages, Release, InRelease and Release.gpg of a flat repository."""
    packages = _run(['dpkg-scanpackages', '--multiversion', '.', '/dev/null'],
                    cwd=directory).stdout
    with open(os.path.join(directory, 'Packages'), 'wb') as stream:
        stream.write(packages)
    release = os.path.join(directory, 'Release')
    write_release(release, {'Packages': packages})
    key.sign(release)


def write_release(path, files):
    """A Release file listing ``files`` ({name: content}) by size and
    hash, dated now, as apt checks it."""
    lines = ['Origin: testbed', 'Label: testbed', 'Suite: testbed',
             'Date: ' + email.utils.formatdate(usegmt=True),
             'Architectures: amd64 all']
    for field, algorithm in (('MD5Sum', hashlib.md5),
                             ('SHA256', hashlib.sha256)):
        lines.append(field + ':')
        lines += [f' {algorithm(data).hexdigest()} {len(data)} {name}'
                  for name, data in sorted(files.items())]
    with open(path, 'w') as stream:
        stream.write('\n'.join(lines) + '\n')


# The VNF package's files and the request's offline sources of a cluster
# whose nodes are prepared from this repository. containerd pulls nothing
# in the testbed: the registry mirror is only configured.
KEY_FILE = 'Files/keys/kubernetes-apt.asc'
CNI_FILE = 'Files/cni/calico.yaml'
REGISTRY_MIRROR = 'http://10.254.0.1:5000'
MIRRORED_REGISTRIES = ('registry.k8s.io', 'docker.io')
PAUSE_IMAGE = '10.254.0.1:5000/pause:3.10'


def offline_params(repository):
    """The request's ``offline`` object naming the repository, the
    package's KEY_FILE and CNI_FILE, the registry mirror and the pause
    image."""
    return {
        'apt_repository_url': repository.url, 'apt_key_file': KEY_FILE,
        'cni_manifest_file': CNI_FILE,
        'registry_mirror_url': REGISTRY_MIRROR,
        'mirrored_registries': list(MIRRORED_REGISTRIES),
        'sandbox_image': PAUSE_IMAGE}


def use_in(virtual, repository, cni_manifest, key=None):
    """Make a testbed.virtual_vnf.VirtualCluster's request and package name
    the repository: its key (or ``key``, armored bytes) and the CNI
    manifest in the package, the registry mirror and the pause image."""
    virtual.add_package_file(
        KEY_FILE, (key or repository.key.public_armored).decode())
    virtual.add_package_file(CNI_FILE, cni_manifest)
    virtual.offline = offline_params(repository)


class _Handler(SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass  # requests go to the server's log instead

    def log_request(self, code='-', size='-'):
        self.server.log.append((self.client_address[0], self.command,
                                self.path, int(code) if str(code).isdigit()
                                else code))


class AptRepository(object):
    """The signed repository served on a bridge of its own; use as a
    context manager. ``url`` is what nodes put into their sources."""

    def __init__(self, prefix=None, image=None, versions=()):
        """``image``: a testbed.guest_images.GuestImage whose containerd
        the repository serves (default: the runner's Debian's);
        ``versions``: package versions served besides the script's and
        the next minor's."""
        self.prefix = prefix or f'ar{secrets.token_hex(3)}'
        self.image = image
        self.versions = tuple(versions)
        self.bridge = f'{self.prefix}br'
        self.directory = None
        self.key = None
        self.subnet = None
        self.address = None
        self._bridge_added = False
        self._server = None
        self._thread = None

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc_info):
        self.stop()

    @property
    def url(self):
        """The install script's minor's repository."""
        return self.url_for(standins.k8s_package_version())

    def url_for(self, package_version):
        """The repository of that version's minor (k8s/v1.35/)."""
        return (f'http://{self.address}:{self._server.server_port}/k8s/'
                f'{minor_path(package_version)}/')

    @property
    def log(self):
        """(client address, method, path, status) of every request."""
        return self._server.log

    def requests_from(self, address, since=0):
        return [entry for entry in self.log[since:] if entry[0] == address]

    def start(self):
        try:
            self.directory = tempfile.mkdtemp(prefix='testbed-apt-')
            self.key = SigningKey()
            for minor, versions in self._by_minor().items():
                packages = os.path.join(self.directory, 'k8s', minor)
                os.makedirs(packages)
                for version in versions:
                    populate(packages, self.image, version)
                write_index(packages, self.key)
            self.subnet = subnets.free_subnet()
            self.address = str(self.subnet[1])
            self._add_bridge()
            self._serve()
        except BaseException:
            self.stop()
            raise

    def _by_minor(self):
        """{minor path: [populate's version]}: None (everything) for the
        install script's; the next minor's and ``versions``."""
        current = standins.k8s_package_version()
        served = {minor_path(current): [None]}
        for version in dict.fromkeys((standins.next_minor(current),) +
                                     self.versions):
            if version != current:
                served.setdefault(minor_path(version), []).append(version)
        return served

    def _add_bridge(self):
        hosts._run(['ip', 'link', 'add', self.bridge, 'type', 'bridge'])
        self._bridge_added = True
        hosts._run(['ip', 'addr', 'add',
                    f'{self.address}/{self.subnet.prefixlen}', 'dev',
                    self.bridge])
        hosts._run(['ip', 'link', 'set', self.bridge, 'up'])

    def _serve(self):
        handler = functools.partial(_Handler, directory=self.directory)
        self._server = ThreadingHTTPServer((self.address, 0), handler)
        self._server.daemon_threads = True
        self._server.log = []
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        name='apt-repository', daemon=True)
        self._thread.start()

    def stop(self):
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._thread.join()
            self._server = None
        if self._bridge_added:
            hosts._run(['ip', 'link', 'del', self.bridge])
            self._bridge_added = False
        if self.key is not None:
            self.key.close()
            self.key = None
        if self.directory:
            shutil.rmtree(self.directory, ignore_errors=True)
            self.directory = None

    def route_from(self, host, gateway):
        """Give a test host a route to the repository through the runner's
        address on its own network (``gateway``), which the runner answers
        itself: no forwarding between the bridges is needed."""
        host.run(f'ip route replace {self.subnet} via {gateway}')
