"""The model behind the fake OpenStack: Heat's stacks and resources as
the fake serves them and the Heat engine builds them, the request log and
injected failures, and Heat's way of printing times."""

import dataclasses
import datetime
import re
import uuid


def now():
    return datetime.datetime.now(datetime.timezone.utc)


def iso(moment):
    return moment.strftime('%Y-%m-%dT%H:%M:%S.%fZ')


def heat_time(moment=None):
    """A time as Heat prints it: whole seconds, no zone."""
    return (moment or now()).strftime('%Y-%m-%dT%H:%M:%S')


@dataclasses.dataclass
class FakeResource:
    name: str
    resource_type: str
    physical_resource_id: str
    attributes: dict
    nested_stack_id: str = None
    status: str = 'CREATE_COMPLETE'
    status_reason: str = 'state changed'
    creation_time: str = dataclasses.field(default_factory=heat_time)
    updated_time: str = None
    # Heat's view, for the engine: resolved properties, metadata, events
    # (dicts, oldest first) and the mark_unhealthy flag.
    properties: dict = dataclasses.field(default_factory=dict)
    metadata: dict = dataclasses.field(default_factory=dict)
    events: list = dataclasses.field(default_factory=list)
    unhealthy: bool = False
    # Names of the resources of its template that refer to it (Heat's
    # required_by: Tacker finds a server's ports by it).
    required_by: list = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class FakeStack:
    id: str
    name: str
    parent_id: str = None
    resources: dict = dataclasses.field(default_factory=dict)
    status: str = 'CREATE_COMPLETE'
    status_reason: str = 'Stack CREATE completed successfully'
    creation_time: str = dataclasses.field(default_factory=heat_time)
    updated_time: str = None
    deleted: bool = False
    template: dict = None
    files: dict = dataclasses.field(default_factory=dict)
    parameters: dict = dataclasses.field(default_factory=dict)
    parent_resource: str = None


@dataclasses.dataclass
class InjectedFailure:
    """Requests FakeOpenStack.fail_requests() answers with an error."""
    method: str
    path: re.Pattern
    remaining: int  # None: unlimited
    status: int
    message: str
    hits: list = dataclasses.field(default_factory=list)


@dataclasses.dataclass(frozen=True)
class RequestRecord:
    method: str
    path: str
    had_token: bool
    status: int


def short_id():
    """A short random id, as Heat names group members and nested stacks."""
    return uuid.uuid4().hex[:12]
