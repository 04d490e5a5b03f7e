"""A small GAN whose discriminator phase steps the generator's optimizer: opt_d is made and never steps,
though the discriminator gets gradients at every iteration (its requires_grad is switched off for the
generator's phase, as SRGAN-style loops do). An argument "fixed" steps opt_d where it belongs."""

import sys

import torch
from torch import nn

torch.manual_seed(0)
generator = nn.Sequential(nn.Linear(2, 8), nn.ReLU(), nn.Linear(8, 2))
discriminator = nn.Sequential(nn.Linear(2, 8), nn.LeakyReLU(0.2), nn.Linear(8, 1))
opt_g = torch.optim.Adam(generator.parameters(), lr=0.01)
opt_d = torch.optim.Adam(discriminator.parameters(), lr=0.01)
bce = nn.BCEWithLogitsLoss()
real = torch.randn(64, 2) * 0.5 + 1.0
stepped_in_d_phase = opt_d if sys.argv[1:] == ["fixed"] else opt_g
for step in range(1, 81):
    discriminator.requires_grad_(True)
    discriminator.zero_grad()
    fake = generator(torch.randn(64, 2))
    d_loss = bce(discriminator(real), torch.ones(64, 1)) + bce(discriminator(fake.detach()), torch.zeros(64, 1))
    d_loss.backward()
    stepped_in_d_phase.step()
    discriminator.requires_grad_(False)
    opt_g.zero_grad()
    g_loss = bce(discriminator(generator(torch.randn(64, 2))), torch.ones(64, 1))
    g_loss.backward()
    opt_g.step()
    if step % 20 == 0:
        print(f"step {step} d_loss {d_loss.item():.4f} g_loss {g_loss.item():.4f}")
