#!/usr/bin/python3 -S
"""containerd stand-in, installed as /usr/bin/containerd in every test host.

No container runtime can run in the test hosts. The install script only
asks containerd for its version and its default configuration (which it
edits to SystemdCgroup = true), so that is what this answers: the relevant
part of containerd 1.7's default (version 2), or, when the package is a
containerd 2.x (Ubuntu 26.04's, testbed.guest_images), of 2.x's (version
3: single quotes, the pause image in pinned_images, no SystemdCgroup key).
"""

import re
import sys

PACKAGE_VERSION = '1.7.24-0testbed1'  # rewritten by testbed.standins
VERSION = 'v' + re.match(r'[0-9.]*[0-9]', PACKAGE_VERSION).group()
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

DEFAULT_CONFIG_2X = '''\
version = 3
root = '/var/lib/containerd'
state = '/run/containerd'
temp = ''
disabled_plugins = []
required_plugins = []
oom_score = 0
imports = []

[grpc]
  address = '/run/containerd/containerd.sock'
  uid = 0
  gid = 0

[plugins]
  [plugins.'io.containerd.cri.v1.images']
    snapshotter = 'overlayfs'
    max_concurrent_downloads = 3

    [plugins.'io.containerd.cri.v1.images'.pinned_images]
      sandbox = 'registry.k8s.io/pause:3.10.1'

    [plugins.'io.containerd.cri.v1.images'.registry]
      config_path = ''

  [plugins.'io.containerd.cri.v1.runtime']
    enable_selinux = false

    [plugins.'io.containerd.cri.v1.runtime'.containerd]
      default_runtime_name = 'runc'

      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes]
        [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
          runtime_type = 'io.containerd.runc.v2'
          sandboxer = 'podsandbox'

          [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
            BinaryName = ''
            CriuImagePath = ''
            IoGid = 0
            IoUid = 0
            NoNewKeyring = false
            Root = ''
            ShimCgroup = ''

    [plugins.'io.containerd.cri.v1.runtime'.cni]
      bin_dir = ''
      conf_dir = '/etc/cni/net.d'
'''  # noqa: E501 (containerd's own indentation)


def main(args):
    if args in (['--version'], ['-v']):
        print(f'containerd github.com/containerd/containerd {VERSION} '
              f'{REVISION}')
        return 0
    if args == ['config', 'default']:
        sys.stdout.write(DEFAULT_CONFIG_2X if VERSION.startswith('v2.')
                         else DEFAULT_CONFIG)
        return 0
    print('containerd (testbed stand-in): cannot run containerd here; only '
          '--version and "config default" are supported', file=sys.stderr)
    return 1


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
