"""The testbed's one way to wait for a condition it cannot be told about.

Test hosts come up in milliseconds and services in seconds, so a fixed
sleep would either waste time or be flaky: ``wait_until`` re-checks with a
growing back-off, and its timeout only bounds a broken set-up.
"""

import time


class WaitTimeout(TimeoutError):
    """A condition did not hold in time (the message names it)."""


def wait_until(predicate, what, timeout=10.0, first_delay=0.002,
               max_delay=0.1, log=None):
    """Call ``predicate`` until it returns something truthy and return
    that, sleeping ``first_delay`` s at first, twice as long each time up
    to ``max_delay`` s; ``WaitTimeout`` naming ``what`` (and the ``log``
    to read) after ``timeout`` s. Exceptions of ``predicate`` propagate."""
    delay = first_delay
    deadline = time.monotonic() + timeout
    while True:
        result = predicate()
        if result:
            return result
        if time.monotonic() > deadline:
            hint = ' (see %s)' % log if log else ''
            raise WaitTimeout('timed out after %ss waiting for %s%s'
                              % (timeout, what, hint))
        time.sleep(delay)
        delay = min(delay * 2, max_delay)
