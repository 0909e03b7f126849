"""plan_classes: which StorageClasses to create, leave or replace."""

import json

import pytest

from kubernetes_mgmt_pv import exceptions
from kubernetes_mgmt_pv.request import storage_class_params as scp
from kubernetes_mgmt_pv.storage import csi_driver
from kubernetes_mgmt_pv.storage import dynamic

SPEC = scp.StorageClassSpec('nfs', '/volume/nfs/dynamic')


def live(*documents, **extra):
    """As the API server returns them: defaults added."""
    return json.dumps({'items': [dict(document, allowVolumeExpansion=False,
                                      **extra) for document in documents]})


def desired(spec=SPEC, server='10.0.0.7'):
    return csi_driver.storage_class(spec, server)


@pytest.mark.parametrize('current, apply, replace, unchanged', [
    ([], ['nfs'], [], []),
    ([desired()], [], [], ['nfs']),
    # The Storage server came back at another address: parameters cannot
    # be updated, the class is created again.
    ([desired(server='10.0.0.8')], [], ['nfs'], []),
    ([desired(scp.StorageClassSpec('nfs', '/volume/nfs/dynamic',
                                   on_delete='delete'))], [], ['nfs'], []),
    ([desired(scp.StorageClassSpec('nfs', '/volume/nfs/dynamic',
                                   mount_options=('nfsvers=4.2',)))],
     [], ['nfs'], []),
    # Only the default-class annotation differs: applied in place.
    ([desired(scp.StorageClassSpec('nfs', '/volume/nfs/dynamic',
                                   default_class=True))], ['nfs'], [], []),
    ([desired(scp.StorageClassSpec('other', '/volume/nfs/dynamic'))],
     ['nfs'], [], []),
])
def test_plan_classes(current, apply, replace, unchanged):
    plan = dynamic.plan_classes([desired()], live(*current))
    assert [d['metadata']['name'] for d in plan.apply] == apply
    assert [d['metadata']['name'] for d in plan.replace] == replace
    assert list(plan.unchanged) == unchanged


def test_a_listing_that_is_no_list_is_an_error():
    with pytest.raises(exceptions.ClusterInstallError):
        dynamic.plan_classes([desired()], '{"kind": "Status"}')
