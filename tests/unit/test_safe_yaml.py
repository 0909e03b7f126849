"""safe_yaml: hostile YAML and JSON end in a LoadError, fast, with libyaml
and with the pure-Python fallback alike."""

import json
import os
import random
import time

import pytest
import yaml

from kubernetes_mgmt_pv import safe_yaml
from testbed import pv_manifest

LIMITS = safe_yaml.MANIFEST_LIMITS
MANIFEST = pv_manifest.TEMPLATE.format(name='nfs-pv1', server='0.0.0.0',
                                       path='/volume/nfs/pv1')


def billion_laughs(levels=9):
    lines = ['l0: &l0 "lol"']
    for level in range(1, levels + 1):
        lines.append('l%d: &l%d [%s]' % (
            level, level, ', '.join(['*l%d' % (level - 1)] * 10)))
    return '\n'.join(lines) + '\n'


HOSTILE_YAML = [
    # 90 aliases, under the alias limit: the expansion (10**9) refuses it.
    (billion_laughs(), 'expands to more than 100000 nodes'),
    ('a: &a [*a]\n', 'recursive alias'),
    ('&a {x: [1, {y: *a}]}\n', 'recursive alias'),
    # Deep flow nesting: whichever limit trips first refuses it, ours or
    # the one libyaml has had since PyYAML 6.0.4 (None: any LoadError).
    ('[' * 20000 + ']' * 20000, None),
    ('{a: ' * 20000 + '1' + '}' * 20000, None),
    (''.join('%s- \n' % ('  ' * n) for n in range(150)),
     'nests deeper than 100 levels'),
    ('a: &a x\nb: [%s]\n' % ', '.join(['*a'] * 101), 'more than 100 aliases'),
    # A lone surrogate: refused by libyaml and by safe_yaml's own check.
    ('a: "\\ud800"\n', 'invalid Unicode character escape'),
    ('a: [unclosed\n', 'is not valid YAML'),
    ('a: !!python/object/apply:os.system ["true"]\n', 'is not valid YAML'),
    ('? [a]\n: b\n', 'is not valid YAML'),
    ('a: ' + '1' * 5000 + '\n', 'cannot be loaded'),
    ('a: 2020-13-45\n', 'cannot be loaded'),
    ('a: \x00\n', 'is not valid YAML'),
]


@pytest.fixture(params=['libyaml', 'python'])
def loader(request, monkeypatch):
    """Every test runs with the loader in use and with the fallback."""
    if request.param == 'python':
        monkeypatch.setattr(safe_yaml, '_Loader', yaml.SafeLoader)
    return request.param


@pytest.mark.parametrize('text, message', HOSTILE_YAML)
def test_hostile_yaml_is_a_load_error(loader, text, message):
    started = time.process_time()
    with pytest.raises(safe_yaml.LoadError) as caught:
        safe_yaml.loads_all(text, LIMITS)
    assert message is None or message in str(caught.value)
    assert time.process_time() - started < 1


def test_event_limit(loader):
    limits = safe_yaml.Limits(max_bytes=safe_yaml.MiB, max_depth=10,
                              max_aliases=10, max_events=50, max_nodes=50)
    with pytest.raises(safe_yaml.LoadError, match='more than 50 YAML events'):
        safe_yaml.loads('[%s]' % ', '.join(['1'] * 60), limits)


def test_text_over_the_size_limit(loader):
    with pytest.raises(safe_yaml.LoadError, match='larger than the limit'):
        safe_yaml.loads('a: %s\n' % ('x' * LIMITS.max_bytes), LIMITS)


def test_ordinary_yaml_with_shared_aliases_and_merge_keys_loads(loader):
    text = ('base: &base {size: 1Gi, modes: [ReadWriteOnce]}\n'
            'one: {<<: *base, name: a}\ntwo: *base\n')
    assert safe_yaml.loads(text, LIMITS) == {
        'base': {'size': '1Gi', 'modes': ['ReadWriteOnce']},
        'one': {'size': '1Gi', 'modes': ['ReadWriteOnce'], 'name': 'a'},
        'two': {'size': '1Gi', 'modes': ['ReadWriteOnce']}}


def test_nesting_up_to_the_limit_loads(loader):
    depth = LIMITS.max_depth
    assert safe_yaml.loads('[' * depth + ']' * depth, LIMITS) is not None


def test_documents(loader):
    assert safe_yaml.loads('', LIMITS) is None
    assert safe_yaml.loads_all('a: 1\n---\nb: 2\n', LIMITS) == [
        {'a': 1}, {'b': 2}]
    with pytest.raises(safe_yaml.LoadError, match='2 YAML documents'):
        safe_yaml.loads('a: 1\n---\nb: 2\n', LIMITS)


def test_mangled_manifests_never_raise_anything_else(loader):
    """Random cuts, repeats and insertions of a real manifest."""
    randomness = random.Random(7)
    pieces = ['&a ', '*a', '[', '{', ']', '}', ': ', '- ', '"', "'", '\\',
              '\n', '\t', '!!', '<<: ', '%YAML 1.1\n', '---\n', '\ufeff',
              '\x85', '\u2028', '#', '|', '>', '? ', '\\ud800']
    started = time.process_time()
    for _ in range(400):
        text = MANIFEST
        for _ in range(randomness.randint(1, 6)):
            cut = randomness.randrange(len(text) + 1)
            text = text[:cut] + randomness.choice(pieces) * \
                randomness.randint(1, 3) + text[cut:]
        try:
            safe_yaml.loads_all(text, LIMITS)
        except safe_yaml.LoadError:
            pass
    assert time.process_time() - started < 5


# -- files --------------------------------------------------------------------

def test_fifo_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / 'manifest.yaml'
    os.mkfifo(fifo)
    started = time.process_time()
    with pytest.raises(safe_yaml.LoadError, match='not a regular file but a '
                                                  'FIFO'):
        safe_yaml.load(str(fifo), LIMITS)
    assert time.process_time() - started < 1


@pytest.mark.parametrize('path, message', [
    ('/dev/null', 'a device'), ('/', 'a directory'),
    ('/nonexistent/x.yaml', 'does not exist'),
    ('bad\x00name', 'cannot be read'), ('\ud800', 'cannot be read')])
def test_other_files_that_cannot_be_read(path, message):
    with pytest.raises(safe_yaml.LoadError, match=message):
        safe_yaml.load(path, LIMITS)


def test_symbolic_link_is_refused_only_when_asked(tmp_path):
    target = tmp_path / 'target.yaml'
    target.write_text('a: 1\n')
    link = tmp_path / 'link.yaml'
    os.symlink(target, link)
    assert safe_yaml.load(str(link), LIMITS) == {'a': 1}
    with pytest.raises(safe_yaml.LoadError, match='symbolic link'):
        safe_yaml.load(str(link), LIMITS, follow_symlinks=False)


def test_oversized_file_is_refused_before_reading(tmp_path):
    big = tmp_path / 'big.yaml'
    with open(big, 'wb') as stream:
        stream.truncate(LIMITS.max_bytes + 1)
    with pytest.raises(safe_yaml.LoadError, match='larger than the limit of '
                                                  '1 MiB'):
        safe_yaml.load(str(big), LIMITS)


def test_a_file_at_the_size_limit_is_read(tmp_path):
    exact = tmp_path / 'exact.yaml'
    exact.write_text('a: %s\n' % ('x' * (LIMITS.max_bytes - 4)))
    assert len(safe_yaml.load(str(exact), LIMITS)['a']) == \
        LIMITS.max_bytes - 4


def test_invalid_utf8_is_named_by_offset(tmp_path):
    bad = tmp_path / 'bad.yaml'
    bad.write_bytes(b'a: caf\xe9\n')
    with pytest.raises(safe_yaml.LoadError, match=r'not valid UTF-8 \(byte '
                                                  r'0xe9 at offset 6\)'):
        safe_yaml.load(str(bad), LIMITS)


# -- JSON ---------------------------------------------------------------------

@pytest.mark.parametrize('text, message', [
    ('[' * 20000 + ']' * 20000, 'nests deeper than 100 levels'),
    ('{"a": ' * 5000 + '1' + '}' * 5000, 'nests deeper than 100 levels'),
    ('{"a": ', 'is not JSON'),
    ('[' + '1' * 5000 + ']', 'is not JSON'),
])
def test_hostile_json_is_a_load_error(tmp_path, text, message):
    request = tmp_path / 'request.json'
    request.write_text(text)
    started = time.process_time()
    with pytest.raises(safe_yaml.LoadError, match=message):
        safe_yaml.load_json(str(request))
    assert time.process_time() - started < 1


def test_brackets_inside_json_strings_do_not_count(tmp_path):
    request = tmp_path / 'request.json'
    value = {'a': '[' * 500, 'b': ['\\"]' + '{' * 500], 'c': '\ud800'}
    request.write_text(json.dumps(value))
    assert safe_yaml.load_json(str(request)) == value


def test_json_fifo_and_size(tmp_path):
    fifo = tmp_path / 'request.json'
    os.mkfifo(fifo)
    with pytest.raises(safe_yaml.LoadError, match='FIFO'):
        safe_yaml.load_json(str(fifo))
    big = tmp_path / 'big.json'
    big.write_text('"%s"' % ('x' * safe_yaml.REQUEST_MAX_BYTES))
    with pytest.raises(safe_yaml.LoadError, match='larger than the limit'):
        safe_yaml.load_json(str(big))
