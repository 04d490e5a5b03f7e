"""A steady loop for the pause, step, break and lifecycle tests.

Prints every step's loss and a checksum of the weights after it; SIGUSR1 prints the checksum at
that moment (the test's view of the weights while the loop is paused). ``--nan-at K`` turns step
K's loss (``--nan-in loss``) or only its gradient (``--nan-in grad``) non-finite. ``--helper``
starts a helper process first and prints both pids, for the no-orphan checks.
"""

import argparse
import os
import signal
import subprocess
import sys
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def checksum(model: nn.Module) -> float:
    return sum(p.double().sum().item() for p in model.parameters())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--sleep", type=float, default=0.0)
    parser.add_argument("--nan-at", type=int)
    parser.add_argument("--nan-in", choices=["loss", "grad"], default="loss")
    parser.add_argument("--helper", action="store_true")
    args = parser.parse_args()
    if args.helper:
        helper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        print(f"pids {os.getpid()} {helper.pid}", flush=True)

    torch.manual_seed(0)
    x = torch.randn(64, 4)
    y = x @ torch.tensor([[1.0], [-2.0], [0.5], [3.0]])
    loader = DataLoader(TensorDataset(x, y), batch_size=8, shuffle=True)
    model = nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    signal.signal(signal.SIGUSR1, lambda signum, frame: print(f"weights now {checksum(model)!r}", flush=True))
    step = 0
    while step < args.steps:
        for xb, yb in loader:
            step += 1
            loss = nn.functional.mse_loss(model(xb), yb)
            if step == args.nan_at and args.nan_in == "loss":
                loss = loss * float("nan")
            elif step == args.nan_at:
                loss = loss + (model.weight.sum() * 0).sqrt()  # finite, but its gradient is NaN
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            print(f"step {step} loss {loss.item()!r} weights {checksum(model)!r}", flush=True)
            time.sleep(args.sleep)
            if step == args.steps:
                break


if __name__ == "__main__":
    main()
