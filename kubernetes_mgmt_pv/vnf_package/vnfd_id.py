"""The VNFD id a package is built with.

Tacker takes a VNFD id once (VnfPackageVnfdIdDuplicate), and an instance
names its package by it. Packages built from one source for another API
or Kubernetes version must therefore not share the source's id, and a
rebuild must keep the id it had: ``chosen`` derives one from the
source's id, the API and the version (a name-based UUID), unless the
operator gives one. The v1 package of the source's own version keeps
the source's id, which packages built before these rules carried.
"""

import re
import uuid

from kubernetes_mgmt_pv import safe_yaml

# The namespace of derived ids (uuid5); changing it changes every id.
NAMESPACE = uuid.UUID('82e06b16-63ac-485b-ba61-96412ef3d38c')
_CANONICAL = re.compile(r'[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}',
                        re.IGNORECASE)
# Larger files (VM images) are not searched for the id: descriptors,
# scripts and sample requests are far smaller.
MAX_REWRITTEN_BYTES = safe_yaml.DEFINITION_LIMITS.max_bytes


class VnfdIdError(ValueError):
    """The source's id cannot be found or the given one is no UUID."""


def parse(text):
    """A VNFD id given by the operator, lower-cased: only the canonical
    8-4-4-4-12 form, which Tacker's API schemas take."""
    if not isinstance(text, str) or not _CANONICAL.fullmatch(text):
        raise VnfdIdError('--vnfd-id %r is not a UUID such as %s'
                          % (text, NAMESPACE))
    return text.lower()


def of_definition(text, where):
    """The descriptor_id of the node templates of a VNFD file's text
    (Entry-Definitions), or None when none gives one."""
    try:
        document = safe_yaml.loads(text, safe_yaml.DEFINITION_LIMITS)
    except safe_yaml.LoadError as error:
        raise VnfdIdError('%s %s' % (where, error))
    nodes = _mapping(_mapping(_mapping(document).get(
        'topology_template')).get('node_templates'))
    found = {_mapping(node.get('properties')).get('descriptor_id')
             for node in nodes.values() if isinstance(node, dict)}
    found = {value for value in found if isinstance(value, str) and value}
    if len(found) > 1:
        raise VnfdIdError('%s: its node templates give %d descriptor_ids '
                          '(%s); a VNFD has one' % (
                              where, len(found), ', '.join(sorted(found))))
    return found.pop() if found else None


def chosen(source_id, api, version, source_version, given=None):
    """The id of a package of ``api`` whose install script is at
    ``version`` (None: the source's, ``source_version``)."""
    if given is not None:
        return given
    version = version or source_version
    if api in ('v1', 'cnf') and version == source_version:
        return source_id
    return str(uuid.uuid5(NAMESPACE, 'vnfd=%s api=%s kubernetes=%s' % (
        source_id, api, version or '')))


def rewritten(data, source_id, vnfd_id):
    """``data`` (bytes) with every occurrence of the source's id replaced,
    or None when it has none (or is too large to be searched)."""
    old = source_id.encode('utf-8')
    if old == vnfd_id.encode('utf-8') or len(data) > MAX_REWRITTEN_BYTES \
            or old not in data:
        return None
    return data.replace(old, vnfd_id.encode('utf-8'))


def _mapping(value):
    return value if isinstance(value, dict) else {}
