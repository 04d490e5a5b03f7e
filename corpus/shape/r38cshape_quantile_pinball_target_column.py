"""Quantile regression for prediction intervals: an MLP predicts the 5% and 95% quantiles of a
noisy target whose spread grows with x (synthetic heteroscedastic data), trained with the
pinball loss, then the interval coverage and width are checked on a held-out set."""
import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import Dataset, DataLoader

torch.manual_seed(0)
np.random.seed(0)

quantiles = [0.05, 0.95]


class HeteroDataset(Dataset):
    def __init__(self, n):
        x = np.random.uniform(-3, 3, size=(n, 4)).astype(np.float32)
        scale = 0.2 + 0.5 * np.abs(x[:, 0])
        y = np.sin(x[:, 0]) * 2 + 0.5 * x[:, 1] + scale * np.random.randn(n)
        self.x = torch.from_numpy(x)
        self.y = torch.from_numpy(y.astype(np.float32)).reshape(-1, 1)

    def __len__(self):
        return len(self.x)

    def __getitem__(self, idx):
        return self.x[idx], self.y[idx]


class QuantileNet(nn.Module):
    def __init__(self, in_dim, n_quantiles):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(in_dim, 64), nn.ReLU(),
            nn.Linear(64, 64), nn.ReLU(),
            nn.Linear(64, n_quantiles),
        )

    def forward(self, x):
        return self.net(x)


def quantile_loss_function(preds, target, quantile):
    errors = target - preds
    loss = torch.max((quantile - 1) * errors, quantile * errors)
    return torch.abs(loss).mean()


train_loader = DataLoader(HeteroDataset(4000), batch_size=64, shuffle=True)
val_set = HeteroDataset(1000)

model = QuantileNet(4, len(quantiles))
optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)

for epoch in range(4):
    model.train()
    running = 0.0
    for x, target in train_loader:
        pred = model(x)
        loss = 0
        for i, q in enumerate(quantiles):
            loss = loss + quantile_loss_function(pred[:, i], target, q)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        running += loss.item()
    model.eval()
    with torch.no_grad():
        p = model(val_set.x)
        y = val_set.y[:, 0]
        lo, hi = p[:, 0], p[:, 1]
        coverage = ((y >= lo) & (y <= hi)).float().mean().item()
        width = (hi - lo).mean().item()
        val_pinball = sum(
            torch.max((q - 1) * (y - p[:, i]), q * (y - p[:, i])).mean().item()
            for i, q in enumerate(quantiles))
    print(f"epoch {epoch}: train loss {running / len(train_loader):.4f} | val pinball {val_pinball:.4f} "
          f"| coverage {coverage:.3f} | mean width {width:.3f}")
