"""A small DataLoader loop that fails on purpose: ``MODE AT`` picks the fault and the step.

kill / segv / exit / raise at step AT; worker: a DataLoader worker raises; import: the script raises
before any step; early: ``sys.exit(0)`` after AT steps; after: raises once the loop is over.
Also registers probes that fail on purpose (``fault.raises``, ``fault.oom``) after changing the
weights, for the proof that a failing probe leaves the run as it was.
"""

import ctypes
import os
import signal
import sys

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

MODE, AT = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 5
if MODE == "import":
    raise ImportError("no module named 'missing_dependency'")

try:
    from tuidebug.probe_api import ProbeContext, probe
except ImportError:  # plain python: the probes are only for runs under tuidebug
    probe = None

if probe is not None:
    def _spoil_then(ctx: "ProbeContext", error: BaseException) -> None:
        with torch.no_grad():
            for parameter in ctx.run.observed.model.parameters():
                parameter.add_(1.0)
        raise error

    probe("fault.raises")(lambda ctx: _spoil_then(ctx, RuntimeError("the probe's own bug")))
    probe("fault.oom")(lambda ctx: _spoil_then(ctx, MemoryError()))


class Rows(Dataset):
    def __init__(self) -> None:
        generator = torch.Generator().manual_seed(0)
        self.x = torch.randn(512, 8, generator=generator)
        self.y = self.x.sum(1, keepdim=True)

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, index: int):
        if MODE == "worker" and index == 300:
            raise ValueError(f"row {index} cannot be read")
        return self.x[index], self.y[index]


torch.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
loader = DataLoader(Rows(), batch_size=8, num_workers=1 if MODE == "worker" else 0)
step = 0
for epoch in range(2 if MODE == "after" else 20):
    for x, y in loader:
        if step == AT:
            if MODE == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
            if MODE == "segv":
                ctypes.string_at(0)
            if MODE == "exit":
                os._exit(3)
            if MODE == "raise":
                raise ValueError(f"bad value at step {step}")
            if MODE == "early":
                sys.exit(0)
        optimizer.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
        step += 1
        print(f"step {step} loss {loss.item():.4f} checksum {sum(p.double().sum().item() for p in model.parameters())!r}",
              flush=True)
if MODE == "after":
    raise RuntimeError("the export after training failed")
