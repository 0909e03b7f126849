#!/usr/bin/python3
"""kubelet stand-in, installed as /usr/bin/kubelet in every test host.

The test hosts cannot run a kubelet (no containers, no systemd); the
kubeadm stand-in registers the Node instead. This only answers what the
install script and the driver ask a node's kubelet: its version.
"""

import sys

PACKAGE_VERSION = '1.35.4-1.1'  # rewritten by testbed.standins when built
VERSION = 'v' + PACKAGE_VERSION.split('-')[0]


def main(args):
    if args in (['--version'], ['--version=true']):
        print(f'Kubernetes {VERSION}')
        return 0
    print('kubelet (testbed stand-in): cannot run a kubelet here; only '
          '--version is supported', file=sys.stderr)
    return 1


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
