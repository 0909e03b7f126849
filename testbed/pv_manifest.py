"""A PersistentVolume manifest as VNF packages ship them, and a claim that
binds one, for the tests and demos."""

TEMPLATE = """apiVersion: v1
kind: PersistentVolume
metadata:
  name: {name}
spec:
  capacity:
    storage: 1Gi
  persistentVolumeReclaimPolicy: Retain
  accessModes:
    - ReadWriteOnce
  nfs:
    server: {server}
    path: {path}
"""

# Binds nfs-pv1, as a CNF's volume claim would: a storage heal is refused.
BOUND_CLAIM = """apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: data
  namespace: default
spec:
  accessModes: [ReadWriteOnce]
  storageClassName: ""
  volumeName: nfs-pv1
  resources:
    requests:
      storage: 1Gi
"""
