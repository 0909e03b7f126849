"""What ``validate`` reads of a package's VNFD: its YAML files, found as
Tacker finds them (at the top of the package or one level down), the API
its driver artifact is for, its VNFD id, VDU names, scaling aspects and
instantiation levels. A malformed part of a template defines nothing;
a file that does not load is a finding of the caller's ``found``.
"""

import dataclasses
import os

from kubernetes_mgmt_pv import feature_hooks
from kubernetes_mgmt_pv import safe_yaml
from kubernetes_mgmt_pv.vnf_package import driver_artifact

YAML_SUFFIXES = ('.yaml', '.yml')
_SCALING_ASPECTS = 'tosca.policies.nfv.ScalingAspects'
_INSTANTIATION_LEVELS = 'tosca.policies.nfv.InstantiationLevels'
_VDU_COMPUTE = 'tosca.nodes.nfv.Vdu.Compute'


def mapping(value):
    """A mapping of the package's own YAML, or {}."""
    return value if isinstance(value, dict) else {}


def load_yaml(path):
    return safe_yaml.load(path, safe_yaml.DEFINITION_LIMITS)


def yaml_files(directory):
    try:
        return sorted(f for f in os.listdir(directory)
                      if f.endswith(YAML_SUFFIXES)
                      and os.path.isfile(os.path.join(directory, f)))
    except OSError:
        return []


def _subdirectories(directory):
    try:
        return sorted(d for d in os.listdir(directory)
                      if os.path.isdir(os.path.join(directory, d)))
    except OSError:
        return []


def templates(package_dir, found):
    """[(file, template)] of every YAML file Tacker may read a VNFD from:
    at the top of the package or one level down."""
    candidates = yaml_files(package_dir) + [
        '%s/%s' % (d, f) for d in _subdirectories(package_dir)
        for f in yaml_files(os.path.join(package_dir, d))]
    loaded = []
    for relative in candidates:
        try:
            loaded.append((relative, mapping(load_yaml(
                os.path.join(package_dir, relative)))))
        except safe_yaml.LoadError as error:
            found.error('yaml-invalid', relative, '%s %s' % (relative, error))
    return loaded


def _topology(template):
    return mapping(template.get('topology_template'))


def flavour_of(template):
    """The flavour_id a template's substitution_mappings give, or None."""
    return mapping(mapping(_topology(template).get(
        'substitution_mappings')).get('properties')).get('flavour_id')


def _node_templates(loaded):
    for relative, template in loaded:
        for name, node in sorted(mapping(_topology(template).get(
                'node_templates')).items(), key=lambda item: str(item[0])):
            yield relative, name, mapping(node)


def api(loaded):
    """'v1' or 'v2' by the file of the driver artifact of a VNF node (the
    hashed driver file or a script), None when no VNF node names it."""
    for _, name, node in _node_templates(loaded):
        artifact = mapping(mapping(node.get('artifacts')).get(
            feature_hooks.DRIVER_NAME))
        if name == 'VNF' and artifact:
            return driver_artifact.api_of(artifact)
    return None


def vnfd_ids(loaded):
    """{VNFD id: file} of the VNF nodes' descriptor_id (a literal) and of
    the node types' default, as Tacker reads it at upload."""
    ids = {}
    for relative, name, node in _node_templates(loaded):
        value = mapping(node.get('properties')).get('descriptor_id')
        if name == 'VNF' and isinstance(value, str):
            ids.setdefault(value, relative)
    for relative, template in loaded:
        for node_type in mapping(template.get('node_types')).values():
            value = mapping(mapping(mapping(node_type).get(
                'properties')).get('descriptor_id')).get('default')
            if isinstance(value, str):
                ids.setdefault(value, relative)
    return ids


def vdu_names(loaded):
    return sorted({name for _, name, node in _node_templates(loaded)
                   if node.get('type') == _VDU_COMPUTE})


@dataclasses.dataclass(frozen=True)
class Aspect(object):
    """A scaling aspect of one flavour."""
    flavour: str
    where: str  # file: policies.<name>.properties.aspects.<aspect>
    max_scale_level: object  # an int unless the VNFD is malformed
    # The aspect's scale_level in the flavour's default instantiation
    # level (0 when the levels do not name it).
    default_scale_level: int = 0


def _policies(template):
    """(name, policy) of a template's policies list."""
    entries = _topology(template).get('policies')
    for entry in entries if isinstance(entries, list) else ():
        for name, policy in sorted(mapping(entry).items(),
                                   key=lambda item: str(item[0])):
            yield name, mapping(policy)


def _default_levels(template):
    """{aspect: scale_level} of the default instantiation level."""
    for _, policy in _policies(template):
        properties = mapping(policy.get('properties'))
        if policy.get('type') == _INSTANTIATION_LEVELS:
            level = mapping(mapping(properties.get('levels')).get(
                properties.get('default_level')))
            return {aspect: mapping(info).get('scale_level')
                    for aspect, info in mapping(
                        level.get('scale_info')).items()}
    return {}


def aspects(loaded):
    """{aspect id: [Aspect of each flavour that defines it]}."""
    found = {}
    for relative, template in loaded:
        defaults = _default_levels(template)
        for name, policy in _policies(template):
            if policy.get('type') != _SCALING_ASPECTS:
                continue
            for aspect, value in mapping(mapping(policy.get(
                    'properties')).get('aspects')).items():
                default = defaults.get(aspect)
                found.setdefault(aspect, []).append(Aspect(
                    flavour_of(template), '%s: policies.%s.properties.'
                    'aspects.%s' % (relative, name, aspect),
                    mapping(value).get('max_scale_level'),
                    default if isinstance(default, int) else 0))
    return found
