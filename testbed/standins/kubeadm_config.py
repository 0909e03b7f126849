"""kubeadm's configuration files, for the kubeadm stand-in (kubeadm.py).

Installed as /usr/lib/testbed/kubeadm_config.py next to kubeadm_etcd.py.
`kubeadm join --config FILE` reads a JoinConfiguration (kubeadm.k8s.io
v1beta3 or v1beta4) from FILE; the hosts' python3 has no YAML library, so
this reads the block-style YAML kubeadm's documentation uses (nested
mappings, sequences, plain and quoted scalars, `---` between documents)
and JSON. Validation follows kubeadm's: discovery through a bootstrap
token needs the endpoint, a well-formed token and CA hashes (or
unsafeSkipCAVerification); unknown fields are warnings, as with kubeadm's
strict decoding. Messages never contain the token or the certificate key.

Standard library only.
"""

import json
import re

API_VERSIONS = ('kubeadm.k8s.io/v1beta3', 'kubeadm.k8s.io/v1beta4')
TOKEN = re.compile(r'[a-z0-9]{6}\.[a-z0-9]{16}')
SECRET_FIELDS = ('token', 'tlsBootstrapToken', 'certificateKey')
# The JoinConfiguration fields kubeadm knows, nested; None: any value.
SCHEMA = {
    'apiVersion': None, 'kind': None, 'dryRun': None, 'caCertPath': None,
    'nodeRegistration': None, 'skipPhases': None, 'patches': None,
    'timeouts': None,
    'discovery': {
        'bootstrapToken': {'apiServerEndpoint': None, 'token': None,
                           'caCertHashes': None,
                           'unsafeSkipCAVerification': None},
        'file': None, 'tlsBootstrapToken': None, 'timeout': None},
    'controlPlane': {
        'localAPIEndpoint': {'advertiseAddress': None, 'bindPort': None},
        'certificateKey': None},
}


class ConfigError(Exception):
    """A configuration kubeadm refuses."""


# --- reading -----------------------------------------------------------------

def _scalar(text):
    text = text.strip()
    if text.startswith('"'):
        return json.loads(text)
    if text.startswith("'"):
        return text[1:-1].replace("''", "'")
    text = re.sub(r'\s+#.*$', '', text)
    if text in ('true', 'false'):
        return text == 'true'
    if re.fullmatch(r'-?\d+', text):
        return int(text)
    return {'': None, '~': None, 'null': None, '{}': {}, '[]': []}.get(
        text, text)


_KEY = re.compile(r'^([A-Za-z0-9_.-]+):(?:\s+(.*))?$')


def _block(lines, i, indent):
    """(value, next index) of the block at lines[i], indented ``indent``."""
    if lines[i][1] == '-' or lines[i][1].startswith('- '):
        items = []
        while i < len(lines) and lines[i][0] == indent and (
                lines[i][1] == '-' or lines[i][1].startswith('- ')):
            rest = lines[i][1][1:].strip()
            if not rest:
                value, i = _block(lines, i + 1, lines[i + 1][0])
            elif _KEY.match(rest):  # "- key: value" opens a mapping
                lines[i] = (indent + 2, rest)
                value, i = _block(lines, i, indent + 2)
            else:
                value, i = _scalar(rest), i + 1
            items.append(value)
        return items, i
    mapping = {}
    while i < len(lines) and lines[i][0] == indent:
        match = _KEY.match(lines[i][1])
        if not match:
            raise ConfigError(f'yaml: line {i + 1}: could not find expected '
                              f'\':\'')
        key, value = match.groups()
        i += 1
        if value is not None and value.strip():
            mapping[key] = _scalar(value)
        elif i < len(lines) and (lines[i][0] > indent or (
                lines[i][0] == indent and lines[i][1].startswith('-'))):
            mapping[key], i = _block(lines, i, lines[i][0])
        else:
            mapping[key] = None
    return mapping, i


def parse_document(text):
    """One YAML (or JSON) document as Python values."""
    if text.lstrip().startswith('{'):
        try:
            return json.loads(text)
        except ValueError as error:
            raise ConfigError(f'error converting YAML to JSON: {error}')
    lines = [(len(line) - len(line.lstrip(' ')), line.strip())
             for line in text.splitlines()
             if line.strip() and not line.strip().startswith('#')]
    if not lines:
        return {}
    value, end = _block(lines, 0, lines[0][0])
    if end != len(lines):
        raise ConfigError(f'yaml: line {end + 1}: did not find expected key')
    return value


def documents(text):
    """The documents of a multi-document file."""
    return [parse_document(part)
            for part in re.split(r'^---[ \t]*$', text, flags=re.M)
            if part.strip()]


# --- JoinConfiguration -------------------------------------------------------

def unknown_fields(value, schema, path=''):
    """The dotted paths of fields kubeadm does not know."""
    found = []
    for key, item in (value or {}).items():
        where = f'{path}{key}'
        if key not in schema:
            found.append(where)
        elif isinstance(schema[key], dict) and isinstance(item, dict):
            found += unknown_fields(item, schema[key], where + '.')
    return found


def validate(config):
    """The field errors kubeadm's ValidateJoinConfiguration reports."""
    errors = []
    discovery = config.get('discovery') or {}
    bootstrap = discovery.get('bootstrapToken')
    if bootstrap is None and not discovery.get('file'):
        return ['discovery: Invalid value: "": bootstrapToken or file must '
                'be set']
    if bootstrap is not None:
        if not bootstrap.get('apiServerEndpoint'):
            errors.append('discovery.bootstrapToken.apiServerEndpoint: '
                          'Required value: APIServerEndpoint is not set')
        if not TOKEN.fullmatch(str(bootstrap.get('token') or '')):
            errors.append('discovery.bootstrapToken.token: Invalid value: '
                          'the bootstrap token is invalid')
        if not bootstrap.get('caCertHashes') and \
                not bootstrap.get('unsafeSkipCAVerification'):
            errors.append('discovery.bootstrapToken: Invalid value: "": '
                          'using token-based discovery without caCertHashes '
                          'can be unsafe. Set unsafeSkipCAVerification as '
                          'true in your kubeadm config file or pass '
                          '--discovery-token-unsafe-skip-ca-verification '
                          'flag to continue')
    tls_token = discovery.get('tlsBootstrapToken') or \
        (bootstrap or {}).get('token')
    if not TOKEN.fullmatch(str(tls_token or '')):
        errors.append('discovery.tlsBootstrapToken: Invalid value: the '
                      'bootstrap token is invalid')
    port = ((config.get('controlPlane') or {}).get('localAPIEndpoint')
            or {}).get('bindPort')
    if port is not None and not (isinstance(port, int) and
                                 0 < port < 65536):
        errors.append('controlPlane.localAPIEndpoint.bindPort: Invalid '
                      f'value: {port}: port number is not valid')
    return errors


def load_join_configuration(path):
    """(JoinConfiguration dict, warnings) of a --config file, or
    ConfigError as kubeadm refuses it."""
    try:
        with open(path) as handle:
            text = handle.read()
    except OSError as error:
        raise ConfigError(f'unable to read config from "{path}" : '
                          f'open {path}: {error.strerror.lower()}')
    join = None
    for document in documents(text):
        if not isinstance(document, dict):
            raise ConfigError(f'unable to decode config from "{path}"')
        kind, version = document.get('kind'), document.get('apiVersion')
        if not kind or not version:
            raise ConfigError(f'invalid configuration for GroupVersionKind '
                              f'{version}, Kind={kind}: kind and apiVersion '
                              f'is mandatory information that must be '
                              f'specified')
        if kind == 'JoinConfiguration':
            if version not in API_VERSIONS:
                raise ConfigError(f'no kind "{kind}" is registered for '
                                  f'version "{version}"')
            join = document
    if join is None:
        raise ConfigError(f'no JoinConfiguration kind was found in the YAML '
                          f'file "{path}"')
    warnings = [f'unknown field "{field}"'
                for field in unknown_fields(join, SCHEMA)]
    errors = validate(join)
    if errors:
        raise ConfigError('\n'.join(errors))
    return join, warnings


def redacted(value):
    """A configuration with its secrets replaced, fit for a log."""
    if isinstance(value, dict):
        return {key: '***' if key in SECRET_FIELDS and item else
                redacted(item) for key, item in value.items()}
    if isinstance(value, list):
        return [redacted(item) for item in value]
    return value
