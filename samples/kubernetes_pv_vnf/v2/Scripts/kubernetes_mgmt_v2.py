"""Tacker v2 management script: runs the installed kubernetes-mgmt-pv.

Tacker v2 runs this file with tacker-conductor's interpreter for each hook
the VNFD routes to it; the driver itself is installed in that environment
(pip install kubernetes-mgmt-pv), so this package keeps working across
driver upgrades.
"""

import os
import sys

try:
    from kubernetes_mgmt_pv.doors import tacker_v2
except ImportError as error:
    os.write(2, ('kubernetes-mgmt-pv failed on %s: %s: install '
                 'kubernetes-mgmt-pv into tacker-conductor\'s Python '
                 'environment\n' % (os.uname().nodename, error)).encode())
    sys.exit(1)

if __name__ == '__main__':
    sys.exit(tacker_v2.main())
