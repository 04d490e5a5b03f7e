"""Run as ``python -m pat_pkg.train``: a relative import, and the identity python -m gives."""

import os
import sys

import torch
from torch import nn

from . import __doc__ as package_doc

print("name", __name__, "package", __package__, "spec", __spec__.name)
print("argv", [os.path.relpath(sys.argv[0])] + sys.argv[1:], "path0 is cwd", sys.path[0] == os.getcwd())
print("file", os.path.relpath(__file__), "package doc", package_doc)
torch.manual_seed(0)
model = nn.Linear(3, 1)
optimizer = torch.optim.Adam(model.parameters(), lr=0.1)
x, y = torch.randn(8, 3), torch.randn(8, 1)
for step in range(1, 4):
    loss = nn.functional.mse_loss(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step} loss {loss.item()!r}")
sys.exit(int(sys.argv[1]) if len(sys.argv) > 1 else 0)
