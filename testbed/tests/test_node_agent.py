"""Tests of the node agent's decisions (testbed/node_agent.py) and of the
mount options its FUSE NFS client honours (testbed/nfs_fuse.py); the
mounts themselves are tried in tests/functional/pod_volumes.py."""

import pytest

from testbed import nfs_fuse
from testbed import node_agent


@pytest.mark.parametrize('options, parsed', [
    ([], {'version': 4, 'read_only': False}),
    (['nfsvers=4'], {'version': 4, 'read_only': False}),
    (['vers=4.0', 'hard'], {'version': 4, 'read_only': False}),
    (['nfsvers=4,ro'], {'version': 4, 'read_only': True}),
    (['rw', 'noatime'], {'version': 4, 'read_only': False}),
])
def test_honoured_mount_options(options, parsed):
    assert nfs_fuse.parse_options(options) == parsed


@pytest.mark.parametrize('options, named', [
    (['nfsvers=3'], 'nfsvers=3'),
    (['nfsvers=4.1'], 'nfsvers=4.1'),
    (['hard', 'rsize=1048576'], 'rsize=1048576'),
    (['ro,sec=krb5'], 'sec=krb5'),
])
def test_unsupported_mount_options_are_refused_by_name(options, named):
    with pytest.raises(nfs_fuse.OptionError) as error:
        nfs_fuse.parse_options(options)
    assert named in str(error.value)


def pod(*claims, read_only=False):
    return {'metadata': {'uid': 'u1', 'namespace': 'default'},
            'spec': {'volumes': [
                {'name': 'scratch', 'emptyDir': {}},
                *({'name': claim, 'persistentVolumeClaim': {
                    'claimName': claim, 'readOnly': read_only}}
                  for claim in claims)]}}


def claim(name, phase='Bound', volume='nfs-pv1'):
    return {('default', name): {'metadata': {'name': name},
                                'spec': {'volumeName': volume},
                                'status': {'phase': phase}}}


def volume(name='nfs-pv1', options=None, nfs=True):
    spec = {'mountOptions': options} if options else {}
    if nfs:
        spec['nfs'] = {'server': '10.1.0.11', 'path': f'/srv/{name}'}
    return {name: {'metadata': {'name': name}, 'spec': spec}}


PATH = '/var/lib/kubelet/pods/u1/volumes/kubernetes.io~nfs/nfs-pv1'


@pytest.mark.parametrize('the_pod, claims, volumes, mounts', [
    (pod(), {}, {}, []),
    (pod('data'), {}, volume(), None),  # no claim yet
    (pod('data'), claim('data', 'Pending', ''), volume(), None),
    (pod('data'), claim('data'), {}, None),  # its PV gone
    (pod('data'), claim('data'), volume(nfs=False), []),
    (pod('data'), claim('data'), volume(options=['nfsvers=4']),
     [node_agent.NfsMount(PATH, '10.1.0.11', '/srv/nfs-pv1',
                          ('nfsvers=4',))]),
    (pod('data', read_only=True), claim('data'), volume(),
     [node_agent.NfsMount(PATH, '10.1.0.11', '/srv/nfs-pv1', ('ro',))]),
])
def test_pod_mounts(the_pod, claims, volumes, mounts):
    assert node_agent.pod_mounts(the_pod, claims, volumes) == mounts
