"""The VNF package (CSAR): format, build and offline checks."""
