"""The only module that imports Tacker.

Tacker is not a requirement of this package: without it, a stand-in
abstract base with the same hook names lets the core and the driver
classes run (and be tested) anywhere. What needs Tacker's database lives
here too: the VNF package directory and the VIM credentials (lookups), and
the registration of the cluster as a Kubernetes VIM through Tacker's
NfvoPlugin; tests replace them through the driver's own seam methods.
Tacker is imported lazily, inside the functions, except for the base class.
"""

import abc
import datetime
import json
import threading

from oslo_log import log as logging

from kubernetes_mgmt_pv.doors import v2_mapping
from kubernetes_mgmt_pv.doors import vim_errors
from kubernetes_mgmt_pv import exceptions
from kubernetes_mgmt_pv import redaction

LOG = logging.getLogger(__name__)

HOOKS = (
    'instantiate_start', 'instantiate_end',
    'terminate_start', 'terminate_end',
    'scale_start', 'scale_end',
    'heal_start', 'heal_end',
    'change_external_connectivity_start', 'change_external_connectivity_end',
    'modify_information_start', 'modify_information_end',
)

try:
    from tacker.vnfm.mgmt_drivers.vnflcm_abstract_driver import \
        VnflcmMgmtAbstractDriver
    TACKER_AVAILABLE = True
except ImportError:
    TACKER_AVAILABLE = False

    def _abstract(name):
        def method(self, *args, **kwargs):
            raise NotImplementedError(name)
        method.__name__ = name
        return abc.abstractmethod(method)

    VnflcmMgmtAbstractDriver = abc.ABCMeta(
        'VnflcmMgmtAbstractDriver', (object,),
        {name: _abstract(name) for name in
         ('get_type', 'get_name', 'get_description') + HOOKS})


def load_tacker_config(args):
    """Parse Tacker's configuration (``--config-file`` ... ``args``) into
    the global CONF, as tacker-conductor does at start: a Tacker v2 hook
    runs in a process of its own, which has not read tacker.conf."""
    from oslo_config import cfg
    if TACKER_AVAILABLE:
        from tacker.common import config as tacker_config  # noqa: F401
        _register_conductor_service_credentials(cfg)
    cfg.CONF(args=list(args), project='tacker', default_config_files=[])


def tacker_paths():
    """Tacker's ``log_dir`` and ``state_path`` ([DEFAULT]), each None when
    unset or not registered (no Tacker)."""
    from oslo_config import cfg
    found = []
    for name in ('log_dir', 'state_path'):
        try:
            found.append(cfg.CONF[name] or None)
        except cfg.NoSuchOptError:
            found.append(None)
    return tuple(found)


# tacker-conductor registers these [keystone_authtoken] options itself (it
# runs without the auth middleware); registering a VIM reads them. Importing
# tacker.conductor.conductor_server for them would cost every v2 hook
# process seconds (it loads the whole conductor, v2's Kubernetes client
# included), so they are declared here as the conductor declares them:
# oslo.config accepts an identical declaration twice, and
# tests/tacker_integration checks that they still are identical.
_CONDUCTOR_SERVICE_CREDENTIALS = (
    ('user_domain_id', 'default', 'User Domain Id'),
    ('project_domain_id', 'default', 'Project Domain Id'),
    ('password', 'default', 'User Password'),
    ('username', 'default', 'User Name'),
    ('user_domain_name', 'Default', 'Use Domain Name'),
    ('project_name', 'default', 'Project Name'),
    ('project_domain_name', 'Default', 'Project Domain Name'),
    ('auth_url', 'http://localhost/identity/v3', 'Keystone endpoint'),
)


def _register_conductor_service_credentials(cfg):
    cfg.CONF.register_opts(
        [cfg.StrOpt(name, default=default, help=text)
         for name, default, text in _CONDUCTOR_SERVICE_CREDENTIALS],
        'keystone_authtoken')


def v2_heat_cert_verify():
    """How Tacker v2 verifies Heat's certificate: False, True, or the CA
    file ([v2_vnfm] heat_verify_cert, heat_ca_cert_file); True without
    Tacker."""
    if not TACKER_AVAILABLE:
        return True
    from tacker.sol_refactored.common import config as v2_config
    options = v2_config.CONF.v2_vnfm
    if options.heat_verify_cert and options.heat_ca_cert_file:
        return options.heat_ca_cert_file
    return bool(options.heat_verify_cert)


def project_context(openstack_vim_id):
    """An admin context of the project that owns the OpenStack VIM
    ``openstack_vim_id``, the project the Kubernetes VIM goes to: a v2
    hook gets no request context."""
    if not TACKER_AVAILABLE:
        raise exceptions.MgmtDriverError(
            'Tacker is not installed: the VIM registry needs it')
    from tacker import context as tacker_context
    from tacker.extensions import nfvo
    context = tacker_context.get_admin_context()
    try:
        vim = nfvo_plugin().get_vim(context, openstack_vim_id)
    except nfvo.VimNotFoundException:
        raise exceptions.MgmtDriverError(
            'The OpenStack VIM %s of the VNF instance is not in Tacker\'s '
            'VIM registry: its project owns the Kubernetes VIM'
            % openstack_vim_id) from None
    context.project_id = vim['tenant_id']
    return context


def _vnflcm_utils():
    if not TACKER_AVAILABLE:
        raise exceptions.MgmtDriverError(
            'Tacker is not installed: the VNF package and VIM lookups need '
            'it (outside Tacker, override the driver\'s vnf_package_dir and '
            'vim_access_info)')
    from tacker import objects
    from tacker.vnflcm import utils
    # Its lookups use Tacker's versioned objects (VnfPackageVnfd), which
    # tacker-conductor registers at start but a v2 hook's process has not.
    objects.register_all()
    return utils


def vnf_package_dir(context, vnf_instance):
    """Directory of the extracted VNF package (CSAR) of the instance."""
    return _vnflcm_utils()._get_vnf_package_path(context,
                                                 vnf_instance.vnfd_id)


def vim_access_info(context, vnf_instance):
    """Decrypted OpenStack VIM credentials (auth_url, username, ... region)."""
    utils = _vnflcm_utils()
    return utils._get_vim(context,
                          vnf_instance.vim_connection_info)['access_info']


# -- the Kubernetes VIM of the cluster ---------------------------------------

VIM_TYPE = 'kubernetes'
# Tacker's CLI requires a project name for a Kubernetes VIM ("it is the
# namespace in Kubernetes"); Tacker itself does not use it. 'default' is what
# the Tacker guides put there.
VIM_PROJECT = {'name': 'default'}

_nfvo_plugin = None
_nfvo_plugin_lock = threading.Lock()


def nfvo_plugin():
    """Tacker's NfvoPlugin, one per process, created on first use.

    In tacker-conductor, Tacker's own TackerManager already holds one (its
    VimClient reads VIMs through it): that instance is shared. Elsewhere the
    driver creates its own, once.
    """
    global _nfvo_plugin
    with _nfvo_plugin_lock:
        if _nfvo_plugin is None:
            if not TACKER_AVAILABLE:
                raise exceptions.MgmtDriverError(
                    'Tacker is not installed: registering the cluster as a '
                    'Kubernetes VIM needs it')
            from tacker import manager
            from tacker.nfvo import nfvo_plugin as plugin_module
            plugin = None
            if manager.TackerManager.has_instance():
                plugin = manager.TackerManager.get_service_plugins().get(
                    'NFVO')
            if not isinstance(plugin, plugin_module.NfvoPlugin):
                plugin = plugin_module.NfvoPlugin()
            _nfvo_plugin = plugin
        return _nfvo_plugin


def _reset_nfvo_plugin():
    """Forget the NfvoPlugin (tests: after changing Tacker's configuration)."""
    global _nfvo_plugin
    with _nfvo_plugin_lock:
        _nfvo_plugin = None


def _field(obj, name):
    """obj.name, or None when unset (an unset field of a Tacker object
    raises instead of returning None)."""
    try:
        return getattr(obj, name, None)
    except NotImplementedError:
        return None


def _same_url(first, second):
    return (first or '').rstrip('/') == (second or '').rstrip('/')


def _connection_infos(vnf_instance):
    return list(_field(vnf_instance, 'vim_connection_info') or [])


def _find_vims(context, plugin, name, tenant_id):
    """The VIMs named ``name`` (None: any) in the project."""
    # NfvoPluginDb filters with column.in_([value]): scalars, not lists.
    filters = {'tenant_id': tenant_id}
    if name is not None:
        filters['name'] = name
    return plugin.get_vims(context, filters=filters)


CREDENTIAL_NAMES = {'bearer_token': 'bearer token',
                    'ssl_ca_cert': 'CA certificate'}


def changed_credentials(stored, bearer_token, ssl_ca_cert):
    """The credentials of a registered Kubernetes VIM that differ from the
    cluster's, in CREDENTIAL_NAMES order; empty when it needs no update.

    ``stored`` is the VIM's auth_cred as Tacker decrypts it, or None when
    it cannot be read (its key lost): then everything is replaced. A VIM
    that authenticates otherwise (user and password, OIDC) has no
    bearer_token, so it changes to the cluster's token.
    """
    wanted = {'bearer_token': bearer_token, 'ssl_ca_cert': ssl_ca_cert}
    if stored is None:
        return tuple(CREDENTIAL_NAMES)
    return tuple(name for name in CREDENTIAL_NAMES
                 if _credential(stored.get(name)) !=
                 _credential(wanted[name]))


def _credential(value):
    """Tacker stores an absent CA as None, '' or the string 'None'."""
    return None if value in (None, '', 'None') else value


def register_kubernetes_vim(context, vnf_instance, name, auth_url,
                            bearer_token, ssl_ca_cert, record=True):
    """Register the cluster as the Kubernetes VIM ``name``; its id.

    A VIM of that name in the instance's project is reused when it points
    at the same API server, and is an error otherwise. A reused VIM whose
    token or CA differ from the cluster's (a cluster rebuilt at the same
    address) is updated as ``PUT /v1.0/vims/{id}`` does; one whose
    credentials match is left alone. Tacker checks the credentials against
    the cluster (GET /api/, list namespaces) and keeps the token and CA
    encrypted (the key in Barbican). No node credential is stored in the
    VIM. With ``record`` (the v1 door) the VIM is then added to the
    instance's vimConnectionInfo (once), and the instance saved.
    """
    plugin = nfvo_plugin()
    tenant_id = _field(vnf_instance, 'tenant_id') or context.project_id
    vims = _find_vims(context, plugin, name, tenant_id)
    if vims:
        vim_id = _reuse_vim(context, plugin, vims[0], name, auth_url,
                            bearer_token, ssl_ca_cert)
    else:
        vim_id = _create_vim(context, plugin, vnf_instance, tenant_id, name,
                             auth_url, bearer_token, ssl_ca_cert)
    if record:
        _add_connection_info(vnf_instance, vim_id, auth_url)
    return vim_id


def _reuse_vim(context, plugin, vim, name, auth_url, bearer_token,
               ssl_ca_cert):
    """The id of ``vim``, the VIM ``name`` found in the project, once it
    is known to point at this cluster, its credentials updated."""
    shown_url = redaction.redact(auth_url)
    if vim['type'] != VIM_TYPE or not _same_url(vim['auth_url'], auth_url):
        raise exceptions.MgmtDriverError(redaction.redact(
            'A VIM named %r already exists (id %s, type %s) for %s, not '
            'for this cluster\'s API server %s: choose another vim_name '
            'or delete that VIM' % (name, vim['id'], vim['type'],
                                    vim['auth_url'], auth_url),
            (bearer_token,)))
    vim_id = vim['id']
    changed = changed_credentials(
        _stored_credentials(context, plugin, vim_id), bearer_token,
        ssl_ca_cert)
    if changed:
        _update_credentials(context, plugin, name, vim, bearer_token,
                            ssl_ca_cert)
        LOG.info('Kubernetes VIM %s (%s) for %s: %s changed, updated',
                 name, vim_id, shown_url, ' and '.join(
                     CREDENTIAL_NAMES[field] for field in changed))
    else:
        LOG.info('Kubernetes VIM %s (%s) already registered for %s: '
                 'credentials unchanged', name, vim_id, shown_url)
    return vim_id


def _create_vim(context, plugin, vnf_instance, tenant_id, name, auth_url,
                bearer_token, ssl_ca_cert):
    """The id of the Kubernetes VIM ``name`` registered anew."""
    shown_url = redaction.redact(auth_url)
    body = {'vim': {
        'name': name,
        'description': _description(vnf_instance),
        'type': VIM_TYPE,
        'auth_url': auth_url,
        'vim_project': dict(VIM_PROJECT),
        'auth_cred': {'bearer_token': bearer_token,
                      'ssl_ca_cert': ssl_ca_cert},
        'tenant_id': tenant_id,
        'is_default': False,
        # What Tacker's API stores for a VIM registered without extra.
        'extra': {},
    }}
    try:
        vim_id = plugin.create_vim(context, body)['id']
    except Exception as error:
        raise exceptions.MgmtDriverError(
            'Registering the Kubernetes VIM %r (%s) in Tacker failed: %s'
            % (name, shown_url, vim_errors.reason(error, bearer_token))
        ) from redaction.safe_cause(error, (bearer_token,))
    LOG.info('Registered Kubernetes VIM %s (%s) for %s',
             name, vim_id, shown_url)
    return vim_id


def registered_vim_tokens(context, vnf_instance):
    """The bearer tokens of the Kubernetes VIMs registered for the
    instance (those of its vimConnectionInfo, else those the driver
    registered for it in its project), as Tacker keeps them."""
    if not TACKER_AVAILABLE:
        return []
    try:
        vim_ids = [vim_id for vim_id, _ in _instance_vims(
            context, vnf_instance, None)]
    except Exception as error:
        LOG.warning('The Kubernetes VIM of VNF instance %s cannot be looked '
                    'up (%s): a Master that prints its bearer token shows '
                    'it', _field(vnf_instance, 'id'), redaction.one_line(
                        redaction.redact(exceptions.failure_reason(error))))
        return []
    return vim_tokens(context, vim_ids)


def vim_tokens(context, vim_ids):
    """The bearer tokens of these VIMs, decrypted as Tacker's LCM gets
    them: the secrets of every hook of their cluster. A VIM that is gone
    or cannot be read has none."""
    plugin = nfvo_plugin()
    tokens = []
    for vim_id in vim_ids:
        try:
            token = _decrypted_credentials(context, plugin, vim_id).get(
                'bearer_token')
        except Exception as error:
            token_unreadable(vim_id, error)
            continue
        if token:
            tokens.append(token)
    return tokens


def token_unreadable(vim_id, error):
    """Log why the token of the VIM ``vim_id`` is not hidden."""
    LOG.warning('The bearer token of Kubernetes VIM %s cannot be read '
                '(%s): a Master that prints it shows it', vim_id,
                redaction.one_line(redaction.redact(
                    exceptions.failure_reason(error))))


def _decrypted_credentials(context, plugin, vim_id):
    from tacker.vnfm import vim_client
    vim = plugin.get_vim(context, vim_id, mask_password=False)
    return vim_client.VimClient()._build_vim_auth(vim)


def _stored_credentials(context, plugin, vim_id):
    """The VIM's auth_cred decrypted as Tacker's LCM gets it (VimClient),
    or None when Tacker cannot decrypt it (e.g. its key gone)."""
    try:
        return _decrypted_credentials(context, plugin, vim_id)
    except Exception as error:
        LOG.warning('The credentials of Kubernetes VIM %s cannot be read '
                    '(%s): replacing them', vim_id,
                    redaction.redact(exceptions.failure_reason(error)))
        return None


def _update_credentials(context, plugin, name, vim, bearer_token,
                        ssl_ca_cert):
    """Replace token and CA of ``vim`` through NfvoPlugin.update_vim, as
    Tacker's API does: Tacker checks them against the cluster, encrypts
    them with a new key and deletes the old key. Both are always given:
    a credential left out would be re-checked in its encrypted form."""
    from tacker.extensions import nfvo
    vim_id = vim['id']
    body = {'vim': {'auth_cred': {'bearer_token': bearer_token,
                                  'ssl_ca_cert': ssl_ca_cert}}}
    try:
        plugin.update_vim(context, vim_id, body)
    except nfvo.VimInUseException as error:
        raise exceptions.MgmtDriverError(
            'The Kubernetes VIM %r (%s) holds credentials of an earlier '
            'cluster at this address, and Tacker refuses to update a VIM '
            'that VNF(s) are deployed on (%s). Terminate them, or update '
            'the VIM with "openstack vim set", then retry.' % (
                name, vim_id, ', '.join(v2_mapping.shown_users(
                    _vnfs_on_vim(context, vim_id), vim['tenant_id'])) or
                'see "openstack vnflcm list"')) from error
    except Exception as error:
        raise exceptions.MgmtDriverError(
            'Updating the credentials of the Kubernetes VIM %r (%s) in '
            'Tacker failed: %s' % (name, vim_id,
                                   vim_errors.reason(error, bearer_token))
        ) from redaction.safe_cause(error, (bearer_token,))


def _add_connection_info(vnf_instance, vim_id, auth_url):
    infos = _connection_infos(vnf_instance)
    if any(info.vim_id == vim_id for info in infos):
        return
    from oslo_utils import uuidutils
    from tacker.objects import vim_connection
    infos.append(vim_connection.VimConnectionInfo(
        id=uuidutils.generate_uuid(), vim_id=vim_id, vim_type=VIM_TYPE,
        access_info={'auth_url': auth_url}, interface_info={}, extra={}))
    vnf_instance.vim_connection_info = infos
    vnf_instance.save()


def _description(vnf_instance):
    """The description of the VIM the driver registers for an instance:
    it tells, after Tacker has emptied the instance's vimConnectionInfo
    (a terminate does that before terminate_end), which VIM it was."""
    return 'Kubernetes cluster of VNF instance %s' % vnf_instance.id


def _instance_vims(context, vnf_instance, name):
    """[(vim id, its VimConnectionInfo or None)]: the kubernetes VIMs in
    the instance's vimConnectionInfo or, when Tacker has emptied it
    (terminate), the VIMs named ``name`` (None: any name) in the
    instance's project that the driver registered for this instance."""
    candidates = [(info.vim_id, info)
                  for info in _connection_infos(vnf_instance)
                  if info.vim_type == VIM_TYPE and info.vim_id]
    if not candidates and TACKER_AVAILABLE:
        tenant_id = _field(vnf_instance, 'tenant_id') or context.project_id
        candidates = [(vim['id'], None) for vim in _find_vims(
            context, nfvo_plugin(), name, tenant_id)
            if vim['type'] == VIM_TYPE and
            vim.get('description') == _description(vnf_instance)]
    return candidates


def kubernetes_vim_users(context, vnf_instance, name):
    """{vim id: the VNF instances on it, as shown_users names them} of
    the instance's Kubernetes VIM ``name`` while any v1 or v2 VNF
    instance uses it (see _vim_users); empty when none does, or when
    there is no such VIM."""
    candidates = _instance_vims(context, vnf_instance, name)
    if not candidates:
        return {}
    plugin = nfvo_plugin()
    from tacker.extensions import nfvo
    users = {}
    for vim_id, _ in candidates:
        try:
            vim = plugin.get_vim(context, vim_id)
        except nfvo.VimNotFoundException:
            continue
        if vim['name'] != name:
            continue
        in_use, shown = _vim_users(context, plugin, vim, vnf_instance)
        if in_use:
            users[vim_id] = shown
    return users


def _vim_users(context, plugin, vim, vnf_instance):
    """(in use, the VNF instances on the VIM ``vim`` as a message names
    them, v2_mapping.shown_users) but for ``vnf_instance`` itself: v1's
    as NfvoPlugin counts them (its "vnf" rows; in use with no ids when
    they cannot be listed), v2's by their vimConnectionInfo, which
    NfvoPlugin never reads."""
    from tacker.extensions import nfvo
    users = _v2_instances_on_vim(context, vim, vnf_instance.id)
    in_use = bool(users)
    try:
        plugin.is_vim_still_in_use(context, vim['id'])
    except nfvo.VimInUseException:
        in_use = True
        users.update(_vnfs_on_vim(context, vim['id']))
    users.pop(vnf_instance.id, None)
    return in_use, v2_mapping.shown_users(users, vim['tenant_id'])


def _v2_instances_on_vim(context, vim, own_id):
    """{id: project} of the v2 VNF instances on the VIM
    (v2_mapping.instances_on_vim) from Tacker's VnfInstanceV2 rows, and
    from the operation parameters of unfinished operations, in every
    project. Only vimConnectionInfo is read, as stored (credentials may
    be encrypted; none is used)."""
    from tacker.sol_refactored.db.sqlalchemy import models
    instances = models.VnfInstanceV2
    occurrences = models.VnfLcmOpOccV2
    projects = _v2_projects(context)
    rows = context.session.query(
        instances.id, instances.vnfdId, instances.vimConnectionInfo).filter(
            instances.id != own_id).all()
    owners = {row.id: projects.get(row.vnfdId) for row in rows}
    connections = [(row.id, owners[row.id],
                    _stored_json(row.vimConnectionInfo)) for row in rows]
    for row in context.session.query(
            occurrences.vnfInstanceId, occurrences.operationParams).filter(
                occurrences.vnfInstanceId != own_id,
                occurrences.operationState.in_(_UNFINISHED)):
        params = _stored_json(row.operationParams)
        if isinstance(params, dict):
            connections.append((row.vnfInstanceId,
                                owners.get(row.vnfInstanceId),
                                params.get('vimConnectionInfo')))
    return v2_mapping.instances_on_vim(connections, vim['id'],
                                       vim.get('auth_url'), vim['tenant_id'])


def _v2_projects(context):
    """{vnfd id: project} of the VNF packages: a v2 instance belongs to
    the project of its package. Tacker v2 keeps no project with an
    instance, and its create finds a user only the packages of the
    user's project (VnfPackageVnfd.get_by_id)."""
    from tacker.db.db_sqlalchemy import models
    vnfds, packages = models.VnfPackageVnfd, models.VnfPackage
    query = context.session.query(vnfds.vnfd_id, packages.tenant_id).join(
        packages, packages.id == vnfds.package_uuid).filter(
            vnfds.deleted == '0')
    return {row.vnfd_id: row.tenant_id for row in query}


# The states of a v2 operation that may still change the VNF.
_UNFINISHED = ('STARTING', 'PROCESSING', 'FAILED_TEMP', 'ROLLING_BACK')


def _stored_json(value):
    """A JSON column as v2's objects write it: the document serialized
    once more, into a JSON string."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return None
    return value


def delete_kubernetes_vim(context, vnf_instance, name):
    """Delete the Kubernetes VIM ``name`` that this instance registered.

    Candidates are the kubernetes VIMs in the instance's vimConnectionInfo
    or, when Tacker has emptied it (terminate), the VIMs of that name in
    the instance's project that the driver registered for this instance;
    a VIM of the same name that the instance does not use is never
    touched. Their entries are removed and the instance saved; entries
    whose VIM is already gone are dropped too. Returns whether a VIM was
    deleted: nothing to delete is not an error.
    """
    infos = _connection_infos(vnf_instance)
    candidates = _instance_vims(context, vnf_instance, name)
    if not candidates:
        return False
    dropped, deleted, error = [], False, None
    for vim_id, info in candidates:
        outcome, error = _delete_candidate(context, vnf_instance, name,
                                           vim_id)
        if error is not None:
            break
        if outcome != _KEPT:
            dropped.append(info)
        deleted = deleted or outcome == _DELETED
    kept = [info for info in infos if info not in dropped]
    if len(kept) != len(infos):
        vnf_instance.vim_connection_info = kept
        vnf_instance.save()
    if error is not None:
        raise error
    return deleted


# What became of a candidate VIM of delete_kubernetes_vim.
_KEPT, _GONE, _DELETED = 'kept', 'gone', 'deleted'


def _delete_candidate(context, vnf_instance, name, vim_id):
    """(_KEPT, _GONE or _DELETED, the error that stops the deletion or
    None) of the candidate VIM ``vim_id``: kept when not named ``name``
    or in use."""
    plugin = nfvo_plugin()
    from tacker.extensions import nfvo
    try:
        vim = plugin.get_vim(context, vim_id)
    except nfvo.VimNotFoundException:
        LOG.info('Kubernetes VIM %s of VNF instance %s is already gone',
                 vim_id, vnf_instance.id)
        return _GONE, None
    if vim['name'] != name:
        LOG.info('Keeping Kubernetes VIM %s (%s) of VNF instance %s: '
                 'not named %s', vim['name'], vim_id, vnf_instance.id, name)
        return _KEPT, None
    in_use, shown = _vim_users(context, plugin, vim, vnf_instance)
    if in_use:
        return _KEPT, _still_used(name, vim_id, shown)
    try:
        plugin.delete_vim(context, vim_id)
    except nfvo.VimNotFoundException:
        return _GONE, None
    except nfvo.VimInUseException:  # a v1 VNF came in the meantime
        return _KEPT, _still_used(name, vim_id, v2_mapping.shown_users(
            _vnfs_on_vim(context, vim_id), vim['tenant_id']))
    except Exception as failure:
        return _KEPT, exceptions.MgmtDriverError(
            'Deleting the Kubernetes VIM %r (%s) in Tacker failed: %s' % (
                name, vim_id, vim_errors.reason(failure)))
    LOG.info('Deleted Kubernetes VIM %s (%s)', name, vim_id)
    return _DELETED, None


def _still_used(name, vim_id, users):
    return exceptions.MgmtDriverError(
        'The Kubernetes VIM %r (%s) was not deleted: VNF instance(s) still '
        'use it (%s). Terminate them, then delete the VIM with "openstack '
        'vim delete %s".' % (name, vim_id, ', '.join(users) or
                             'see "openstack vnflcm list"', vim_id))


def _vnfs_on_vim(context, vim_id):
    """{id: project} of the VNFs Tacker counts as using the VIM (best
    effort)."""
    try:
        from tacker.db.vnfm import vnfm_db
        query = context.session.query(vnfm_db.VNF).filter_by(
            vim_id=vim_id, deleted_at=datetime.datetime.min)
        return {vnf.id: vnf.tenant_id for vnf in query}
    except Exception:
        LOG.debug('Could not list the VNFs of VIM %s', vim_id, exc_info=True)
        return {}
