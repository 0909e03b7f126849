"""The Kubernetes minors the driver knows, with their upstream release and
end-of-life dates: the one place that says which minors the driver and the
sample install script support, and what ``validate`` warns about.

Upstream maintains a minor for about fourteen months, the last two in
maintenance mode; kubeadm upgrades one minor at a time, so a cluster kept
on a minor past its end of life needs several upgrades in a row. Checked
against kubernetes/sig-release on CHECKED; a later check adds a row.
"""

import dataclasses
import datetime
import re

from kubernetes_mgmt_pv.cluster import upgrade_plan

CHECKED = datetime.date(2026, 11, 28)
# Warn this many days before a minor's end of life.
WARNING_DAYS = 90


@dataclasses.dataclass(frozen=True)
class Release(object):
    minor: tuple  # (major, minor)
    released: datetime.date
    end_of_life: datetime.date


RELEASES = (
    Release((1, 34), datetime.date(2025, 8, 27), datetime.date(2026, 10, 27)),
    Release((1, 35), datetime.date(2025, 12, 17), datetime.date(2027, 2, 28)),
    Release((1, 36), datetime.date(2026, 4, 22), datetime.date(2027, 6, 28)),
    Release((1, 37), datetime.date(2026, 8, 26), datetime.date(2027, 10, 28)),
)
# Those maintained upstream when the table was checked.
SUPPORTED_MINORS = tuple(release.minor for release in RELEASES
                         if release.end_of_life > CHECKED)
EOL_PASSED, EOL_SOON, UNKNOWN = ('kubernetes-end-of-life',
                                 'kubernetes-end-of-life-soon',
                                 'kubernetes-release-unknown')
_MINOR = re.compile(r'(\d+)\.(\d+)\.')


def shown(minor):
    return '%d.%d' % minor


def lifecycle_warning(package_version, today):
    """(code, message) when the Kubernetes ``package_version``
    ('1.36.4-1.1') is of a minor past its end of life on ``today`` (a
    date), within WARNING_DAYS of it, or not in RELEASES; else None."""
    match = _MINOR.match(package_version or '')
    if not match:
        return None
    minor = (int(match[1]), int(match[2]))
    known = {release.minor: release for release in RELEASES}
    release = known.get(minor)
    if release is None and minor < RELEASES[0].minor:
        return (EOL_PASSED, 'installs Kubernetes %s, older than every minor '
                'in the driver\'s release table (the oldest, %s, reached its '
                'end of life on %s): upgrade one minor at a time to a '
                'supported one' % (shown(minor), shown(RELEASES[0].minor),
                                   RELEASES[0].end_of_life))
    if release is None:
        return (UNKNOWN, 'installs Kubernetes %s, which is not in the '
                'driver\'s release table (checked %s; supported: %s)' % (
                    shown(minor), CHECKED,
                    ', '.join(shown(m) for m in SUPPORTED_MINORS)))
    left = (release.end_of_life - today).days
    if left < 0:
        return (EOL_PASSED, 'installs Kubernetes %s, past its end of life '
                '(%s): it gets no security fixes; build the package with '
                'a maintained minor' % (shown(minor), release.end_of_life))
    if left <= WARNING_DAYS:
        return (EOL_SOON, 'installs Kubernetes %s, which reaches its end of '
                'life on %s (in %d days): plan the upgrade to the next minor'
                % (shown(minor), release.end_of_life, left))
    return None


def script_warning(path, today=None):
    """lifecycle_warning of the K8S_PACKAGE_VERSION of the install script
    at ``path`` (None when it names none) on ``today`` (default: the
    day it runs)."""
    with open(path, 'rb') as stream:
        version = upgrade_plan.script_package_version(stream.read())
    return lifecycle_warning(version, today or datetime.date.today()) \
        if version else None
