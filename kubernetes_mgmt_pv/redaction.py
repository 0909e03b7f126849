"""Secrets kept out of every message and log line the driver produces.

Errors of the driver end up in Tacker's database and API (the LCM
operation error) and in tacker-conductor's log, tracebacks included, so a
password, token or the user info of a URL (``scheme://user:pass@host``)
must be gone before an error is raised or a line logged.
"""

import functools
import re
import traceback
import urllib.parse

# The user info of a URL: everything between "scheme://" and the last "@"
# before the path, query, fragment or the end of the word. Greedy, so a
# password with a raw "@" (``http://admin:p@ss@host``) is hidden whole.
_URL_CREDENTIALS = re.compile(
    r'(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*://)[^/?#\s]*@')


def redact(text, secrets=()):
    """Hide secrets and URL credentials (``scheme://user:pass@``) in text.

    A secret is hidden where it stands as a whole value, not inside a
    longer word: a password "nfs" must not turn "nfs-common" into
    "***-common" (see ``_whole``).
    """
    for secret in secrets:
        if secret:
            text = _whole(secret).sub('***', text)
    return _URL_CREDENTIALS.sub(r'\g<scheme>***@', text)


@functools.lru_cache(maxsize=256)
def _whole(secret):
    """A pattern finding ``secret`` where no word continues it: an edge of
    the secret that is a word character must not touch another word
    character, nor a "-" or "." joining one ("nfs-common", "nfs.service");
    a "." or "-" ending a sentence or a value still delimits it."""
    pattern = re.escape(secret)
    if re.match(r'\w', secret):
        pattern = r'(?<!\w)(?<!\w[-.])' + pattern
    if re.search(r'\w\Z', secret):
        pattern += r'(?!\w)(?![-.]\w)'
    return re.compile(pattern)


def url_secrets(url):
    """The password in a URL's user info, as written and decoded: a
    message may show the URL's parts rather than the URL."""
    try:
        password = urllib.parse.urlsplit(url or '').password
    except ValueError:  # e.g. an invalid port: the regex still applies
        return ()
    if not password:
        return ()
    return tuple(dict.fromkeys((password, urllib.parse.unquote(password))))


def safe_cause(error, secrets=()):
    """``error`` to chain to a driver error, or None when its traceback
    (which Tacker logs with the driver's error) would show a secret."""
    text = _traceback(error)
    return error if redact(text, secrets) == text else None


def redacted_traceback(error, secrets=()):
    """The traceback of ``error``, its chain included, with secrets
    hidden: for the log, instead of ``LOG.exception``."""
    return redact(_traceback(error), secrets)


def _traceback(error):
    return ''.join(traceback.format_exception(type(error), error,
                                              error.__traceback__))
