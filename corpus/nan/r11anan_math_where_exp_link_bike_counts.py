"""Hourly bike-rental demand as a Poisson regression: an MLP gives the linear predictor
and a piecewise "exp-linear" link (exp below zero, 1 + x above) turns it into a
positive rate, so large counts do not need huge exponentials.
"""
import argparse
import math
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset


def make_rentals(n_days, seed=0):
    rng = np.random.default_rng(seed)
    rows, counts = [], []
    for day in range(n_days):
        weekday = day % 7
        season_temp = 14 + 10 * math.sin(2 * math.pi * day / 365)
        weather = rng.choice([0, 1, 2], p=[0.65, 0.27, 0.08])
        for hour in range(24):
            temp = season_temp + 5 * math.sin(2 * math.pi * (hour - 9) / 24) + rng.normal(0, 2)
            hum = np.clip(rng.normal(60 + 12 * weather, 10), 10, 100)
            commute = 1.0 if weekday < 5 and hour in (7, 8, 17, 18) else 0.0
            base = 40 + 8 * max(temp, 0) + 380 * commute - 60 * weather
            base *= 0.15 if hour < 6 else 1.0
            lam = max(base, 2.0)
            counts.append(rng.poisson(lam))
            rows.append([math.sin(2 * math.pi * hour / 24), math.cos(2 * math.pi * hour / 24),
                         float(weekday < 5), temp / 10.0, hum / 100.0, float(weather == 1), float(weather == 2)])
    x = torch.tensor(np.array(rows), dtype=torch.float32)
    y = torch.tensor(np.array(counts), dtype=torch.float32)
    return x, y


class DemandNet(nn.Module):
    def __init__(self, n_in, hidden=64):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(n_in, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU())
        self.head = nn.Linear(hidden, 1)

    def forward(self, x):
        eta = self.head(self.body(x)).squeeze(-1)
        rate = torch.where(eta <= 0, torch.exp(eta), 1 + eta)
        return rate


def main():
    parser = argparse.ArgumentParser(description="bike demand poisson regression")
    parser.add_argument("--days", type=int, default=120)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--log-interval", type=int, default=10)
    args = parser.parse_args()

    torch.manual_seed(0)
    x, y = make_rentals(args.days, seed=1)
    n_train = int(0.85 * len(y))
    train_ds = TensorDataset(x[:n_train], y[:n_train])
    val_x, val_y = x[n_train:], y[n_train:]
    loader = DataLoader(train_ds, batch_size=args.batch_size, shuffle=True)

    model = DemandNet(x.shape[1])
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)

    step = 0
    t0 = time.time()
    for epoch in range(1, args.epochs + 1):
        model.train()
        for xb, yb in loader:
            rate = model(xb)
            loss = F.poisson_nll_loss(rate, yb, log_input=False)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            step += 1
            if step % args.log_interval == 0:
                print(f"epoch {epoch} step {step} poisson_nll {loss.item():.4f} "
                      f"mean_rate {rate.mean().item():.1f} mean_count {yb.mean().item():.1f}")
        model.eval()
        with torch.no_grad():
            val_rate = model(val_x)
            val_loss = F.poisson_nll_loss(val_rate, val_y, log_input=False).item()
            mae = (val_rate - val_y).abs().mean().item()
        print(f"epoch {epoch} val_nll {val_loss:.4f} val_mae {mae:.1f} ({time.time() - t0:.1f}s)")


if __name__ == "__main__":
    main()
