"""The Kubernetes cluster feature: its hooks, steps and decisions."""
