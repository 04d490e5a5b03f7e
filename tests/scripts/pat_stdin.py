"""A script that reads its settings from stdin and writes results to stdout as it goes."""

import sys

import torch
from torch import nn

steps = int(sys.stdin.readline())
lr = float(input())
print(f"read steps={steps} lr={lr}", flush=True)
torch.manual_seed(0)
model = nn.Linear(2, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=lr)
x, y = torch.randn(8, 2), torch.randn(8, 1)
for step in range(1, steps + 1):
    loss = nn.functional.mse_loss(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    sys.stdout.write(f"step {step} loss {loss.item()!r}\n")
    sys.stdout.flush()
print("rest of stdin:", sys.stdin.read().split())
