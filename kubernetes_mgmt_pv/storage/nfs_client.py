"""NFS client installation on Master/Worker nodes."""

import dataclasses
import ipaddress

from kubernetes_mgmt_pv.remote import dpkg
from kubernetes_mgmt_pv.remote import facts
from kubernetes_mgmt_pv import step_report
from kubernetes_mgmt_pv.storage import export_access

CLIENT_PACKAGES = ('nfs-common',)
OS_RELEASE = '/etc/os-release'

# A node's facts in one command (see scripts/nfs_client_facts.sh).
_GATHER = facts.script('nfs_client_facts.sh')


@dataclasses.dataclass(frozen=True)
class ClientFacts(object):
    os_release: str
    statuses: dict  # {package: dpkg status}
    sources: dict  # {server address: the node's source address or None}


def gather_facts(executor, server_addresses):
    """The node's ``ClientFacts`` from one command (no sudo)."""
    servers = [str(ipaddress.ip_address(address))
               for address in server_addresses]
    sections = facts.gather(
        executor, _GATHER, [len(CLIENT_PACKAGES)] + list(CLIENT_PACKAGES) +
        servers, 'cat %s, dpkg-query, ip -o route get' % OS_RELEASE)
    os_release = sections['os-release']
    statuses = dpkg.gathered_statuses(executor, sections,
                                      CLIENT_PACKAGES)
    routes = {server: sections.get('route %s' % server) for server in servers}
    return ClientFacts(
        os_release.stdout if os_release.ok else '', statuses,
        {server: export_access.parse_route_source(route.stdout)
         if route is not None and route.ok else None
         for server, route in routes.items()})


def install_nfs_client(executor, proxy, conf, report, statuses=None):
    """Install nfs-common on one node unless it is already installed.

    ``statuses``: the packages' dpkg statuses if gathered already.
    """
    with step_report.step(executor.host, 'NFS client installation'):
        dpkg.ensure_installed(executor, CLIENT_PACKAGES, proxy,
                              conf.package_install_timeout, report,
                              statuses)
