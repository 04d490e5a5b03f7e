"""A small GAN on a 2-D mixture of 8 Gaussians placed on a ring.

Training loop follows the DCGAN tutorial: update D on a real batch and on a
detached fake batch, then update G through D with the "real" label, one Adam
optimizer each (beta1 = 0.5). The two losses see-saw against each other; the
sample-quality numbers printed alongside are what should improve.
"""
import math

import torch
import torch.nn as nn

NZ = 8
HIDDEN = 128
BATCH_SIZE = 128
NUM_ITERS = 1000
LR = 2e-3
BETA1 = 0.5
N_MODES = 8
RADIUS = 2.0
STD = 0.05

torch.manual_seed(999)

angles = torch.arange(N_MODES) * (2 * math.pi / N_MODES)
CENTERS = torch.stack([RADIUS * torch.cos(angles), RADIUS * torch.sin(angles)], dim=1)


def sample_real(n):
    idx = torch.randint(0, N_MODES, (n,))
    return CENTERS[idx] + STD * torch.randn(n, 2)


class Generator(nn.Module):
    def __init__(self):
        super().__init__()
        self.main = nn.Sequential(
            nn.Linear(NZ, HIDDEN), nn.ReLU(True),
            nn.Linear(HIDDEN, HIDDEN), nn.ReLU(True),
            nn.Linear(HIDDEN, 2),
        )

    def forward(self, z):
        return self.main(z)


class Discriminator(nn.Module):
    def __init__(self):
        super().__init__()
        self.main = nn.Sequential(
            nn.Linear(2, HIDDEN), nn.LeakyReLU(0.2, inplace=True),
            nn.Linear(HIDDEN, HIDDEN), nn.LeakyReLU(0.2, inplace=True),
            nn.Linear(HIDDEN, 1), nn.Sigmoid(),
        )

    def forward(self, x):
        return self.main(x).view(-1)


@torch.no_grad()
def sample_quality(netG, n=2000):
    """Mean distance to the nearest mode, and how many modes get >= 2% of the samples."""
    fake = netG(torch.randn(n, NZ))
    d = torch.cdist(fake, CENTERS)
    nearest, which = d.min(dim=1)
    close = nearest < 4 * STD
    counts = torch.bincount(which[close], minlength=N_MODES)
    covered = int((counts >= 0.02 * n).sum())
    return nearest.mean().item(), close.float().mean().item(), covered


def main():
    netG = Generator()
    netD = Discriminator()
    criterion = nn.BCELoss()
    real_label, fake_label = 1.0, 0.0

    optimizerD = torch.optim.Adam(netD.parameters(), lr=LR, betas=(BETA1, 0.999))
    optimizerG = torch.optim.Adam(netG.parameters(), lr=LR, betas=(BETA1, 0.999))

    dist, frac, covered = sample_quality(netG)
    print(f"[init] mean dist to mode {dist:.3f} | on-mode {frac:.2f} | modes covered {covered}/{N_MODES}")

    for it in range(1, NUM_ITERS + 1):
        ############################
        # (1) Update D: maximize log(D(x)) + log(1 - D(G(z)))
        ############################
        netD.zero_grad()
        real = sample_real(BATCH_SIZE)
        label = torch.full((BATCH_SIZE,), real_label)
        output = netD(real)
        errD_real = criterion(output, label)
        errD_real.backward()
        D_x = output.mean().item()

        noise = torch.randn(BATCH_SIZE, NZ)
        fake = netG(noise)
        label.fill_(fake_label)
        output = netD(fake.detach())
        errD_fake = criterion(output, label)
        errD_fake.backward()
        D_G_z1 = output.mean().item()
        errD = errD_real + errD_fake
        optimizerD.step()

        ############################
        # (2) Update G: maximize log(D(G(z)))
        ############################
        netG.zero_grad()
        label.fill_(real_label)
        output = netD(fake)
        errG = criterion(output, label)
        errG.backward()
        D_G_z2 = output.mean().item()
        optimizerG.step()

        if it % 100 == 0:
            print(f"[{it:4d}/{NUM_ITERS}] Loss_D: {errD.item():.4f} Loss_G: {errG.item():.4f} "
                  f"D(x): {D_x:.3f} D(G(z)): {D_G_z1:.3f} / {D_G_z2:.3f}")
        if it % 250 == 0:
            dist, frac, covered = sample_quality(netG)
            print(f"        samples: mean dist to mode {dist:.3f} | on-mode {frac:.2f} | "
                  f"modes covered {covered}/{N_MODES}")


if __name__ == "__main__":
    main()
