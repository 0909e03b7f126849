"""The join secrets stay off every command line and off the disk: while
the real sample install script joins a Worker and a second Master (on the
kubeadm stand-ins, which take `kubeadm join --config FILE` as kubeadm
does), an unprivileged user of each joining node keeps reading every
process's command line, as `ps -eo args` does, and never sees the
bootstrap token or the certificate key."""

import json
import shlex
import subprocess

import pytest

from kubernetes_mgmt_pv.cluster import cluster
from testbed import standins
from testbed import virtual_vnf
from tests.functional.conftest import skip_without_testbed

SAMPLER = '/tmp/cmdline-sampler.py'
SAMPLES = '/tmp/cmdline-samples.json'
STOP = '/tmp/cmdline-sampler.stop'
# Runs as the login user: what any user of the node can see. Every
# distinct command line of every process, read from /proc (ps's source)
# as often as it can, until the stop file appears (or 10 minutes pass).
SAMPLER_SOURCE = '''
import json, os, sys, time
seen, rounds, deadline = set(), 0, time.monotonic() + 600
while not os.path.exists(sys.argv[2]) and time.monotonic() < deadline:
    for pid in os.listdir('/proc'):
        if pid.isdigit():
            try:
                with open('/proc/%s/cmdline' % pid, 'rb') as handle:
                    seen.add(handle.read().replace(b'\\0', b' ').decode(
                        'utf-8', 'replace').strip())
            except OSError:
                pass
    rounds += 1
    time.sleep(0.002)
with open(sys.argv[1], 'w') as handle:
    json.dump({'rounds': rounds, 'cmdlines': sorted(seen)}, handle)
'''


def start_sampler(host):
    host.write_file(SAMPLER, SAMPLER_SOURCE)
    host.run(f'rm -f {SAMPLES} {STOP}; chmod 644 {SAMPLER}; '
             f'setsid runuser -u ubuntu -- python3 {SAMPLER} {SAMPLES} '
             f'{STOP} > /dev/null 2>&1 < /dev/null &')


def stop_sampler(host):
    host.run(f'touch {STOP}; i=0; while [ ! -s {SAMPLES} ] && '
             f'[ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done')
    return json.loads(host.read_file(SAMPLES))


def files_holding(host, secrets):
    """Files the host wrote (its disk and its tmpfs) that hold a secret."""
    patterns = [arg for secret in secrets for arg in ('-e', secret)]
    on_disk = subprocess.run(
        ['grep', '-rlF', *patterns, host.written_files_dir],
        capture_output=True, text=True).stdout.split()
    in_memory = host.run('grep -rlF %s /run /tmp' % shlex.join(patterns),
                         check=False).stdout.split()
    return on_disk + in_memory


@pytest.fixture
def two_masters():
    skip_without_testbed()
    with virtual_vnf.VirtualCluster(masters=2, workers=1, volumes=1,
                                    install_cluster=True) as virtual:
        yield virtual


def test_joins_show_no_secret_to_other_users(two_masters, monkeypatch):
    learnt = []
    parse = cluster.parse_join_info

    def recording_parse(stdout):
        info = parse(stdout)
        learnt.append(info)
        return info

    monkeypatch.setattr(cluster, 'parse_join_info', recording_parse)
    joining = [two_masters.host('master2'), two_masters.host('worker1')]
    for host in joining:
        start_sampler(host)
    try:
        two_masters.instantiate_end()
    finally:
        samples = {host.name: stop_sampler(host) for host in joining}

    # The leader's join information went to master2, master2's to the
    # Worker: those are the secrets a joining node was given.
    secrets = [secret for info in learnt[:2] for secret in info.secrets]
    assert len(learnt) == 2 and len(set(secrets)) == 4
    assert virtual_vnf.node_readiness(two_masters.host('master1')) == {
        'master1': 'True', 'master2': 'True', 'worker1': 'True'}
    for host in joining:
        cmdlines = samples[host.name]['cmdlines']
        # The sampler saw the join happen: the script and kubeadm join.
        assert [line for line in cmdlines
                if 'install_k8s_cluster.sh' in line and host.ip in line], \
            host.name
        joins = [line for line in cmdlines
                 if 'kubeadm join --config /run/kubeadm-join.' in line]
        assert joins, (host.name, cmdlines)
        leaked = [line for line in cmdlines for secret in secrets
                  if secret in line]
        assert leaked == [], host.name
        assert files_holding(host, secrets) == [], host.name
        assert host.run('ls /run').stdout.count('kubeadm-join.') == 0
    # The control-plane join got its key through the configuration file.
    join, = [entry for entry in standins.call_log(two_masters.host('master2'))
             if entry['argv'][1] == 'join']
    assert join['config']['controlPlane']['certificateKey'] == '***'
    assert join['config']['discovery']['bootstrapToken'][
        'apiServerEndpoint'] == '%s:16443' % two_masters.vip
    # The joins over, no bootstrap token the Masters printed nor the
    # uploaded certificates are left in the cluster.
    names = {item['metadata']['name'] for item in json.loads(
        virtual_vnf.kubectl(two_masters.host('master1'), 'get', 'secrets',
                            '-n', 'kube-system', '-o', 'json'))['items']}
    assert cluster.CERTIFICATES_SECRET not in names
    assert not {'bootstrap-token-%s' % info.token.partition('.')[0]
                for info in learnt} & names
