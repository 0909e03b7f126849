"""A minimal CNF package for Tacker v2: one Deployment, one VDU.

Enough for a v2 CNF instantiate (``vimType: kubernetes``) against the
Kubernetes VIM the driver registers for a cluster: Tacker's Kubernetes
infra driver reads ``lcm-kubernetes-def-files`` from the package, matches
each resource to the VDU whose ``name`` it has, and creates it through
the cluster's API server. The SOL001 type files come from the sample;
``source(directory, vnfd_id)`` writes the rest. Build the zip with
``kubernetes-mgmt-pv package`` (it computes the TOSCA.meta hashes Tacker
checks at upload; the driver file it adds is unused here).
"""

import os
import shutil
import zipfile

import yaml

DEPLOYMENT = 'web'
DEF_FILE = 'Files/kubernetes/deployment.yaml'
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
            'description': 'A CNF of one Deployment (testbed)',
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
                    DEPLOYMENT: {
                        'type': 'tosca.nodes.nfv.Vdu.Compute',
                        'properties': {
                            'name': DEPLOYMENT,
                            'description': 'the web Deployment',
                            'vdu_profile': {'min_number_of_instances': 1,
                                            'max_number_of_instances': 2}}}},
                # Tacker v2 grants a VDU only through an instantiation
                # level: without these the grant names no resource.
                'policies': [
                    {'web_initial_delta': {
                        'type': 'tosca.policies.nfv.VduInitialDelta',
                        'properties': {'initial_delta': {
                            'number_of_instances': 1}},
                        'targets': [DEPLOYMENT]}},
                    {'instantiation_levels': {
                        'type': 'tosca.policies.nfv.InstantiationLevels',
                        'properties': {
                            'levels': {LEVEL: {'description': 'one web'}},
                            'default_level': LEVEL}}},
                    {'web_instantiation_levels': {
                        'type': 'tosca.policies.nfv.VduInstantiationLevels',
                        'properties': {'levels': {
                            LEVEL: {'number_of_instances': 1}}},
                        'targets': [DEPLOYMENT]}}]}}


def _deployment():
    labels = {'app': DEPLOYMENT}
    return {'apiVersion': 'apps/v1', 'kind': 'Deployment',
            'metadata': {'name': DEPLOYMENT, 'namespace': 'default'},
            'spec': {'replicas': 1, 'selector': {'matchLabels': labels},
                     'template': {'metadata': {'labels': labels},
                                  'spec': {'containers': [{
                                      'name': 'nginx', 'image': 'nginx',
                                      'ports': [{'containerPort': 80}]}]}}}}


def source(directory, vnfd_id, types_dir):
    """Write the package source into ``directory``; ``types_dir`` holds
    the SOL001 type files (the sample's Definitions/)."""
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
                 DEF_FILE: _deployment()}
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


def instantiate_request(k8s_vim_id):
    """A v2 CNF instantiate request on a registered Kubernetes VIM."""
    return {'flavourId': FLAVOUR,
            'additionalParams': {'lcm-kubernetes-def-files': [DEF_FILE],
                                 'namespace': 'default'},
            'vimConnectionInfo': {'vim1': {'vimId': k8s_vim_id,
                                           'vimType': 'kubernetes'}}}
