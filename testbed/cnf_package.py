"""A minimal CNF package for Tacker v2: one bare Pod, one VDU.

Enough for a v2 CNF instantiate against the Kubernetes VIM the driver
registers for a cluster, or the cluster given inline: Tacker's Kubernetes
infra driver reads ``lcm-kubernetes-def-files`` from the package, matches
each resource to the VDU whose ``name`` it has, creates it through the
cluster's API server, and waits until the Pod is Running. The Pod is bound
to a Node (``spec.nodeName``): the test API server has no scheduler and no
workload controllers, its kubelets run such a Pod, so the instantiate
completes there too. The SOL001 type files come from the sample;
``source(directory, vnfd_id, types_dir, node_name)`` writes the rest.
Build the zip with ``kubernetes-mgmt-pv package`` (it computes the
TOSCA.meta hashes Tacker checks at upload; the driver file it adds is
unused here).
"""

import os
import shutil
import zipfile

import yaml

POD = 'web'
DEF_FILE = 'Files/kubernetes/pod.yaml'
FLAVOUR = 'simple'
LEVEL = 'instantiation_level_1'
_TYPES = ('etsi_nfv_sol001_common_types.yaml',
          'etsi_nfv_sol001_vnfd_types.yaml')


def _vnf_type(vnfd_id):
    fixed = {'descriptor_id': vnfd_id, 'descriptor_version': '1.0',
             'provider': 'Company', 'product_name': 'Sample CNF',
             'software_version': '1.0'}
    properties = {key: {'type': 'string', 'default': value,
                        'constraints': [{'valid_values': [value]}]}
                  for key, value in fixed.items()}
    properties['vnfm_info'] = {'type': 'list', 'default': ['Tacker'],
                               'entry_schema': {'type': 'string'}}
    properties['flavour_id'] = {
        'type': 'string', 'default': FLAVOUR,
        'constraints': [{'valid_values': [FLAVOUR]}]}
    properties['flavour_description'] = {'type': 'string', 'default': ''}
    return {'tosca_definitions_version': 'tosca_simple_yaml_1_2',
            'imports': list(_TYPES),
            'node_types': {'company.provider.CNF': {
                'derived_from': 'tosca.nodes.nfv.VNF',
                'properties': properties,
                'interfaces': {'Vnflcm': {
                    'type': 'tosca.interfaces.nfv.Vnflcm'}}}}}


def _top(vnfd_id):
    return {'tosca_definitions_version': 'tosca_simple_yaml_1_2',
            'description': 'A CNF of one Pod (testbed)',
            'imports': list(_TYPES) + ['cnf_types.yaml', 'cnf_df.yaml'],
            'topology_template': {
                'inputs': {'selected_flavour': {'type': 'string'}},
                'node_templates': {'VNF': {
                    'type': 'company.provider.CNF',
                    'properties': {
                        'flavour_id': {'get_input': 'selected_flavour'},
                        'descriptor_id': vnfd_id,
                        'provider': 'Company', 'product_name': 'Sample CNF',
                        'software_version': '1.0',
                        'descriptor_version': '1.0',
                        'vnfm_info': ['Tacker']}}}}}


def _flavour():
    return {'tosca_definitions_version': 'tosca_simple_yaml_1_2',
            'imports': list(_TYPES) + ['cnf_types.yaml'],
            'topology_template': {
                # Every property of the VNF type (toscaparser insists).
                'inputs': dict(
                    {name: {'type': 'string'} for name in (
                        'descriptor_id', 'descriptor_version', 'provider',
                        'product_name', 'software_version', 'flavour_id',
                        'flavour_description')},
                    vnfm_info={'type': 'list',
                               'entry_schema': {'type': 'string'}}),
                'substitution_mappings': {
                    'node_type': 'company.provider.CNF',
                    'properties': {'flavour_id': FLAVOUR}},
                'node_templates': {
                    'VNF': {'type': 'company.provider.CNF',
                            'properties': {'flavour_description': 'one'}},
                    POD: {
                        'type': 'tosca.nodes.nfv.Vdu.Compute',
                        'properties': {
                            'name': POD,
                            'description': 'the web Pod',
                            'vdu_profile': {'min_number_of_instances': 1,
                                            'max_number_of_instances': 1}}}},
                # Tacker v2 grants a VDU only through an instantiation
                # level: without these the grant names no resource.
                'policies': [
                    {'web_initial_delta': {
                        'type': 'tosca.policies.nfv.VduInitialDelta',
                        'properties': {'initial_delta': {
                            'number_of_instances': 1}},
                        'targets': [POD]}},
                    {'instantiation_levels': {
                        'type': 'tosca.policies.nfv.InstantiationLevels',
                        'properties': {
                            'levels': {LEVEL: {'description': 'one web'}},
                            'default_level': LEVEL}}},
                    {'web_instantiation_levels': {
                        'type': 'tosca.policies.nfv.VduInstantiationLevels',
                        'properties': {'levels': {
                            LEVEL: {'number_of_instances': 1}}},
                        'targets': [POD]}}]}}


def _pod(node_name):
    return {'apiVersion': 'v1', 'kind': 'Pod',
            'metadata': {'name': POD, 'namespace': 'default',
                         'labels': {'app': POD}},
            'spec': {'nodeName': node_name,
                     'containers': [{'name': 'nginx', 'image': 'nginx',
                                     'ports': [{'containerPort': 80}]}]}}


def source(directory, vnfd_id, types_dir, node_name):
    """Write the package source into ``directory``; ``types_dir`` holds
    the SOL001 type files (the sample's Definitions/), ``node_name`` is
    the cluster's Node the Pod runs on."""
    definitions = os.path.join(directory, 'Definitions')
    os.makedirs(definitions)
    os.makedirs(os.path.join(directory, 'TOSCA-Metadata'))
    os.makedirs(os.path.join(directory, os.path.dirname(DEF_FILE)))
    for name in _TYPES:
        shutil.copyfile(os.path.join(types_dir, name),
                        os.path.join(definitions, name))
    documents = {'Definitions/cnf_top.vnfd.yaml': _top(vnfd_id),
                 'Definitions/cnf_types.yaml': _vnf_type(vnfd_id),
                 'Definitions/cnf_df.yaml': _flavour(),
                 DEF_FILE: _pod(node_name)}
    for path, document in documents.items():
        with open(os.path.join(directory, path), 'w') as handle:
            yaml.safe_dump(document, handle, sort_keys=False)
    with open(os.path.join(directory, 'TOSCA-Metadata', 'TOSCA.meta'),
              'w') as handle:
        handle.write('TOSCA-Meta-File-Version: 1.0\nCSAR-Version: 1.1\n'
                     'Created-by: testbed\n'
                     'Entry-Definitions: Definitions/cnf_top.vnfd.yaml\n')


def name_artifacts(zip_path):
    """Rewrite TOSCA.meta's artifact blocks with ``Name:`` instead of
    ``Source:``: Tacker v2 finds a CNF's definition files by ``Name``
    only (vnfd_utils.get_vnf_artifact_files), v1 accepts both."""
    with zipfile.ZipFile(zip_path) as archive:
        entries = [(info, archive.read(info)) for info in archive.infolist()]
    with zipfile.ZipFile(zip_path, 'w', zipfile.ZIP_DEFLATED) as archive:
        for info, data in entries:
            if info.filename == 'TOSCA-Metadata/TOSCA.meta':
                data = data.replace(b'\nSource: ', b'\nName: ')
            archive.writestr(info, data)
    return zip_path


def instantiate_request(vim):
    """A v2 CNF instantiate request on ``vim``: a vimConnectionInfo entry
    (registered_vim or inline_vim)."""
    return {'flavourId': FLAVOUR,
            'additionalParams': {'lcm-kubernetes-def-files': [DEF_FILE],
                                 'namespace': 'default'},
            'vimConnectionInfo': {'vim1': vim}}


def registered_vim(k8s_vim_id):
    """The Kubernetes VIM of Tacker's registry, by id (Tacker v2 completes
    the entry from the registry)."""
    return {'vimId': k8s_vim_id, 'vimType': 'kubernetes'}


def inline_vim(endpoint, bearer_token, ca_pem):
    """The cluster given inline: its API server, token and CA."""
    return {'vimType': 'ETSINFV.KUBERNETES.V_1',
            'interfaceInfo': {'endpoint': endpoint, 'ssl_ca_cert': ca_pem},
            'accessInfo': {'bearer_token': bearer_token}}
