"""How every kubectl step of either feature runs, declared below both.

kubectl runs on a Master, as root, with the cluster admin's kubeconfig
that kubeadm writes, against that Master's own API server: admin.conf
exists from kubeadm init/join on and belongs to no login user; its own
server may be the VIP, which moves while the HA configuration changes
and may point at a Master being healed.
"""

ADMIN_KUBECONFIG = '/etc/kubernetes/admin.conf'
MISSING_ADMIN_KUBECONFIG = (
    '%s is missing: the driver runs kubectl as root with the cluster '
    "admin's kubeconfig that kubeadm writes there; on a cluster the driver "
    'did not install, copy it there on every Master (owner root, mode 0600)'
    ' and retry' % ADMIN_KUBECONFIG)
API_SERVER_PORT = 6443


def url_host(address):
    """An address as it goes into a URL or host:port (IPv6 bracketed)."""
    return '[%s]' % address if ':' in address else address


def api_server_url(address):
    """The URL of the API server a Master runs itself."""
    return 'https://%s:%d' % (url_host(address), API_SERVER_PORT)


def kubectl_argv(address, args):
    """kubectl as the cluster admin against the API server of the Master
    at ``address``."""
    return ['kubectl', '--kubeconfig', ADMIN_KUBECONFIG, '--server',
            api_server_url(address)] + list(args)
