"""Secrets kept out of every message and log line the driver produces.

Errors of the driver end up in Tacker's database and API (the LCM
operation error) and in tacker-conductor's log, tracebacks included, so a
password, token or the user info of a URL (``scheme://user:pass@host``)
must be gone before an error is raised or a line logged. Text from a VM
is made printable on the way: no terminal escape, no undecodable byte.
"""

import base64
import functools
import re
import shlex
import traceback
import urllib.parse

# Shorter values are not hidden: a password "1" would turn every "exit 1"
# of a message into "exit ***", and hides nothing a guess would not find.
MIN_SECRET_LENGTH = 4
# Longer values are no secret of the driver's (a password is at most 4096
# characters, a token a few thousand) but what a hostile VM passed off as
# one (a join value it printed): looking for them would cost the time
# and memory the VM chose.
MAX_SECRET_LENGTH = 16 * 1024
# What an error shows of a command's output: its first and last
# characters (the first error and the last), and that more was left out.
OUTPUT_HEAD = 500
OUTPUT_TAIL = 1500
_LEFT_OUT = '\n[... left out ...]\n'
# How far past a cut an excerpt looks for a secret the cut splits: more
# than a kubeconfig's token or a URL with its user info.
_MARGIN = 4096

# Every pattern run over a VM's text is linear in its length: no two
# quantifiers compete for the same characters, and no scan restarts at
# every word (VM text reaches 16 MiB; a quadratic scan of it holds the
# GIL for days).
#
# The user info of a URL: everything between "://" and the last "@"
# before the path, query, fragment or the end of the word. Greedy, so a
# password with a raw "@" (``http://admin:p@ss@host``) is hidden whole.
# Found from its "://", not from a scheme's first letter: a scheme
# pattern restarts at every word of "a-a-a-...". The user info spans of
# two "://" never overlap (each ends before a "/").
_URL_CREDENTIALS = re.compile(r'://[^/?#\s]*@')
# The name of a proxy setting whose value has no scheme
# (HTTP_PROXY=u:pw@host, which curl and apt accept); its user info runs
# to the last "@" of the value (``_hide_proxy_credentials``).
_PROXY_NAME = re.compile(r'\b[A-Za-z_]*proxy["\']?\s*[=:]\s*["\']?'
                         r'(?![A-Za-z][A-Za-z0-9+.-]*://)', re.IGNORECASE)
_PROXY_VALUE_END = re.compile(r'[/?#\s"\']')
# A bearer token or a kubeconfig's token wherever a tool shows one
# (kubectl -v shows "Authorization: Bearer ..."): the admin kubeconfig's
# credentials are the hook's secrets though the driver never reads them.
# (At least 8 characters: "bearer token changed" is no token.)
_TOKEN = re.compile(r'(?P<key>\bbearer\s+|\b[A-Za-z_]*token["\']?\s*[:=]\s*'
                    r'["\']?)[A-Za-z0-9._~+/-]{8,}=*', re.IGNORECASE)
# Terminal escape sequences and control characters but tab and newline:
# a VM's output must not rewrite the operator's terminal or fake a line
# of a log.
_CONTROL = re.compile(r'\x1b\[[0-?]*[ -/]*[@-~]|\x1b[@-_]?|'
                      r'[\x00-\x08\x0b-\x1f\x7f-\x9f]')
_SPACE = re.compile(r'\s')
# The line breaks that ``printable`` keeps, and how a field of one line
# shows them: a VM's text must not start a line of a log or report of
# its own ("2026-11-28 ... INFO ... all fine").
_LINE_BREAKS = str.maketrans({'\n': '\\n', '\u2028': '\\u2028',
                              '\u2029': '\\u2029'})
# Lone surrogates: bytes of a VM that were no UTF-8 (decoded with
# surrogateescape); a log handler cannot encode them.
_SURROGATE = re.compile('[\ud800-\udfff]')


def redact(text, secrets=()):
    """Hide secrets and URL credentials (``scheme://user:pass@``) in text,
    made printable.

    A secret is hidden where it stands as a whole value, not inside a
    longer word: a password "nfsd" must not turn "nfsd-common" into
    "***-common" (see ``_whole``); so are its percent-encoded, base64 and
    shell-quoted forms.
    """
    text = printable(text)
    for form in sorted(_all_forms(secrets), key=len, reverse=True):
        if form in text:  # a plain search first: most forms are absent
            text = _whole(form).sub('***', text)
    text = _TOKEN.sub(r'\g<key>***', text)
    text = _hide_proxy_credentials(text)
    return _URL_CREDENTIALS.sub('://***@', text)


def _hide_proxy_credentials(text):
    """``text`` with the user info of each proxy setting hidden.

    Many names may share one value ("proxy=proxy=...@"): the value's end
    and its last "@" are looked up once per value, not once per name,
    which a single pattern would do (quadratic).
    """
    parts, shown_from = [], 0
    value_end = last_at = -1
    for name in _PROXY_NAME.finditer(text):
        start = name.end()
        if name.start() < shown_from:
            continue  # inside user info already hidden
        if start > value_end:  # a new value: no delimiter since the last
            found = _PROXY_VALUE_END.search(text, start)
            value_end = found.start() if found else len(text)
            last_at = text.rfind('@', start, value_end)
        if last_at >= start:
            parts += [text[shown_from:start], '***']
            shown_from = last_at
    parts.append(text[shown_from:])
    return ''.join(parts)


def excerpt(text, secrets=()):
    """What an error shows of a command's output: ``text`` redacted, its
    middle left out when it is longer than OUTPUT_HEAD + OUTPUT_TAIL.

    Only the shown parts are redacted: a failed command's output reaches
    16 MiB. A secret that a cut splits must not show in part, so each part
    is redacted once more with a margin of text beyond its cut, and is left
    out too when the two disagree; a word longer than the margin (URL user
    info without its "@") is never cut, but left out whole.
    """
    if len(text) <= OUTPUT_HEAD + OUTPUT_TAIL:
        return redact(text, secrets)
    margin = max([_MARGIN] + [len(form) + 2 for form in _all_forms(secrets)])
    return (_safe_head(text, margin, secrets) + _LEFT_OUT +
            _safe_tail(text, margin, secrets))


def _safe_head(text, margin, secrets):
    """The head of an excerpt: cut at OUTPUT_HEAD, else before the word
    the cut splits, whichever shows no secret in part; else nothing."""
    split_word = len(_SPACE.split(text[:OUTPUT_HEAD])[-1])
    cuts = [OUTPUT_HEAD - split_word]
    if _SPACE.search(text, OUTPUT_HEAD, OUTPUT_HEAD + margin):
        cuts.insert(0, OUTPUT_HEAD)  # the word ends within the margin
    for cut in dict.fromkeys(cuts):
        shown = redact(text[:cut], secrets)
        if redact(text[:cut + margin], secrets).startswith(shown):
            return shown
    return ''


def _safe_tail(text, margin, secrets):
    """The tail of an excerpt, chosen like its head."""
    start = len(text) - OUTPUT_TAIL
    split_word = len(_SPACE.split(text[start:])[0])
    cuts = [start + split_word]
    if _SPACE.search(text, max(0, start - margin), start):
        cuts.insert(0, start)
    for cut in dict.fromkeys(cuts):
        shown = redact(text[cut:], secrets)
        if redact(text[max(0, cut - margin):], secrets).endswith(shown):
            return shown
    return ''


def shortened(text):
    """``text`` (redacted already) cut like ``excerpt``."""
    if len(text) <= OUTPUT_HEAD + OUTPUT_TAIL + len(_LEFT_OUT):
        return text
    return text[:OUTPUT_HEAD] + _LEFT_OUT + text[-OUTPUT_TAIL:]


def printable(text):
    """``text`` without control characters (tab and newline kept) and
    with a replacement character for each byte that was no UTF-8."""
    return _SURROGATE.sub('\ufffd', _CONTROL.sub('', text))


def one_line(text):
    """``text`` made printable, for a field meant to be one line (a step,
    a host, a step's detail): its line breaks shown as ``\\n``. Not
    text (no host: None): unchanged, as an error being raised must not
    fail."""
    if not isinstance(text, str):
        return text
    return printable(text).translate(_LINE_BREAKS)


def _all_forms(secrets):
    return {form for secret in secrets
            if secret and MIN_SECRET_LENGTH <= len(secret) <= MAX_SECRET_LENGTH
            for form in _forms(secret)}


@functools.lru_cache(maxsize=256)
def _forms(secret):
    """``secret`` as written and as URLs, HTTP headers and shells show
    it."""
    raw = secret.encode('utf-8', 'surrogatepass')
    encoded = base64.b64encode(raw).decode('ascii')
    return (secret, urllib.parse.quote(secret, safe=''),
            urllib.parse.quote(secret), urllib.parse.quote_plus(secret),
            shlex.quote(secret), encoded, encoded.rstrip('='))


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


def redacted_error(error, secrets=()):
    """``error`` again, of its own class, with its message and the text of
    its attributes hidden, and no chain: what a hook lets out when the
    error shows a secret. Its class, step and host stay readable for the
    door that reports it."""
    clean = type(error).__new__(type(error))
    Exception.__init__(clean, redact(str(error), secrets))
    for name, value in vars(error).items():
        setattr(clean, name, _redacted_value(value, secrets))
    return clean


def _redacted_value(value, secrets):
    if isinstance(value, str):
        return redact(value, secrets)
    if isinstance(value, BaseException):
        return redacted_error(value, secrets)
    if isinstance(value, dict):
        return {key: _redacted_value(item, secrets)
                for key, item in value.items()}
    if type(value) in (list, tuple):
        return type(value)(_redacted_value(item, secrets) for item in value)
    return value


def redacted_traceback(error, secrets=()):
    """The traceback of ``error``, its chain included, with secrets
    hidden: for the log, instead of ``LOG.exception``."""
    return redact(_traceback(error), secrets)


def _traceback(error):
    return ''.join(traceback.format_exception(type(error), error,
                                              error.__traceback__))
