"""Operating-system check and idempotent Debian package installation."""

import shlex

from kubernetes_mgmt_pv import exceptions

_INSTALLED = 'install ok installed'


def os_release(executor):
    """``(ID, VERSION_ID)`` from /etc/os-release of the host."""
    text = executor.read_file('/etc/os-release') or ''
    fields = {}
    for line in text.splitlines():
        key, sep, value = line.partition('=')
        if sep:
            parts = shlex.split(value) if value else ['']
            fields[key.strip()] = parts[0] if parts else ''
    return fields.get('ID', ''), fields.get('VERSION_ID', '')


def check_supported_os(executor, supported):
    """Refuse hosts whose OS is not listed in ``supported`` (ID:VERSION_ID)."""
    os_id, version = os_release(executor)
    if '%s:%s' % (os_id, version) not in supported:
        raise exceptions.UnsupportedOSError(
            '%s: operating system %s %s is not supported; supported: %s' % (
                executor.host, os_id or 'unknown', version or '',
                ', '.join(supported)))
    return os_id, version


def is_installed(executor, package):
    """True only when dpkg's Status is "install ok installed".

    ``dpkg -s`` alone is not enough: it also succeeds for a removed package
    whose configuration files remain ("deinstall ok config-files").
    """
    result = executor.run(['dpkg-query', '-W', '-f=${Status}', package],
                          check=False)
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
            '%s: apt-get reported success but %s is not installed' % (
                executor.host, ', '.join(still_missing)))
    report.record(executor.host, 'packages %s' % ' '.join(packages), True,
                  'installed %s' % ' '.join(missing))
    return True
