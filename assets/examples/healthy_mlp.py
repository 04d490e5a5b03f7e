"""A healthy run: a small MLP learns a synthetic classification task.

Deterministic (fixed seed), fast on a CPU, and prints its own loss every step so tests can
compare it with what tuidebug reports.
"""

import argparse

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def make_data(n: int = 512) -> TensorDataset:
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(n, 16, generator=generator)
    y = (x[:, :4].sum(dim=1) > 0).long()
    return TensorDataset(x, y)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--workers", type=int, default=0)
    args = parser.parse_args()

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    criterion = nn.CrossEntropyLoss()
    loader = DataLoader(make_data(), batch_size=args.batch_size, shuffle=True,
                        num_workers=args.workers, generator=torch.Generator().manual_seed(1))
    step = 0
    for epoch in range(args.epochs):
        for x, y in loader:
            optimizer.zero_grad()
            loss = criterion(model(x), y)
            loss.backward()
            optimizer.step()
            step += 1
            print(f"step {step} loss {loss.item():.6f}")
    print("done")


if __name__ == "__main__":
    main()
