"""YAML and JSON files of VNF packages and requests, loaded with limits.

A VNF package and a request come from someone else. Loaded naively, a
FIFO blocks forever, a 20 000-deep list overflows the Python stack, and a
few hundred bytes of aliases ("billion laughs") expand to more nodes than
memory holds while ``validate`` and the hooks walk them. Every YAML or JSON
file the driver or ``validate`` reads goes through this module, so both
accept exactly the same files and fail with one error type, ``LoadError``,
whose message says what is wrong (the caller adds which file).

YAML is checked in three steps, none of them recursive in Python: the
event stream (an iterative parser) for nesting depth, alias count and
size; the composed node graph for recursive aliases and for its size with
every alias expanded; only then are Python objects constructed.
"""

import dataclasses
import json
import os
import re
import stat

import yaml

MiB = 1 << 20


@dataclasses.dataclass(frozen=True)
class Limits(object):
    """What a YAML file may hold; nodes count every alias expanded."""
    max_bytes: int
    max_depth: int
    max_aliases: int
    max_events: int
    max_nodes: int


# A PersistentVolume manifest is about 300 bytes and 40 events; these
# leave room for long annotations while keeping a hostile one cheap.
MANIFEST_LIMITS = Limits(max_bytes=1 * MiB, max_depth=100, max_aliases=100,
                         max_events=100_000, max_nodes=100_000)
# VNFD files, BaseHOT templates and TOSCA.meta: the ETSI SOL001 type
# definitions, the largest file of a usual package, are 70 KB and 3 400
# events; 500 000 events load in about two seconds.
DEFINITION_LIMITS = Limits(max_bytes=4 * MiB, max_depth=100, max_aliases=100,
                           max_events=500_000, max_nodes=500_000)
# Request bodies: Tacker itself refuses bodies over 112 KiB
# (oslo.middleware max_request_body_size); json would overflow the Python
# stack at about 1 000 levels.
REQUEST_MAX_BYTES = 1 * MiB
REQUEST_MAX_DEPTH = 100

# libyaml is much faster on large files and rejects lone-surrogate escapes
# itself; the pure-Python loader is the fallback when it is not built in.
_Loader = getattr(yaml, 'CSafeLoader', yaml.SafeLoader)
_SURROGATE = re.compile(r'[\ud800-\udfff]')
_JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_NOT_BRACKET = re.compile(r'[^\[\]{}]+')
_OPENING = {yaml.SequenceStartEvent, yaml.MappingStartEvent}
_CLOSING = {yaml.SequenceEndEvent, yaml.MappingEndEvent}


class LoadError(ValueError):
    """The file cannot be loaded safely; the message says why."""


def read_text(path, max_bytes, follow_symlinks=True):
    """The UTF-8 text of the regular file at path, at most max_bytes long.

    FIFOs, devices and directories are refused without blocking on them;
    with follow_symlinks=False so is a symbolic link (for callers that
    resolved the path themselves).
    """
    _require_regular(_reading(os.stat, path, follow_symlinks=follow_symlinks))
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC
    if not follow_symlinks:
        flags |= os.O_NOFOLLOW
    descriptor = _reading(os.open, path, flags)
    with os.fdopen(descriptor, 'rb') as stream:
        # Checked again on the open file: the path may have been replaced.
        status = os.fstat(stream.fileno())
        _require_regular(status)
        if status.st_size > max_bytes:
            raise _too_large(max_bytes)
        data = _reading(stream.read, max_bytes + 1)
    if len(data) > max_bytes:
        raise _too_large(max_bytes)
    try:
        return data.decode('utf-8')
    except UnicodeDecodeError as error:
        raise LoadError('is not valid UTF-8 (byte 0x%02x at offset %d)'
                        % (data[error.start], error.start))


def _reading(call, *args, **kwargs):
    """call(*args, **kwargs) with its OSError turned into a LoadError."""
    try:
        return call(*args, **kwargs)
    except FileNotFoundError:
        raise LoadError('does not exist')
    except OSError as error:
        raise LoadError('cannot be read: %s' % (error.strerror or error))
    except ValueError as error:  # NUL or an unencodable character in path
        raise LoadError('cannot be read: %s' % error)


def _require_regular(status):
    if stat.S_ISREG(status.st_mode):
        return
    kinds = ((stat.S_ISDIR, 'a directory'), (stat.S_ISFIFO, 'a FIFO'),
             (stat.S_ISLNK, 'a symbolic link'), (stat.S_ISSOCK, 'a socket'),
             (stat.S_ISCHR, 'a device'), (stat.S_ISBLK, 'a device'))
    kind = next((name for test, name in kinds if test(status.st_mode)),
                'a special file')
    raise LoadError('is not a regular file but %s' % kind)


def _too_large(max_bytes):
    return LoadError('is larger than the limit of %s' % _size(max_bytes))


def _size(count):
    if count % MiB == 0:
        return '%d MiB' % (count // MiB)
    return '%d bytes' % count


def load(path, limits, follow_symlinks=True):
    """The single YAML document of the file at path (None if empty)."""
    return loads(read_text(path, limits.max_bytes, follow_symlinks), limits)


def load_all(path, limits, follow_symlinks=True):
    """Every YAML document of the file at path, as a list."""
    return loads_all(read_text(path, limits.max_bytes, follow_symlinks),
                     limits)


def loads(text, limits):
    """The single YAML document of text (None if it has none)."""
    documents = loads_all(text, limits)
    if len(documents) > 1:
        raise LoadError('holds %d YAML documents where one is expected'
                        % len(documents))
    return documents[0] if documents else None


def loads_all(text, limits):
    """Every YAML document of text, each checked against limits."""
    if len(text) > limits.max_bytes:
        raise _too_large(limits.max_bytes)
    try:
        _check_events(text, limits)
        loader = _Loader(text)
        try:
            documents = []
            while loader.check_node():
                node = loader.get_node()
                _check_expansion(node, limits)
                documents.append(loader.construct_document(node))
            return documents
        finally:
            loader.dispose()
    except LoadError:
        raise
    except yaml.MarkedYAMLError as error:
        raise LoadError('is not valid YAML: %s' % _marked(error))
    except yaml.YAMLError as error:
        raise LoadError('is not valid YAML: %s' % ' '.join(str(error).split()))
    except (ValueError, TypeError, OverflowError) as error:
        # A scalar the safe constructor cannot convert, such as an integer
        # of 5 000 digits or a timestamp with month 13.
        raise LoadError('has a value that cannot be loaded: %s' % error)


def _marked(error):
    problem = error.problem or error.context or 'syntax error'
    mark = error.problem_mark or error.context_mark
    if mark is None:
        return problem
    return '%s (line %d, column %d)' % (problem, mark.line + 1,
                                        mark.column + 1)


def _check_events(text, limits):
    """Walk the event stream, which needs no recursion, and stop at the
    first limit crossed: nothing has been built yet."""
    depth = aliases = 0
    for count, event in enumerate(yaml.parse(text, Loader=_Loader), 1):
        kind = type(event)
        if count > limits.max_events:
            raise LoadError('has more than %d YAML events (nodes and '
                            'collection ends)' % limits.max_events)
        if kind in _OPENING:
            depth += 1
            if depth > limits.max_depth:
                raise LoadError('nests deeper than %d levels (line %d)' % (
                    limits.max_depth, event.start_mark.line + 1))
        elif kind in _CLOSING:
            depth -= 1
        elif kind is yaml.AliasEvent:
            aliases += 1
            if aliases > limits.max_aliases:
                raise LoadError('has more than %d aliases (line %d)' % (
                    limits.max_aliases, event.start_mark.line + 1))
        elif kind is yaml.ScalarEvent and _SURROGATE.search(event.value):
            raise LoadError('has an invalid Unicode character escape, a '
                            'lone surrogate (line %d)'
                            % (event.start_mark.line + 1))


def _children(node):
    if isinstance(node, yaml.SequenceNode):
        return node.value
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return []


def _check_expansion(root, limits):
    """Refuse a node graph that contains itself through an alias, or that
    has more than limits.max_nodes nodes once every alias is expanded.

    Depth-first without recursion; each node's expanded size is computed
    once, so an alias bomb costs as many steps as it has distinct nodes.
    """
    sizes = {}
    on_path = set()
    stack = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        key = id(node)
        if children_done:
            on_path.discard(key)
            size = 1 + sum(sizes[id(child)] for child in _children(node))
            if size > limits.max_nodes:
                raise LoadError(
                    'expands to more than %d nodes through its aliases '
                    '(line %d)' % (limits.max_nodes,
                                   node.start_mark.line + 1))
            sizes[key] = size
        elif key in on_path:
            raise LoadError('has a recursive alias: a node that contains '
                            'itself (line %d)' % (node.start_mark.line + 1))
        elif key not in sizes:
            on_path.add(key)
            stack.append((node, True))
            stack.extend((child, False) for child in _children(node))


def load_json(path, max_bytes=REQUEST_MAX_BYTES, max_depth=REQUEST_MAX_DEPTH):
    """The JSON value of the file at path, refusing what json would choke
    on: the nesting depth is measured before parsing."""
    return loads_json(read_text(path, max_bytes), max_depth)


def loads_json(text, max_depth=REQUEST_MAX_DEPTH):
    """The JSON value of text (a file's or a command's output), with the
    nesting depth measured before parsing."""
    if _json_too_deep(text, max_depth):
        raise LoadError('nests deeper than %d levels' % max_depth)
    try:
        return json.loads(text)
    except ValueError as error:
        raise LoadError('is not JSON: %s' % error)


def _json_too_deep(text, max_depth):
    """Whether brackets outside of strings nest deeper than max_depth."""
    depth = 0
    for bracket in _NOT_BRACKET.sub('', _JSON_STRING.sub('', text)):
        depth += 1 if bracket in '[{' else -1
        if depth > max_depth:
            return True
    return False
