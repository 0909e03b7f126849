"""Operating-system check and idempotent Debian package installation."""

import re

from kubernetes_mgmt_pv import exceptions

_INSTALLED = 'install ok installed'
# os-release(5): KEY=value, the value optionally in single or double quotes.
_ASSIGNMENT = re.compile(r'^([A-Za-z0-9_]+)=(.*)$')
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
        match = _ASSIGNMENT.match(line.strip())
        if match:
            fields[match.group(1)] = _unquote(match.group(2))
    return fields.get('ID', ''), fields.get('VERSION_ID', '')


def check_supported_os(executor, supported):
    """Refuse hosts whose OS is not listed in ``supported`` (ID:VERSION_ID)."""
    os_id, version = parse_os_release(
        executor.read_file('/etc/os-release') or '')
    if '%s:%s' % (os_id, version) not in supported:
        raise exceptions.UnsupportedOSError(
            '%s: operating system %s %s is not supported; supported: %s' % (
                executor.host, os_id or 'unknown', version,
                ', '.join(supported)))
    return os_id, version


def is_installed(executor, package):
    """True only when dpkg's Status is "install ok installed".

    ``dpkg -s`` alone is not enough: it also succeeds for a removed package
    whose configuration files remain ("deinstall ok config-files").
    """
    result = executor.run(['dpkg-query', '-W', '-f=${Status}', package],
                          check=False)
    if not result.ok and 'no packages found matching' not in result.stderr:
        raise executor.failure('dpkg-query -W %s' % package, result)
    return result.ok and result.stdout.strip() == _INSTALLED


def ensure_installed(executor, packages, proxy, timeout, report):
    """Install the missing ``packages`` with apt-get; report what changed.

    apt-get update runs only when the install from the current package
    lists fails, so an up-to-date host is left untouched.
    """
    missing = [p for p in packages if not is_installed(executor, p)]
    if not missing:
        report.record(executor.host, 'packages %s' % ' '.join(packages),
                      False)
        return False
    env = dict(proxy.environment(), DEBIAN_FRONTEND='noninteractive')
    install = ['apt-get', '-y', '-q', '-o', 'DPkg::Lock::Timeout=300',
               '-o', 'Dpkg::Options::=--force-confdef',
               '-o', 'Dpkg::Options::=--force-confold', 'install'] + missing
    first = executor.run(install, sudo=True, env=env, check=False,
                         timeout=timeout)
    if not first.ok:
        executor.run(['apt-get', '-q', '-o', 'DPkg::Lock::Timeout=300',
                      'update'], sudo=True, env=env, timeout=timeout)
        executor.run(install, sudo=True, env=env, timeout=timeout)
    still_missing = [p for p in missing if not is_installed(executor, p)]
    if still_missing:
        raise exceptions.MgmtDriverError(
            'apt-get reported success but %s is not installed'
            % ', '.join(still_missing))
    report.record(executor.host, 'packages %s' % ' '.join(packages), True,
                  'installed %s' % ' '.join(missing))
    return True
