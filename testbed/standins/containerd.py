#!/usr/bin/python3
"""containerd stand-in, installed as /usr/bin/containerd in every test host.

No container runtime can run in the test hosts. The install script only
asks containerd for its version and its default configuration (which it
edits to SystemdCgroup = true), so that is what this answers; the default
configuration is the relevant part of containerd 1.7's.
"""

import sys

PACKAGE_VERSION = '1.7.24-0testbed1'  # rewritten by testbed.standins
VERSION = 'v' + PACKAGE_VERSION.split('-')[0]
REVISION = '88bf19b2105c8b17560993bee28a01ddc2f97182'

DEFAULT_CONFIG = '''\
disabled_plugins = []
imports = []
oom_score = 0
plugin_dir = ""
required_plugins = []
root = "/var/lib/containerd"
state = "/run/containerd"
temp = ""
version = 2

[cgroup]
  path = ""

[grpc]
  address = "/run/containerd/containerd.sock"
  gid = 0
  max_recv_message_size = 16777216
  max_send_message_size = 16777216
  uid = 0

[plugins]

  [plugins."io.containerd.grpc.v1.cri"]
    enable_selinux = false
    sandbox_image = "registry.k8s.io/pause:3.8"

    [plugins."io.containerd.grpc.v1.cri".cni]
      bin_dir = "/opt/cni/bin"
      conf_dir = "/etc/cni/net.d"

    [plugins."io.containerd.grpc.v1.cri".containerd]
      default_runtime_name = "runc"
      snapshotter = "overlayfs"

      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes]

        [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
          runtime_type = "io.containerd.runc.v2"

          [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
            BinaryName = ""
            CriuImagePath = ""
            NoPivotRoot = false
            Root = ""
            ShimCgroup = ""
            SystemdCgroup = false

    [plugins."io.containerd.grpc.v1.cri".registry]
      config_path = ""
'''  # noqa: E501 (containerd's own indentation)


def main(args):
    if args in (['--version'], ['-v']):
        print(f'containerd github.com/containerd/containerd {VERSION} '
              f'{REVISION}')
        return 0
    if args == ['config', 'default']:
        sys.stdout.write(DEFAULT_CONFIG)
        return 0
    print('containerd (testbed stand-in): cannot run containerd here; only '
          '--version and "config default" are supported', file=sys.stderr)
    return 1


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
