"""Prints 50 lines a step (then a progress bar redrawn with carriage returns and a line longer than a
terminal), then FLOOD DONE: the output pane's and the log view's flood tests, and the log file's
every-line test (``--steps 120`` prints 6,241 lines, more than the session's 5,000). With ``--gate
FILE`` it waits after step ``--gate-after`` until FILE exists: a test scrolls up first, then lets more
output come, whatever the machine's speed."""

import argparse
import os
import time

import torch
from torch import nn


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--sleep", type=float, default=0.0)
    parser.add_argument("--gate", default=None)
    parser.add_argument("--gate-after", type=int, default=5)
    args = parser.parse_args()
    torch.manual_seed(0)
    model = nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(16, 4), torch.randn(16, 1)
    for step in range(1, args.steps + 1):
        loss = nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        for line in range(1, 51):
            print(f"flood step {step} line {line} loss {loss.item():.4f}")
        print(f"progress {step}: 0%\rprogress {step}: 50%\rprogress {step}: 100%")
        print(f"long line {step} " + "-" * 120 + f" end of long line {step}")
        time.sleep(args.sleep)
        while args.gate and step == args.gate_after and not os.path.exists(args.gate):
            time.sleep(0.02)
    print("FLOOD DONE")


if __name__ == "__main__":
    main()
