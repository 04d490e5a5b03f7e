"""Original WGAN (weight clipping) on a 2-D toy distribution.

Training loop after martinarjovsky/WassersteinGAN main.py: the critic is trained Diters times per
generator step (more at the start), its weights are clamped to [-c, c] after every update, RMSprop,
and the gradients are seeded with one / mone instead of a minimised loss.
"""
import math

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)

NZ = 4
HIDDEN = 64
BATCH_SIZE = 64
LR_D = 5e-4
LR_G = 5e-4
CLAMP_LOWER = -0.05
CLAMP_UPPER = 0.05
DITERS = 5
NITER = 6


def sample_real(n):
    # an elongated, rotated Gaussian centred away from the origin
    z = torch.randn(n, 2) * torch.tensor([1.5, 0.3])
    a = math.pi / 6
    rot = torch.tensor([[math.cos(a), -math.sin(a)], [math.sin(a), math.cos(a)]])
    return z @ rot.T + torch.tensor([2.0, -1.0])


class MLP_G(nn.Module):
    def __init__(self, nz, hidden):
        super().__init__()
        self.main = nn.Sequential(
            nn.Linear(nz, hidden), nn.ReLU(True),
            nn.Linear(hidden, hidden), nn.ReLU(True),
            nn.Linear(hidden, 2),
        )

    def forward(self, input):
        return self.main(input)


class MLP_D(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.main = nn.Sequential(
            nn.Linear(2, hidden), nn.ReLU(True),
            nn.Linear(hidden, hidden), nn.ReLU(True),
            nn.Linear(hidden, 1),
        )

    def forward(self, input):
        output = self.main(input)
        output = output.mean(0)
        return output.view(1)


def stats(netG, n=4000):
    with torch.no_grad():
        fake = netG(torch.randn(n, NZ))
    real = sample_real(n)
    mean_err = (fake.mean(0) - real.mean(0)).norm().item()
    cov_err = (torch.cov(fake.T) - torch.cov(real.T)).norm().item()
    return mean_err, cov_err


def main():
    dataset = TensorDataset(sample_real(25600))
    dataloader = DataLoader(dataset, batch_size=BATCH_SIZE, shuffle=True, drop_last=True)

    netG = MLP_G(NZ, HIDDEN)
    netD = MLP_D(HIDDEN)

    input = torch.FloatTensor(BATCH_SIZE, 2)
    noise = torch.FloatTensor(BATCH_SIZE, NZ)
    fixed_noise = torch.FloatTensor(BATCH_SIZE, NZ).normal_(0, 1)
    one = torch.FloatTensor([1])
    mone = one * -1

    optimizerD = torch.optim.RMSprop(netD.parameters(), lr=LR_D)
    optimizerG = torch.optim.RMSprop(netG.parameters(), lr=LR_G)

    m, c = stats(netG)
    print(f"init: mean_err {m:.3f} cov_err {c:.3f}")
    gen_iterations = 0
    for epoch in range(NITER):
        data_iter = iter(dataloader)
        i = 0
        while i < len(dataloader):
            ############################
            # (1) Update D network
            ###########################
            for p in netD.parameters():
                p.requires_grad = True

            if gen_iterations < 10 or gen_iterations % 100 == 0:
                Diters = 25
            else:
                Diters = DITERS
            j = 0
            while j < Diters and i < len(dataloader):
                j += 1

                for p in netD.parameters():
                    p.data.clamp_(CLAMP_LOWER, CLAMP_UPPER)

                data = next(data_iter)
                i += 1

                real_cpu = data[0]
                netD.zero_grad()
                input.resize_as_(real_cpu).copy_(real_cpu)
                inputv = input

                errD_real = netD(inputv)
                errD_real.backward(one)

                noise.resize_(BATCH_SIZE, NZ).normal_(0, 1)
                with torch.no_grad():
                    noisev = noise
                    fake = netG(noisev)
                inputv = fake
                errD_fake = netD(inputv)
                errD_fake.backward(mone)
                errD = errD_real - errD_fake
                optimizerD.step()

            ############################
            # (2) Update G network
            ###########################
            for p in netD.parameters():
                p.requires_grad = False
            netG.zero_grad()
            noise.resize_(BATCH_SIZE, NZ).normal_(0, 1)
            noisev = noise
            fake = netG(noisev)
            errG = netD(fake)
            errG.backward(one)
            optimizerG.step()
            gen_iterations += 1

        m, c = stats(netG)
        print(f"[{epoch}/{NITER}][gen_iter {gen_iterations}] Loss_D: {errD.item():.5f} "
              f"Loss_G: {errG.item():.5f} Loss_D_real: {errD_real.item():.5f} "
              f"Loss_D_fake: {errD_fake.item():.5f} mean_err {m:.3f} cov_err {c:.3f}")


if __name__ == "__main__":
    main()
