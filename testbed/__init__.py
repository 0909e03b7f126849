"""The testbed: real SSH test hosts in network namespaces, with loop-device
volumes and an NFS data path (``hosts``, ``nfs``), the stand-ins for what
cannot run here (``openstack_api``: Keystone, Heat and Nova over HTTP;
``kubeapi``: a Kubernetes API server for the real kubectl), a whole virtual
cluster VNF wired to the driver (``cluster``) and fault injection
(``faults``). Used by the functional tests, the demo and the benchmark; its
own self-tests are in ``testbed/tests`` (they need root).
"""
