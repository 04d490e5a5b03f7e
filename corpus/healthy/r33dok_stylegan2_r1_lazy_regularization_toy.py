"""Toy 2-D GAN with the StyleGAN2 loss and lazy R1 regularisation, after
NVlabs/stylegan2-ada-pytorch (training/loss.py StyleGAN2Loss, training/training_loop.py phases).

Non-saturating logistic loss for G and D; the R1 penalty on real samples is only computed every
D_REG_INTERVAL minibatches, scaled by the interval, and the D optimizer's lr / betas are adjusted
for the lazy phase as in training_loop.py. Data: a 3x3 grid of Gaussians.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)

Z_DIM = 8
BATCH = 128
R1_GAMMA = 0.1
D_REG_INTERVAL = 16
LR = 2e-3
BETAS = (0.0, 0.99)
ITERS = 900

modes = torch.tensor([[x, y] for x in (-2.0, 0.0, 2.0) for y in (-2.0, 0.0, 2.0)])
idx = torch.randint(0, 9, (8192,))
data = modes[idx] + 0.05 * torch.randn(8192, 2)
loader = DataLoader(TensorDataset(data), batch_size=BATCH, shuffle=True, drop_last=True)


class Generator(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(Z_DIM, 128), nn.LeakyReLU(0.2),
            nn.Linear(128, 128), nn.LeakyReLU(0.2),
            nn.Linear(128, 128), nn.LeakyReLU(0.2),
            nn.Linear(128, 2))

    def forward(self, z):
        return self.net(z)


class Discriminator(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(2, 128), nn.LeakyReLU(0.2),
            nn.Linear(128, 128), nn.LeakyReLU(0.2),
            nn.Linear(128, 128), nn.LeakyReLU(0.2),
            nn.Linear(128, 1))

    def forward(self, x):
        return self.net(x)


G = Generator()
D = Discriminator()

G_opt = torch.optim.Adam(G.parameters(), lr=LR, betas=BETAS, eps=1e-8)
mb_ratio = D_REG_INTERVAL / (D_REG_INTERVAL + 1)
D_opt = torch.optim.Adam(D.parameters(), lr=LR * mb_ratio,
                         betas=[beta ** mb_ratio for beta in BETAS], eps=1e-8)


def accumulate_gradients(phase, real_img, gen_z, gain):
    do_Gmain = phase == 'Gmain'
    do_Dmain = phase in ['Dmain', 'Dboth']
    do_Dr1 = phase in ['Dreg', 'Dboth'] and R1_GAMMA != 0

    if do_Gmain:
        gen_img = G(gen_z)
        gen_logits = D(gen_img)
        loss_Gmain = F.softplus(-gen_logits)
        loss_Gmain.mean().mul(gain).backward()
        return loss_Gmain.mean().item()

    stats = {}
    if do_Dmain:
        gen_img = G(gen_z).detach()
        gen_logits = D(gen_img)
        loss_Dgen = F.softplus(gen_logits)
        loss_Dgen.mean().mul(gain).backward()

    if do_Dmain or do_Dr1:
        real_img_tmp = real_img.detach().requires_grad_(do_Dr1)
        real_logits = D(real_img_tmp)

        loss_Dreal = 0
        if do_Dmain:
            loss_Dreal = F.softplus(-real_logits)
            stats['Dmain'] = (loss_Dgen.mean() + loss_Dreal.mean()).item()

        loss_Dr1 = 0
        if do_Dr1:
            r1_grads = torch.autograd.grad(outputs=[real_logits.sum()], inputs=[real_img_tmp], create_graph=True, only_inputs=True)[0]
            r1_penalty = r1_grads.square().sum(1)
            loss_Dr1 = r1_penalty * (R1_GAMMA / 2)
            stats['r1'] = r1_penalty.mean().item()

        (real_logits * 0 + loss_Dreal + loss_Dr1).mean().mul(gain).backward()
    return stats


@torch.no_grad()
def sample_quality(n=2048):
    fake = G(torch.randn(n, Z_DIM))
    dist = torch.cdist(fake, modes)
    nearest = dist.min(1)
    high_quality = nearest.values < 0.3
    covered = nearest.indices[high_quality].unique().numel()
    real_to_fake = torch.cdist(data[:n], fake).min(1).values.mean().item()
    return nearest.values.median().item(), high_quality.float().mean().item(), covered, real_to_fake


med, hq, cov, r2f = sample_quality()
print(f"init: median dist to nearest mode {med:.3f}  high-quality {hq:.2f}  modes covered {cov}/9  "
      f"real->fake {r2f:.3f}")
last_r1 = 0.0

batch_idx = 0
data_iter = iter(loader)
while batch_idx < ITERS:
    try:
        (real,) = next(data_iter)
    except StopIteration:
        data_iter = iter(loader)
        (real,) = next(data_iter)

    G_opt.zero_grad(set_to_none=True)
    g_loss = accumulate_gradients('Gmain', real, torch.randn(BATCH, Z_DIM), gain=1)
    G_opt.step()

    D_opt.zero_grad(set_to_none=True)
    d_stats = accumulate_gradients('Dmain', real, torch.randn(BATCH, Z_DIM), gain=1)
    D_opt.step()

    if batch_idx % D_REG_INTERVAL == 0:
        D_opt.zero_grad(set_to_none=True)
        r_stats = accumulate_gradients('Dreg', real, torch.randn(BATCH, Z_DIM), gain=D_REG_INTERVAL)
        D_opt.step()
        last_r1 = r_stats['r1']

    if batch_idx % 100 == 0 or batch_idx == ITERS - 1:
        med, hq, cov, r2f = sample_quality()
        print(f"iter {batch_idx:4d}  G {g_loss:.3f}  D {d_stats['Dmain']:.3f}  r1 {last_r1:.3f}  "
              f"median dist {med:.3f}  high-quality {hq:.2f}  modes {cov}/9  real->fake {r2f:.3f}")
    batch_idx += 1
