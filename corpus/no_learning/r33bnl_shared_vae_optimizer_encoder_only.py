"""Shared VAE on single-cell expression profiles (log1p counts of 256 genes).

Cells come from a handful of cell types, each driven by a few gene programs.
The VAE is trained with MSE reconstruction + KL (kl_weight 0.1), as in our
MMVAE experiments, and we report the reconstruction error on held-out cells.
"""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)
np.random.seed(0)

N_GENES = 256
N_PROGRAMS = 8
N_TYPES = 6
LATENT = 16
BATCH = 64
EPOCHS = 4


def simulate_cells(n, rng):
    programs = rng.gamma(0.6, 1.0, size=(N_PROGRAMS, N_GENES))
    type_usage = rng.dirichlet(np.ones(N_PROGRAMS) * 0.4, size=N_TYPES)
    cell_type = rng.integers(0, N_TYPES, size=n)
    usage = type_usage[cell_type] * rng.lognormal(0.0, 0.3, size=(n, N_PROGRAMS))
    rate = 3.0 * usage @ programs
    counts = rng.poisson(rate)
    return np.log1p(counts).astype(np.float32), cell_type


class CellDataset(Dataset):
    def __init__(self, x):
        self.x = torch.from_numpy(x)

    def __len__(self):
        return len(self.x)

    def __getitem__(self, idx):
        return self.x[idx]


class SharedEncoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(N_GENES, 128)
        self.fc2 = nn.Linear(128, 64)
        self.mu = nn.Linear(64, LATENT)
        self.logvar = nn.Linear(64, LATENT)

    def forward(self, x):
        h = F.leaky_relu(self.fc1(x))
        h = F.leaky_relu(self.fc2(h))
        return self.mu(h), self.logvar(h)


class SharedDecoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(LATENT, 64)
        self.fc2 = nn.Linear(64, 128)
        self.out = nn.Linear(128, N_GENES)

    def forward(self, z):
        h = F.leaky_relu(self.fc1(z))
        h = F.leaky_relu(self.fc2(h))
        return self.out(h)


class SharedVAE(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = SharedEncoder()
        self.decoder = SharedDecoder()

    def forward(self, x):
        mu, logvar = self.encoder(x)
        std = torch.exp(0.5 * logvar)
        z = mu + std * torch.randn_like(std)
        return self.decoder(z), mu, logvar


def kl_divergence(mu, logvar):
    return -0.5 * torch.mean(torch.sum(1 + logvar - mu.pow(2) - logvar.exp(), dim=1))


def vae_loss(pred, target, mu, logvar, kl_weight=0.1):
    recon = F.mse_loss(pred, target)
    kl = kl_divergence(mu, logvar)
    return recon + kl_weight * kl, recon, kl


rng = np.random.default_rng(0)
x_all, _ = simulate_cells(4000, rng)
train_ds = CellDataset(x_all[:3200])
val_ds = CellDataset(x_all[3200:])
train_loader = DataLoader(train_ds, batch_size=BATCH, shuffle=True)
val_loader = DataLoader(val_ds, batch_size=256)

model = SharedVAE()
optimizers = {
    "shr_vae": torch.optim.Adam(model.encoder.parameters(), lr=1e-3),
}

for epoch in range(EPOCHS):
    model.train()
    tot, tot_recon, tot_kl, n = 0.0, 0.0, 0.0, 0
    for x in train_loader:
        optimizers["shr_vae"].zero_grad()
        pred, mu, logvar = model(x)
        loss, recon, kl = vae_loss(pred, x, mu, logvar, kl_weight=0.1)
        loss.backward()
        optimizers["shr_vae"].step()
        tot += loss.item()
        tot_recon += recon.item()
        tot_kl += kl.item()
        n += 1

    model.eval()
    with torch.no_grad():
        val_recon, m = 0.0, 0
        for x in val_loader:
            mu, logvar = model.encoder(x)
            val_recon += F.mse_loss(model.decoder(mu), x, reduction="sum").item()
            m += x.numel()
    print(f"epoch {epoch + 1}: loss {tot / n:.4f} recon {tot_recon / n:.4f} "
          f"kl {tot_kl / n:.4f} | val recon mse {val_recon / m:.4f}")
