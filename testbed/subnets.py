"""The test networks' subnets: a random 10.x.y.0/24 that overlaps
nothing on this machine, picked under a lock shared by every testbed."""

import contextlib
import fcntl
import ipaddress
import os
import secrets
import subprocess
import tempfile


def _ip(*args):
    return subprocess.run(['ip', *args], check=True, capture_output=True,
                          text=True).stdout


def used_networks():
    """IPv4 networks already on this machine, from addresses and routes."""
    networks = []
    for line in _ip('-4', '-o', 'addr', 'show').splitlines():
        fields = line.split()
        networks.append(ipaddress.ip_interface(
            fields[fields.index('inet') + 1]).network)
    for line in _ip('-4', 'route', 'show').splitlines():
        destination = line.split()[0]
        if destination != 'default':
            networks.append(ipaddress.ip_network(destination, strict=False))
    return networks


# The test clusters' Service network (Kubernetes' default): the driver
# refuses a node network that overlaps it, so no testbed network is in it.
KUBERNETES_SERVICE_NETWORK = ipaddress.ip_network('10.96.0.0/12')
NETWORK_LOCK = os.path.join(tempfile.gettempdir(), 'testbed-networks.lock')


@contextlib.contextmanager
def network_lock():
    """Held from picking a subnet until its bridge has it: testbeds
    starting side by side (xdist workers) never pick the same one."""
    with open(NETWORK_LOCK, 'a') as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # closing the file releases it
        yield


def free_subnet():
    """Pick a random 10.x.y.0/24 that overlaps nothing on this machine nor
    the test clusters' Service network.

    secrets (not random) so that pytest plugins reseeding `random` cannot
    make parallel workers pick the same subnet.
    """
    used = used_networks() + [KUBERNETES_SERVICE_NETWORK]
    for _ in range(100):
        net = ipaddress.ip_network(
            f'10.{1 + secrets.randbelow(254)}.{secrets.randbelow(256)}.0/24')
        if not any(net.overlaps(u) for u in used):
            return net
    raise RuntimeError('no free 10.x.y.0/24 subnet found')
