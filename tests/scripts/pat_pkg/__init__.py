"""A package whose module is run with ``python -m pat_pkg.train``."""
