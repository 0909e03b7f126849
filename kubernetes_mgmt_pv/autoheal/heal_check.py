"""The guard rails applied at the start of an automatic heal: the facts
gathered on the cluster, the decision taken by ``guard.refusal``."""

import datetime
import logging

from kubernetes_mgmt_pv.autoheal import guard
from kubernetes_mgmt_pv import exceptions

LOG = logging.getLogger(__name__)


def check(cluster_feature, context, vnf_instance, heal_vnf_request, conf,
          now=None):
    """Refuse (MgmtDriverError) an automatic heal the guard rails stop,
    before anything changes."""
    facts = cluster_feature.heal_health_facts(context, vnf_instance,
                                              heal_vnf_request)
    if facts is None:
        return
    listing, healed_addresses = facts
    try:
        nodes = guard.node_health(listing)
    except ValueError as error:
        raise exceptions.MgmtDriverError(
            'automatic heal refused: the Node list a Master printed is not '
            'usable (%s)' % error)
    problem = guard.refusal(
        nodes, healed_addresses, conf.auto_heal_max_unhealthy,
        conf.auto_heal_startup_grace,
        now or datetime.datetime.now(datetime.timezone.utc))
    if problem:
        raise exceptions.MgmtDriverError(problem)
    LOG.info('automatic heal: %d of %d Nodes Ready, within the guard rails',
             sum(node.ready for node in nodes), len(nodes))
