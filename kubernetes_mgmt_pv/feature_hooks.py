"""The LCM hooks each feature acts at, and the driver's name, declared
once for every layer (the doors, the package builder and checker).

A hook the VNFD does not route to the driver runs Tacker's vnflcm_noop
instead, so ``package_check`` requires these; the unit tests check them
against the hooks each feature class defines, the hashed entry-point
file, the README table and the sample VNFDs, so none of those can drift.
"""

# The name Tacker's driver entry point and the VNFD's artifact know the
# driver by.
DRIVER_NAME = 'mgmt-drivers-kubernetes'

CLUSTER = ('instantiate_end', 'terminate_start', 'terminate_end',
           'scale_start', 'scale_end', 'heal_start', 'heal_end')
PERSISTENT_VOLUME = ('instantiate_end', 'heal_start', 'heal_end',
                     'scale_end')
# Tacker v2 rolls an instantiate or a scale-out back without terminate or
# scale_start, which Tacker v1 calls: the v2 door runs the cluster's
# terminate_start and scale_start at these (v1 never calls them).
CLUSTER_V2_ROLLBACK = ('instantiate_rollback_start', 'scale_rollback_start')
# Tacker v2's ChangeCurrentVnfPackage upgrades the cluster's Kubernetes
# minor (doors.v2_upgrade): change_current_package_start (a guard too)
# checks it, the end upgrades, the rollback says what stays upgraded.
CLUSTER_V2_UPGRADE = ('change_current_package_end',
                      'change_current_package_rollback_start')
# The hooks where the driver refuses a request that would change the
# cluster under it (request.lcm_guards; the v2 door also keeps a PATCH off
# its state in metadata). Tacker v1 calls only the first of them with a
# request (its modify_information_start gets none, it has no package
# change), so a v1 package needs only V1_GUARDS.
GUARDS = ('change_external_connectivity_start', 'modify_information_start',
          'change_current_package_start')
V1_GUARDS = GUARDS[:1]
