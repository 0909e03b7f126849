"""Patches (merge, strategic merge, JSON patch) and label and field
selectors, as the API server applies them."""

import copy
import re
from typing import Callable, Optional

from testbed.kubeapi import bodies
from testbed.kubeapi import model


def merge(target, patch, strategic: bool):
    """JSON merge patch (RFC 7386), or with ``strategic`` a strategic one.

    The strategic variant honours the map directives kubectl may send but
    replaces lists whole, which for the kinds here differs from Kubernetes
    only for lists with a merge key (finalizers, ownerReferences, a Node's
    conditions and addresses).
    """
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    if strategic and patch.get('$patch') == 'replace':
        return merge({}, {k: v for k, v in patch.items() if k != '$patch'},
                     strategic)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    if strategic and '$retainKeys' in patch:
        result = {k: v for k, v in result.items()
                  if k in patch['$retainKeys']}
    for key, value in patch.items():
        if strategic and key.startswith('$deleteFromPrimitiveList/'):
            name = key.split('/', 1)[1]
            result[name] = [item for item in result.get(name, [])
                            if item not in value]
        elif strategic and key.startswith('$'):
            continue  # $setElementOrder/..., or a directive handled above
        elif value is None or (strategic and isinstance(value, dict)
                               and value.get('$patch') == 'delete'):
            result.pop(key, None)
        else:
            result[key] = merge(result.get(key), value, strategic)
    return result


def _json_patch(doc: dict, operations) -> dict:
    """Apply an RFC 6902 JSON patch."""
    def pointer(path):
        if path and not path.startswith('/'):
            raise ValueError(f'invalid JSON pointer {path!r}')
        return [token.replace('~1', '/').replace('~0', '~')
                for token in path.split('/')[1:]]

    def get(root, tokens):
        for token in tokens:
            root = root[int(token)] if isinstance(root, list) else root[token]
        return root

    def remove(root, tokens):
        parent = get(root, tokens[:-1])
        return parent.pop(int(tokens[-1]) if isinstance(parent, list)
                          else tokens[-1])

    def add(root, tokens, value):
        if not tokens:
            return value
        parent = get(root, tokens[:-1])
        if isinstance(parent, list):
            parent.insert(len(parent) if tokens[-1] == '-'
                          else int(tokens[-1]), value)
        else:
            parent[tokens[-1]] = value
        return root

    if not isinstance(operations, list):
        raise model.ApiError(400, 'BadRequest',
                             'a JSON patch must be a list of operations')
    doc = copy.deepcopy(doc)
    for operation in operations:
        op = operation.get('op')
        try:
            path = pointer(operation.get('path', ''))
            if op == 'test':
                if get(doc, path) != operation.get('value'):
                    raise ValueError(f'{operation["path"]} differs')
            elif op == 'remove':
                remove(doc, path)
            elif op in ('add', 'replace'):
                if op == 'replace':
                    get(doc, path)  # it must exist
                    if path:
                        remove(doc, path)
                doc = add(doc, path, copy.deepcopy(operation['value']))
            elif op in ('move', 'copy'):
                source = pointer(operation['from'])
                value = (remove(doc, source) if op == 'move'
                         else copy.deepcopy(get(doc, source)))
                doc = add(doc, path, value)
            else:
                raise model.ApiError(
                    400, 'BadRequest',
                    f'unsupported JSON patch operation {op!r}')
        except (KeyError, IndexError, ValueError, TypeError) as error:
            raise model.ApiError(
                422, 'Invalid',
                f'the JSON patch operation {op} failed: {error}')
    return doc


def apply_patch(obj: dict, content_type: str, body: bytes) -> dict:
    media = content_type.split(';')[0].strip()
    if media == 'application/apply-patch+yaml':
        raise model.ApiError(415, 'UnsupportedMediaType',
                             'server-side apply is not supported here')
    if media == 'application/json-patch+json':
        return _json_patch(obj, bodies.decode_body(body))
    if media in ('application/merge-patch+json',
                 'application/strategic-merge-patch+json'):
        patch = bodies.decode_body(body)
        if not isinstance(patch, dict):
            raise model.ApiError(400, 'BadRequest',
                                 'a merge patch must be a JSON object')
        return merge(obj, patch, strategic='strategic' in media)
    raise model.ApiError(415, 'UnsupportedMediaType',
                         f'the body of the request was in an unknown format '
                         f'("{media}")')


def _field_value(obj: dict, path: str) -> str:
    """A field as field selectors see it: booleans as "true"/"false",
    a missing field as ""."""
    value = obj
    for part in path.split('.'):
        value = value.get(part) if isinstance(value, dict) else None
    if isinstance(value, bool):
        return 'true' if value else 'false'
    return '' if value is None else str(value)


def query_selector(query: dict, res: Optional[model.Resource] = None
                   ) -> Callable[[dict], bool]:
    """Build a predicate from fieldSelector (the resource's field labels)
    and an equality labelSelector."""
    tests = []
    labels = ('metadata.name', 'metadata.namespace',
              *(res.fields if res else ()))
    for term in filter(None, query.get('fieldSelector', '').split(',')):
        match = re.fullmatch(r'([^!=]+)(==|=|!=)(.*)', term)
        if not match or match[1] not in labels:
            raise model.ApiError(400, 'BadRequest',
                                 'field label not supported: '
                                 + term.split('=')[0])
        negate, value = match[2] == '!=', match[3]
        tests.append(lambda obj, f=match[1], n=negate, v=value:
                     (_field_value(obj, f) == v) != n)
    for term in filter(None, query.get('labelSelector', '').split(',')):
        match = re.fullmatch(r'(!?)([\w./-]+)(?:(==|=|!=)([\w.-]*))?',
                             term.strip())
        if not match:
            raise model.ApiError(400, 'BadRequest',
                                 f'unsupported label selector {term!r} '
                                 '(only =, ==, != and existence)')
        absent, key, operator, value = match.groups()
        if operator:
            tests.append(lambda obj, k=key, n=operator == '!=', v=value:
                         (model.labels(obj).get(k) == v) != n)
        else:
            tests.append(lambda obj, k=key, n=bool(absent):
                         (k in model.labels(obj)) != n)
    return lambda obj: all(test(obj) for test in tests)


def selects(selector: Optional[dict], labels: dict) -> bool:
    """Evaluate a PVC's spec.selector (a LabelSelector) on a PV's labels."""
    selector = selector or {}
    for key, value in (selector.get('matchLabels') or {}).items():
        if labels.get(key) != value:
            return False
    for expression in selector.get('matchExpressions') or []:
        key, values = expression['key'], expression.get('values') or []
        present = key in labels
        holds = {'In': present and labels[key] in values,
                 'NotIn': not present or labels[key] not in values,
                 'Exists': present, 'DoesNotExist': not present}
        if not holds.get(expression['operator'], False):
            return False
    return True
