"""tuidebug: a terminal debugger for PyTorch training runs."""

__version__ = "0.1.0"
