"""The whole hook path of the cluster feature with Tacker's real VIM
registry: the driver installs Kubernetes (the sample install script on the
testbed's kubeadm stand-ins), then registers the cluster as a Kubernetes
VIM through its own seams (register_vim / delete_vim of the base class,
into tacker_compat and Tacker's NfvoPlugin), and the persistent volumes go
on top.

Real Tacker: NfvoPlugin and its database code, the Kubernetes VIM driver
(it checks the cluster with the token and the CA, then encrypts both with
a Fernet key kept by the key manager), VimClient and vnflcm utils
decrypting them, Tacker's Kubernetes client (KubernetesHTTPAPI), the
request contexts, the VnfInstance (with its InstantiatedVnfInfo and
VimConnectionInfo) saved in and read back from the database, and the
request objects as Tacker's v1 API makes them. Not real: the database is
SQLite and the key manager in memory (conftest); the driver's two lookups
that need Tacker's package store and an OpenStack VIM (vnf_package_dir,
vim_access_info) answer with the testbed's package and fake OpenStack.

The hooks get the arguments Tacker 16's VnfLcmDriver gives them
(instantiate_vnf, heal_vnf, terminate_vnf): a request context per
operation, the VnfInstance as the conductor has it, the LCM request,
grant=None, grant_request=None and, for the *_end hooks but
terminate_end, vnf= a copy of the VNF dict.
"""

import copy
import datetime
import json
import os
import sqlite3
import time
import uuid

import pytest

pytest.importorskip('tacker.objects')

from kubernetes.client import exceptions as k8s_exceptions  # noqa: E402
from tacker.common.container import kubernetes_utils  # noqa: E402
from tacker.common import utils as tacker_utils  # noqa: E402
from tacker.db.vnfm import vnfm_db  # noqa: E402
from tacker.extensions import nfvo  # noqa: E402
from tacker import objects  # noqa: E402
from tacker.objects import fields  # noqa: E402
from tacker.vnflcm import utils as vnflcm_utils  # noqa: E402
from tacker.vnfm import vim_client  # noqa: E402

from kubernetes_mgmt_pv.cluster import cluster_workflow  # noqa: E402
from kubernetes_mgmt_pv import config  # noqa: E402
from kubernetes_mgmt_pv.doors import tacker_compat  # noqa: E402
from kubernetes_mgmt_pv.doors import tacker_v1  # noqa: E402
from kubernetes_mgmt_pv import exceptions  # noqa: E402
from kubernetes_mgmt_pv import mgmt_driver  # noqa: E402
from kubernetes_mgmt_pv.request import param_model  # noqa: E402
from testbed import hosts  # noqa: E402
from testbed import virtual_vnf  # noqa: E402
from tests.tacker_integration.support import REQUESTS  # noqa: E402

VDU_OF_CP = {virtual_vnf.STORAGE_CP: 'storage_server',
             virtual_vnf.MASTER_CP: 'masterNode',
             virtual_vnf.WORKER_CP: 'workerNode'}
PVS = ('nfs-pv1', 'nfs-pv2', 'nfs-pv3')


# -- fixtures -----------------------------------------------------------------

@pytest.fixture
def virtual(vim_conf):
    """Storage (1 volume), 1 Master, 1 Worker; the driver installs
    Kubernetes. With the testbed's fast-failure options."""
    reason = hosts.require_testbed()
    if reason:
        pytest.skip(reason)
    virtual_vnf.use_test_options()
    try:
        with virtual_vnf.VirtualCluster(masters=1, workers=1, volumes=1,
                                        install_cluster=True) as cluster:
            yield cluster
    finally:
        config.CONF.reset()


@pytest.fixture
def timings():
    """Seconds per step, printed at the end (pytest -s shows them)."""
    seen = {}
    yield seen
    print('\ntimings: ' + ', '.join('%s %.1fs' % item
                                    for item in seen.items()))


def driver_for(package_dir, openstack_access_info):
    """The entry-point driver class, with only the two lookups that need
    Tacker's package store and an OpenStack VIM answered by the testbed:
    register_vim / delete_vim stay the base class's, into tacker_compat
    and Tacker's NfvoPlugin."""

    class Driver(mgmt_driver.KubernetesPvMgmtDriver):
        def vnf_package_dir(self, context, vnf_instance):
            return package_dir

        def vim_access_info(self, context, vnf_instance):
            return openstack_access_info()

    for seam in ('register_vim', 'delete_vim'):
        assert getattr(Driver, seam) is getattr(
            tacker_v1.KubernetesMgmtDriver, seam), seam
    return Driver()


# -- Tacker's objects ---------------------------------------------------------

def vnfc_resource_info(cluster):
    """vnfcResourceInfo of the cluster's VMs, as Tacker builds it."""
    return [objects.VnfcResourceInfo(
        id=vnfc.vnfc_id, vdu_id=VDU_OF_CP[vnfc.cp_name],
        compute_resource=objects.ResourceHandle(
            resource_id=vnfc.server_id,
            vim_level_resource_type='OS::Nova::Server'),
        vnfc_cp_info=[objects.VnfcCpInfo(id=str(uuid.uuid4()),
                                         cpd_id=vnfc.cp_name)])
            for vnfc in cluster.vnfcs.values()]


def create_vnf_instance(context, additional_params, stack_id=None,
                        vnfcs=(), vnfd_id=None):
    """An instantiated VnfInstance saved as Tacker keeps it: created by
    the v1 API with the OpenStack VIM as vimConnectionInfo[0], then given
    its InstantiatedVnfInfo (the Heat stack, the VMs, the instantiate
    request's additionalParams)."""
    objects.register_all()
    instance = objects.VnfInstance(
        context=context, vnfd_id=vnfd_id or str(uuid.uuid4()),
        vnf_provider='Company', vnf_product_name='Sample VNF',
        vnf_software_version='1.0', vnfd_version='1.0',
        vnf_pkg_id=str(uuid.uuid4()), tenant_id=context.project_id)
    instance.create()
    instance.vim_connection_info = [objects.VimConnectionInfo(
        id=str(uuid.uuid4()), vim_id=str(uuid.uuid4()), vim_type='openstack',
        access_info={}, interface_info={}, extra={})]
    instance.instantiated_vnf_info = objects.InstantiatedVnfInfo(
        flavour_id='simple', vnf_instance_id=instance.id,
        vnf_state=fields.VnfOperationalStateType.STARTED,
        instance_id=stack_id, ext_cp_info=[],
        vnfc_resource_info=list(vnfcs),
        additional_params=copy.deepcopy(additional_params))
    instance.instantiation_state = fields.VnfInstanceState.INSTANTIATED
    instance.save()
    return instance


def vnf_dict(instance):
    """What VnfLcmDriver passes as ``vnf`` (a copy of its VNF dict)."""
    return {'id': instance.id, 'vnfd_id': instance.vnfd_id,
            'tenant_id': instance.tenant_id, 'status': 'ACTIVE',
            'before_error_point': 0, 'attributes': {}}


def instantiate_request(context, instance, additional_params):
    """InstantiateVnfRequest as the v1 API makes it from the body (the
    OpenStack VIM in vimConnectionInfo), snake_cased."""
    openstack = instance.vim_connection_info[0]
    return objects.InstantiateVnfRequest.obj_from_primitive({
        'flavour_id': 'simple',
        'additional_params': copy.deepcopy(additional_params),
        'vim_connection_info': [{'id': openstack.id,
                                 'vim_id': openstack.vim_id,
                                 'vim_type': 'openstack'}]}, context)


class Tacker(object):
    """Calls the hooks as tacker-conductor does: each operation comes with
    its own request context and the VnfInstance read with it."""

    def __init__(self, hook_context, driver, instance_id, additional_params):
        self.hook_context = hook_context
        self.driver = driver
        self.instance_id = instance_id
        self.additional_params = additional_params

    def instance(self, context=None):
        return objects.VnfInstance.get_by_id(context or self.hook_context(),
                                             self.instance_id)

    def instantiate_end(self):
        context = self.hook_context()
        instance = self.instance(context)
        self.driver.instantiate_end(
            context=context, vnf_instance=instance,
            instantiate_vnf_request=instantiate_request(
                context, instance, self.additional_params),
            grant=None, grant_request=None, vnf=vnf_dict(instance))

    def heal_entire_vnf(self, respawn):
        """heal_vnf of an SOL003 heal (no vnfcInstanceId): heal_start,
        Tacker's respawn (``respawn(instance)``, then the instance saved),
        heal_end; one context and one instance object, as in heal_vnf."""
        context = self.hook_context()
        instance = self.instance(context)
        with open(os.path.join(REQUESTS, 'heal_entire_cluster.json')) as f:
            body = tacker_utils.convert_camelcase_to_snakecase(json.load(f))
        request = objects.HealVnfRequest(context=context, **body)  # v1 API
        assert request.vnfc_instance_id == []
        self.driver.heal_start(context=context, vnf_instance=instance,
                               heal_vnf_request=request, grant=None,
                               grant_request=None)
        respawn(instance)
        instance.save()
        self.driver.heal_end(context=context, vnf_instance=instance,
                             heal_vnf_request=request, grant=None,
                             grant_request=None, vnf=vnf_dict(instance))

    def terminate_end(self, instance=None, context=None):
        context = context or self.hook_context()
        self.driver.terminate_end(
            context=context, vnf_instance=instance or self.instance(context),
            terminate_vnf_request=objects.TerminateVnfRequest
            .obj_from_primitive({'termination_type': 'FORCEFUL'}, context),
            grant=None, grant_request=None)


# -- what Tacker has ----------------------------------------------------------

def live_vims(hook_context):
    """The VIMs NfvoPlugin lists (not soft-deleted), any project."""
    return tacker_compat.nfvo_plugin().get_vims(hook_context(admin=True))


def kubernetes_infos(instance):
    return [info for info in instance.vim_connection_info
            if info.vim_type == 'kubernetes']


def vim_rows(tacker_db):
    """Every row of Tacker's VIM tables, read with sqlite3."""
    connection = sqlite3.connect(tacker_db)
    connection.row_factory = sqlite3.Row
    try:
        return {table: [dict(row) for row in connection.execute(
            'SELECT * FROM %s' % table)] for table in ('vims', 'vimauths')}
    finally:
        connection.close()


def leaves(value):
    """The strings in a column value, JSON documents taken apart."""
    if isinstance(value, bytes):
        value = value.decode()
    if isinstance(value, str):
        try:
            parsed = json.loads(value)
        except ValueError:
            yield value
            return
        if isinstance(parsed, str):
            yield parsed
            return
        value = parsed
    if isinstance(value, dict):
        for key, item in value.items():
            yield str(key)
            yield from leaves(item)
    elif isinstance(value, list):
        for item in value:
            yield from leaves(item)
    elif value is not None:
        yield str(value)


def assert_vim_rows_clean(tacker_db, cluster, secrets, token):
    """No node (or OpenStack) password anywhere in Tacker's VIM rows, nor
    the token or the CA in clear."""
    node_passwords = {cluster.testbed.password, virtual_vnf.STORAGE_PASSWORD,
                      cluster.openstack.password}
    rows = vim_rows(tacker_db)
    assert rows['vims'] and rows['vimauths']
    for auth in rows['vimauths']:
        assert auth['password'] is None
    for table, table_rows in rows.items():
        for row in table_rows:
            for column, value in row.items():
                for text in leaves(value):
                    assert text not in node_passwords, (table, column)
                    assert 'password' not in text.lower(), (table, column)
                    assert token not in text, (table, column)
                    assert 'BEGIN CERTIFICATE' not in text, (table, column)
                    # 'ubuntu' is long enough to look for inside the
                    # encrypted blobs too ('nfs' could occur by chance).
                    assert cluster.testbed.password not in text, (
                        table, column)
    for payload in secrets.values():  # the Fernet keys, nothing else
        assert payload not in node_passwords


def vim_auth(hook_context, info):
    """The VIM as Tacker's LCM gets it for a vimConnectionInfo entry:
    decrypted, through vnflcm utils and VimClient."""
    access = vnflcm_utils._get_vim(hook_context(), [info])
    assert access['vim_type'] == 'kubernetes'
    assert access['vim_id'] == info.vim_id
    direct = vim_client.VimClient().get_vim(hook_context(), info.vim_id)
    assert direct['vim_auth']['bearer_token'] == \
        access['access_info']['bearer_token']
    assert direct['vim_auth']['ssl_ca_cert'] == \
        access['access_info']['ssl_ca_cert']
    return access['access_info']


def namespaces(auth):
    """Namespace names listed with Tacker's Kubernetes client (as its
    Kubernetes infra driver connects: bearer token, CA file)."""
    api = kubernetes_utils.KubernetesHTTPAPI()
    descriptor, ca_file = api.create_ca_cert_tmp_file(auth['ssl_ca_cert'])
    try:
        core = api.get_core_v1_api_client({
            'auth_url': auth['auth_url'],
            'bearer_token': auth['bearer_token'],
            'ca_cert_file': ca_file})
        return [item.metadata.name for item in
                core.list_namespace(_request_timeout=10).items]
    finally:
        api.close_tmp_file(descriptor, ca_file)


def pv_phases(master):
    return {name: volume['status']['phase'] for name, volume in
            virtual_vnf.persistent_volumes(master).items()}


def assert_cluster_with_volumes(cluster):
    master = cluster.host('master1')
    assert virtual_vnf.node_readiness(master) == {'master1': 'True',
                                                  'worker1': 'True'}
    assert pv_phases(master) == dict.fromkeys(PVS, 'Available')


# -- the hook path ------------------------------------------------------------

def test_cluster_hooks_with_tackers_vim_registry(
        virtual, hook_context, tacker_db, vim_secrets, timings):
    params = virtual.additional_params()
    vim_name = params[param_model.ROOT]['vim_name']
    project = hook_context().project_id
    master = virtual.host('master1')
    url = 'https://%s:6443' % master.ip
    instance_id = create_vnf_instance(
        hook_context(), params, stack_id=virtual.stack_id,
        vnfcs=vnfc_resource_info(virtual), vnfd_id=virtual.vnfd_id).id
    tacker = Tacker(hook_context, driver_for(
        virtual.package_dir, virtual.openstack.access_info),
        instance_id, params)
    openstack = tacker.instance().vim_connection_info[0]

    # instantiate_end: Kubernetes installed, the VIM registered in Tacker.
    started = time.monotonic()
    tacker.instantiate_end()
    timings['instantiate_end'] = time.monotonic() - started

    [vim] = live_vims(hook_context)
    assert (vim['name'], vim['type'], vim['auth_url'], vim['tenant_id']) == \
        (vim_name, 'kubernetes', url, project)
    assert vim['auth_cred']['key_type'] == 'barbican_key'
    assert len(vim_secrets) == 1
    stored = tacker.instance()
    # Appended after the OpenStack VIM, which Tacker's LCM takes from [0].
    assert [(info.vim_type, info.vim_id) for info in
            stored.vim_connection_info] == [
        ('openstack', openstack.vim_id), ('kubernetes', vim['id'])]
    assert stored.vim_connection_info[0].id == openstack.id
    [info] = kubernetes_infos(stored)
    assert uuid.UUID(info.id)
    assert (info.access_info, info.interface_info, info.extra) == \
        ({'auth_url': url}, {}, {})

    auth = vim_auth(hook_context, info)
    assert auth['auth_url'] == url
    assert auth['ssl_ca_cert'] == virtual.kube.ca_pem
    assert auth['bearer_token'] != virtual.kube.token  # the ServiceAccount's
    before = virtual.kube.request_log.count(('GET', '/api/v1/namespaces'))
    assert {'default', 'kube-system'} <= set(namespaces(auth))
    assert virtual.kube.request_log.count(
        ('GET', '/api/v1/namespaces')) == before + 1  # through master1
    assert_vim_rows_clean(tacker_db, virtual, vim_secrets,
                          auth['bearer_token'])
    assert_cluster_with_volumes(virtual)

    # A re-run (e.g. the operator retries): the same VIM, nothing added.
    started = time.monotonic()
    tacker.instantiate_end()
    timings['instantiate_end again'] = time.monotonic() - started
    assert [v['id'] for v in live_vims(hook_context)] == [vim['id']]
    stored = tacker.instance()
    assert [i.vim_id for i in stored.vim_connection_info] == \
        [openstack.vim_id, vim['id']]
    assert len(vim_secrets) == 1
    assert_cluster_with_volumes(virtual)

    # Entire-cluster heal: the VIM goes with the old cluster, a new one
    # comes with the new cluster (new API server, new CA and token).
    old_token = auth['bearer_token']
    deleted = []

    def respawn(instance):
        timings['heal_start'] = time.monotonic() - started
        # heal_start has run: the VIM and its connection info are gone.
        with pytest.raises(nfvo.VimNotFoundException):
            tacker_compat.nfvo_plugin().get_vim(hook_context(), vim['id'])
        deleted.append((live_vims(hook_context), dict(vim_secrets),
                        [i.vim_type for i in tacker.instance()
                         .vim_connection_info],
                        pv_phases(master)))
        # Tacker re-creates every VM, then records them.
        replacing = time.monotonic()
        virtual.replace_everything()
        instance.instantiated_vnf_info.vnfc_resource_info = \
            vnfc_resource_info(virtual)
        timings['VMs replaced'] = time.monotonic() - replacing
        respawned.append(time.monotonic())

    respawned = []
    started = time.monotonic()
    tacker.heal_entire_vnf(respawn)
    timings['heal_end'] = time.monotonic() - respawned[0]
    assert deleted == [([], {}, ['openstack'], {})]

    [new_vim] = live_vims(hook_context)
    assert new_vim['id'] != vim['id']
    assert (new_vim['name'], new_vim['type'], new_vim['auth_url']) == \
        (vim_name, 'kubernetes', url)
    stored = tacker.instance()
    assert [i.vim_id for i in stored.vim_connection_info] == \
        [openstack.vim_id, new_vim['id']]
    new_auth = vim_auth(hook_context, kubernetes_infos(stored)[0])
    assert new_auth['bearer_token'] != old_token
    assert new_auth['ssl_ca_cert'] == virtual.kube.ca_pem != \
        auth['ssl_ca_cert']
    assert 'kube-system' in namespaces(new_auth)
    assert ('GET', '/api/v1/namespaces') in virtual.kube.request_log
    with pytest.raises(k8s_exceptions.ApiException) as rejected:
        namespaces(dict(new_auth, bearer_token=old_token))
    assert rejected.value.status == 401  # the old cluster's token
    assert len(vim_secrets) == 1
    assert_vim_rows_clean(tacker_db, virtual, vim_secrets,
                          new_auth['bearer_token'])
    assert_cluster_with_volumes(virtual)

    # terminate_end: the VIM, its key and its connection info deleted.
    started = time.monotonic()
    tacker.terminate_end()
    timings['terminate_end'] = time.monotonic() - started
    assert live_vims(hook_context) == []
    assert vim_secrets == {}
    with pytest.raises(nfvo.VimNotFoundException):
        vim_client.VimClient().get_vim(hook_context(), new_vim['id'])
    stored = tacker.instance()
    assert [(i.id, i.vim_type) for i in stored.vim_connection_info] == \
        [(openstack.id, 'openstack')]

    # Again (e.g. a retried terminate): nothing to delete, no error.
    tacker.terminate_end()
    assert live_vims(hook_context) == []
    assert [i.vim_type for i in tacker.instance().vim_connection_info] == \
        ['openstack']


# -- terminate as Tacker 16 calls it ------------------------------------------

def sample_vim_name(instance):
    """The VIM name of the sample request's cluster: it gives no vim_name
    (a second VNF would collide), so the instance's own."""
    return 'kubernetes_vim_%s' % instance.id


def test_terminate_end_after_tackers_terminate_deletes_the_vim(
        hook_context, kube_api, credentials, vim_secrets):
    """No testbed needed: terminate_end contacts no VM. The VIM is
    registered through the driver's own seam, as instantiate_end does."""
    with open(os.path.join(REQUESTS, 'instantiate_simple.json')) as stream:
        params = json.load(stream)['additionalParams']
    driver = driver_for('/nonexistent', dict)
    context = hook_context()
    instance = create_vnf_instance(context, params)
    vim_name = sample_vim_name(instance)
    token, ca_pem = credentials
    driver.register_vim(context, instance, vim_name,
                        cluster_workflow.ClusterAccess(
                            url=kube_api.url, bearer_token=token,
                            ca_cert=ca_pem))
    assert len(live_vims(hook_context)) == 1

    # VnfLcmDriver.terminate_vnf (tacker 16.0.0, vnflcm_driver.py lines
    # 730-732 and 755-760): after the Heat stack is deleted, the instance
    # is reinitialised and saved without vimConnectionInfo, then the same
    # object goes to terminate_end.
    context = hook_context()
    instance = objects.VnfInstance.get_by_id(context, instance.id)
    instance.instantiated_vnf_info.reinitialize()
    instance.vim_connection_info = []
    instance.task_state = None
    instance.save()
    Tacker(hook_context, driver, instance.id, params).terminate_end(
        instance=instance, context=context)

    assert live_vims(hook_context) == []
    assert vim_secrets == {}


def test_terminate_start_refuses_while_a_vnf_uses_the_vim(
        hook_context, kube_api, credentials, vim_secrets):
    """Refused before Heat deletes anything: the VIM, its key and the
    instance's connection info stay, and Heat is not asked. Once the CNF
    is gone, terminate_start deletes the VIM and terminate_end, after
    Tacker's terminate, finds nothing left to delete."""
    with open(os.path.join(REQUESTS, 'instantiate_simple.json')) as stream:
        params = json.load(stream)['additionalParams']

    def no_heat():
        raise AssertionError('terminate_start must not contact Heat')

    driver = driver_for('/nonexistent', no_heat)
    instance = create_vnf_instance(hook_context(), params)
    vim_name = sample_vim_name(instance)
    token, ca_pem = credentials
    vim_id = driver.register_vim(hook_context(), instance, vim_name,
                                 cluster_workflow.ClusterAccess(
                                     url=kube_api.url, bearer_token=token,
                                     ca_cert=ca_pem))
    # A CNF instantiated on the cluster: Tacker's "vnf" row with this VIM.
    cnf = vnfm_db.VNF(id=str(uuid.uuid4()), tenant_id=instance.tenant_id,
                      name='cnf', status='ACTIVE', vim_id=vim_id,
                      deleted_at=datetime.datetime.min)
    session = hook_context().session
    session.add(cnf)
    session.commit()
    keys = dict(vim_secrets)
    tacker = Tacker(hook_context, driver, instance.id, params)

    def terminate_start():
        context = hook_context()
        stored = tacker.instance(context)
        driver.terminate_start(
            context=context, vnf_instance=stored,
            terminate_vnf_request=objects.TerminateVnfRequest
            .obj_from_primitive({'termination_type': 'FORCEFUL'}, context),
            grant=None, grant_request=None, vnf=vnf_dict(stored))

    with pytest.raises(exceptions.MgmtDriverError) as refused:
        terminate_start()
    assert vim_id in str(refused.value) and cnf.id in str(refused.value)
    assert [vim['id'] for vim in live_vims(hook_context)] == [vim_id]
    assert vim_secrets == keys
    assert [info.vim_id for info in kubernetes_infos(tacker.instance())] == \
        [vim_id]

    session.delete(cnf)  # the CNF terminated and deleted
    session.commit()
    terminate_start()
    assert live_vims(hook_context) == []
    assert vim_secrets == {}
    assert kubernetes_infos(tacker.instance()) == []

    context = hook_context()  # Tacker's terminate, then terminate_end
    stored = tacker.instance(context)
    stored.instantiated_vnf_info.reinitialize()
    stored.vim_connection_info = []
    stored.save()
    tacker.terminate_end(instance=stored, context=context)
    assert live_vims(hook_context) == []
