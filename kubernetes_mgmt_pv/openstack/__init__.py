"""OpenStack lookups: Heat, Nova and the VNF's nodes."""
