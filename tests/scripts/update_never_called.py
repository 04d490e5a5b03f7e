"""A trainer whose update lives in a hook it never calls: losses are computed, nothing goes backward.
With ``--accumulate``, the correct loop: 32 micro-batch losses gathered, one backward of their mean."""

import sys

import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(256, 8)
y = x[:, :3].argmax(dim=1)
accumulate = "--accumulate" in sys.argv


def after_step(loss):
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()


def train_step(inputs, targets):
    return nn.functional.cross_entropy(model(inputs), targets)


for epoch in range(40 if accumulate else 3):
    losses = []
    for i in range(0, 256, 8):
        loss = train_step(x[i:i + 8], y[i:i + 8])
        losses.append(loss)
        if accumulate and len(losses) == 32:
            after_step(torch.stack(losses).mean())
            losses = []
    print(f"epoch {epoch} loss {torch.stack(losses).mean().item() if losses else loss.item():.4f}")
