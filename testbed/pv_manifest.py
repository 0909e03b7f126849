"""A PersistentVolume manifest as VNF packages ship them, for the tests."""

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
