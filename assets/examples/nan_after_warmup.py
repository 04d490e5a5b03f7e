"""Goes wrong after a few seconds: the learning rate warms up far too high and the loss turns NaN.

The demo script: a regression MLP trains normally, then a linear warm-up pushes the learning rate
to 50x a stable value and the run diverges to inf and NaN.
"""

import argparse
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--sleep", type=float, default=0.02, help="seconds per step, so a person can watch")
    args = parser.parse_args()

    torch.manual_seed(0)
    x = torch.randn(2048, 8)
    y = x @ torch.randn(8, 1) + 0.1 * torch.randn(2048, 1)
    loader = DataLoader(TensorDataset(x, y), batch_size=64, shuffle=True)
    model = nn.Sequential(nn.Linear(8, 64), nn.Tanh(), nn.Linear(64, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1 + step / 4)
    step = 0
    while step < args.steps:
        for xb, yb in loader:
            loss = nn.functional.mse_loss(model(xb), yb)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            scheduler.step()
            step += 1
            if step % 10 == 0:
                print(f"step {step} loss {loss.item():.4f} lr {scheduler.get_last_lr()[0]:.3f}")
            time.sleep(args.sleep)
            if step >= args.steps:
                break


if __name__ == "__main__":
    main()
