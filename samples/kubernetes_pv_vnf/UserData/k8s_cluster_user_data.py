"""Heat input of the sample BaseHOT, computed by Tacker from the request.

Tacker runs ``KubernetesClusterUserData.instantiate`` at instantiate (and
at an entire-cluster heal) and passes the returned dict to Heat as stack
parameters. The BaseHOT reads everything through one ``nfv`` parameter,
``{get_param: [nfv, VDU|CP, <name>, <key>]}``; this class answers exactly
the keys the sample uses, and fails with a clear reason for anything else:

* ``VDU.<vdu>.flavor``: the VDU's ``requested_additional_capability_name``
  (a Nova flavor name);
* ``VDU.<vdu>.image``: the VDU's ``sw_image_data.name`` (a Glance image
  registered beforehand: the sample package carries no image file);
* ``keypairs.<vdu>``: the Nova keypair the request names in
  ``additionalParams.nfv.VDU.<vdu>.key_name`` (where Tacker v2's default
  UserData takes it from). It lives outside ``VDU.<vdu>`` because a v1
  heal rebuilds that entry from the VNFD, keeping only flavor and image;
* ``CP.<cp>.network``: the ``resourceId`` of the ``extVirtualLinks`` entry
  whose ``extCps`` lists the CP;
* any other key (``{get_param: [nfv, management_cidr]}``): the request's
  ``additionalParams.nfv``, merged into ``nfv`` as a JSON merge patch, as
  Tacker v2's default UserData does, so one request shape serves both
  APIs.
"""

from tacker.extensions import vnfm
from tacker.sol_refactored.common import vnf_instance_utils as inst_utils
from tacker.vnfm.lcm_user_data.abstract_user_data import AbstractUserData


class KubernetesClusterUserData(AbstractUserData):

    @staticmethod
    def instantiate(base_hot_dict=None, vnfd_dict=None, inst_req_info=None,
                    grant_info=None):
        references = _nfv_references(base_hot_dict or {})
        nfv = _vdu_and_cp_values(
            references, _vdu_properties(vnfd_dict or {}),
            _cp_networks(inst_req_info))
        keypairs = _keypair_values(references,
                                   _requested_keypairs(inst_req_info))
        if keypairs:
            nfv['keypairs'] = keypairs
        nfv = inst_utils.json_merge_patch(nfv, (getattr(
            inst_req_info, 'additional_params', None) or {}).get('nfv') or {})
        for key, in sorted(r for r in references if len(r) == 1):
            if nfv.get(key) in (None, ''):
                raise vnfm.LCMUserDataFailed(
                    reason='BaseHOT parameter nfv.%s has no value: set '
                           'additionalParams.nfv.%s in the request'
                           % (key, key))
        return {'nfv': nfv}


def _keypair_values(references, keypairs):
    """nfv.keypairs.<vdu> for each such reference, from the request."""
    values = {}
    for path in sorted(r for r in references if len(r) == 2):
        if path[0] != 'keypairs':
            raise vnfm.LCMUserDataFailed(
                reason='BaseHOT parameter nfv.%s.%s is not supported by '
                       'KubernetesClusterUserData' % path)
        if not keypairs.get(path[1]):
            raise vnfm.LCMUserDataFailed(
                reason='BaseHOT parameter nfv.keypairs.%s has no value: set '
                       'additionalParams.nfv.VDU.%s.key_name in the request'
                       % (path[1], path[1]))
        values[path[1]] = keypairs[path[1]]
    return values


def _vdu_and_cp_values(references, vdus, networks):
    """nfv.VDU.<vdu>.flavor|image and nfv.CP.<cp>.network."""
    nfv = {'VDU': {}, 'CP': {}}
    for kind, name, key in sorted(r for r in references if len(r) == 3):
        if kind == 'VDU' and key in ('flavor', 'image'):
            value = vdus.get(name, {}).get(key)
            source = 'VDU %s of the VNFD' % name
        elif kind == 'CP' and key == 'network':
            value = networks.get(name)
            source = 'extVirtualLinks[].extCps[] of the request'
        else:
            raise vnfm.LCMUserDataFailed(
                reason='BaseHOT parameter nfv.%s.%s.%s is not supported '
                       'by KubernetesClusterUserData' % (kind, name, key))
        if not value:
            raise vnfm.LCMUserDataFailed(
                reason='BaseHOT parameter nfv.%s.%s.%s has no value: '
                       'nothing in %s provides it' % (kind, name, key,
                                                      source))
        nfv[kind].setdefault(name, {})[key] = value
    return nfv


def _nfv_references(node):
    """The path below nfv of every ``get_param: [nfv, ...]`` in the HOTs:
    (kind, name, key), (keypairs, vdu) or (key,)."""
    found = set()
    if isinstance(node, dict):
        path = node.get('get_param')
        if isinstance(path, list) and len(path) in (2, 3, 4) and \
                path[0] == 'nfv':
            found.add(tuple(path[1:]))
        for value in node.values():
            found |= _nfv_references(value)
    elif isinstance(node, list):
        for value in node:
            found |= _nfv_references(value)
    return found


def _vdu_properties(vnfd_dict):
    """Flavor and image name of each VDU (node with sw_image_data)."""
    vdus = {}
    templates = vnfd_dict.get('topology_template', {}).get(
        'node_templates', {})
    for name, template in templates.items():
        image = (template.get('properties') or {}).get('sw_image_data')
        if not image:
            continue
        compute = (template.get('capabilities') or {}).get(
            'virtual_compute', {}).get('properties', {})
        flavor = compute.get('requested_additional_capabilities', {}).get(
            'properties', {}).get('requested_additional_capability_name')
        vdus[name] = {'flavor': flavor, 'image': image.get('name')}
    return vdus


def _requested_keypairs(inst_req_info):
    """Nova keypair of each VDU named in additionalParams.nfv.VDU."""
    params = getattr(inst_req_info, 'additional_params', None) or {}
    nfv = params.get('nfv')
    vdus = nfv.get('VDU') if isinstance(nfv, dict) else None
    if not isinstance(vdus, dict):
        return {}
    return {name: value.get('key_name') for name, value in vdus.items()
            if isinstance(value, dict)}


def _cp_networks(inst_req_info):
    """Neutron network of each external CP named in the request."""
    networks = {}
    for link in getattr(inst_req_info, 'ext_virtual_links', None) or []:
        for ext_cp in link.ext_cps or []:
            networks[ext_cp.cpd_id] = link.resource_id
    return networks
