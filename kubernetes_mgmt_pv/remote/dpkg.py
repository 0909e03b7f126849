"""Operating-system check and idempotent Debian package installation."""

import re

from kubernetes_mgmt_pv import exceptions

_INSTALLED = 'install ok installed'
# os-release(5): KEY=value, the value optionally in single or double quotes.
_ASSIGNMENT = re.compile(r'([A-Za-z0-9_]+)=(.*)')
_ESCAPED = re.compile(r'\\(.)')


def _unquote(value):
    """An os-release value without its quotes (never raises, unlike shlex
    on a stray quote)."""
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in '"\'':
        inner = value[1:-1]
        return _ESCAPED.sub(r'\1', inner) if value[0] == '"' else inner
    return value


def parse_os_release(text):
    """``(ID, VERSION_ID)`` of an os-release file's text ('' when absent)."""
    fields = {}
    for line in text.split('\n'):
        match = _ASSIGNMENT.fullmatch(line.strip())
        if match:
            fields[match.group(1)] = _unquote(match.group(2))
    return fields.get('ID', ''), fields.get('VERSION_ID', '')


def check_supported_os(executor, supported):
    """Refuse hosts whose OS is not listed in ``supported`` (ID:VERSION_ID)."""
    return check_os_release(executor.host,
                            executor.read_file('/etc/os-release') or '',
                            supported)


def check_os_release(host, text, supported):
    """``check_supported_os`` of an os-release file already read."""
    os_id, version = parse_os_release(text)
    if '%s:%s' % (os_id, version) not in supported:
        raise exceptions.UnsupportedOSError(
            '%s: operating system %s %s is not supported; supported: %s' % (
                host, os_id or 'unknown', version, ', '.join(supported)))
    return os_id, version


def parse_dpkg_status(result):
    """dpkg's Status of a package from ``dpkg-query -W -f=${Status}``'s
    result: 'unknown ok not-installed' when dpkg has never heard of it,
    None when the query itself failed."""
    if result.ok:
        return result.stdout.strip()
    if 'no packages found matching' in result.stderr:
        return 'unknown ok not-installed'
    return None


def gathered_statuses(executor, sections, package_names):
    """``{package: dpkg Status}`` from the "package NAME" facts of a
    gathering script (see ``facts``); a failed query is an error."""
    statuses = {}
    for package in package_names:
        result = sections['package %s' % package]
        statuses[package] = parse_dpkg_status(result)
        if statuses[package] is None:
            raise executor.failure('dpkg-query -W %s' % package, result)
    return statuses


def query_status(executor, package):
    """dpkg's Status of one package (one command)."""
    result = executor.run(['dpkg-query', '-W', '-f=${Status}', package],
                          check=False)
    status = parse_dpkg_status(result)
    if status is None:
        raise executor.failure('dpkg-query -W %s' % package, result)
    return status


def missing_packages(wanted, statuses):
    """The ``wanted`` packages to install, given their dpkg statuses.

    Only "install ok installed" counts as installed: a removed package
    whose configuration files remain ("deinstall ok config-files") or a
    half-installed one must be installed (again).
    """
    return [package for package in wanted
            if statuses.get(package) != _INSTALLED]


def install_command(missing):
    """apt-get install of ``missing``, keeping changed configuration files."""
    return ['apt-get', '-y', '-q', '-o', 'DPkg::Lock::Timeout=300',
            '-o', 'Dpkg::Options::=--force-confdef',
            '-o', 'Dpkg::Options::=--force-confold', 'install'] + missing


def ensure_installed(executor, packages, proxy, timeout, report,
                     statuses=None):
    """Install the missing ``packages`` with apt-get; report what changed.

    ``statuses`` are dpkg's statuses if already gathered; otherwise they
    are queried. apt-get update runs only when the install from the
    current package lists fails, so an up-to-date host is left untouched.
    """
    if statuses is None:
        statuses = {p: query_status(executor, p) for p in packages}
    missing = missing_packages(packages, statuses)
    if not missing:
        report.record(executor.host, 'packages %s' % ' '.join(packages),
                      False)
        return False
    env = dict(proxy.environment(), DEBIAN_FRONTEND='noninteractive')
    install = install_command(missing)
    first = executor.run(install, sudo=True, env=env, check=False,
                         timeout=timeout)
    if not first.ok:
        executor.run(['apt-get', '-q', '-o', 'DPkg::Lock::Timeout=300',
                      'update'], sudo=True, env=env, timeout=timeout)
        executor.run(install, sudo=True, env=env, timeout=timeout)
    still_missing = missing_packages(
        missing, {p: query_status(executor, p) for p in missing})
    if still_missing:
        raise exceptions.MgmtDriverError(
            'apt-get reported success but %s is not installed'
            % ', '.join(still_missing))
    report.record(executor.host, 'packages %s' % ' '.join(packages), True,
                  'installed %s' % ' '.join(missing))
    return True
