#!/usr/bin/python3 -S
"""kubelet stand-in, installed as /usr/bin/kubelet in every test host.

The test hosts cannot run a kubelet (no containers, no systemd); the
kubeadm stand-in registers the Node instead. This answers what the
install script and the driver ask a node's kubelet, its version;
``--testbed-restart`` does what a kubelet's restart shows the cluster:
the Node's status names this kubelet's version; and with systemd's
command line (``--config=...``) it holds the kubelet's port open
(kubelet_service.py). The kubelet package's
postinst runs it on a node that is a member, as a real kubelet package's
upgrade ends with the service restarted (the hosts have no systemd).
"""

import os
import socket
import sys

PACKAGE_VERSION = '1.36.4-1.1'  # rewritten by testbed.standins when built
VERSION = 'v' + PACKAGE_VERSION.split('-')[0]
KUBELET_CONF = '/etc/kubernetes/kubelet.conf'


def post_status():
    """PATCH the Node's status.nodeInfo with this kubelet's version."""
    sys.dont_write_bytecode = True  # as kubeadm.py: no stale .pyc
    sys.path[:0] = ['/usr/lib/testbed',
                    os.path.dirname(os.path.abspath(__file__))]
    import kubeadm_node as node
    server, ca_pem, token = node.read_kubeconfig(KUBELET_CONF)
    name = socket.gethostname().lower()
    node.Api(server, ca_pem, token).expect(
        'PATCH', f'/api/v1/nodes/{name}/status',
        {'status': {'nodeInfo': {'kubeletVersion': VERSION,
                                 'kubeProxyVersion': VERSION}}},
        content_type='application/merge-patch+json',
        what=f'kubelet: unable to update node "{name}"')
    print(f'kubelet {VERSION}: Node "{name}" status posted')


def main(args):
    if args in (['--version'], ['--version=true']):
        print(f'Kubernetes {VERSION}')
        return 0
    if args == ['--testbed-restart']:
        post_status()
        return 0
    if any(arg.startswith('--config=') for arg in args):
        sys.path[:0] = ['/usr/lib/testbed']
        import kubelet_service
        kubelet_service.serve()
    print('kubelet (testbed stand-in): cannot run a kubelet here; only '
          '--version is supported', file=sys.stderr)
    return 1


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
