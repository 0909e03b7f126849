"""testbed/image_cache.py: a layer is built once per key, then copied."""

import os

from testbed import image_cache


def test_a_layer_is_built_once_then_copied(tmp_path, monkeypatch):
    monkeypatch.setattr(image_cache, 'CACHE_DIR', str(tmp_path / 'kept'))
    built = []

    def build(upper):
        built.append(upper)
        os.makedirs(os.path.join(upper, 'etc'))
        with open(os.path.join(upper, 'etc', 'layer'), 'w') as handle:
            handle.write('built\n')

    for name in ('first', 'second'):
        image_cache.upper_dir('k1', build, str(tmp_path / name))
    assert built == [str(tmp_path / 'first')]
    assert (tmp_path / 'second' / 'etc' / 'layer').read_text() == 'built\n'
    # Another key is built anew.
    image_cache.upper_dir('k2', build, str(tmp_path / 'third'))
    assert built[1:] == [str(tmp_path / 'third')]


def test_the_key_follows_every_part_and_the_runners_packages():
    assert image_cache.key('a', ('b',)) == image_cache.key('a', ('b',))
    assert image_cache.key('a', ('b',)) != image_cache.key('a', ('c',))
    state = image_cache.runner_packages()
    assert '/var/lib/dpkg/status' in [path for path, _, _ in state]


def test_a_key_is_authorized_for_the_layers_user_only(tmp_path):
    upper = tmp_path / 'upper'
    (upper / 'etc').mkdir(parents=True)
    (upper / 'home' / 'ubuntu' / '.ssh').mkdir(parents=True)
    (upper / 'etc' / 'passwd').write_text(
        'root:x:0:0::/root:/bin/sh\n'
        f'ubuntu:x:{os.getuid()}:{os.getgid()}::/home/ubuntu:/bin/bash\n')
    image_cache.authorize_key(str(upper), 'ubuntu', 'ssh-ed25519 AAAA k')
    keys = upper / 'home' / 'ubuntu' / '.ssh' / 'authorized_keys'
    assert keys.read_text() == 'ssh-ed25519 AAAA k\n'
    assert oct(keys.stat().st_mode & 0o777) == '0o600'
