"""The install script's upgrade stages (-U kubeadm, -U kubelet): the
packages pinned at the script's version and held again, the Kubernetes
repository of its minor, nothing of the install. Same harness as
test_install_script_offline; the real thing runs in the functional test
test_upgrade."""

import pytest

from tests.unit import install_script_harness as base
from tests.unit.test_install_script_offline import node  # noqa: F401
from tests.unit.test_install_script_offline import PREPARE
from tests.unit.test_install_script_offline import REPO

VERSION = base.VERSION


def upgrade(node, *options, **env):  # noqa: F811
    return node.run_main(*options, extra=PREPARE % (node.apt,
                                                    node.containerd), **env)


@pytest.mark.parametrize('options, message', [
    (['-U', 'all'], "-U: 'all' is neither kubeadm nor kubelet"),
    (['-U'], 'option -U needs an argument'),
    (['-U', 'kubeadm', '-r', 'ftp://mirror/'], '-r:'),
])
def test_bad_stages_are_usage_errors(node, options, message):  # noqa: F811
    result = node.run_script(*options)
    assert result.returncode == 2
    assert message in result.stderr
    assert node.calls() == []


def test_the_kubeadm_stage_switches_the_repository_and_holds_kubeadm(
        node):  # noqa: F811
    result = upgrade(node, '-U', 'kubeadm', '-r', REPO, '-g',
                     str(node.key))
    assert result.returncode == 0, result.stderr
    sources = (node.apt / 'sources.list.d' / 'kubernetes.list').read_text()
    assert REPO in sources
    apt = node.argvs('apt-get')
    assert apt[0][0] == 'update'
    assert apt[1][-2:] == ['--allow-downgrades', 'kubeadm=' + VERSION]
    assert '--allow-change-held-packages' in apt[1]
    assert node.argvs('apt-mark') == [['unhold', 'kubeadm'],
                                      ['hold', 'kubeadm']]
    assert 'Upgrade Success!' in result.stdout
    assert node.argvs('kubeadm') == [['version', '-o', 'short']]
    assert 'RESTART_KUBELET_CALLED' not in result.stdout


def test_the_kubelet_stage_holds_kubelet_and_kubectl_and_restarts(
        node):  # noqa: F811
    result = upgrade(node, '-U', 'kubelet')
    assert result.returncode == 0, result.stderr
    assert node.argvs('apt-get') == [[
        'install', '-y', '-q', '-o', 'DPkg::Lock::Timeout=600', '-o',
        'Acquire::Retries=3', '-o', 'Dpkg::Options::=--force-confdef', '-o',
        'Dpkg::Options::=--force-confold', '--allow-change-held-packages',
        '--allow-downgrades', 'kubelet=' + VERSION, 'kubectl=' + VERSION]]
    assert node.argvs('apt-mark') == [['unhold', 'kubelet', 'kubectl'],
                                      ['hold', 'kubelet', 'kubectl']]
    assert 'RESTART_KUBELET_CALLED' in result.stdout
    assert not (node.apt / 'sources.list.d').exists()
    assert node.argvs('kubeadm') == []
