"""Tools run from the repository root: ``python -m tools.demo``,
``python -m tools.benchmark_pv``."""
