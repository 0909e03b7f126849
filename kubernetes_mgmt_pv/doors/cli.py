"""``kubernetes-mgmt-pv``: operator commands around the VNF package.

``validate`` checks a package and an LCM request body offline, before
any LCM call; ``package`` builds the CSAR zip that Tacker accepts;
``plan`` logs in to the VNF's VMs and says what instantiate_end would
change on each, changing nothing. The logic lives in ``package_check``,
``csar`` and ``check_mode``; this module only parses arguments and
prints. Bad input, however hostile, ends in the command's
normal error output and a non-zero exit status, never a traceback.
"""

import argparse
import collections
import dataclasses
from importlib import metadata
import json
import os
import re
import sys

from oslo_config import cfg

from kubernetes_mgmt_pv.doors import check_mode
from kubernetes_mgmt_pv.doors import tacker_v2
from kubernetes_mgmt_pv import exceptions
from kubernetes_mgmt_pv import mgmt_driver
from kubernetes_mgmt_pv.remote import ssh_keys
from kubernetes_mgmt_pv import safe_yaml
from kubernetes_mgmt_pv.vnf_package import csar
from kubernetes_mgmt_pv.vnf_package import lcm_bodies
from kubernetes_mgmt_pv.vnf_package import package_check
from kubernetes_mgmt_pv.vnf_package import vnfd_id

# plan's exit status when a change is pending (0: none, 1: failure).
CHANGES_PENDING = 2

# All C0 and C1 control characters but the newline.
_CONTROL = re.compile(r'[\x00-\x09\x0b-\x1f\x7f-\x9f]')


def _say(text, stream=None):
    """print, escaping control characters and what the stream cannot
    encode: file names and values from a package or request may hold
    terminal escapes, lone surrogates or bytes that are not text."""
    stream = stream or sys.stdout
    encoding = getattr(stream, 'encoding', None) or 'utf-8'
    text = _CONTROL.sub(lambda match: '\\x%02x' % ord(match.group()), text)
    print(text.encode(encoding, 'backslashreplace').decode(encoding),
          file=stream)


def _validate(args):
    key_place, findings = _key_place(args.project)
    findings += package_check.validate(args.package, args.request,
                                       args.kind, key_place)
    findings += _v2_log_findings(args.request)
    if args.format == 'json':
        # ensure_ascii (the default) escapes everything but ASCII.
        _say(json.dumps([dataclasses.asdict(f) for f in findings], indent=2))
    else:
        for finding in findings:
            _say('%-7s %s: %s: %s' % (finding.severity.upper(), finding.code,
                                      finding.where, finding.message))
        count = collections.Counter(f.severity for f in findings)
        _say('%d error(s), %d warning(s)%s' % (
            count[package_check.ERROR], count[package_check.WARNING],
            ', %d note(s)' % count[package_check.NOTE]
            if count[package_check.NOTE] else ''))
    return 1 if any(f.severity == package_check.ERROR for f in findings) \
        else 0


def _key_place(project):
    """(where the hooks look the key files up, findings): the conductor's
    ssh_key_dir, or with ssh_key_per_project its ``project``
    subdirectory, when this host has Tacker's configuration; None (the
    key files are not checked) off it, or per project without one."""
    try:
        options = tacker_v2.configured_key_options(os.environ)
    except cfg.Error:
        return None, []  # reported as v2-log-unchecked
    if options is None:
        return None, []
    directory, per_project = options
    if not per_project:
        return ssh_keys.KeyPlace(directory), []
    if project:
        return ssh_keys.KeyPlace(directory, project), []
    return None, [package_check.Finding(
        package_check.NOTE, 'unchecked-offline', 'ssh_key_per_project',
        'the key files are not checked: ssh_key_per_project is set and '
        'no --project names the VNF instance\'s project')]


def _v2_log_findings(request_path):
    """For a v2 request, whether this user could write the hook log that
    Tacker's configuration on this host names (run as the conductor's
    user on its host, this is what each hook will find)."""
    try:
        request = safe_yaml.load_json(request_path)
    except safe_yaml.LoadError:
        return []  # reported as request-unreadable
    if not isinstance(request, dict) or not isinstance(
            request.get('vimConnectionInfo'), dict):
        return []
    try:
        path = tacker_v2.configured_log_file(os.environ)
    except cfg.Error as error:
        return [package_check.Finding(
            package_check.WARNING, 'v2-log-unchecked', 'v2_log_file',
            'Tacker\'s configuration could not be read: %s' % error)]
    problem = tacker_v2.log_problem(path)
    if problem is None:
        return []
    return [package_check.Finding(
        package_check.WARNING, 'v2-log-unwritable', path,
        '%s (checked as uid %d on this host): every Tacker v2 hook of the '
        'conductor would fail before changing anything' % (
            problem, os.geteuid()))]


def _package(args):
    try:
        given = None if args.vnfd_id is None else \
            vnfd_id.parse(args.vnfd_id)
        result = csar.build(args.source, args.output, api=args.api,
                            kubernetes_version=args.kubernetes_version,
                            vnfd_id=given)
    except (csar.PackageError, vnfd_id.VnfdIdError, OSError) as error:
        _say('kubernetes-mgmt-pv package: %s' % error, sys.stderr)
        return 1
    if result.driver_replaced:
        _say('%s of the source differs from the installed driver and was '
             'replaced by it' % csar.DRIVER_PATH, sys.stderr)
    if args.api == 'v2':
        kind = 'a Tacker v2 package (the VNFD runs %s)' % csar.V2_SCRIPT_PATH
    elif args.api == 'cnf':
        kind = 'a CNF package for Tacker v2\'s Kubernetes VIM'
    else:
        kind = '%s = %s (sha256 %s)' % (
            csar.DRIVER_PATH, csar.installed_driver_file(),
            csar.file_hash(csar.installed_driver_file()))
    _say('wrote %s: %d files, %s' % (args.output, len(result.files), kind))
    _say('VNFD id: %s' % result.vnfd_id)
    return 0


def _json_file(option, path):
    """The JSON value of the file an option names; an error names both."""
    try:
        return safe_yaml.load_json(path)
    except safe_yaml.LoadError as error:
        raise safe_yaml.LoadError('%s %s %s' % (option, path, error))


def _plan(args):
    try:
        request = _json_file('--request', args.request)
        access_info = _json_file('--vim', args.vim)
        with csar.opened(args.package) as package_dir:
            result = check_mode.check(*check_mode.load(
                package_dir, request, access_info, args.stack_id),
                project=args.project)
    except (exceptions.MgmtDriverError, safe_yaml.LoadError,
            csar.PackageError, OSError) as error:
        _say('kubernetes-mgmt-pv plan: %s' % error, sys.stderr)
        return 1
    if args.format == 'json':
        _say(json.dumps({
            'hosts': [{'host': host, 'role': role,
                       'changes': result.of(host)}
                      for host, role in result.hosts]}, indent=2))
    else:
        for line in check_mode.render(result):
            _say(line)
    return CHANGES_PENDING if result.changes else 0


def _plan_parser(commands):
    plan = commands.add_parser(
        'plan', help='say what instantiate_end would change on each VM',
        description='Log in to every VM of an instantiated VNF, gather the '
                    'facts the hooks gather and print what instantiate_end '
                    '(or a heal of the entire VNF, or a scale-out, which '
                    'converge to the same state) would change on each, '
                    'changing nothing. Exit status 0: no change, %d: '
                    'changes pending, 1: the check failed.'
                    % CHANGES_PENDING)
    plan.add_argument('--package', required=True, metavar='DIR|ZIP',
                      help='the VNF package (its source directory or the '
                           'CSAR zip built from it): the install script '
                           'and the PV manifests')
    plan.add_argument('--request', required=True, metavar='FILE',
                      help='Instantiate request body (JSON): its '
                           'additionalParams')
    plan.add_argument('--vim', required=True, metavar='FILE',
                      help='the OpenStack VIM\'s access_info (JSON: '
                           'auth_url, username, password, project_name, '
                           '...), kept out of the command line')
    plan.add_argument('--stack-id', required=True, metavar='ID',
                      help='Heat stack of the VNF instance (its '
                           'instantiatedVnfInfo instanceId)')
    plan.add_argument('--project', metavar='ID',
                      help='project id of the VNF instance: with '
                           'ssh_key_per_project, its key files are in '
                           'ssh_key_dir/<ID>/')
    plan.add_argument('--format', choices=('text', 'json'), default='text',
                      help='json: {"hosts": [{host, role, changes}]}')
    plan.set_defaults(run=_plan)


def _validate_parser(commands):
    validate = commands.add_parser(
        'validate', help='check a package and an LCM request offline',
        description='Report every problem of a VNF package and an LCM '
                    'request (instantiate, scale, heal, terminate, create, '
                    'change_vnfpkg) that Tacker or the driver would only '
                    'hit later; notes say what only Tacker can check. Run '
                    'on the conductor host, the ssh_key files are checked '
                    'too. Exit status 0 without errors (warnings and notes '
                    'allowed), 1 otherwise.')
    validate.add_argument('--package', required=True, metavar='DIR|ZIP',
                          help='package source directory or CSAR zip')
    validate.add_argument('--request', required=True, metavar='FILE',
                          help='LCM request body (JSON)')
    validate.add_argument('--project', metavar='ID',
                          help='project id of the VNF instance: with '
                               'ssh_key_per_project, its key files are in '
                               'ssh_key_dir/<ID>/')
    validate.add_argument('--kind', choices=lcm_bodies.KINDS,
                          help='the request\'s kind; by default told by '
                               'its keys (flavourId: instantiate, aspectId: '
                               'scale, vnfcInstanceId or cause: heal, '
                               'terminationType: terminate, vnfdId: create, '
                               'or change_vnfpkg with additionalParams)')
    validate.add_argument('--format', choices=('text', 'json'),
                          default='text',
                          help='json: a list of {severity, code, where, '
                               'message}')
    validate.set_defaults(run=_validate)


def _package_parser(commands):
    package = commands.add_parser(
        'package', help='build the CSAR zip of a package source directory',
        description='Zip a package source directory into a CSAR, writing '
                    'TOSCA.meta with the SHA-256 of every artifact. Only '
                    '--api v1 embeds the installed driver file, as %s, '
                    'which Tacker v1 compares with the driver installed '
                    'with tacker-conductor; a v2 package runs %s instead '
                    'and a CNF package has no driver. Prints the VNFD id '
                    'it wrote.' % (csar.DRIVER_PATH, csar.V2_SCRIPT_PATH))
    package.add_argument('--source', required=True, metavar='DIR',
                         help='package source directory')
    package.add_argument('--output', required=True, metavar='FILE.zip',
                         help='CSAR zip to write (replaced if it exists)')
    package.add_argument('--api', choices=csar.APIS, default='v1',
                         help='v1 (default): for /vnflcm/v1, with the '
                              'installed driver file; v2: for /vnflcm/v2, '
                              'the VNFD running %s, with the source\'s %s '
                              'files; cnf: a CNF\'s package (Kubernetes '
                              'manifests, no driver)' % (
                                  csar.V2_SCRIPT_PATH, csar.V2_DIR))
    package.add_argument('--kubernetes-version', metavar='X.Y.Z-R',
                         help='the Kubernetes package version the '
                              'install script installs (its '
                              'K8S_PACKAGE_VERSION, e.g. 1.37.1-1.1): '
                              'the package of the next minor, which a '
                              'change_vnfpkg upgrades the cluster to '
                              '(supported minors: %s)' % ', '.join(
                                  '%d.%d' % minor
                                  for minor in csar.SUPPORTED_MINORS))
    package.add_argument('--vnfd-id', metavar='UUID',
                         help='the VNFD id of the package (default: the '
                              'source\'s for a v1 or CNF package of its '
                              'own Kubernetes version, else one derived '
                              'from the source\'s, the API and the '
                              'version, the same at every rebuild): Tacker '
                              'takes a VNFD id once')
    package.set_defaults(run=_package)


def _parser():
    parser = argparse.ArgumentParser(
        prog='kubernetes-mgmt-pv',
        description='Build and check VNF packages for the '
                    'mgmt-drivers-kubernetes Tacker management driver.')
    parser.add_argument('--version', action='version', version=_version())
    commands = parser.add_subparsers(dest='command', required=True)

    _validate_parser(commands)
    _package_parser(commands)
    _plan_parser(commands)
    return parser


def _version():
    try:
        version = metadata.version('kubernetes-mgmt-pv')
    except metadata.PackageNotFoundError:  # run from a source tree
        version = 'unknown'
    return '%%(prog)s %s (VNF package contract %d)' % (
        version, mgmt_driver.PACKAGE_CONTRACT_VERSION)


def main(argv=None):
    """Console script entry point; returns the exit status."""
    args = _parser().parse_args(argv)
    return args.run(args)


if __name__ == '__main__':
    sys.exit(main())
