"""WGAN-GP on the 8-Gaussians toy distribution (port of caogang/wgan-gp gan_toy.py).

Critic and generator are 3-hidden-layer ReLU MLPs, Adam(lr=1e-4, betas=(0.5, 0.9)) for both,
5 critic iterations per generator iteration, gradient penalty on random interpolates between
real and fake samples (LAMBDA = 0.1 for the toy task). The critic's parameters are switched off
(requires_grad = False) while the generator trains and back on before the critic's turn.
Samples are scored by the mean distance of generated points to the nearest mode.
"""
import random

import numpy as np
import torch
import torch.autograd as autograd
import torch.nn as nn
import torch.optim as optim

torch.manual_seed(1)
random.seed(1)
np.random.seed(1)

MODE = 'wgan-gp'  # wgan or wgan-gp
DATASET = '8gaussians'
DIM = 128  # Model dimensionality
LAMBDA = .1  # Smaller lambda seems to help for toy tasks specifically
CRITIC_ITERS = 5  # How many critic iterations per generator iteration
BATCH_SIZE = 64  # Batch size
ITERS = 250  # how many generator iterations to train for

# ==================Definition Start======================


class Generator(nn.Module):

    def __init__(self):
        super(Generator, self).__init__()

        main = nn.Sequential(
            nn.Linear(2, DIM),
            nn.ReLU(True),
            nn.Linear(DIM, DIM),
            nn.ReLU(True),
            nn.Linear(DIM, DIM),
            nn.ReLU(True),
            nn.Linear(DIM, 2),
        )
        self.main = main

    def forward(self, noise):
        output = self.main(noise)
        return output


class Discriminator(nn.Module):

    def __init__(self):
        super(Discriminator, self).__init__()

        main = nn.Sequential(
            nn.Linear(2, DIM),
            nn.ReLU(True),
            nn.Linear(DIM, DIM),
            nn.ReLU(True),
            nn.Linear(DIM, DIM),
            nn.ReLU(True),
            nn.Linear(DIM, 1),
        )
        self.main = main

    def forward(self, inputs):
        output = self.main(inputs)
        return output.view(-1)


# custom weights initialization called on netG and netD
def weights_init(m):
    classname = m.__class__.__name__
    if classname.find('Linear') != -1:
        m.weight.data.normal_(0.0, 0.02)
        m.bias.data.fill_(0)
    elif classname.find('BatchNorm') != -1:
        m.weight.data.normal_(1.0, 0.02)
        m.bias.data.fill_(0)


scale = 2.
centers = [
    (1, 0),
    (-1, 0),
    (0, 1),
    (0, -1),
    (1. / np.sqrt(2), 1. / np.sqrt(2)),
    (1. / np.sqrt(2), -1. / np.sqrt(2)),
    (-1. / np.sqrt(2), 1. / np.sqrt(2)),
    (-1. / np.sqrt(2), -1. / np.sqrt(2))
]
centers = [(scale * x, scale * y) for x, y in centers]
centers_t = torch.tensor(centers, dtype=torch.float32) / 1.414


# Dataset iterator
def inf_train_gen():
    while True:
        dataset = []
        for i in range(BATCH_SIZE):
            point = np.random.randn(2) * .02
            center = random.choice(centers)
            point[0] += center[0]
            point[1] += center[1]
            dataset.append(point)
        dataset = np.array(dataset, dtype='float32')
        dataset /= 1.414  # stdev
        yield dataset


def calc_gradient_penalty(netD, real_data, fake_data):
    alpha = torch.rand(BATCH_SIZE, 1)
    alpha = alpha.expand(real_data.size())

    interpolates = alpha * real_data + ((1 - alpha) * fake_data)
    interpolates.requires_grad_(True)

    disc_interpolates = netD(interpolates)

    gradients = autograd.grad(outputs=disc_interpolates, inputs=interpolates,
                              grad_outputs=torch.ones(disc_interpolates.size()),
                              create_graph=True, retain_graph=True, only_inputs=True)[0]

    gradient_penalty = ((gradients.norm(2, dim=1) - 1) ** 2).mean() * LAMBDA
    return gradient_penalty


@torch.no_grad()
def mode_distance(netG, n=512):
    samples = netG(torch.randn(n, 2))
    return torch.cdist(samples, centers_t).min(dim=1).values.mean().item()

# ==================Definition End======================


netG = Generator()
netD = Discriminator()
netD.apply(weights_init)
netG.apply(weights_init)
print(netG)
print(netD)

optimizerD = optim.Adam(netD.parameters(), lr=1e-4, betas=(0.5, 0.9))
optimizerG = optim.Adam(netG.parameters(), lr=1e-4, betas=(0.5, 0.9))

one = torch.tensor(1.)
mone = one * -1

data = inf_train_gen()

for iteration in range(ITERS):
    ############################
    # (1) Update D network
    ###########################
    for p in netD.parameters():  # reset requires_grad
        p.requires_grad = True  # they are set to False below in netG update

    for iter_d in range(CRITIC_ITERS):
        _data = next(data)
        real_data = torch.from_numpy(_data)

        netD.zero_grad()

        # train with real
        D_real = netD(real_data)
        D_real = D_real.mean()
        D_real.backward(mone)

        # train with fake
        noise = torch.randn(BATCH_SIZE, 2)
        with torch.no_grad():  # totally freeze netG
            fake = netG(noise)
        D_fake = netD(fake)
        D_fake = D_fake.mean()
        D_fake.backward(one)

        # train with gradient penalty
        gradient_penalty = calc_gradient_penalty(netD, real_data, fake)
        gradient_penalty.backward()

        D_cost = D_fake - D_real + gradient_penalty
        Wasserstein_D = D_real - D_fake
        optimizerD.step()

    ############################
    # (2) Update G network
    ###########################
    for p in netD.parameters():
        p.requires_grad = False  # to avoid computation
    netG.zero_grad()

    noise = torch.randn(BATCH_SIZE, 2)
    fake = netG(noise)
    G = netD(fake)
    G = G.mean()
    G.backward(mone)
    G_cost = -G
    optimizerG.step()

    if iteration % 20 == 0 or iteration == ITERS - 1:
        print('iter {:4d}  disc cost {:+.4f}  gen cost {:+.4f}  wasserstein {:.4f}  gp {:.4f}  '
              'dist to modes {:.3f}'.format(iteration, D_cost.item(), G_cost.item(),
                                             Wasserstein_D.item(), gradient_penalty.item(),
                                             mode_distance(netG)))
