"""What the CLI tests share: the sample package and requests, and a
runner of `validate` that keeps each finding's code and place."""

import json
import os
import zipfile

import yaml

from kubernetes_mgmt_pv.doors import cli
from kubernetes_mgmt_pv.request import param_model

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
SAMPLE = os.path.join(ROOT, 'samples', 'kubernetes_pv_vnf')
REQUESTS = os.path.join(ROOT, 'samples', 'requests')
META = 'TOSCA-Metadata/TOSCA.meta'
DF_SIMPLE = 'Definitions/sample_kubernetes_df_simple.yaml'
VNF_WHERE = DF_SIMPLE + ': VNF'
STORAGE = param_model.ROOT + '.storage_server'


def sample_request(name='instantiate_simple.json'):
    with open(os.path.join(REQUESTS, name)) as stream:
        return json.load(stream)


# Ids of a site's VIM and network, where the samples have placeholders.
SITE_VIM_ID = '3b0c5e7a-95d4-4c1e-8f0a-6d2b9e4f1a77'
SITE_NETWORK_ID = 'c41f2d0e-7a3b-4e59-b6d8-2f9a0c1e5b43'
# The findings of those placeholders, deliberate in the samples.
PLACEHOLDER_CODES = {'vim-placeholder', 'resource-placeholder'}


def with_site_ids(body):
    """The sample body with the site's ids for its placeholders, so that
    a test sees only the findings of its own change."""
    vims = body['vimConnectionInfo']
    for vim in vims.values() if isinstance(vims, dict) else vims:
        vim['vimId'] = SITE_VIM_ID
    for link in body['extVirtualLinks']:
        link['resourceId'] = SITE_NETWORK_ID
    return body


def cluster_params(body):
    return body['additionalParams'][param_model.ROOT]


class Validator(object):
    """Runs `validate --format json` and keeps (code, where) of findings."""

    def __init__(self, capsys, tmp_path):
        self.capsys = capsys
        self.tmp_path = tmp_path

    def __call__(self, package, body, *options):
        request = self.tmp_path / 'request.json'
        request.write_text(json.dumps(body))
        self.capsys.readouterr()
        code = cli.main(['validate', '--package', str(package),
                         '--request', str(request), '--format', 'json'] +
                        list(options))
        self.findings = json.loads(self.capsys.readouterr().out)
        return code, {(f['code'], f['where']) for f in self.findings}

    def rebuilt(self, package, body):
        """Validate the CSAR built from a changed package directory, so
        only the change itself is reported (the hashes are recomputed)."""
        output = self.tmp_path / 'rebuilt.zip'
        assert cli.main(['package', '--source', str(package),
                         '--output', str(output)]) == 0
        return self(output, body)


def edit_yaml(path, change):
    with open(path) as stream:
        document = yaml.safe_load(stream)
    change(document)
    with open(path, 'w') as stream:
        yaml.safe_dump(document, stream)


def vnf_node(document):
    return document['topology_template']['node_templates']['VNF']


def rezipped(original, output, name, change):
    """A copy of the zip ``original`` at ``output`` whose file ``name`` is
    ``change(its bytes)``, written after `package` (its hash unchanged)."""
    with zipfile.ZipFile(original) as source, \
            zipfile.ZipFile(output, 'w') as target:
        for info in source.infolist():
            data = source.read(info)
            if info.filename == name:
                data = change(data)
            target.writestr(info, data)
    return output
