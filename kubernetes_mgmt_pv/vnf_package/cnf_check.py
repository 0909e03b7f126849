"""Offline checks of a CNF's package (``kubernetes-mgmt-pv package --api
cnf``) against its v2 (or v1) Instantiate request on the cluster's
Kubernetes VIM: what Tacker's Kubernetes infra driver would only hit
after the grant, on the cluster (a definition file it cannot find, a VIM
that is not Kubernetes), and what would leave a pod Pending (a claim that
no manifest defines, a claim of no class that could bind any PV rather
than the driver's; a claim of a StorageClass is provisioned, not bound).

``findings`` is a package_check._Findings; each finding names the JSON
path of the request or the package's file.
"""

import os

from kubernetes_mgmt_pv import safe_yaml
from kubernetes_mgmt_pv.vnf_package import csar

DEF_FILES = 'lcm-kubernetes-def-files'
# vimType of a registered Kubernetes VIM, and of one given inline.
VIM_TYPES = ('kubernetes', 'ETSINFV.KUBERNETES.V_1')
# The vimId of the sample request, to be replaced by the cluster's VIM.
PLACEHOLDER_VIM_ID = '00000000-0000-0000-0000-000000000000'
_WORKLOADS = ('Deployment', 'ReplicaSet', 'DaemonSet', 'StatefulSet')


def is_cnf_request(request):
    """Whether the Instantiate request deploys a CNF's manifests."""
    params = request.get('additionalParams')
    return isinstance(params, dict) and DEF_FILES in params


def _pod_spec(document):
    """The pod spec of a Pod or of a workload's template, or {}."""
    spec = document.get('spec')
    if document['kind'] in _WORKLOADS and isinstance(spec, dict):
        spec = (spec.get('template') or {}).get('spec') \
            if isinstance(spec.get('template'), dict) else None
    elif document['kind'] != 'Pod':
        spec = None
    return spec if isinstance(spec, dict) else {}


def check(package_dir, request, found):
    _check_vims(request.get('vimConnectionInfo'), found)
    documents = _load_def_files(package_dir, request['additionalParams'],
                                found)
    _check_claims(documents, found)


def _check_vims(vims, found):
    """v2's vimConnectionInfo is a map of entries, v1's a list."""
    if isinstance(vims, dict) and vims:
        entries = [('vimConnectionInfo.%s' % key, vim)
                   for key, vim in sorted(vims.items())]
    elif isinstance(vims, list) and vims:
        entries = [('vimConnectionInfo[%d]' % index, vim)
                   for index, vim in enumerate(vims)]
    else:
        found.error('vim-missing', 'vimConnectionInfo',
                    'a CNF needs the cluster\'s Kubernetes VIM: '
                    '{"vimId": <its id>, "vimType": "kubernetes"}')
        return
    for where, vim in entries:
        if not isinstance(vim, dict) or vim.get('vimType') not in VIM_TYPES:
            found.error('vim-not-kubernetes', where + '.vimType',
                        'must be one of %s' % ', '.join(VIM_TYPES))
        elif vim.get('vimId') == PLACEHOLDER_VIM_ID:
            found.warning('vim-placeholder', where + '.vimId',
                          'still the sample\'s placeholder: put the id of '
                          'the VIM the driver registered for the cluster '
                          '(named vim_name, or kubernetes_vim_<cluster VNF '
                          'instance id>)')


def _artifact_names(package_dir):
    """The artifacts TOSCA.meta names with ``Name`` (the only ones Tacker
    v2 finds), and those with ``Source`` only (a source directory has
    neither: ``package`` writes the blocks)."""
    try:
        meta = csar.parse_meta(safe_yaml.read_text(
            os.path.join(package_dir, csar.META_PATH),
            safe_yaml.DEFINITION_LIMITS.max_bytes))
    except (safe_yaml.LoadError, csar.PackageError):
        return set(), set()  # reported by package_check's meta checks
    named = {block['Name'] for block in meta.artifacts if 'Name' in block}
    sourced = {block['Source'] for block in meta.artifacts
               if 'Source' in block} - named
    return named, sourced


def _load_def_files(package_dir, params, found):
    """[(request path, document)] of every definition file that loads."""
    files = params.get(DEF_FILES)
    where = 'additionalParams.%s' % DEF_FILES
    if not isinstance(files, list) or not files or not all(
            isinstance(name, str) and name for name in files):
        found.error('def-files-invalid', where,
                    'must be a non-empty list of the package\'s manifest '
                    'paths')
        return []
    named, sourced = _artifact_names(package_dir)
    root = os.path.realpath(package_dir)
    documents = []
    for index, name in enumerate(files):
        at = '%s[%d]' % (where, index)
        path = os.path.realpath(os.path.join(root, name))
        if os.path.commonpath([root, path]) != root or \
                not os.path.isfile(path):
            found.error('def-file-missing', at,
                        '%r is not a file of the package' % name)
            continue
        if name in sourced:
            found.error('def-file-not-named', at,
                        '%r has a "Source:" block in %s but no "Name:" one: '
                        'Tacker v2 finds definition files by Name only '
                        '(build with "kubernetes-mgmt-pv package --api cnf")'
                        % (name, csar.META_PATH))
        try:
            loaded = safe_yaml.load_all(path, safe_yaml.MANIFEST_LIMITS)
        except safe_yaml.LoadError as error:
            found.error('def-file-invalid', at, '%r %s' % (name, error))
            continue
        for document in loaded:
            if document is None:
                continue
            if not isinstance(document, dict) or not document.get(
                    'kind') or not (document.get('metadata') or {}).get(
                    'name'):
                found.error('def-file-invalid', at,
                            '%r: every document needs kind and '
                            'metadata.name' % name)
                continue
            documents.append((at, document))
    return documents


def _check_claims(documents, found):
    """Each claim a pod mounts is defined here; each claim of no class
    (``storageClassName: ""``) names the PV it binds."""
    claims = {}
    for at, document in documents:
        if document['kind'] == 'PersistentVolumeClaim':
            claims[document['metadata']['name']] = document
            spec = document.get('spec') or {}
            if spec.get('storageClassName') == '' and not spec.get(
                    'volumeName') and not spec.get('selector'):
                found.warning(
                    'claim-unpinned', at,
                    'PersistentVolumeClaim %s names no volumeName nor '
                    'selector: it may bind any matching PV, not the one '
                    'the driver registered for it'
                    % document['metadata']['name'])
    for at, document in documents:
        for volume in _pod_spec(document).get('volumes') or []:
            claim = ((volume or {}).get('persistentVolumeClaim') or {}).get(
                'claimName')
            if claim and claim not in claims:
                found.warning(
                    'claim-not-defined', at,
                    '%s %s mounts the claim %s, which no definition file '
                    'defines: it must exist in the namespace, or the pod '
                    'stays Pending' % (document['kind'],
                                       document['metadata']['name'], claim))
