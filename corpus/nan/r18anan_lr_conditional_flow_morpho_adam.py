"""Conditional normalizing flow for a Morpho-MNIST-style causal model: the flow models the
8x8 stroke image given its two parent attributes, stroke thickness and intensity, with actnorm,
conditional affine coupling layers (the scale/shift networks see the untouched half of the
pixels and the attributes) and fixed permutations. Trained by maximum likelihood (bits/dim).
"""
import math

import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)
np.random.seed(0)

PATCH = 8
DIM = PATCH * PATCH
N_FLOWS = 8
HIDDEN = 128
BATCH_SIZE = 64
EPOCHS = 3
LR = 3e-2


def render_strokes(n, rng):
    yy, xx = np.mgrid[0:PATCH, 0:PATCH] + 0.5
    thickness = rng.uniform(0.5, 2.5, n)
    intensity = rng.uniform(0.3, 1.0, n)
    imgs = []
    for t, i in zip(thickness, intensity):
        cx, cy, r = rng.uniform(3, 5), rng.uniform(3, 5), rng.uniform(1.5, 3.0)
        dist = np.abs(np.sqrt((xx - cx) ** 2 + (yy - cy) ** 2) - r)
        stroke = np.clip(t / 2 + 0.5 - dist, 0, 1)
        imgs.append(i * stroke)
    imgs = np.stack(imgs) + rng.normal(0, 0.05, (n, PATCH, PATCH))
    return imgs.reshape(n, DIM).astype(np.float32), np.stack([thickness, intensity], 1).astype(np.float32)


class MorphoStrokes(Dataset):
    def __init__(self, n, seed):
        rng = np.random.default_rng(seed)
        x, attrs = render_strokes(n, rng)
        self.x = torch.from_numpy(x - 0.5)
        self.attrs = torch.from_numpy(attrs)

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return self.x[i], self.attrs[i]


class ActNorm(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.loc = nn.Parameter(torch.zeros(dim))
        self.log_scale = nn.Parameter(torch.zeros(dim))
        self.initialized = False

    def forward(self, x):
        if not self.initialized:
            with torch.no_grad():
                self.loc.data = -x.mean(0)
                self.log_scale.data = -torch.log(x.std(0) + 1e-6)
            self.initialized = True
        y = (x + self.loc) * torch.exp(self.log_scale)
        return y, self.log_scale.sum().expand(x.size(0))


class ConditionalAffineCoupling(nn.Module):
    def __init__(self, dim, cond_dim, hidden):
        super().__init__()
        self.half = dim // 2
        self.net = nn.Sequential(
            nn.Linear(self.half + cond_dim, hidden), nn.ReLU(),
            nn.Linear(hidden, hidden), nn.ReLU(),
            nn.Linear(hidden, 2 * (dim - self.half)),
        )

    def forward(self, x, cond):
        xa, xb = x[:, :self.half], x[:, self.half:]
        s, t = self.net(torch.cat([xa, cond], dim=1)).chunk(2, dim=1)
        yb = xb * torch.exp(s) + t
        return torch.cat([xa, yb], dim=1), s.sum(dim=1)


class ConditionalFlow(nn.Module):
    def __init__(self, dim=DIM, cond_dim=2, n_flows=N_FLOWS, hidden=HIDDEN):
        super().__init__()
        self.actnorms = nn.ModuleList([ActNorm(dim) for _ in range(n_flows)])
        self.couplings = nn.ModuleList([ConditionalAffineCoupling(dim, cond_dim, hidden) for _ in range(n_flows)])
        g = torch.Generator().manual_seed(123)
        self.register_buffer("perms", torch.stack([torch.randperm(dim, generator=g) for _ in range(n_flows)]))

    def forward(self, x, cond):
        logdet = torch.zeros(x.size(0))
        for actnorm, coupling, perm in zip(self.actnorms, self.couplings, self.perms):
            x, ld = actnorm(x)
            logdet = logdet + ld
            x, ld = coupling(x, cond)
            logdet = logdet + ld
            x = x[:, perm]
        return x, logdet

    def nll_bits_per_dim(self, x, cond):
        z, logdet = self(x, cond)
        log_pz = -0.5 * (z ** 2).sum(dim=1) - 0.5 * DIM * math.log(2 * math.pi)
        nll = -(log_pz + logdet)
        return nll.mean() / (DIM * math.log(2))


def main():
    train_set = MorphoStrokes(6144, seed=1)
    val_set = MorphoStrokes(1024, seed=2)
    train_loader = DataLoader(train_set, batch_size=BATCH_SIZE, shuffle=True, drop_last=True)
    val_loader = DataLoader(val_set, batch_size=256)
    print(f"{len(train_set)} training images, {len(val_set)} validation images")

    model = ConditionalFlow()
    optimizer = torch.optim.Adam(model.parameters(), lr=LR)
    step = 0
    for epoch in range(EPOCHS):
        model.train()
        for images, attrs in train_loader:
            loss = model.nll_bits_per_dim(images, attrs)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            if step % 10 == 0:
                print(f"epoch {epoch} step {step} nll {loss.item():.4f} bits/dim")
            step += 1
        model.eval()
        with torch.no_grad():
            val = np.mean([model.nll_bits_per_dim(x, a).item() for x, a in val_loader])
        print(f"epoch {epoch} val nll {val:.4f} bits/dim")


if __name__ == "__main__":
    main()
