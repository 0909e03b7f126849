"""The checks behind ``param_model``: each value of additionalParams tested
and every problem recorded under its JSON path, never raised one by one;
strings accepted only when any host can be sent them as they are."""

import dataclasses
import ipaddress
import json
import posixpath
import re

from kubernetes_mgmt_pv import exceptions
from kubernetes_mgmt_pv.remote import ssh_keys
from kubernetes_mgmt_pv.request import offline_params

# Conservative on purpose: these strings end up in /etc/exports, /etc/fstab
# and command lines; anything outside this set is refused, not escaped.
_SAFE_PATH = re.compile(r'(/[A-Za-z0-9._@+=,:-]+)+')
_HOSTNAME_LABEL = r'[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?'
HOSTNAME = re.compile(r'%s(?:\.%s)*' % (_HOSTNAME_LABEL, _HOSTNAME_LABEL))
# exports(5) clients besides addresses and names: wildcard host names
# ("*", "*.example.org", "node?", "node[0-9]") and NIS netgroups.
_HOST_PATTERN = re.compile(r'(?=.{1,253}\Z)(?=.*[*?\[])'
                           r'[A-Za-z0-9*?\[\]-]+(?:\.[A-Za-z0-9*?\[\]-]+)*')
_NETGROUP = re.compile(r'@[A-Za-z0-9_.-]{1,253}')
# Heat resource names as the driver puts them into Heat API URLs: a "/"
# would reach another path of the endpoint (with the VIM token), so only
# the characters the sample packages use are accepted.
_RESOURCE_NAME = re.compile(r'[A-Za-z0-9][A-Za-z0-9_.-]{0,254}')
# C0 and C1 control characters (NUL, newline, escape, ...) and lone
# surrogates, which cannot be encoded to send to a host.
_UNSENDABLE = re.compile(r'[\x00-\x1f\x7f-\x9f\ud800-\udfff]')
# Long enough for any path (PATH_MAX), password or URL.
MAX_TEXT_LENGTH = 4096
# additionalParams nest about five levels; deeper is refused before any
# code walks it, so no walk can exhaust the Python stack.
MAX_DEPTH = 32
# Directories that hold the system's or users' data: mounting a volume
# over them hides that data, exporting them hands it out (after a chown).
# Below them a directory is allowed (/srv/nfs, /mnt/data).
_SYSTEM_DIRS = frozenset((
    '/', '/home', '/lost+found', '/media', '/mnt', '/opt', '/snap', '/srv',
    '/tmp', '/var', '/var/backups', '/var/cache', '/var/lib', '/var/local',
    '/var/log', '/var/mail', '/var/opt', '/var/spool', '/var/tmp'))
# These and everything below them belong to the system or to root.
_SYSTEM_TREES = ('/bin', '/boot', '/dev', '/etc', '/lib', '/lib32', '/lib64',
                 '/libx32', '/proc', '/root', '/run', '/sbin', '/sys', '/usr',
                 '/var/lock', '/var/run')
_HOME_DIR = re.compile(r'/home/[^/]+')
_PLAIN_KEY = re.compile(r'[A-Za-z_][A-Za-z0-9_-]*')
_TRAILING_INDICES = re.compile(r'(\[\d+\])+$')
# The port each client of a proxy URL without one connects to: curl
# (CURLOPT_PROXYPORT: 443 for https proxies, 1080 for all others), apt
# (the scheme's port) and Go's net/http (containerd, kubelet, kubeadm:
# the scheme's port).
_DEFAULT_PROXY_PORTS = {
    'http': 'curl connects to port 1080, apt-get and containerd, kubelet '
            'and kubeadm (Go) to port 80',
    'https': 'curl, apt-get and containerd, kubelet and kubeadm (Go) '
             'connect to port 443'}


@dataclasses.dataclass(frozen=True)
class ParameterWarning(object):
    """A value that is accepted but probably not what the user meant."""
    path: str
    reason: str


class Checker(object):
    """Collects problems while walking the parameter tree."""

    def __init__(self):
        self.errors = []
        self.warnings = []

    def fail(self, path, reason):
        self.errors.append(exceptions.ParameterError(path, reason))

    def warn(self, path, reason):
        self.warnings.append(ParameterWarning(path, reason))

    def mapping(self, value, path, required=True):
        if value is None:
            if required:
                self.fail(path, 'is required')
            return None
        if not isinstance(value, dict):
            self.fail(path, 'must be an object, got %s' % type(value).__name__)
            return None
        return value

    def no_unknown_keys(self, value, path, known):
        for key in sorted(set(value) - set(known), key=repr):
            self.fail(_key_path(path, key),
                      'unknown key; expected one of: %s'
                      % ', '.join(sorted(known)))

    def unused_keys(self, value, path, known):
        """Warn of keys this driver ignores (a typo, or a key of another
        driver's schema) in a mapping that tolerates them."""
        for key in sorted(set(value) - set(known), key=repr):
            self.warn(_key_path(path, key),
                      'is not used by this driver and is ignored; known '
                      'keys: %s' % ', '.join(sorted(known)))

    def text(self, parent, key, path, required=True):
        """A non-empty string that can be sent to a host as it is.

        Never echoes the value: it may be a password.
        """
        return self.text_value(parent.get(key), '%s.%s' % (path, key),
                               required)

    def text_value(self, value, where, required=True):
        """``text`` of a value found at JSON path ``where`` (a list's
        item)."""
        if value is None:
            if required:
                self.fail(where, 'is required')
            return None
        if not isinstance(value, str):
            self.fail(where, 'must be a string, got %s'
                      % type(value).__name__)
        elif len(value) > MAX_TEXT_LENGTH:
            self.fail(where, 'must be at most %d characters long, got %d'
                      % (MAX_TEXT_LENGTH, len(value)))
        elif _UNSENDABLE.search(value):
            self.fail(where, _unsendable_reason(value))
        elif not value.strip():
            self.fail(where, 'must be a non-empty string')
        else:
            return value
        return None

    def resource_name(self, parent, key, path, required=True):
        value = self.text(parent, key, path, required)
        if value is None or is_resource_name(value):
            return value
        self.fail('%s.%s' % (path, key),
                  'must be a Heat resource name (a letter or digit, then up '
                  'to 254 letters, digits and _ . -), got %s' % shown(value))
        return None

    def name(self, parent, key, path):
        """An optional name such as the VIM's: the resource name rules."""
        value = self.text(parent, key, path, required=False)
        if value is None or _RESOURCE_NAME.fullmatch(value):
            return value
        self.fail('%s.%s' % (path, key),
                  'must be a letter or digit, then up to 254 letters, '
                  'digits and _ . -, got %s' % shown(value))
        return None

    def key_file_name(self, parent, key, path):
        """An optional file name of ``ssh_keys.KEY_NAME``, never a path."""
        value = self.text(parent, key, path, required=False)
        if value is None or ssh_keys.KEY_NAME.fullmatch(value):
            return value
        self.fail('%s.%s' % (path, key),
                  'must be a file name in ssh_key_dir (a letter or digit, '
                  'then up to 127 letters, digits and _ . -), got %s'
                  % shown(value))
        return None

    def cidrs(self, parent, key, path):
        """(text, networks) of a CIDR or a dual-stack "IPv4,IPv6" pair, as
        kubeadm accepts them: host bits are allowed, with a warning."""
        value = self.text(parent, key, path, required=False)
        where = '%s.%s' % (path, key)
        if value is None:
            return None, ()
        networks = []
        for entry in value.split(','):
            address, _, prefix = entry.partition('/')
            try:
                network = ipaddress.ip_network(entry, strict=False)
            except ValueError:
                network = None
            if network is None or not prefix.isdigit() or '%' in entry:
                self.fail(where, 'must be a network in CIDR notation such as '
                                 '10.96.0.0/12, or an IPv4 and an IPv6 one '
                                 'separated by ",", got %s' % shown(value))
                return None, ()
            if network.network_address != ipaddress.ip_address(address):
                self.warn(where, '%s has host bits set; kubeadm uses %s'
                          % (shown(entry), network))
            networks.append(network)
        if len(networks) > 2 or len({n.version for n in networks}) != len(
                networks):
            self.fail(where, 'a dual-stack value is one IPv4 and one IPv6 '
                             'CIDR, got %s' % shown(value))
            return None, ()
        return value, tuple(networks)

    def items(self, parent, key, path, minimum):
        value = parent.get(key)
        where = '%s.%s' % (path, key)
        if value is None:
            if minimum:
                self.fail(where, 'is required')
            return []
        if not isinstance(value, list):
            self.fail(where, 'must be a list')
            return []
        if len(value) < minimum:
            self.fail(where, 'must have at least %d item(s)' % minimum)
        return [('%s[%d]' % (where, index), item)
                for index, item in enumerate(value)]

    def absolute_path(self, parent, key, path):
        value = self.text(parent, key, path)
        where = '%s.%s' % (path, key)
        if value is None:
            return None
        if not value.startswith('/'):
            self.fail(where, 'must be an absolute path, got %s'
                      % shown(value))
        elif posixpath.normpath(value) != value:
            self.fail(where, 'must be a normalised path (no "..", "." or '
                             'repeated or trailing "/"), got %s'
                      % shown(value))
        elif _is_system_dir(value):
            self.fail(where, '%s is a system or home directory, whose data '
                             'a volume would hide or an export would hand '
                             'out; use a directory of its own such as '
                             '/volume or /srv/nfs' % shown(value))
        elif not _SAFE_PATH.fullmatch(value):
            self.fail(where, 'may only contain letters, digits and . _ @ + = '
                             ', : - between "/", got %s' % shown(value))
        else:
            return value
        return None

    def export_target(self, parent, key, path):
        value = self.text(parent, key, path)
        if value is None:
            return None
        if is_network(value) or HOSTNAME.fullmatch(value) or \
                _HOST_PATTERN.fullmatch(value) or _NETGROUP.fullmatch(value):
            return value
        self.fail('%s.%s' % (path, key),
                  'must be an IP address, a network (CIDR or netmask), a '
                  'host name, a wildcard (* ? [...]) or @netgroup, got %s'
                  % shown(value))
        return None

    def package_path(self, parent, key, path, required=True):
        return self.package_path_value(parent.get(key), '%s.%s' % (path, key),
                                       required)

    def package_path_value(self, value, where, required=True):
        """``package_path`` of a value found at JSON path ``where``."""
        value = self.text_value(value, where, required)
        if value is None:
            return None
        if value.startswith('/') or '\\' in value:
            self.fail(where, 'must be a relative path inside the VNF package, '
                             'got %s' % shown(value))
        elif posixpath.normpath(value) != value or '..' in value.split('/'):
            self.fail(where, 'must be a normalised path inside the VNF '
                             'package (no ".."), got %s' % shown(value))
        else:
            return value
        return None

    def proxy_url(self, parent, key, path):
        value = self.text(parent, key, path, required=False)
        if value is None:
            return None
        where = '%s.%s' % (path, key)
        if not offline_params.is_http_url(value):
            # Not echoed: a malformed URL may still contain a password.
            self.fail(where, 'must be an http:// or https:// URL with a host '
                             'and an optional port from 1 to 65535, its '
                             'special characters percent-encoded')
            return None
        port = offline_params.url_port(value)
        if port and not port.isdigit():
            # Not echoed either. The user guide's sample has "host1:port1".
            self.fail(where, 'its port is not a number, so nothing can '
                             'connect through this proxy; replace the '
                             'placeholder with the port number')
            return None
        if not port:
            self.warn(where, 'names no port: %s; give the proxy\'s port'
                      % _DEFAULT_PROXY_PORTS[value.partition(':')[0].lower()])
        return value


def is_resource_name(value):
    """Whether value may name a Heat resource (a CP, volume or group)."""
    return isinstance(value, str) and bool(_RESOURCE_NAME.fullmatch(value))


def is_sendable_text(value):
    """Whether value is a string that parse would accept as text."""
    return (isinstance(value, str) and len(value) <= MAX_TEXT_LENGTH and
            not _UNSENDABLE.search(value) and bool(value.strip()))


def _unsendable_reason(value):
    """Where value holds what no host can be sent, without echoing it."""
    match = _UNSENDABLE.search(value)
    return ('must not contain control characters or lone surrogates, found '
            'U+%04X at offset %d' % (ord(match.group()), match.start()))


def _is_system_dir(path):
    return (path in _SYSTEM_DIRS or _HOME_DIR.fullmatch(path) is not None or
            any(path == tree or path.startswith(tree + '/')
                for tree in _SYSTEM_TREES))


def is_within(path, directory):
    return path == directory or path.startswith(directory.rstrip('/') + '/')


def is_network(value):
    try:
        ipaddress.ip_network(value, strict=False)
    except ValueError:
        return False
    return True


def shown(value):
    """repr of value for an error message: escaped, and short."""
    return _shortened(repr(value))


def _shortened(text, limit=80):
    return text if len(text) <= limit else text[:limit - 3] + '...'


def _key_path(path, key):
    """JSON path of a member; odd keys are quoted and escaped so the path
    stays one short printable line."""
    if isinstance(key, str) and _PLAIN_KEY.fullmatch(key):
        return '%s.%s' % (path, key) if path else key
    shown = json.dumps(key) if isinstance(key, str) else repr(key)
    return '%s[%s]' % (path, _shortened(shown))


def check_depth(check, value):
    """Refuse values nested deeper than MAX_DEPTH, walking without
    recursion; the finding names the member that holds the deep value."""
    stack = [(value, '', 0)]
    while stack:
        node, path, depth = stack.pop()
        if not isinstance(node, (dict, list)):
            continue
        if depth == MAX_DEPTH:
            check.fail(_TRAILING_INDICES.sub('', path),
                       'is nested deeper than %d levels' % MAX_DEPTH)
        elif isinstance(node, dict):
            stack.extend((child, _key_path(path, key), depth + 1)
                         for key, child in node.items())
        else:
            stack.extend((child, '%s[%d]' % (path, index), depth + 1)
                         for index, child in enumerate(node))
