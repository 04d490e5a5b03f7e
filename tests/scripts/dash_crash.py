"""Trains three steps, then fails in the script's own code: the dashboard's post-mortem test."""

import torch
from torch import nn


def check(loss: float) -> None:
    raise ValueError(f"boom after step 3 (loss {loss:.3f})")


def main() -> None:
    torch.manual_seed(0)
    model = nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(8, 4), torch.randn(8, 1)
    for step in range(1, 4):
        loss = nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        print(f"step {step} loss {loss.item():.4f}")
    check(loss.item())


if __name__ == "__main__":
    main()
