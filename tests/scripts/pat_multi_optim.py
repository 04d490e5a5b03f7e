"""Several optimizers in one loop: a small GAN, discriminator step then generator step."""

import torch
from torch import nn

torch.manual_seed(0)
generator = nn.Sequential(nn.Linear(2, 8), nn.ReLU(), nn.Linear(8, 2))
discriminator = nn.Sequential(nn.Linear(2, 8), nn.LeakyReLU(0.2), nn.Linear(8, 1))
opt_g = torch.optim.Adam(generator.parameters(), lr=0.01)
opt_d = torch.optim.Adam(discriminator.parameters(), lr=0.01)
bce = nn.BCEWithLogitsLoss()
real = torch.randn(64, 2) * 0.5 + 1.0
for step in range(1, 9):
    fake = generator(torch.randn(64, 2))
    d_loss = bce(discriminator(real), torch.ones(64, 1)) + bce(discriminator(fake.detach()), torch.zeros(64, 1))
    opt_d.zero_grad()
    d_loss.backward()
    opt_d.step()
    g_loss = bce(discriminator(fake), torch.ones(64, 1))
    opt_g.zero_grad()
    g_loss.backward()
    opt_g.step()
    print(f"step {step} d_loss {d_loss.item()!r} g_loss {g_loss.item()!r}")
