"""``k8s_cluster_installation_param.offline``: where an air-gapped site's
nodes get Kubernetes from, instead of the Internet.

An internal apt repository (a mirror of pkgs.k8s.io) with its signing key
shipped in the VNF package, the CNI manifest shipped in the package, a
container registry mirror for containerd and the pause (sandbox) image.
Every key is optional and an absent one keeps the online default, so a
request without ``offline`` installs exactly as before. ``param_model`` parses
this mapping with its checker; the URL rules live here because the proxy
URLs follow them too.
"""

import dataclasses
import re
import urllib.parse

# Where the driver puts the package's files on every node it runs the
# install script on: root-owned, next to the script.
NODE_DIR = '/usr/local/lib/kubernetes-mgmt-pv'
NODE_APT_KEY = NODE_DIR + '/kubernetes-apt-key.asc'
NODE_CNI_MANIFEST = NODE_DIR + '/cni-manifest.yaml'

PATH = 'k8s_cluster_installation_param.offline'
KEYS = ('apt_repository_url', 'apt_key_file', 'cni_manifest_file',
        'registry_mirror_url', 'mirrored_registries', 'sandbox_image')

# The characters of an http(s) URL: RFC 3986's but the quote "'", which
# must be percent-encoded like spaces, other quotes and non-ASCII, or it
# would end up in apt's sources, containerd's TOML or a process
# environment. The install script's URL_RE has this very set (a test
# keeps them equal), so it never refuses a URL the driver accepted, after
# the driver changed the nodes.
URL_CHARACTERS = r"A-Za-z0-9._~:/?#\[\]@!$&()*+,;=%-"
_URL = re.compile(r'https?://[%s]+' % URL_CHARACTERS)
# A registry host as containerd names its hosts.toml directory.
_REGISTRY = re.compile(r'[A-Za-z0-9](?:[A-Za-z0-9.-]{0,251}[A-Za-z0-9])?'
                       r'(?::[0-9]{1,5})?')
# An image reference: [registry[:port]/]path[:tag][@digest].
_IMAGE = re.compile(r'[A-Za-z0-9][A-Za-z0-9._/-]{0,254}'
                    r'(?::[0-9]{1,5}/[A-Za-z0-9._/-]{1,255})?'
                    r'(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?'
                    r'(?:@sha256:[0-9a-f]{64})?')


@dataclasses.dataclass(frozen=True)
class OfflineSources(object):
    """None (or empty) everywhere keeps the install script's default."""
    apt_repository_url: str = None
    apt_key_file: str = None  # a path inside the VNF package
    cni_manifest_file: str = None  # a path inside the VNF package
    registry_mirror_url: str = None
    # Empty: the install script's default (registry.k8s.io, docker.io,
    # quay.io: kubeadm's, the pause image's and Calico's registries).
    mirrored_registries: tuple = ()
    sandbox_image: str = None

    def package_files(self):
        """(JSON path, path in the package, path on the node) of every
        file the driver uploads to the nodes before the install script."""
        files = []
        if self.apt_key_file:
            files.append(('apt_key_file', self.apt_key_file, NODE_APT_KEY))
        if self.cni_manifest_file:
            files.append(('cni_manifest_file', self.cni_manifest_file,
                          NODE_CNI_MANIFEST))
        return [(PATH + '.' + key, relative, node)
                for key, relative, node in files]

    def script_options(self):
        """The install script's options for these sources (see its
        contract): none when everything is the default."""
        argv = []
        if self.apt_repository_url:
            argv += ['-r', self.apt_repository_url]
        if self.apt_key_file:
            argv += ['-g', NODE_APT_KEY]
        if self.cni_manifest_file:
            argv += ['-n', NODE_CNI_MANIFEST]
        if self.registry_mirror_url:
            argv += ['-M', self.registry_mirror_url]
        if self.mirrored_registries:
            argv += ['-R', ','.join(self.mirrored_registries)]
        if self.sandbox_image:
            argv += ['-P', self.sandbox_image]
        return argv


def is_http_url(value):
    """An http(s) URL with a host; its port, if a number, in range (one
    that is not a number is a placeholder the caller may warn of)."""
    if not _URL.fullmatch(value):
        return False
    try:
        parsed = urllib.parse.urlsplit(value)
    except ValueError:
        return False
    port = url_port(value)
    if port.isdigit() and not 0 < int(port) < 65536:
        return False
    return parsed.scheme in ('http', 'https') and bool(parsed.hostname)


def url_port(url):
    """The port text of a URL whose syntax urlsplit accepted; '' when it
    has none."""
    host_and_port = urllib.parse.urlsplit(url).netloc.rpartition('@')[2]
    if host_and_port.startswith('['):
        host_and_port = host_and_port.partition(']')[2]
    return host_and_port.rpartition(':')[2] if ':' in host_and_port else ''


def parse(check, value):
    """OfflineSources of the ``offline`` mapping (None: all defaults);
    ``check`` is the parameter checker of ``param_model``, which records the
    findings."""
    offline = check.mapping(value, PATH, required=False)
    if offline is None:
        return OfflineSources()
    check.no_unknown_keys(offline, PATH, KEYS)
    repository = _url(check, offline, 'apt_repository_url')
    key_file = check.package_path(offline, 'apt_key_file', PATH,
                                  required=False)
    if offline.get('apt_repository_url') is not None and \
            offline.get('apt_key_file') is None:
        check.fail(PATH + '.apt_key_file',
                   'is required with apt_repository_url: the nodes trust '
                   'the repository only with the key the VNF package '
                   'ships (no key is downloaded from a mirror)')
    mirror = _url(check, offline, 'registry_mirror_url')
    registries = _registries(check, offline)
    if offline.get('mirrored_registries') is not None and \
            offline.get('registry_mirror_url') is None:
        check.fail(PATH + '.mirrored_registries',
                   'requires registry_mirror_url, the mirror their pulls '
                   'go to')
    return OfflineSources(
        apt_repository_url=repository, apt_key_file=key_file,
        cni_manifest_file=check.package_path(offline, 'cni_manifest_file',
                                             PATH, required=False),
        registry_mirror_url=mirror, mirrored_registries=registries,
        sandbox_image=_image(check, offline, 'sandbox_image'))


def _url(check, offline, key):
    value = check.text(offline, key, PATH, required=False)
    if value is None:
        return None
    port = url_port(value) if is_http_url(value) else None
    if port is not None and '@' in urllib.parse.urlsplit(value).netloc:
        # Not echoed either.
        check.fail(PATH + '.' + key,
                   'must not carry credentials: the URL goes into a command '
                   'line and a world-readable file of every node (give apt '
                   'its credentials in /etc/apt/auth.conf.d of the image)')
        return None
    if port is not None and (port == '' or port.isdigit()):
        return value
    # Not echoed: a URL may carry credentials.
    check.fail(PATH + '.' + key,
               'must be an http:// or https:// URL with a host and an '
               'optional port from 1 to 65535, its special characters '
               'percent-encoded')
    return None


def _registries(check, offline):
    names = []
    given = offline.get('mirrored_registries') is not None
    for where, item in check.items(offline, 'mirrored_registries', PATH,
                                   minimum=1 if given else 0):
        item = check.text_value(item, where)
        if item is None:
            continue
        if _REGISTRY.fullmatch(item):
            names.append(item)
        else:
            check.fail(where, 'must be a registry host name such as '
                              'registry.k8s.io or mirror.example:5000')
    if len(set(names)) != len(names):
        check.fail(PATH + '.mirrored_registries',
                   'names a registry more than once')
    return tuple(names)


def _image(check, offline, key):
    value = check.text(offline, key, PATH, required=False)
    if value is None or _IMAGE.fullmatch(value):
        return value
    check.fail(PATH + '.' + key,
               'must be an image reference such as '
               'registry.example.com/pause:3.10')
    return None
