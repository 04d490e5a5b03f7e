"""A series read from a log whose gaps (`?`) parse to NaN, scaled, split, and cut into windows by a Dataset that keeps a copy
of the whole series (more rows than windows)."""
import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

rng = np.random.default_rng(0)
gaps = set(rng.choice(2000, 40, replace=False).tolist())
log = [f"{np.sin(t / 20.0) + 0.1 * rng.normal():.4f}" if t not in gaps else "?" for t in range(2000)]
readings = np.genfromtxt(log)
series = (readings - np.nanmin(readings)) / (np.nanmax(readings) - np.nanmin(readings))
train_part = series[:1500]


class Windows(Dataset):
    def __init__(self, values, width):
        self.values = torch.tensor(values, dtype=torch.float32)
        self.width = width

    def __len__(self):
        return len(self.values) - self.width

    def __getitem__(self, i):
        return self.values[i:i + self.width], self.values[i + self.width:i + self.width + 1]


torch.manual_seed(0)
model = nn.Sequential(nn.Linear(24, 32), nn.ReLU(), nn.Linear(32, 1))
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
for epoch in range(3):
    for x, y in DataLoader(Windows(train_part, 24), batch_size=32, shuffle=True):
        loss = nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(f"epoch {epoch} loss {loss.item():.4f}")
