"""Auto-heal (Tacker v2's Prometheus plugin): what the driver tells
Prometheus to probe for each VNF instance, and the guard rails an
automatic heal passes before anything changes."""
