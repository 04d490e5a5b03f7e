"""Next-day return prediction for a basket of stocks from daily OHLCV bars.

Features follow the Alpha158 "KBAR" family (candle shape normalised by the open price) plus a
few rolling ratios; an MLP regresses the next day's return.
"""
import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
rng = np.random.default_rng(0)

N_STOCKS = 40
N_DAYS = 500


def load_bars():
    """Synthetic daily bars. The vendor file writes 0 for fields it did not receive."""
    bars = []
    for s in range(N_STOCKS):
        ret = rng.normal(0.0003, 0.02, N_DAYS)
        close = 20 * np.exp(np.cumsum(ret))
        open_ = close * np.exp(rng.normal(0, 0.01, N_DAYS))
        high = np.maximum(open_, close) * (1 + np.abs(rng.normal(0, 0.008, N_DAYS)))
        low = np.minimum(open_, close) * (1 - np.abs(rng.normal(0, 0.008, N_DAYS)))
        volume = rng.lognormal(12, 0.5, N_DAYS)
        if s == 17:
            missing = rng.choice(N_DAYS, 4, replace=False)
            open_[missing] = 0.0
        bars.append(np.stack([open_, high, low, close, volume], axis=1))
    return bars


def make_features(bar):
    o, h, l, c, v = bar.T
    kbar = np.stack([c - o, h - l, h - np.maximum(o, c), np.minimum(o, c) - l, 2 * c - h - l], axis=1) / o[:, None]
    feats = [kbar]
    for w in (5, 10, 20):
        ma = np.convolve(c, np.ones(w) / w, mode="full")[: len(c)]
        roc = np.concatenate([np.full(w, np.nan), c[:-w]]) / c
        vma = np.convolve(v, np.ones(w) / w, mode="full")[: len(v)]
        feats.append(np.stack([ma / c, roc, vma / (v + 1e-12)], axis=1))
    x = np.concatenate(feats, axis=1)
    y = np.concatenate([c[1:] / c[:-1] - 1, [np.nan]])
    keep = slice(20, len(c) - 1)
    return x[keep], y[keep]


xs, ys = zip(*(make_features(b) for b in load_bars()))
X = torch.tensor(np.concatenate(xs), dtype=torch.float32)
Y = torch.tensor(np.concatenate(ys), dtype=torch.float32).unsqueeze(1) * 100
print(f"dataset: {X.shape[0]} rows, {X.shape[1]} features")

loader = DataLoader(TensorDataset(X, Y), batch_size=256, shuffle=True)


class ReturnMLP(nn.Module):
    def __init__(self, n_in):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(n_in, 64), nn.ReLU(),
            nn.Linear(64, 32), nn.ReLU(),
            nn.Linear(32, 1),
        )

    def forward(self, x):
        return self.net(x)


model = ReturnMLP(X.shape[1])
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
criterion = nn.MSELoss()

step = 0
for epoch in range(2):
    running = 0.0
    for xb, yb in loader:
        pred = model(xb)
        loss = criterion(pred, yb)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        running += loss.item()
        step += 1
        if step % 10 == 0:
            print(f"epoch {epoch} step {step:4d}  mse {loss.item():.4f}")
    print(f"epoch {epoch}  mean mse {running / len(loader):.4f}")
