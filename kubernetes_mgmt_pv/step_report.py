"""What each idempotent step did, Ansible style: changed, unchanged, or
failed (naming the step and the host)."""

import contextlib
import dataclasses
import threading

from oslo_log import log as logging

from kubernetes_mgmt_pv import exceptions
from kubernetes_mgmt_pv import redaction

LOG = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class StepOutcome(object):
    host: str
    step: str
    changed: bool
    detail: str = ''

    def __str__(self):
        text = '%s: %s %s' % (self.host, self.step,
                              'changed' if self.changed else 'unchanged')
        return text + (' (%s)' % self.detail if self.detail else '')


class Report(object):
    """What a hook did, step by step; safe to fill from several threads."""

    def __init__(self):
        self._lock = threading.Lock()
        self.outcomes = []

    def record(self, host, step, changed, detail=''):
        # Each field may quote a VM's text (a device name in a step, a
        # file in a detail): a log handler must be able to write it (no
        # undecodable byte), and it must not fake a line.
        outcome = StepOutcome(redaction.one_line(host),
                              redaction.one_line(step), bool(changed),
                              redaction.one_line(detail))
        with self._lock:
            self.outcomes.append(outcome)
        LOG.info('%s', outcome)
        return outcome

    def summary(self):
        changed = sum(outcome.changed for outcome in self.outcomes)
        return '%d step(s) changed, %d unchanged' % (
            changed, len(self.outcomes) - changed)


@contextlib.contextmanager
def step(host, name):
    """Turn any failure inside into ``StepError(name, host, error)``.

    A failure already named by an inner step keeps that, more precise,
    name.
    """
    try:
        yield
    except exceptions.StepError:
        raise
    except Exception as error:
        raise exceptions.StepError(name, host, error) from error
