"""argparse options and an explicit ``sys.exit`` with the script's own code."""

import argparse
import sys

import torch
from torch import nn


def main() -> int:
    parser = argparse.ArgumentParser(description="a training script with options")
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--exit-code", type=int, default=0)
    args = parser.parse_args()
    print("argv", sys.argv)
    torch.manual_seed(0)
    model = nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    x, y = torch.randn(16, 4), torch.randn(16, 1)
    for step in range(1, args.steps + 1):
        loss = nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        print(f"step {step} loss {loss.item()!r}")
    return args.exit_code


if __name__ == "__main__":
    sys.exit(main())
