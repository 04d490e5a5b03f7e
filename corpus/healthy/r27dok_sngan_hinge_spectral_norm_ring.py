"""Spectrally normalised GAN with the hinge loss on a toy 2-D data set (a ring of 8 Gaussians),
after christiancosgrove/pytorch-spectral-normalization-gan (main.py --loss hinge, disc_iters=5).
Every Linear layer of the discriminator is wrapped in spectral_norm, so the weight the layer uses is
weight_orig / sigma, with sigma re-estimated by one power iteration per forward. The discriminator
takes 5 steps per generator step; the generator loss is -D(G(z)).mean()."""
import math
import torch
import torch.nn as nn
from torch.nn.utils import spectral_norm

torch.manual_seed(0)

Z_dim = 16
batch_size = 128
disc_iters = 5
n_gen_steps = 400


def sample_ring(n, n_modes=8, radius=2.0, std=0.1):
    k = torch.randint(0, n_modes, (n,))
    ang = 2 * math.pi * k.float() / n_modes
    centers = torch.stack([radius * torch.cos(ang), radius * torch.sin(ang)], dim=1)
    return centers + std * torch.randn(n, 2)


MODES = torch.stack([torch.tensor([2.0 * math.cos(2 * math.pi * i / 8), 2.0 * math.sin(2 * math.pi * i / 8)])
                     for i in range(8)])


class Generator(nn.Module):
    def __init__(self, z_dim):
        super().__init__()
        self.model = nn.Sequential(
            nn.Linear(z_dim, 128), nn.ReLU(),
            nn.Linear(128, 128), nn.ReLU(),
            nn.Linear(128, 2),
        )

    def forward(self, z):
        return self.model(z)


class Discriminator(nn.Module):
    def __init__(self):
        super().__init__()
        self.model = nn.Sequential(
            spectral_norm(nn.Linear(2, 128)), nn.LeakyReLU(0.1),
            spectral_norm(nn.Linear(128, 128)), nn.LeakyReLU(0.1),
            spectral_norm(nn.Linear(128, 1)),
        )

    def forward(self, x):
        return self.model(x)


discriminator = Discriminator()
generator = Generator(Z_dim)

optim_disc = torch.optim.Adam(filter(lambda p: p.requires_grad, discriminator.parameters()), lr=1e-3, betas=(0.0, 0.9))
optim_gen = torch.optim.Adam(generator.parameters(), lr=1e-3, betas=(0.0, 0.9))

fixed_z = torch.randn(2000, Z_dim)


@torch.no_grad()
def evaluate():
    samples = generator(fixed_z)
    d = torch.cdist(samples, MODES)
    dist, idx = d.min(dim=1)
    good = dist < 0.3
    covered = torch.bincount(idx[good], minlength=8) > 20
    return dist.mean().item(), good.float().mean().item(), int(covered.sum())


md, hq, cov = evaluate()
print(f"init: mean dist to nearest mode {md:.3f}  high-quality {hq:.3f}  modes covered {cov}/8")

for step in range(1, n_gen_steps + 1):
    for _ in range(disc_iters):
        data = sample_ring(batch_size)
        z = torch.randn(batch_size, Z_dim)
        optim_disc.zero_grad()
        optim_gen.zero_grad()
        disc_loss = nn.ReLU()(1.0 - discriminator(data)).mean() + nn.ReLU()(1.0 + discriminator(generator(z))).mean()
        disc_loss.backward()
        optim_disc.step()

    z = torch.randn(batch_size, Z_dim)
    optim_disc.zero_grad()
    optim_gen.zero_grad()
    gen_loss = -discriminator(generator(z)).mean()
    gen_loss.backward()
    optim_gen.step()

    if step % 50 == 0:
        md, hq, cov = evaluate()
        print(f"step {step:4d}  disc loss {disc_loss.item():.3f}  gen loss {gen_loss.item():.3f}  "
              f"mean dist {md:.3f}  high-quality {hq:.3f}  modes covered {cov}/8")
