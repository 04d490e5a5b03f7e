"""Predict hourly taxi pickups per zone (counts) with an MLP and a Poisson log-link.

Features: hour of day (sin/cos), weekday one-hot, temperature, rain, zone one-hot.
The network outputs log(rate) and is trained with PoissonNLLLoss, RMSprop optimizer.
"""
import math

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)

N_ZONES = 12


def make_table(n, seed):
    g = torch.Generator().manual_seed(seed)
    hour = torch.randint(0, 24, (n,), generator=g)
    weekday = torch.randint(0, 7, (n,), generator=g)
    zone = torch.randint(0, N_ZONES, (n,), generator=g)
    temp = 15 + 8 * torch.randn(n, generator=g)
    rain = (torch.rand(n, generator=g) < 0.2).float()
    zone_pop = torch.linspace(0.5, 3.0, N_ZONES)
    rush = torch.exp(-((hour.float() - 8) ** 2) / 6) + torch.exp(-((hour.float() - 18) ** 2) / 8)
    log_rate = 1.0 + zone_pop[zone] + 1.2 * rush - 0.3 * (weekday >= 5).float() + 0.4 * rain + 0.01 * temp
    counts = torch.poisson(torch.exp(log_rate), generator=g)
    feats = torch.cat([
        torch.stack([torch.sin(2 * math.pi * hour / 24), torch.cos(2 * math.pi * hour / 24)], 1),
        nn.functional.one_hot(weekday, 7).float(),
        ((temp - 15) / 8).unsqueeze(1),
        rain.unsqueeze(1),
        nn.functional.one_hot(zone, N_ZONES).float(),
    ], 1)
    return feats, counts


class PickupDataset(Dataset):
    def __init__(self, n, seed):
        self.x, self.y = make_table(n, seed)

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        return self.x[i], self.y[i]


class PickupNet(nn.Module):
    def __init__(self, n_in, hidden=256):
        super().__init__()
        self.body = nn.Sequential(
            nn.Linear(n_in, hidden), nn.ReLU(),
            nn.Linear(hidden, hidden), nn.ReLU(),
        )
        self.head = nn.Linear(hidden, 1)

    def forward(self, x):
        return self.head(self.body(x)).squeeze(1)


def main():
    train_ds = PickupDataset(4000, seed=1)
    val_ds = PickupDataset(1000, seed=2)
    train_loader = DataLoader(train_ds, batch_size=64, shuffle=True)
    val_loader = DataLoader(val_ds, batch_size=256)

    model = PickupNet(train_ds.x.shape[1])
    criterion = nn.PoissonNLLLoss(log_input=True)
    optimizer = torch.optim.RMSprop(model.parameters(), lr=1e-2)

    step = 0
    for epoch in range(3):
        model.train()
        running = 0.0
        for x, y in train_loader:
            log_rate = model(x)
            loss = criterion(log_rate, y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            running += loss.item()
            step += 1
            if step % 20 == 0:
                print(f"epoch {epoch} step {step} train poisson nll {running / 20:.4f}")
                running = 0.0

        model.eval()
        abs_err, n = 0.0, 0
        with torch.no_grad():
            for x, y in val_loader:
                pred = torch.exp(model(x))
                abs_err += (pred - y).abs().sum().item()
                n += len(y)
        print(f"epoch {epoch} val MAE {abs_err / n:.2f} pickups/hour (mean {val_ds.y.mean():.1f})")


if __name__ == "__main__":
    main()
