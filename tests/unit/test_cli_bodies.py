"""`validate` of the LCM bodies that are not Instantiate ones: the kind
told by the keys or --kind, each body checked against the package where
the package decides, and a note for what only Tacker can check."""

import json
import os

import pytest

from kubernetes_mgmt_pv.doors import cli
from kubernetes_mgmt_pv.request import param_model
from kubernetes_mgmt_pv.vnf_package import lcm_bodies
from tests.unit import cli_support
from tests.unit.cli_support import sample_request

REQUESTS_V2 = os.path.join(cli_support.ROOT, 'samples', 'requests-v2')
UNCHECKED = 'unchecked-offline'
VNFD_ID = '32ab1f35-a1f4-4798-9433-2bab9c77e6e8'
VNFC_UUID = '5e1c2a4b-9d3f-4b6e-8a7c-1f0e2d3c4b5a'
DF = 'Definitions/sample_kubernetes_df_%s.yaml: policies.scaling_aspects.' \
    'properties.aspects.%s'


def v2_sample(name):
    with open(os.path.join(REQUESTS_V2, name)) as stream:
        return json.load(stream)


@pytest.mark.parametrize('body, kind', [
    ({'flavourId': 'simple'}, 'instantiate'),
    ({'instantiationLevelId': 'instantiation_level_1'}, 'instantiate'),
    ({'type': 'SCALE_OUT', 'aspectId': 'a'}, 'scale'),
    ({'aspectId': 'a'}, 'scale'),
    ({'cause': 'x'}, 'heal'),
    ({'vnfcInstanceId': []}, 'heal'),
    ({'additionalParams': {'all': True}}, 'heal'),
    ({'additionalParams': {'skip_pv_check_if_unreachable': True}}, 'heal'),
    ({'terminationType': 'FORCEFUL'}, 'terminate'),
    ({'vnfdId': VNFD_ID, 'vnfInstanceName': 'x'}, 'create'),
    ({'vnfdId': VNFD_ID, 'additionalParams': {}}, 'change_vnfpkg'),
    ({}, None),
    ({'additionalParams': {}}, None),
    ({'flavourId': 'simple', 'aspectId': 'a'}, None),
    ({'terminationType': 'FORCEFUL', 'cause': 'x'}, None),
])
def test_the_kind_of_a_body_by_its_keys(body, kind):
    assert lcm_bodies.kind_of(body) == kind


def test_the_samples_kinds():
    for name, kind in (('scale_out_worker.json', 'scale'),
                       ('scale_in_worker.json', 'scale'),
                       ('heal_entire_cluster.json', 'heal'),
                       ('heal_storage_server.json', 'heal'),
                       ('instantiate_simple.json', 'instantiate')):
        assert lcm_bodies.kind_of(sample_request(name)) == kind
        assert lcm_bodies.kind_of(v2_sample(name)) == kind


def test_a_body_of_no_known_kind_names_the_option(built_zip, validate):
    assert validate(built_zip, {'additionalParams': {}}) == (
        1, {('request-kind-unknown', '$')})
    assert '--kind' in validate.findings[0]['message']


def test_kind_option_overrides_the_keys(built_zip, validate):
    body = {'additionalParams': {}}
    assert validate(built_zip, body, '--kind', 'heal') == (
        0, {(UNCHECKED, 'vnfcInstanceId')})
    assert validate(built_zip, body, '--kind', 'instantiate') == (
        1, {('flavour-missing', 'flavourId')})


def test_a_scale_sample_is_no_instantiate_request(built_zip, validate):
    code, found = validate(built_zip, sample_request('scale_out_worker.json'))
    assert (code, found) == (0, {(UNCHECKED, 'numberOfSteps')})
    note, = validate.findings
    assert note['severity'] == 'note'
    assert 'out 2 step(s) and in 0 in flavour simple' in note['message']


def _scale(**changes):
    body = {'type': 'SCALE_OUT', 'aspectId': 'worker_instance',
            'numberOfSteps': 1}
    body.update(changes)
    return {key: value for key, value in body.items() if value is not None}


@pytest.mark.parametrize('body, code, expected', [
    (_scale(), 0, set()),
    (_scale(numberOfSteps=None), 0, set()),
    (_scale(numberOfSteps=2, type='SCALE_IN'), 0, set()),
    (_scale(numberOfSteps=3), 1, {('scale-steps-exceed', 'numberOfSteps')}),
    (_scale(numberOfSteps=0), 1, {('scale-invalid', 'numberOfSteps')}),
    (_scale(numberOfSteps='1'), 1, {('scale-invalid', 'numberOfSteps')}),
    (_scale(numberOfSteps=True), 1, {('scale-invalid', 'numberOfSteps')}),
    (_scale(type='SCALE_UP'), 1, {('scale-invalid', 'type')}),
    (_scale(aspectId='master_instance'), 1,
     {('scale-aspect-fixed', 'aspectId')}),
])
def test_scale_bodies(built_zip, validate, body, code, expected):
    assert validate(built_zip, body) == (
        code, expected | {(UNCHECKED, 'numberOfSteps')})


@pytest.mark.parametrize('aspect', ['storage_instance', 7, None])
def test_a_scale_of_an_aspect_the_package_lacks(built_zip, validate, aspect):
    assert validate(built_zip, _scale(aspectId=aspect)) == (
        1, {('scale-aspect-unknown', 'aspectId')})
    assert 'master_instance, worker_instance' in \
        validate.findings[0]['message']


def test_steps_beyond_one_flavour_only_warn(package, validate):
    path = package / 'Definitions' / 'sample_kubernetes_df_ha.yaml'
    cli_support.edit_yaml(path, lambda document: document[
        'topology_template']['policies'][0]['scaling_aspects'][
        'properties']['aspects']['worker_instance'].update(
            max_scale_level=4))
    code, found = validate.rebuilt(package, _scale(numberOfSteps=3))
    assert (code, found) == (0, {('scale-steps-exceed', 'numberOfSteps'),
                                 (UNCHECKED, 'numberOfSteps')})
    message = validate.findings[0]['message']
    assert 'flavour simple (%s)' % (DF % ('simple', 'worker_instance')) \
        in message and 'flavour ha' not in message


def _heal(ids=None, **params):
    body = {'cause': 'test'}
    if ids is not None:
        body['vnfcInstanceId'] = ids
    if params:
        body['additionalParams'] = params
    return body


NOTE_IDS = (UNCHECKED, 'vnfcInstanceId')


@pytest.mark.parametrize('api, body, code, expected', [
    ('v1', _heal(), 0, set()),
    ('v1', _heal([VNFC_UUID]), 0, set()),
    ('v1', _heal(['masterNode-' + VNFC_UUID]), 1,
     {('vnfc-id-shape', 'vnfcInstanceId[0]')}),
    ('v1', _heal([lcm_bodies.PLACEHOLDER_UUID]), 0,
     {('vnfc-placeholder', 'vnfcInstanceId[0]')}),
    ('v1', _heal('x'), 1, {('heal-invalid', 'vnfcInstanceId')}),
    ('v1', _heal([VNFC_UUID, 3]), 1, {('heal-invalid', 'vnfcInstanceId')}),
    ('v2', _heal(['storage_server-' + VNFC_UUID]), 0, set()),
    ('v2', _heal([VNFC_UUID]), 0, {('vnfc-id-shape', 'vnfcInstanceId[0]')}),
    ('v2', _heal(['nodeX-' + VNFC_UUID]), 0,
     {('vnfc-id-shape', 'vnfcInstanceId[0]')}),
    ('v2', _heal(all=True), 0, set()),
    ('v1', _heal(all=True), 0, {('heal-param-ignored',
                                 'additionalParams.all')}),
    ('v2', _heal(all='yes'), 1, {('heal-invalid', 'additionalParams.all')}),
    ('v2', _heal(skip_pv_check_if_unreachable=1), 1,
     {('heal-invalid', 'additionalParams.skip_pv_check_if_unreachable')}),
    ('v1', _heal(skip_pv_check_if_unreachable=True), 0, set()),
    ('v1', _heal(skip_pv_check=True), 0,
     {('heal-param-unknown', 'additionalParams.skip_pv_check')}),
    ('v1', _heal(worker_node_username='ubuntu'), 0, set()),
])
def test_heal_bodies(built_zip, v2_zip, validate, api, body, code, expected):
    package = built_zip if api == 'v1' else v2_zip
    # An id list that is no list of strings is not looked at further.
    note = set() if ('heal-invalid', 'vnfcInstanceId') in expected else {
        NOTE_IDS}
    assert validate(package, body) == (code, expected | note)


def test_heal_with_logins_notes_what_only_the_instance_knows(v2_zip,
                                                             validate):
    body = v2_sample('heal_storage_server.json')
    body['vnfcInstanceId'] = ['storage_server-' + VNFC_UUID]
    assert validate(v2_zip, body) == (0, {
        NOTE_IDS, (UNCHECKED, 'additionalParams.' + param_model.ROOT)})


@pytest.mark.parametrize('body, code, expected', [
    ({'terminationType': 'FORCEFUL'}, 0, set()),
    ({'terminationType': 'GRACEFUL', 'gracefulTerminationTimeout': 60}, 0,
     set()),
    ({'terminationType': 'forceful'}, 1,
     {('terminate-invalid', 'terminationType')}),
    ({'gracefulTerminationTimeout': 60}, 1,
     {('terminate-invalid', 'terminationType')}),
    ({'terminationType': 'GRACEFUL', 'gracefulTerminationTimeout': -1}, 1,
     {('terminate-invalid', 'gracefulTerminationTimeout')}),
    ({'terminationType': 'FORCEFUL', 'gracefulTerminationTimeout': 60}, 0,
     {('graceful-timeout-unused', 'gracefulTerminationTimeout')}),
])
def test_terminate_bodies(built_zip, validate, body, code, expected):
    assert validate(built_zip, body) == (
        code, expected | {(UNCHECKED, 'terminationType')})


@pytest.mark.parametrize('body, code, expected', [
    ({'vnfdId': VNFD_ID, 'vnfInstanceName': 'k8s'}, 0, set()),
    ({'vnfdId': VNFD_ID.replace('3', '4'), 'vnfInstanceName': 'k8s'}, 1,
     {('vnfd-id-mismatch', 'vnfdId')}),
    ({'vnfdId': 7, 'vnfInstanceName': 'k8s'}, 1,
     {('vnfd-id-invalid', 'vnfdId')}),
    ({'vnfdId': VNFD_ID, 'additionalParams': {}}, 0, set()),
    ({'vnfdId': 'other', 'additionalParams': {}}, 1,
     {('vnfd-id-mismatch', 'vnfdId')}),
])
def test_create_and_change_bodies_name_the_package(built_zip, validate,
                                                   body, code, expected):
    assert validate(built_zip, body) == (
        code, expected | {(UNCHECKED, 'vnfdId')})
    if expected:
        assert VNFD_ID in validate.findings[0]['message']


def test_notes_are_counted_in_text_output(built_zip, tmp_path, capsys):
    request = tmp_path / 'terminate.json'
    request.write_text(json.dumps({'terminationType': 'FORCEFUL'}))
    assert cli.main(['validate', '--package', str(built_zip),
                     '--request', str(request)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith('NOTE    unchecked-offline: terminationType: ')
    assert lines[-1] == '0 error(s), 0 warning(s), 1 note(s)'
