"""Fit NFW halo parameters to weak-lensing convergence profiles.

A small MLP reads a noisy azimuthally averaged convergence profile kappa(theta)
and predicts the halo's log10 mass and concentration; the NFW convergence of
the prediction (Meneghetti lecture notes eq. 3.69 / 3.74) is compared with the
observed profile.
"""
import math

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)

N_BINS = 24
THETA = torch.logspace(-1.0, 0.9, N_BINS)   # arcmin, 0.1' .. 8'
D_L = 1000.0                                # Mpc
ARCMIN = math.pi / (180.0 * 60.0)
RHO_CRIT = 1.36e11                          # Msun / Mpc^3
SIGMA_CRIT = 3.0e15                         # Msun / Mpc^2
DELTA = 200.0


def _f_nfw(x):
    f_pos = 1 - 2 * torch.atan(torch.sqrt((x - 1) / (x + 1))) / torch.sqrt(x ** 2 - 1)
    f_neg = 1 - 2 * torch.atanh(torch.sqrt((1 - x) / (1 + x))) / torch.sqrt(1 - x ** 2)
    return torch.where(x > 1, f_pos, torch.where(x < 1, f_neg, torch.zeros_like(x)))


def convergence_nfw(log_mass, c):
    mass = 10.0 ** log_mass
    r_delta = (3 * mass / (4 * math.pi * DELTA * RHO_CRIT)) ** (1 / 3)
    rs = r_delta / c
    rho_s = DELTA / 3 * RHO_CRIT * c ** 3 / (torch.log(1 + c) - c / (1 + c))
    kappa_s = rs * rho_s / SIGMA_CRIT
    xi = D_L * THETA * ARCMIN
    x = xi[None, :] / rs[:, None]
    return 2 * kappa_s[:, None] * _f_nfw(x) / (x ** 2 - 1)


def make_halos(n):
    log_mass = torch.empty(n).uniform_(14.0, 15.3)
    c = torch.empty(n).uniform_(3.0, 9.0)
    with torch.no_grad():
        kappa = convergence_nfw(log_mass, c)
    kappa = kappa + 0.01 * torch.randn_like(kappa)
    return kappa, torch.stack([log_mass, c], dim=1)


class HaloNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(
            nn.Linear(N_BINS, 64), nn.Tanh(),
            nn.Linear(64, 64), nn.Tanh(),
            nn.Linear(64, 2),
        )

    def forward(self, kappa):
        h = self.body(torch.log(kappa.clamp_min(1e-3)))
        log_mass = 14.6 + 0.7 * torch.tanh(h[:, 0])
        c = 2.0 + 8.0 * torch.sigmoid(h[:, 1])
        return log_mass, c


kappa_tr, par_tr = make_halos(1024)
kappa_va, par_va = make_halos(256)
train_loader = DataLoader(TensorDataset(kappa_tr, par_tr), batch_size=32, shuffle=True)

model = HaloNet()
optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)

for epoch in range(5):
    model.train()
    running = 0.0
    for step, (kappa, _) in enumerate(train_loader):
        log_mass, c = model(kappa)
        pred = convergence_nfw(log_mass, c)
        loss = ((pred - kappa) ** 2).mean() * 1e3
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        running += loss.item()
        if step % 8 == 0:
            print(f"epoch {epoch} step {step:3d} loss {loss.item():.5f}")
    model.eval()
    with torch.no_grad():
        log_mass, c = model(kappa_va)
        mass_err = (log_mass - par_va[:, 0]).abs().mean().item()
        c_err = (c - par_va[:, 1]).abs().mean().item()
    print(f"epoch {epoch} train loss {running / len(train_loader):.5f} "
          f"val |dlogM| {mass_err:.4f} val |dc| {c_err:.3f}")
