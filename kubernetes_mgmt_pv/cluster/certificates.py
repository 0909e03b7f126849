"""kubeadm's certificates on the Masters: reading ``kubeadm certs
check-expiration`` and deciding which Masters renew them.

kubeadm signs its leaf certificates (API server, etcd, the kubeconfig
files' client certificates) for one year; a cluster that passes that date
stops serving its API. The output read here is a VM's: it is capped,
every row is validated, and anything else is ignored rather than trusted.
"""

import dataclasses
import datetime
import re

CHECK_ARGV = ['kubeadm', 'certs', 'check-expiration']
RENEW_ARGV = ['kubeadm', 'certs', 'renew', 'all']
# What is read of the output, and of its rows: kubeadm prints about 15.
MAX_OUTPUT_CHARS = 64 * 1024
MAX_ROWS = 64
# A row of either table: NAME  EXPIRES  RESIDUAL [CA]  yes|no, where
# EXPIRES is Go's "Jan 02, 2006 15:04 MST" in UTC.
_ROW = re.compile(
    r'(?P<name>[a-z0-9][a-z0-9.-]{0,62}) +'
    r'(?P<expires>[A-Z][a-z]{2} \d{2}, \d{4} \d{2}:\d{2}) UTC +'
    r'\S+ +(?:(?P<ca>[a-z0-9][a-z0-9-]{0,62}) +)?(?:yes|no)')
_DATE_FORMAT = '%b %d, %Y %H:%M'
_AUTHORITIES_HEADER = re.compile(r'CERTIFICATE AUTHORITY +EXPIRES')


@dataclasses.dataclass(frozen=True)
class Expiry(object):
    """The notAfter (aware, UTC) of each certificate a Master listed:
    ``leaves`` (renewed by ``kubeadm certs renew all``) and
    ``authorities`` (the CAs, which it does not renew)."""
    leaves: dict
    authorities: dict

    def earliest(self):
        """(name, notAfter) of the leaf that expires first, or None."""
        if not self.leaves:
            return None
        return min(self.leaves.items(), key=lambda item: (item[1], item[0]))


def parse_expiration(text):
    """The ``Expiry`` in ``kubeadm certs check-expiration``'s output, or
    None when it lists no certificate (a node that is no Master, or
    output that is not kubeadm's). Only the first MAX_OUTPUT_CHARS and
    MAX_ROWS rows are read; a row that does not match, or names a date
    that does not exist, is skipped."""
    leaves, authorities = {}, {}
    table = leaves
    rows = 0
    for line in text[:MAX_OUTPUT_CHARS].splitlines():
        line = line.strip()
        if _AUTHORITIES_HEADER.match(line):
            table = authorities
            continue
        match = _ROW.fullmatch(line)
        if not match:
            continue
        try:
            expires = datetime.datetime.strptime(
                match['expires'], _DATE_FORMAT).replace(
                    tzinfo=datetime.timezone.utc)
        except ValueError:
            continue
        table[match['name']] = expires
        rows += 1
        if rows >= MAX_ROWS:
            break
    if not leaves and not authorities:
        return None
    return Expiry(leaves=leaves, authorities=authorities)


@dataclasses.dataclass(frozen=True)
class RenewalPlan(object):
    """``renew``: the Masters' addresses to renew, in the order given;
    ``reasons``: {address: (certificate, notAfter)} of each; ``unknown``:
    Masters whose certificates could not be read (left alone, warned
    about); ``restart``: Masters whose earlier renewal did not finish
    restarting their control plane, and that are not renewed again."""
    renew: tuple
    reasons: dict
    unknown: tuple
    restart: tuple = ()


def renewal_plan(expiries, now, renewal_days, unfinished=()):
    """Which Masters renew: those with a leaf certificate expiring within
    ``renewal_days`` of ``now`` (expired ones too). ``expiries``:
    {Master address: Expiry or None}, in the order the Masters are
    renewed (one at a time). 0 days turns renewal off. ``unfinished``:
    the Masters whose last renewal did not finish (its marker is still
    there): their control plane runs on the old certificates, so each
    that is not renewed now restarts, whatever the dates say."""
    limit = now + datetime.timedelta(days=renewal_days)
    renew, reasons, unknown, restart = [], {}, [], []
    for address, expiry in expiries.items():
        earliest = expiry.earliest() if expiry else None
        if earliest is None:
            unknown.append(address)
        elif renewal_days > 0 and earliest[1] <= limit:
            renew.append(address)
            reasons[address] = earliest
        if address in unfinished and address not in reasons:
            restart.append(address)
    return RenewalPlan(renew=tuple(renew), reasons=reasons,
                       unknown=tuple(unknown), restart=tuple(restart))


def describe(expiry):
    """'name notAfter, ...' of the leaves, for the log."""
    return ', '.join('%s %s' % (name, date.strftime('%Y-%m-%d %H:%M UTC'))
                     for name, date in sorted(expiry.leaves.items()))
