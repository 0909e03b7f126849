"""Front doors: Tacker v1 (the hashed entry class's base), Tacker v2 (one
process per hook), the CLI and its check mode."""
