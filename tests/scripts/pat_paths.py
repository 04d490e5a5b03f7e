"""Paths relative to ``__file__`` and to the working directory.

Reads ``pat_paths.json`` beside the script (after changing into the working directory's
``run/`` folder, as scripts that set up an output folder do), writes a checkpoint into the working
directory and loads it back."""

import json
import os
from pathlib import Path

import torch
from torch import nn

HERE = os.path.dirname(__file__)
os.makedirs("run", exist_ok=True)
os.chdir("run")
config = json.loads((Path(__file__).parent / "pat_paths.json").read_text())
data = Path(HERE, "pat_paths.json").exists()
print("config", config, "beside the script:", data)
torch.manual_seed(config["seed"])
model = nn.Linear(3, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=config["lr"])
x, y = torch.randn(16, 3), torch.randn(16, 1)
for step in range(1, 4):
    loss = nn.functional.mse_loss(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step} loss {loss.item()!r}")
torch.save(model.state_dict(), "checkpoint.pt")
restored = torch.load("checkpoint.pt", weights_only=True)
print("checkpoint in", os.path.basename(os.getcwd()), sorted(restored))
