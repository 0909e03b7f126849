"""The VNF package (CSAR) format as Tacker reads it: TOSCA.meta and the zip.

Tacker checks a package twice: at upload, every TOSCA.meta entry that has
a ``Hash`` must match its file; at every LCM hook, the management driver
file named by the VNFD artifact must be byte for byte the driver installed
in tacker-conductor. ``build`` produces a package that passes both: it adds
the installed driver file and computes every hash, so no hash is ever
written by hand.
"""

import contextlib
import dataclasses
import hashlib
import inspect
import os
import posixpath
import re
import shutil
import stat
import tempfile
import zipfile
import zlib

from kubernetes_mgmt_pv import feature_hooks
from kubernetes_mgmt_pv import mgmt_driver
from kubernetes_mgmt_pv import safe_yaml
from kubernetes_mgmt_pv.vnf_package import k8s_releases
from kubernetes_mgmt_pv.vnf_package import vnfd_id

META_PATH = 'TOSCA-Metadata/TOSCA.meta'
DRIVER_PATH = 'Scripts/mgmt_driver.py'
# Tacker v2 packages: files under V2_DIR of the source replace their
# counterpart (the v2 BaseHOT, the script), the VNFD artifact names the
# script (relative to Definitions/, as v2 resolves it), and the hashed
# driver and the v1 UserData stay out. v1 packages leave V2_DIR out.
V2_DIR = 'v2/'
V2_SCRIPT_PATH = 'Scripts/kubernetes_mgmt_v2.py'
V2_ARTIFACT_FILE = '../' + V2_SCRIPT_PATH
_V1_ONLY = (DRIVER_PATH, 'UserData/')
# cnf: a CNF's package (its Kubernetes manifests, no driver), deployed by
# Tacker v2's Kubernetes infra driver, which finds the manifests only by
# the "Name" of their TOSCA.meta block (Tacker v1 accepts it as well).
APIS = ('v1', 'v2', 'cnf')
ALGORITHM = 'SHA-256'
# The algorithms Tacker accepts in TOSCA.meta (compared lower-cased).
HASH_FUNCTIONS = {'sha-224': hashlib.sha224, 'sha-256': hashlib.sha256,
                  'sha-384': hashlib.sha384, 'sha-512': hashlib.sha512}
# Not artifacts: the descriptor itself and its metadata.
_NOT_ARTIFACTS = ('TOSCA-Metadata/', 'Definitions/')
_SKIPPED_DIRS = ('__pycache__',)
_SKIPPED_SUFFIXES = ('.pyc', '.pyo')
_YAML = ('.yaml', '.yml')
# Zip timestamps before 1980 are not representable; a fixed one makes the
# same source always give the same bytes.
_ZIP_TIME = (1980, 1, 1, 0, 0, 0)
# `validate` extracts a zip to a temporary directory. These bound what a
# package may make it write, checked on the zip's directory before
# anything is extracted: a package of a driver, templates and manifests
# has a few dozen files and a few MiB. A package carrying large VM images
# can be validated as its source directory instead.
MAX_ZIP_ENTRIES = 10_000
MAX_ZIP_BYTES = 512 * safe_yaml.MiB
_COPY_CHUNK = safe_yaml.MiB


class PackageError(Exception):
    """The package cannot be read or built; the message says why."""


@dataclasses.dataclass(frozen=True)
class Meta(object):
    """TOSCA.meta: the header block and the artifact blocks, each a dict."""
    header: dict
    artifacts: tuple


@dataclasses.dataclass(frozen=True)
class BuildResult(object):
    files: tuple
    driver_replaced: bool
    vnfd_id: str


def within(path, directory):
    """Whether ``path`` is ``directory`` or below it (both normalised)."""
    path, directory = posixpath.normpath(path), posixpath.normpath(directory)
    return path == directory or path.startswith(directory.rstrip('/') + '/')


def installed_driver_file():
    """The file Tacker hashes: the module defining the entry-point class."""
    return inspect.getfile(mgmt_driver)


def file_hash(path, algorithm=ALGORITHM):
    digest = HASH_FUNCTIONS[algorithm.lower()]()
    with open(path, 'rb') as stream:
        for chunk in iter(lambda: stream.read(1 << 20), b''):
            digest.update(chunk)
    return digest.hexdigest()


def parse_meta(text):
    """Split TOSCA.meta into blocks as Tacker does (blank-line separated,
    each a YAML mapping). Raises PackageError for a block that is not one."""
    blocks = []
    for number, chunk in enumerate(_chunks(text), 1):
        try:
            block = safe_yaml.loads(chunk, safe_yaml.DEFINITION_LIMITS)
        except safe_yaml.LoadError as error:
            raise PackageError('%s: block %d is not "Key: value" lines: %s'
                               % (META_PATH, number, error))
        if not isinstance(block, dict):
            raise PackageError('%s: block %d is not "Key: value" lines'
                               % (META_PATH, number))
        blocks.append({str(k): '' if v is None else str(v)
                       for k, v in block.items()})
    if not blocks:
        raise PackageError('%s is empty' % META_PATH)
    return Meta(header=blocks[0], artifacts=tuple(
        b for b in blocks[1:] if 'Hash' in b or 'Algorithm' in b))


def _chunks(text):
    chunk = []
    for line in text.splitlines():
        if line.strip():
            chunk.append(line)
        elif chunk:
            yield '\n'.join(chunk)
            chunk = []
    if chunk:
        yield '\n'.join(chunk)


def artifact_source(block):
    """Tacker accepts ``Name`` as an older spelling of ``Source``."""
    return block.get('Source') or block.get('Name')


_VERSION_LINE = re.compile(
    rb"^readonly K8S_PACKAGE_VERSION='(?P<version>[^'\n]*)'$", re.M)
_PACKAGE_VERSION = re.compile(r'(\d+)\.(\d+)\.\d+-[0-9A-Za-z.+~]+')
# The Kubernetes minors the driver and the sample install script support.
SUPPORTED_MINORS = k8s_releases.SUPPORTED_MINORS


@dataclasses.dataclass(frozen=True)
class _Script(object):
    """The Scripts/ file of the source that sets K8S_PACKAGE_VERSION."""
    name: str
    path: str
    text: bytes
    version: str


def build(source_dir, output_path, api='v1', kubernetes_version=None,
          vnfd_id=None):
    """Write the CSAR zip of source_dir to output_path.

    v1: the installed driver file becomes Scripts/mgmt_driver.py (replacing
    any copy in the source). v2: see V2_DIR. cnf: see APIS. TOSCA.meta
    keeps the source's header block and gets a Source (cnf: Name),
    Algorithm and Hash block per artifact (every file outside
    TOSCA-Metadata/ and Definitions/). Entries are sorted and
    timestamps fixed, so equal inputs give identical zips.
    ``kubernetes_version`` ('1.37.1-1.1'): the K8S_PACKAGE_VERSION the
    package's install script installs (the one Scripts/ file that sets
    it), e.g. the next minor's package a change_vnfpkg upgrades to.
    ``vnfd_id``: the package's VNFD id (default: see vnfd_id.chosen),
    written wherever the source has its own.
    """
    source = os.path.realpath(source_dir)
    if not os.path.isdir(source):
        raise PackageError('the source directory %s does not exist'
                           % source_dir if not os.path.exists(source)
                           else '%s is not a directory' % source_dir)
    if kubernetes_version is not None:
        _check_kubernetes_version(kubernetes_version)
    scripts = _version_scripts(source)
    source_version = scripts[0].version if len(scripts) == 1 else None
    identity = (kubernetes_version, source_version, vnfd_id)
    if kubernetes_version is None:
        return _build(source, output_path, api, {}, identity)
    if len(scripts) != 1:
        raise PackageError('--kubernetes-version needs exactly one Scripts/ '
                           'file with a "readonly K8S_PACKAGE_VERSION=\'...\'"'
                           ' line; found %d' % len(scripts))
    script, = scripts
    with tempfile.TemporaryDirectory() as scratch:
        copy = os.path.join(scratch, os.path.basename(script.path))
        with open(copy, 'wb') as stream:
            stream.write(_VERSION_LINE.sub((
                "readonly K8S_PACKAGE_VERSION='%s'" % kubernetes_version
            ).encode(), script.text))
        shutil.copymode(script.path, copy)
        return _build(source, output_path, api, {script.name: copy},
                      identity)


def _check_kubernetes_version(version):
    match = _PACKAGE_VERSION.fullmatch(version)
    if not match:
        raise PackageError('--kubernetes-version %r is not a package '
                           'version such as 1.36.1-1.1' % version)
    minor = (int(match[1]), int(match[2]))
    if minor not in SUPPORTED_MINORS:
        raise PackageError(
            '--kubernetes-version %s is Kubernetes %d.%d, which this driver '
            'does not support (supported minors: %s)' % (
                version, minor[0], minor[1],
                ', '.join('%d.%d' % m for m in SUPPORTED_MINORS)))


def _version_scripts(source):
    """The Scripts/ files of the source that set K8S_PACKAGE_VERSION."""
    found = []
    scripts = os.path.join(source, 'Scripts')
    for name in sorted(os.listdir(scripts)) if os.path.isdir(scripts) \
            else ():
        path = os.path.join(scripts, name)
        if not os.path.isfile(path) or os.path.islink(path):
            continue
        with open(path, 'rb') as stream:
            text = stream.read()
        match = _VERSION_LINE.search(text)
        if match:
            found.append(_Script('Scripts/' + name, path, text,
                                 match['version'].decode('utf-8', 'replace')))
    return found


def _build(source, output_path, api, replaced_files, identity):
    """``build``, with ``replaced_files`` ({package path: file}) instead
    of the source's; ``identity``: (kubernetes_version, the source's
    version, the VNFD id given)."""
    header_text, entry = _meta_header(source)
    files = dict(_source_files(source, os.path.realpath(output_path)),
                 **replaced_files)
    if entry not in files:
        raise PackageError('Entry-Definitions %s is not in the source'
                           % entry)
    _check_kind(api, files)
    source_id = _source_vnfd_id(files[entry], entry)
    chosen = vnfd_id.chosen(source_id, api, *identity)
    replaced = False
    artifact_key = 'Source'
    if api == 'v2':
        files = _v2_files(files)
    elif api == 'cnf':
        artifact_key = 'Name'
    else:
        files = {name: path for name, path in files.items()
                 if not name.startswith(V2_DIR)}
        driver = installed_driver_file()
        replaced = (DRIVER_PATH in files and
                    file_hash(files[DRIVER_PATH]) != file_hash(driver))
        files[DRIVER_PATH] = driver
    files = _with_vnfd_id(files, source_id, chosen)
    blocks = [header_text.replace(source_id, chosen)]
    blocks += ['%s: %s\nAlgorithm: %s\nHash: %s' % (
        artifact_key, name, ALGORITHM, _hash_of(files[name]))
        for name in sorted(files) if not name.startswith(_NOT_ARTIFACTS)]
    meta = ('\n\n'.join(blocks) + '\n').encode('utf-8')
    _write_zip(output_path, dict(files, **{META_PATH: meta}))
    return BuildResult(files=tuple(sorted(files)) + (META_PATH,),
                       driver_replaced=replaced, vnfd_id=chosen)


def _meta_header(source):
    """(header block text, Entry-Definitions) of the source's TOSCA.meta."""
    meta_file = os.path.join(source, META_PATH)
    try:
        header_text = next(_chunks(safe_yaml.read_text(
            meta_file, safe_yaml.DEFINITION_LIMITS.max_bytes)), '')
    except safe_yaml.LoadError as error:
        raise PackageError('%s %s' % (meta_file, error))
    entry = parse_meta(header_text).header.get('Entry-Definitions')
    if not entry:
        raise PackageError('%s of the source has no Entry-Definitions'
                           % META_PATH)
    return header_text, entry


def _check_kind(api, files):
    """A source whose VNFD names the driver file is this driver's VNF
    package (v1 or v2); one without it a CNF's (cnf)."""
    runs_driver = any(
        _DRIVER_ARTIFACT_LINE.search(_read(path).decode('utf-8', 'replace'))
        for name, path in sorted(files.items())
        if name.startswith('Definitions/') and name.endswith(_YAML))
    if api == 'cnf' and runs_driver:
        raise PackageError(
            'the source is a VNF package of this driver (its VNFD names '
            '%s): build it with --api v1 or --api v2; --api cnf is for a '
            'CNF\'s package, which Kubernetes manifests describe'
            % DRIVER_PATH)
    if api != 'cnf' and not runs_driver:
        raise PackageError(
            'no VNFD file of the source names the driver artifact %s (or '
            '%s), so it is not a VNF package of this driver: build a CNF\'s '
            'package with --api cnf' % (DRIVER_PATH, V2_ARTIFACT_FILE))


def _source_vnfd_id(entry_file, entry):
    try:
        found = vnfd_id.of_definition(
            _read(entry_file).decode('utf-8', 'replace'), entry)
    except vnfd_id.VnfdIdError as error:
        raise PackageError(str(error))
    if found is None:
        raise PackageError('%s: no node template gives a descriptor_id, '
                           'the VNFD id Tacker onboards the package by'
                           % entry)
    return found


def _with_vnfd_id(files, source_id, chosen):
    """``files`` with the source's VNFD id replaced by ``chosen`` in
    every file that has it (the VNFD, the types' constraint, scripts)
    but the driver file, which Tacker v1 compares byte for byte."""
    changed = dict(files)
    for name, value in sorted(files.items()):
        if name == DRIVER_PATH:
            continue
        if not isinstance(value, bytes) and \
                os.path.getsize(value) > vnfd_id.MAX_REWRITTEN_BYTES:
            continue
        data = vnfd_id.rewritten(_read(value), source_id, chosen)
        if data is not None:
            changed[name] = data
    return changed


def _read(value):
    """The bytes of a package file: given as bytes, or a path."""
    if isinstance(value, bytes):
        return value
    with open(value, 'rb') as stream:
        return stream.read()


def _hash_of(value):
    if isinstance(value, bytes):
        return HASH_FUNCTIONS[ALGORITHM.lower()](value).hexdigest()
    return file_hash(value)


def _v2_files(files):
    """The files of a v2 package: the source's, V2_DIR's replacing theirs
    (a v2 BaseHOT/<flavour> replaces the whole top level of the source's),
    the v1-only ones left out, and the VNFD flavours' driver artifact
    pointing at the v2 script (as bytes)."""
    overlay = {name[len(V2_DIR):]: path for name, path in files.items()
               if name.startswith(V2_DIR)}
    if V2_SCRIPT_PATH not in overlay:
        raise PackageError('the source has no %s%s, the script Tacker v2 '
                           'runs' % (V2_DIR, V2_SCRIPT_PATH))
    replaced_dirs = {posixpath.dirname(name) + '/' for name in overlay
                     if name.startswith('BaseHOT/')}
    kept = {name: path for name, path in files.items()
            if not name.startswith((V2_DIR,) + _V1_ONLY) and
            not (posixpath.dirname(name) + '/') in replaced_dirs}
    kept.update(overlay)
    for name in sorted(kept):
        if name.startswith('Definitions/') and name.endswith(('.yaml',
                                                              '.yml')):
            kept[name] = _v2_definition(name, kept[name])
    return kept


_ARTIFACT_LINE = re.compile(
    r'^(?P<key>[ \t]+file:[ \t]*)%s[ \t]*\r?$' % re.escape(DRIVER_PATH),
    re.MULTILINE)


# The driver artifact of a source: the v1 driver file, or the v2 script
# (a package built with --api v2, extracted). Blanks only, no line break,
# around the values: each line is scanned once, whatever the file holds.
_DRIVER_ARTIFACT_LINE = re.compile(r'^[ \t]+file:[ \t]*(%s|%s)[ \t]*\r?$' % (
    re.escape(DRIVER_PATH), re.escape(V2_ARTIFACT_FILE)), re.MULTILINE)


def _v2_definition(name, path):
    """The VNFD file with its driver artifact naming the v2 script; the
    file's path when it has none."""
    with open(path, 'rb') as stream:
        text = stream.read().decode('utf-8')
    changed, count = _ARTIFACT_LINE.subn(
        lambda match: match.group('key') + V2_ARTIFACT_FILE, text)
    if not count:
        return path
    artifact = ((safe_yaml.loads(changed, safe_yaml.DEFINITION_LIMITS) or {})
                .get('topology_template', {}).get('node_templates', {})
                .get('VNF', {}).get('artifacts', {})
                .get(feature_hooks.DRIVER_NAME, {}))
    if count != 1 or artifact.get('file') != V2_ARTIFACT_FILE:
        raise PackageError('%s: the %s artifact of node VNF is the only '
                           '"file: %s" line a v2 package may rewrite'
                           % (name, feature_hooks.DRIVER_NAME, DRIVER_PATH))
    return changed.encode('utf-8')


def _source_files(source, excluded):
    """Package path -> file path of every file of the source but TOSCA.meta.

    Anything but a regular file (a FIFO would block the build) is refused.
    """
    files = {}
    for directory, subdirs, names in os.walk(source):
        subdirs[:] = sorted(d for d in subdirs if d not in _SKIPPED_DIRS)
        for name in names:
            path = os.path.join(directory, name)
            if name.endswith(_SKIPPED_SUFFIXES) or \
                    os.path.realpath(path) == excluded:
                continue
            relative = os.path.relpath(path, source).replace(os.sep, '/')
            if not os.path.isfile(path):
                raise PackageError('%s of the source is not a regular file'
                                   % relative)
            if relative != META_PATH:
                files[relative] = path
    return files


def _write_zip(output_path, contents):
    """contents: package path -> file path, or bytes. Atomic replace."""
    directory = os.path.dirname(os.path.abspath(output_path))
    try:
        handle, temporary = tempfile.mkstemp(dir=directory,
                                             suffix='.zip.tmp')
    except FileNotFoundError:
        raise PackageError('cannot write %s: the directory %s does not '
                           'exist' % (output_path, directory))
    except OSError as error:
        raise PackageError('cannot write %s: %s' % (
            output_path, error.strerror or error))
    try:
        with os.fdopen(handle, 'wb') as raw, \
                zipfile.ZipFile(raw, 'w', zipfile.ZIP_DEFLATED) as archive:
            for name in sorted(contents):
                info = zipfile.ZipInfo(name, date_time=_ZIP_TIME)
                info.compress_type = zipfile.ZIP_DEFLATED
                info.create_system = 3  # Unix: Tacker keeps these modes
                data = contents[name]
                mode = 0o644
                if not isinstance(data, bytes):
                    if os.stat(data).st_mode & 0o111:
                        mode = 0o755
                    with open(data, 'rb') as stream:
                        data = stream.read()
                info.external_attr = (0o100000 | mode) << 16
                archive.writestr(info, data)
        os.replace(temporary, output_path)
    except BaseException:
        os.unlink(temporary)
        raise


@contextlib.contextmanager
def opened(path):
    """The package at path as a directory: path itself, or a zip extracted
    to a temporary directory that is removed afterwards."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise PackageError('%s does not exist' % path)
    except OSError as error:
        raise PackageError('%s cannot be read: %s' % (path, error.strerror))
    if stat.S_ISDIR(mode):
        yield os.path.realpath(path)
        return
    # Checked first: is_zipfile would block on a FIFO.
    if not stat.S_ISREG(mode) or not zipfile.is_zipfile(path):
        raise PackageError('%s is neither a directory nor a zip file' % path)
    try:
        directory = tempfile.mkdtemp(prefix='vnf-package-')
    except OSError as error:
        raise PackageError('cannot create a directory to extract %s: %s'
                           % (path, error.strerror))
    try:
        _extract(path, directory)
        yield directory
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def _extract(path, directory):
    """Extract the zip at path into directory, within the limits above."""
    try:
        with zipfile.ZipFile(path) as archive:
            entries = archive.infolist()
            _check_entries(path, entries)
            for entry in entries:
                _extract_entry(path, archive, entry, directory)
    except (zipfile.BadZipFile, zipfile.LargeZipFile, NotImplementedError,
            RuntimeError, EOFError, zlib.error, OSError,
            ValueError) as error:
        # Corrupt or encrypted data, an unsupported compression, a full disk.
        raise PackageError('%s cannot be extracted: %s' % (path, error))


def _check_entries(path, entries):
    """Refuse, before extracting anything, a zip with too many entries, too
    many bytes declared, or an entry that could write outside the
    directory (absolute, "..", a symbolic link) or twice to one file."""
    if len(entries) > MAX_ZIP_ENTRIES:
        raise PackageError('%s has %d entries, more than the limit of %d'
                           % (path, len(entries), MAX_ZIP_ENTRIES))
    declared = sum(entry.file_size for entry in entries)
    if declared > MAX_ZIP_BYTES:
        raise PackageError(
            '%s expands to %d bytes, more than the limit of %d; validate '
            'the package source directory instead'
            % (path, declared, MAX_ZIP_BYTES))
    names = set()
    for entry in entries:
        name = entry.filename
        parts = name.rstrip('/').split('/')
        if name.startswith('/') or '..' in parts or '\\' in name:
            raise PackageError('%s: unsafe path %r in the zip' % (path, name))
        if stat.S_ISLNK(entry.external_attr >> 16):
            raise PackageError('%s: %r is a symbolic link, which a package '
                               'may not contain' % (path, name))
        if name in names:
            raise PackageError('%s: %r is in the zip twice' % (path, name))
        names.add(name)


def _extract_entry(path, archive, entry, directory):
    """Copy one entry, never more bytes than it declares: the declared
    sizes are what _check_entries limited."""
    target = os.path.join(directory, *entry.filename.rstrip('/').split('/'))
    if entry.is_dir():
        os.makedirs(target, exist_ok=True)
        return
    os.makedirs(os.path.dirname(target), exist_ok=True)
    written = 0
    with archive.open(entry) as source, open(target, 'xb') as sink:
        for chunk in iter(lambda: source.read(_COPY_CHUNK), b''):
            written += len(chunk)
            if written > entry.file_size:
                raise PackageError('%s: %r expands beyond the %d bytes it '
                                   'declares' % (path, entry.filename,
                                                 entry.file_size))
            sink.write(chunk)
