"""Saves a checkpoint the three usual ways (open + torch.save, torch.save to a path, write to a temporary
name then os.replace), appends to a log, and reads the checkpoint back."""

import os
import sys
from pathlib import Path

import torch
from torch import nn

model = nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(16, 4), torch.randn(16, 1)
for step in range(3):
    loss = nn.functional.mse_loss(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
with open("model.pt", "wb") as f:
    torch.save(model.state_dict(), f)
torch.save(model.state_dict(), Path("weights.pt"))
torch.save({"step": 3}, "state.tmp")
os.replace("state.tmp", "state.pt")
with open("train.log", "a") as log:
    log.write("run\n")
again = torch.load("model.pt", weights_only=True)
print("reloaded", sorted(again) == sorted(model.state_dict()), Path("train.log").read_text().count("run"), flush=True)
sys.exit(0)
