"""Changed/unchanged reporting of idempotent steps, Ansible style."""

import dataclasses
import threading

from oslo_log import log as logging

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
        outcome = StepOutcome(host, step, bool(changed), detail)
        with self._lock:
            self.outcomes.append(outcome)
        LOG.info('%s', outcome)
        return outcome

    def summary(self):
        changed = sum(outcome.changed for outcome in self.outcomes)
        return '%d step(s) changed, %d unchanged' % (
            changed, len(self.outcomes) - changed)
