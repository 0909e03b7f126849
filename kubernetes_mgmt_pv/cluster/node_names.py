"""The one check of a VM's host name, at install and at every later
operation, before the driver writes it on other hosts: their /etc/hosts
blocks, haproxy's and keepalived's configuration, etcd's member list.

A VM's ``hostname`` is the VM's word: a compromised one could name itself
``w1 mirror.internal`` to be the mirror in every other node's /etc/hosts.
"""

import re

# A Kubernetes Node name (RFC 1123 subdomain): kubelet registers the host
# name lower-cased, and every other use of the name follows the Node's.
_NODE_NAME = re.compile(r'[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?')


def is_valid(hostname):
    """Whether ``hostname`` (in any case) is a valid Node name."""
    return (isinstance(hostname, str) and hostname.isascii() and
            _NODE_NAME.fullmatch(hostname.lower()) is not None)
