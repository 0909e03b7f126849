"""The Kubernetes release table and the end-of-life warning `validate`
gives for the version a package's install script installs."""

import datetime
import re

import pytest

from kubernetes_mgmt_pv.vnf_package import csar
from kubernetes_mgmt_pv.vnf_package import k8s_releases as releases

D = datetime.date
SCRIPT = 'Scripts/install_k8s_cluster.sh'
# The 1.34 row's end of life passed before the table was checked.
PAST = releases.RELEASES[0]


@pytest.mark.parametrize('version, today, code', [
    # 1.36 ends on 2027-06-28: 90 days before is 2027-03-30.
    ('1.36.4-1.1', D(2026, 11, 28), None),
    ('1.36.4-1.1', D(2027, 3, 29), None),
    ('1.36.4-1.1', D(2027, 3, 30), releases.EOL_SOON),
    ('1.36.4-1.1', D(2027, 6, 28), releases.EOL_SOON),  # its last day
    ('1.36.4-1.1', D(2027, 6, 29), releases.EOL_PASSED),
    ('1.35.9-1.1', D(2026, 11, 29), None),  # 91 days left
    ('1.35.9-1.1', D(2026, 11, 30), releases.EOL_SOON),
    ('1.34.8-1.1', D(2026, 10, 28), releases.EOL_PASSED),
    ('1.37.1-1.1', D(2027, 7, 30), releases.EOL_SOON),
    ('1.30.0-1.1', D(2024, 1, 1), releases.EOL_PASSED),  # before the table
    ('1.38.0-1.1', D(2027, 1, 1), releases.UNKNOWN),
    ('2.0.0-1.1', D(2027, 1, 1), releases.UNKNOWN),
    ('not-a-version', D(2027, 1, 1), None),
    (None, D(2027, 1, 1), None),
])
def test_the_warning_of_a_version_on_a_day(version, today, code):
    warning = releases.lifecycle_warning(version, today)
    assert (warning[0] if warning else None) == code


@pytest.mark.parametrize('today, words', [
    (D(2027, 4, 1), ['1.36', '2027-06-28', 'in 88 days']),
    (D(2027, 7, 1), ['1.36', '2027-06-28', 'past its end of life']),
])
def test_the_message_names_the_minor_and_its_end_of_life(today, words):
    _, message = releases.lifecycle_warning('1.36.4-1.1', today)
    for word in words:
        assert word in message


def test_the_supported_minors_are_those_maintained_when_checked():
    minors = [release.minor for release in releases.RELEASES]
    assert minors == sorted(minors)
    for release in releases.RELEASES:
        assert release.released < release.end_of_life
    assert releases.SUPPORTED_MINORS == ((1, 35), (1, 36), (1, 37))
    assert csar.SUPPORTED_MINORS == releases.SUPPORTED_MINORS
    assert PAST.end_of_life < releases.CHECKED


def test_validate_warns_of_a_script_past_its_end_of_life(package, validate,
                                                         body):
    """The sample's script edited to the 1.34 row's minor, past its end of
    life on any day since the table was checked."""
    script = package / SCRIPT
    old = '%d.%d.8-1.1' % PAST.minor
    text, count = re.subn(r"(?m)^readonly K8S_PACKAGE_VERSION='[^']*'$",
                          "readonly K8S_PACKAGE_VERSION='%s'" % old,
                          script.read_text())
    assert count == 1
    script.write_text(text)
    code, findings = validate.rebuilt(package, body)
    assert (releases.EOL_PASSED, SCRIPT) in findings
    assert code == 0  # a warning, not an error
    assert str(PAST.end_of_life) in ' '.join(
        f['message'] for f in validate.findings)
