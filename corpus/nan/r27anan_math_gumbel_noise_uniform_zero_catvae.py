"""Categorical VAE on binarised 8x8 glyphs: 32 latent variables with 128 categories each,
sampled with the Gumbel-softmax relaxation; the loss is reconstruction BCE minus an entropy
bonus on the relaxed samples (KL to a uniform prior)."""
import math
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import TensorDataset, DataLoader

torch.manual_seed(0)

N_LAT, N_CAT, TAU = 32, 128, 0.5


def make_glyphs(n=4096):
    g = torch.Generator().manual_seed(1)
    protos = (torch.rand(16, 64, generator=g) < 0.4).float()
    idx = torch.randint(0, 16, (n,), generator=g)
    flip = (torch.rand(n, 64, generator=g) < 0.05).float()
    return (protos[idx] - flip).abs()


def gumbel_noise(shape):
    u = torch.rand(shape)
    return -torch.log(-torch.log(u))


class CatVAE(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, N_LAT * N_CAT))
        self.dec = nn.Sequential(nn.Linear(N_LAT * N_CAT, 256), nn.ReLU(), nn.Linear(256, 64))

    def forward(self, x):
        logits = self.enc(x).view(-1, N_LAT, N_CAT)
        y = F.softmax((logits + gumbel_noise(logits.shape)) / TAU, dim=-1)
        return self.dec(y.view(-1, N_LAT * N_CAT)), y


data = make_glyphs()
loader = DataLoader(TensorDataset(data), batch_size=256, shuffle=True)
model = CatVAE()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)

step = 0
for epoch in range(6):
    tot_rec, tot_kl = 0.0, 0.0
    for (x,) in loader:
        recon, y = model(x)
        rec = F.binary_cross_entropy_with_logits(recon, x, reduction="sum") / x.size(0)
        kl = (y * (y * N_CAT).log()).sum(dim=(1, 2)).mean()
        loss = rec + 0.01 * kl
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        tot_rec += rec.item()
        tot_kl += kl.item()
        if step % 20 == 0:
            print(f"step {step} loss {loss.item():.3f} rec {rec.item():.3f} kl {kl.item():.3f}")
        step += 1
    print(f"epoch {epoch} rec {tot_rec / len(loader):.3f} kl {tot_kl / len(loader):.3f}")
