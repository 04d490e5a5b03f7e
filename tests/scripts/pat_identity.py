"""What a script sees of how it was started: ``__name__``, ``__file__``, ``sys.argv``, ``sys.path[0]``."""

import os
import sys

import __main__

print("name", __name__, "main module is this one", __main__.__dict__ is globals())
print("file", __file__, "absolute", os.path.isabs(__file__))
print("argv", sys.argv)
print("path0", sys.path[0], "is the script's directory", sys.path[0] == os.path.dirname(os.path.realpath(__file__)))
print("spec", __spec__, "package", __package__, "builtins", type(__builtins__).__name__)
print("loader", type(__loader__).__name__, "cached", globals()["__cached__"])
print("stdio", sys.stdin.closed, sys.stdout.closed, sys.stderr.closed)
