"""Convolutional autoencoder for temperature/salinity profiles, fine-tuned on a new region.

The CAE is first trained on profiles from the home region, then fine-tuned on profiles from a
new float deployment. Each float reports (depth, temperature, salinity) samples which are
interpolated onto a common grid of N_LEVELS standard depths and standardised per channel.
"""
import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
np.random.seed(0)

N_LEVELS = 64
GRID = np.linspace(5.0, 2000.0, N_LEVELS)
BATCH_SIZE = 32
PRETRAIN_EPOCHS = 3
FINETUNE_EPOCHS = 4
LR = 1e-3


def simulate_float_profiles(n, sst_range, deep_frac):
    profiles = []
    for _ in range(n):
        sst = np.random.uniform(*sst_range)
        mld = np.random.uniform(20, 120)
        max_depth = 2000.0 if np.random.rand() > deep_frac else np.random.uniform(600, 1500)
        depth = np.sort(np.append(np.random.uniform(0, max_depth, size=np.random.randint(60, 120)), max_depth))
        temp = 4.0 + (sst - 4.0) / (1.0 + np.exp((depth - mld) / 80.0)) + np.random.normal(0, 0.1, depth.size)
        salt = 34.5 + 0.6 * np.exp(-depth / 300.0) + np.random.normal(0, 0.02, depth.size)
        t_grid = np.interp(GRID, depth, temp, left=temp[0], right=np.nan)
        s_grid = np.interp(GRID, depth, salt, left=salt[0], right=np.nan)
        profiles.append(np.stack([t_grid, s_grid]))
    return np.stack(profiles).astype(np.float32)


def standardise(x):
    mean = np.nanmean(x, axis=(0, 2), keepdims=True)
    std = np.nanstd(x, axis=(0, 2), keepdims=True)
    return (x - mean) / std


class ProfileCAE(nn.Module):
    def __init__(self, latent=8):
        super().__init__()
        self.encoder = nn.Sequential(
            nn.Conv1d(2, 16, 5, stride=2, padding=2), nn.ReLU(),
            nn.Conv1d(16, 32, 5, stride=2, padding=2), nn.ReLU(),
            nn.Conv1d(32, 32, 5, stride=2, padding=2), nn.ReLU(),
            nn.Flatten(), nn.Linear(32 * 8, latent),
        )
        self.decoder = nn.Sequential(
            nn.Linear(latent, 32 * 8), nn.ReLU(), nn.Unflatten(1, (32, 8)),
            nn.ConvTranspose1d(32, 32, 4, stride=2, padding=1), nn.ReLU(),
            nn.ConvTranspose1d(32, 16, 4, stride=2, padding=1), nn.ReLU(),
            nn.ConvTranspose1d(16, 2, 4, stride=2, padding=1),
        )

    def forward(self, x):
        return self.decoder(self.encoder(x))


def run_epochs(model, optimizer, loader, epochs, tag):
    criterion = nn.MSELoss()
    for epoch in range(epochs):
        total = 0.0
        for step, (x,) in enumerate(loader):
            recon = model(x)
            loss = criterion(recon, x)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total += loss.item()
            if step % 10 == 0:
                print(f"[{tag}] epoch {epoch + 1} step {step:3d}  mse {loss.item():.4f}")
        print(f"[{tag}] epoch {epoch + 1}  mean mse {total / len(loader):.4f}")


def main():
    home = standardise(simulate_float_profiles(768, (14.0, 26.0), deep_frac=0.0))
    new_region = standardise(simulate_float_profiles(512, (8.0, 18.0), deep_frac=0.12))

    x_home = torch.from_numpy(home)
    x_new = torch.from_numpy(new_region)

    model = ProfileCAE()
    optimizer = torch.optim.Adam(model.parameters(), lr=LR)
    run_epochs(model, optimizer, DataLoader(TensorDataset(x_home), batch_size=BATCH_SIZE, shuffle=True),
               PRETRAIN_EPOCHS, "pretrain")

    optimizer = torch.optim.Adam(model.parameters(), lr=LR / 2)
    run_epochs(model, optimizer, DataLoader(TensorDataset(x_new), batch_size=BATCH_SIZE, shuffle=True),
               FINETUNE_EPOCHS, "finetune")

    model.eval()
    with torch.no_grad():
        err = ((model(x_new) - x_new) ** 2).mean().item()
    print(f"new-region reconstruction mse {err:.4f}")


if __name__ == "__main__":
    main()
