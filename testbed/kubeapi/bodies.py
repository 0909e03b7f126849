"""Request bodies: JSON, or Kubernetes' protobuf encoding.

kubectl's typed clients ("kubectl create namespace|secret|pdb|...", and
the DeleteOptions of "kubectl drain --disable-eviction"; kubectl 1.32 was
seen to send its Evictions as JSON) send application/vnd.kubernetes.protobuf:
b"k8s\0" and a runtime.Unknown whose raw field is the object's message.
Responses are JSON, which the clients accept too. A schema maps field
numbers (from the API's generated.proto files) to a JSON name and a type:
"string", "bytes", "bool", "int", "intstr" (an IntOrString), a nested
schema, ("repeated", type) or ("map", value type). Fields not in a schema
(such as the server-set timestamps and status) are ignored.
"""

import base64
import json
from typing import Iterator

from testbed.kubeapi import model


def decode_body(body: bytes, content_type: str = 'application/json'):
    """A request body as JSON data, from JSON or from Kubernetes'
    protobuf encoding."""
    if content_type.split(';')[0].strip() == model.PROTOBUF:
        return _decode_protobuf(body)
    try:
        return json.loads(body or b'{}')
    except ValueError as error:
        raise model.ApiError(400, 'BadRequest',
                             f'the request body is not valid JSON: {error}')


_PB_MAGIC = b'k8s\x00'
_PB_UNKNOWN = {1: ('typeMeta', {1: ('apiVersion', 'string'),
                                2: ('kind', 'string')}),
               2: ('raw', 'raw'), 3: ('contentEncoding', 'string')}
_PB_STRINGS = ('repeated', 'string')
_PB_OBJECT_META = {
    1: ('name', 'string'), 2: ('generateName', 'string'),
    3: ('namespace', 'string'), 5: ('uid', 'string'),
    6: ('resourceVersion', 'string'),
    11: ('labels', ('map', 'string')),
    12: ('annotations', ('map', 'string')),
    13: ('ownerReferences', ('repeated', {
        5: ('apiVersion', 'string'), 1: ('kind', 'string'),
        3: ('name', 'string'), 4: ('uid', 'string'),
        6: ('controller', 'bool'), 7: ('blockOwnerDeletion', 'bool')})),
    14: ('finalizers', _PB_STRINGS)}
_PB_OBJECT_REFERENCE = {
    1: ('kind', 'string'), 2: ('namespace', 'string'), 3: ('name', 'string'),
    4: ('uid', 'string'), 5: ('apiVersion', 'string'),
    6: ('resourceVersion', 'string'), 7: ('fieldPath', 'string')}
_PB_DELETE_OPTIONS = {
    1: ('gracePeriodSeconds', 'int'),
    2: ('preconditions', {1: ('uid', 'string'),
                          2: ('resourceVersion', 'string')}),
    3: ('orphanDependents', 'bool'), 4: ('propagationPolicy', 'string'),
    5: ('dryRun', _PB_STRINGS)}
_PB_INT_OR_STRING = {1: ('type', 'int'), 2: ('intVal', 'int'),
                     3: ('strVal', 'string')}
_PB_LABEL_SELECTOR = {
    1: ('matchLabels', ('map', 'string')),
    2: ('matchExpressions', ('repeated', {
        1: ('key', 'string'), 2: ('operator', 'string'),
        3: ('values', _PB_STRINGS)}))}
_PB_SCHEMAS = {  # kind -> schema of its message
    'Namespace': {1: ('metadata', _PB_OBJECT_META),
                  2: ('spec', {1: ('finalizers', _PB_STRINGS)})},
    'ServiceAccount': {
        1: ('metadata', _PB_OBJECT_META),
        2: ('secrets', ('repeated', _PB_OBJECT_REFERENCE)),
        3: ('imagePullSecrets', ('repeated', {1: ('name', 'string')})),
        4: ('automountServiceAccountToken', 'bool')},
    'Secret': {1: ('metadata', _PB_OBJECT_META),
               2: ('data', ('map', 'bytes')), 3: ('type', 'string'),
               4: ('stringData', ('map', 'string')),
               5: ('immutable', 'bool')},
    'ConfigMap': {1: ('metadata', _PB_OBJECT_META),
                  2: ('data', ('map', 'string')),
                  3: ('binaryData', ('map', 'bytes')),
                  4: ('immutable', 'bool')},
    'ClusterRole': {1: ('metadata', _PB_OBJECT_META),
                    2: ('rules', ('repeated', {
                        1: ('verbs', _PB_STRINGS),
                        2: ('apiGroups', _PB_STRINGS),
                        3: ('resources', _PB_STRINGS),
                        4: ('resourceNames', _PB_STRINGS),
                        5: ('nonResourceURLs', _PB_STRINGS)}))},
    'ClusterRoleBinding': {
        1: ('metadata', _PB_OBJECT_META),
        2: ('subjects', ('repeated', {
            1: ('kind', 'string'), 2: ('apiGroup', 'string'),
            3: ('name', 'string'), 4: ('namespace', 'string')})),
        3: ('roleRef', {1: ('apiGroup', 'string'), 2: ('kind', 'string'),
                        3: ('name', 'string')})},
    'DeleteOptions': _PB_DELETE_OPTIONS,
    # policy/v1
    'Eviction': {1: ('metadata', _PB_OBJECT_META),
                 2: ('deleteOptions', _PB_DELETE_OPTIONS)},
    'PodDisruptionBudget': {
        1: ('metadata', _PB_OBJECT_META),
        2: ('spec', {1: ('minAvailable', 'intstr'),
                     2: ('selector', _PB_LABEL_SELECTOR),
                     3: ('maxUnavailable', 'intstr'),
                     4: ('unhealthyPodEvictionPolicy', 'string')})},
}


def _decode_protobuf(body: bytes) -> dict:
    try:
        if not body.startswith(_PB_MAGIC):
            raise ValueError('no "k8s" envelope')
        unknown = _pb_message(body[len(_PB_MAGIC):], _PB_UNKNOWN)
        type_meta = unknown.get('typeMeta') or {}
        schema = _PB_SCHEMAS.get(type_meta.get('kind'))
        if schema is None or unknown.get('contentEncoding'):
            raise model.ApiError(415, 'UnsupportedMediaType', (
                f'this test server cannot read {type_meta.get("kind")} '
                'objects in protobuf; send JSON'))
        return {**type_meta, **_pb_message(unknown.get('raw', b''), schema)}
    except (ValueError, IndexError, TypeError, AttributeError) as error:
        raise model.ApiError(
            400, 'BadRequest',
            f'the request body is not valid protobuf: {error}')


def _pb_varint(data: bytes, pos: int) -> tuple:
    result = shift = 0
    while True:
        byte = data[pos]
        result |= (byte & 0x7f) << shift
        pos, shift = pos + 1, shift + 7
        if byte < 0x80:
            return result, pos


def _pb_fields(data: bytes) -> Iterator[tuple]:
    """(field number, value) of a message: ints for varints, bytes for
    everything else."""
    pos = 0
    while pos < len(data):
        key, pos = _pb_varint(data, pos)
        wire_type = key & 7
        if wire_type == 0:
            value, pos = _pb_varint(data, pos)
        else:
            if wire_type == 2:
                size, pos = _pb_varint(data, pos)
            elif wire_type in (1, 5):
                size = 8 if wire_type == 1 else 4
            else:
                raise ValueError(f'unsupported wire type {wire_type}')
            if pos + size > len(data):
                raise ValueError('truncated message')
            value, pos = data[pos:pos + size], pos + size
        yield key >> 3, value


def _pb_message(data: bytes, schema: dict) -> dict:
    obj = {}
    for number, value in _pb_fields(data):
        if number not in schema:
            continue
        name, kind = schema[number]
        if isinstance(kind, tuple) and kind[0] == 'map':
            entry = _pb_message(value, {1: ('key', 'string'),
                                        2: ('value', kind[1])})
            obj.setdefault(name, {})[entry.get('key', '')] = entry.get(
                'value', '')
        elif isinstance(kind, tuple):
            obj.setdefault(name, []).append(_pb_value(value, kind[1]))
        elif value != b'' or kind != 'string':
            # Go's encoder writes empty strings, which JSON would omit.
            obj[name] = _pb_value(value, kind)
    return obj


def _pb_value(value, kind):
    if kind == 'raw':
        return bytes(value)
    if kind == 'string':
        return value.decode()
    if kind == 'bytes':
        return base64.b64encode(value).decode()
    if kind == 'bool':
        return bool(value)
    if kind == 'int':  # int64 in two's complement
        return value - (1 << 64) if value >= 1 << 63 else value
    if kind == 'intstr':
        both = _pb_message(value, _PB_INT_OR_STRING)
        return (both.get('strVal', '') if both.get('type') == 1
                else both.get('intVal', 0))
    return _pb_message(value, kind)
