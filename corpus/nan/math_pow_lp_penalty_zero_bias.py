"""Sparse MLP regression on tabular data with an L_p (p < 1) sparsity penalty on the parameters.

Only a handful of the input features matter; the quasi-norm penalty is meant to push the
weights of the useless ones towards zero.
"""
import argparse

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset, random_split


def parse_args():
    parser = argparse.ArgumentParser()
    parser.add_argument("--n-samples", type=int, default=2000)
    parser.add_argument("--n-features", type=int, default=30)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--lp", type=float, default=0.5, help="exponent of the sparsity penalty")
    parser.add_argument("--reg", type=float, default=1e-4)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--seed", type=int, default=0)
    return parser.parse_args()


def make_data(n, d):
    x = torch.randn(n, d)
    y = 2.0 * x[:, 0] - 1.5 * x[:, 1] + x[:, 2] * x[:, 3] + 0.5 * x[:, 4].abs()
    y = y + 0.1 * torch.randn(n)
    return x, y.unsqueeze(1)


class SparseMLP(nn.Module):
    def __init__(self, d_in, hidden):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(d_in, hidden), nn.ReLU(),
            nn.Linear(hidden, hidden), nn.ReLU(),
            nn.Linear(hidden, 1),
        )
        self.apply(self._init)

    @staticmethod
    def _init(m):
        if isinstance(m, nn.Linear):
            nn.init.kaiming_normal_(m.weight, nonlinearity="relu")
            nn.init.zeros_(m.bias)

    def forward(self, x):
        return self.net(x)


def lp_penalty(model, p):
    return sum((param.abs() ** p).sum() for param in model.parameters())


def evaluate(model, loader):
    model.eval()
    se, n = 0.0, 0
    with torch.no_grad():
        for x, y in loader:
            se += ((model(x) - y) ** 2).sum().item()
            n += len(y)
    model.train()
    return se / n


def main():
    args = parse_args()
    torch.manual_seed(args.seed)
    x, y = make_data(args.n_samples, args.n_features)
    train_set, val_set = random_split(TensorDataset(x, y), [0.8, 0.2])
    train_loader = DataLoader(train_set, batch_size=args.batch_size, shuffle=True)
    val_loader = DataLoader(val_set, batch_size=256)

    model = SparseMLP(args.n_features, args.hidden)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    mse = nn.MSELoss()

    for epoch in range(args.epochs):
        for i, (xb, yb) in enumerate(train_loader):
            fit = mse(model(xb), yb)
            loss = fit + args.reg * lp_penalty(model, args.lp)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            if i % 5 == 0:
                print(f"epoch {epoch} iter {i:2d}  mse {fit.item():.4f}  total {loss.item():.4f}")
        print(f"epoch {epoch}  val mse {evaluate(model, val_loader):.4f}")


if __name__ == "__main__":
    main()
