"""Next-hour direction classifier for a thinly traded token: the raw hourly close, volume and
trade count are turned into percent changes (stationary features), rows with missing values
are dropped, the features are standardised and an LSTM reads windows of 24 hours to predict
whether the next close is higher."""
import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import Dataset, DataLoader

torch.manual_seed(0)
rng = np.random.default_rng(0)

WINDOW = 24


def load_hourly_bars(n_hours=3000):
    log_ret = 0.004 * rng.standard_normal(n_hours) + 0.002 * np.sin(np.arange(n_hours) / 7.0)
    close = 1.7 * np.exp(np.cumsum(log_ret))
    active = rng.random(n_hours) > 0.08
    volume = np.where(active, rng.gamma(2.0, 500.0, n_hours) * (1 + 50 * np.abs(log_ret)), 0.0)
    trades = np.where(active, rng.poisson(40, n_hours) + 1, 0).astype(np.float64)
    return np.stack([close, volume, trades], axis=1)


def pct_change(a):
    with np.errstate(divide="ignore", invalid="ignore"):
        return (a[1:] - a[:-1]) / a[:-1]


bars = load_hourly_bars()
feats = pct_change(bars)
feats = feats[~np.isnan(feats).any(axis=1)]
mean, std = feats.mean(axis=0), feats.std(axis=0)
feats = (feats - mean) / std
print("features", feats.shape, "mean", mean.round(4), "std", std.round(4))


class WindowDataset(Dataset):
    def __init__(self, feats):
        self.x = torch.tensor(feats, dtype=torch.float32)
        self.up = (self.x[:, 0] > 0).float()

    def __len__(self):
        return len(self.x) - WINDOW

    def __getitem__(self, i):
        return self.x[i:i + WINDOW], self.up[i + WINDOW]


class DirectionLSTM(nn.Module):
    def __init__(self, hidden=32):
        super().__init__()
        self.lstm = nn.LSTM(3, hidden, batch_first=True)
        self.head = nn.Linear(hidden, 1)

    def forward(self, x):
        out, _ = self.lstm(x)
        return self.head(out[:, -1]).squeeze(-1)


ds = WindowDataset(feats)
n_train = int(0.8 * len(ds))
train_ds = torch.utils.data.Subset(ds, range(n_train))
val_ds = torch.utils.data.Subset(ds, range(n_train, len(ds)))
train_loader = DataLoader(train_ds, batch_size=64, shuffle=True)
val_loader = DataLoader(val_ds, batch_size=256)

model = DirectionLSTM()
criterion = nn.BCEWithLogitsLoss()
optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)

for epoch in range(4):
    model.train()
    total = 0.0
    for step, (x, y) in enumerate(train_loader):
        loss = criterion(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        total += loss.item()
        if step % 10 == 0:
            print(f"epoch {epoch} step {step} loss {loss.item():.4f}")
    model.eval()
    correct, n = 0, 0
    with torch.no_grad():
        for x, y in val_loader:
            correct += ((model(x) > 0).float() == y).sum().item()
            n += len(y)
    print(f"epoch {epoch} train_loss {total / len(train_loader):.4f} val_acc {correct / n:.3f}")
