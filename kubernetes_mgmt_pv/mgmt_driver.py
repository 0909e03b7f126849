"""Entry point ``mgmt-drivers-kubernetes``: the Kubernetes driver with
persistent volumes.

Tacker hashes this file on every hook call and compares it with the copy in
the VNF package, so a change here forces every operator to rebuild and
re-upload their packages. It therefore holds no logic: each hook runs the
cluster part (the base class), then the persistent-volume feature, or the
reverse on ``*_start`` hooks, which undo before the cluster changes. The
decisions live in modules Tacker does not hash.
"""

from kubernetes_mgmt_pv.doors import tacker_v1
from kubernetes_mgmt_pv.storage import storage_feature

# Bump when a change to the additionalParams schema or to what the driver
# expects inside the VNF package would break packages built earlier: that,
# and only that, changes this file and so requires rebuilding packages.
# 2: the modules it imports moved into sub-packages (doors/, storage/).
PACKAGE_CONTRACT_VERSION = 2


class KubernetesPvMgmtDriver(tacker_v1.KubernetesMgmtDriver):
    """The Kubernetes cluster plus Storage server, NFS clients and PVs."""

    def __init__(self):
        super().__init__()
        self.storage = storage_feature.StorageFeature(self)

    def instantiate_end(self, context, vnf_instance, instantiate_vnf_request,
                        grant, grant_request, **kwargs):
        super().instantiate_end(context, vnf_instance,
                                instantiate_vnf_request, grant, grant_request,
                                **kwargs)
        self.storage.instantiate_end(context, vnf_instance,
                                     instantiate_vnf_request, grant,
                                     grant_request, **kwargs)

    def heal_start(self, context, vnf_instance, heal_vnf_request, grant,
                   grant_request, **kwargs):
        self.storage.heal_start(context, vnf_instance, heal_vnf_request,
                                grant, grant_request, **kwargs)
        super().heal_start(context, vnf_instance, heal_vnf_request, grant,
                           grant_request, **kwargs)

    def heal_end(self, context, vnf_instance, heal_vnf_request, grant,
                 grant_request, **kwargs):
        super().heal_end(context, vnf_instance, heal_vnf_request, grant,
                         grant_request, **kwargs)
        self.storage.heal_end(context, vnf_instance, heal_vnf_request, grant,
                              grant_request, **kwargs)

    def scale_end(self, context, vnf_instance, scale_vnf_request, grant,
                  grant_request, **kwargs):
        super().scale_end(context, vnf_instance, scale_vnf_request, grant,
                          grant_request, **kwargs)
        self.storage.scale_end(context, vnf_instance, scale_vnf_request,
                               grant, grant_request, **kwargs)
