"""Every sample request body under samples/, validated against the package
its directory is for, as an operator would before sending it: no finding
but the deliberate ones (doc/operator-guide.rst lists them), so the
samples work unchanged. And the samples' own values: a fresh image, no
shared VIM name, the change_vnfpkg body naming the package it goes to."""

import glob
import json
import os
import re
import shutil

import pytest
import yaml

from kubernetes_mgmt_pv.doors import cli
from kubernetes_mgmt_pv.request import param_model
from tests.unit import cli_support

SAMPLES = os.path.join(cli_support.ROOT, 'samples')
NEXT = '1.37.1-1.1'
# The package source, `package --api` and --kubernetes-version of each
# directory of bodies; change_vnfpkg goes to the next minor's package.
PACKAGES = {
    'requests': ('kubernetes_pv_vnf', 'v1', None),
    'requests-v2': ('kubernetes_pv_vnf', 'v2', None),
    'requests-cnf-v1': ('cnf_with_pv', 'cnf', None),
    'requests-cnf-v2': ('cnf_with_pv', 'cnf', None),
    'requests-v2/change_vnfpkg.json': ('kubernetes_pv_vnf', 'v2', NEXT),
}
BODIES = sorted(os.path.relpath(path, SAMPLES) for directory in PACKAGES
                for path in glob.glob(os.path.join(SAMPLES, directory,
                                                   '*.json')))
OFFLINE = param_model.ROOT + '.offline'
# Deliberate: the ids only the operator knows (a "*-placeholder" finding:
# a VIM, a network, a VNFC), and the offline body's files, the site's
# mirror key and CNI manifest, which the operator adds to the package.
PLACEHOLDER = '-placeholder'
DELIBERATE = {
    'requests/instantiate_offline.json': {
        ('error', 'offline-file-missing', OFFLINE + '.apt_key_file'),
        ('error', 'offline-file-missing', OFFLINE + '.cni_manifest_file')},
}


@pytest.fixture(scope='module')
def packages(tmp_path_factory):
    """{(source, api, version): the zip built from it}."""
    directory = tmp_path_factory.mktemp('samples')
    built = {}
    for source, api, version in set(PACKAGES.values()):
        output = directory / ('%s-%s-%s.zip' % (source, api, version))
        assert cli.main(['package', '--api', api, '--source',
                         os.path.join(SAMPLES, source),
                         '--output', str(output)] + (
                             ['--kubernetes-version', version] if version
                             else [])) == 0
        built[source, api, version] = output
    return built


def _findings(validate, package, body):
    """The errors and warnings of `validate` (not its notes) but those of
    the placeholder ids."""
    validate(package, body)
    return {(f['severity'], f['code'], f['where'])
            for f in validate.findings
            if f['severity'] in ('error', 'warning') and
            not f['code'].endswith(PLACEHOLDER)}


def _load(name):
    with open(os.path.join(SAMPLES, name)) as stream:
        return json.load(stream)


@pytest.mark.parametrize('name', BODIES)
def test_every_sample_body_validates_with_only_its_deliberate_findings(
        packages, validate, name):
    body = _load(name)
    built = packages[PACKAGES.get(name) or PACKAGES[os.path.dirname(name)]]
    assert _findings(validate, built, body) == DELIBERATE.get(name, set())


def test_the_offline_body_validates_clean_once_its_files_are_added(
        validate, tmp_path):
    """The operator's step: the mirror's key and the CNI manifest at the
    paths the body names."""
    body = _load('requests/instantiate_offline.json')
    source = tmp_path / 'source'
    shutil.copytree(os.path.join(SAMPLES, 'kubernetes_pv_vnf'), source)
    offline = cluster_params(body)['offline']
    for key in ('apt_key_file', 'cni_manifest_file'):
        path = source / offline[key]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text('# the site\'s file\n')
    built = tmp_path / 'offline.zip'
    assert cli.main(['package', '--source', str(source),
                     '--output', str(built)]) == 0
    assert _findings(validate, built, body) == set()


def cluster_params(body):
    return body['additionalParams'][param_model.ROOT]


@pytest.mark.parametrize('name', ['requests/instantiate_proxy.json',
                                  'requests/instantiate_offline.json'])
def test_the_proxy_and_offline_bodies_are_the_simple_one_plus_their_object(
        name):
    """They differ from instantiate_simple.json by their one object."""
    body, simple = _load(name), _load('requests/instantiate_simple.json')
    key = 'proxy' if 'proxy' in name else 'offline'
    assert cluster_params(body).pop(key)
    assert body == simple


def test_the_change_vnfpkg_body_names_the_next_minor_v2_package(
        tmp_path, capsys):
    """Its vnfdId is the one `package --api v2 --kubernetes-version`
    writes for the sample (the guide's command), which a rebuild keeps;
    its logins are the scale bodies'."""
    body = _load('requests-v2/change_vnfpkg.json')
    capsys.readouterr()
    assert cli.main(['package', '--api', 'v2', '--kubernetes-version', NEXT,
                     '--source', cli_support.SAMPLE,
                     '--output', str(tmp_path / 'next.zip')]) == 0
    printed = re.findall(r'^VNFD id: (\S+)$', capsys.readouterr().out, re.M)
    assert printed == [body['vnfdId']]
    assert body['additionalParams'].pop('upgrade_type') == 'RollingUpdate'
    assert body['additionalParams'].pop('vdu_params') == []
    assert body['additionalParams'] == _load(
        'requests-v2/scale_out_worker.json')['additionalParams']


@pytest.mark.parametrize('name', [name for name in BODIES
                                  if 'instantiate' in name])
def test_no_instantiate_sample_names_a_shared_vim(name):
    """A fixed vim_name makes the second VNF's instantiate fail: without
    it each cluster's VIM is named after its instance."""
    params = _load(name)['additionalParams']
    assert 'vim_name' not in params.get(param_model.ROOT, {})


def test_the_sample_images_are_of_a_release_the_install_script_supports():
    script = os.path.join(cli_support.SAMPLE, 'Scripts',
                          'install_k8s_cluster.sh')
    with open(script) as stream:
        supported = re.search(r'VM \(Ubuntu ([0-9., ]+),', stream.read())[1]
    releases = {release.strip() for release in supported.split(',')}
    images = set()
    for path in glob.glob(os.path.join(cli_support.SAMPLE, 'Definitions',
                                       'sample_kubernetes_df_*.yaml')):
        with open(path) as stream:
            nodes = yaml.safe_load(stream)['topology_template'][
                'node_templates']
        images |= {(node['properties']['sw_image_data']['name'],
                    node['properties']['sw_image_data']['version'])
                   for node in nodes.values()
                   if 'sw_image_data' in node.get('properties', {})}
    assert images and all(version in releases and version in name
                          for name, version in images), (images, releases)
    with open(os.path.join(cli_support.ROOT, 'doc',
                           'operator-guide.rst')) as stream:
        registered = set(re.findall(r'image create (\S+)', stream.read()))
    assert {name for name, _ in images} == registered
