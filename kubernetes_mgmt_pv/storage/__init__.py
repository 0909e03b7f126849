"""The persistent-volume feature: Storage server, NFS clients,
PersistentVolumes."""
