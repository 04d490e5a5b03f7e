"""Heading regression for a small survey drone: predict the yaw angle from noisy magnetometer and
gyro-integrated features with a probabilistic head (mean direction + concentration), trained with
the von Mises negative log-likelihood."""
import math

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset, random_split

torch.manual_seed(0)


class HeadingLogs(Dataset):
    def __init__(self, n=4096):
        yaw = (torch.rand(n) * 2 - 1) * math.pi
        tilt = torch.randn(n, 2) * 0.1
        hard_iron = torch.tensor([0.12, -0.05])
        mag = torch.stack([torch.cos(yaw), torch.sin(yaw)], 1) * 0.45 + hard_iron
        mag = mag + 0.004 * torch.randn(n, 2)
        gyro = torch.stack([torch.cos(yaw), torch.sin(yaw)], 1) + 0.01 * torch.randn(n, 2)
        temp = torch.randn(n, 1)
        self.x = torch.cat([mag, gyro, tilt, temp], 1)
        self.y = yaw

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        return self.x[i], self.y[i]


class HeadingNet(nn.Module):
    def __init__(self, d_in=7, hidden=64):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(d_in, hidden), nn.Tanh(), nn.Linear(hidden, hidden), nn.Tanh())
        self.direction = nn.Linear(hidden, 2)
        self.log_kappa = nn.Linear(hidden, 1)

    def forward(self, x):
        h = self.body(x)
        d = self.direction(h)
        mu = torch.atan2(d[:, 1], d[:, 0])
        kappa = torch.exp(self.log_kappa(h)).squeeze(1)
        return mu, kappa


def von_mises_nll(mu, kappa, target):
    log_norm = math.log(2 * math.pi) + torch.log(torch.special.i0(kappa))
    return (log_norm - kappa * torch.cos(target - mu)).mean()


def main():
    data = HeadingLogs()
    train_set, val_set = random_split(data, [3584, 512], generator=torch.Generator().manual_seed(0))
    train_loader = DataLoader(train_set, batch_size=64, shuffle=True)
    val_loader = DataLoader(val_set, batch_size=256)
    model = HeadingNet()
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)

    step = 0
    for epoch in range(4):
        model.train()
        for x, y in train_loader:
            mu, kappa = model(x)
            loss = von_mises_nll(mu, kappa, y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            step += 1
            if step % 20 == 0:
                print(f"step {step:4d}  nll {loss.item():.4f}  mean kappa {kappa.mean().item():.1f}")
        model.eval()
        errs = []
        with torch.no_grad():
            for x, y in val_loader:
                mu, _ = model(x)
                errs.append(torch.atan2(torch.sin(y - mu), torch.cos(y - mu)).abs())
        err = torch.cat(errs).mean().item()
        print(f"epoch {epoch + 1}  val mean abs error {math.degrees(err):.2f} deg")


if __name__ == "__main__":
    main()
