"""Conditional flow matching (TorchCFM README example): learn a velocity field that
transports an 8-gaussians source to the two-moons target, then sample with Euler steps."""
import math
import time

import numpy as np
import torch
import torch.nn as nn

torch.manual_seed(0)
np.random.seed(0)


def sample_moons(n, noise=0.2):
    n_out = n // 2
    n_in = n - n_out
    t_out = torch.rand(n_out) * math.pi
    t_in = torch.rand(n_in) * math.pi
    outer = torch.stack([torch.cos(t_out), torch.sin(t_out)], dim=1)
    inner = torch.stack([1 - torch.cos(t_in), 1 - torch.sin(t_in) - 0.5], dim=1)
    x = torch.cat([outer, inner], dim=0)
    x = x + noise * torch.randn_like(x)
    return (x * 3 - 1).float()


def sample_8gaussians(n, scale=5.0, var=0.1):
    centers = torch.tensor([(1, 0), (-1, 0), (0, 1), (0, -1),
                            (1 / math.sqrt(2), 1 / math.sqrt(2)),
                            (1 / math.sqrt(2), -1 / math.sqrt(2)),
                            (-1 / math.sqrt(2), 1 / math.sqrt(2)),
                            (-1 / math.sqrt(2), -1 / math.sqrt(2))], dtype=torch.float32) * scale
    idx = torch.randint(0, 8, (n,))
    return centers[idx] + math.sqrt(var) * torch.randn(n, 2)


class MLP(nn.Module):
    def __init__(self, dim, out_dim=None, w=64, time_varying=False):
        super().__init__()
        self.time_varying = time_varying
        if out_dim is None:
            out_dim = dim
        self.net = nn.Sequential(
            nn.Linear(dim + (1 if time_varying else 0), w),
            nn.SELU(),
            nn.Linear(w, w),
            nn.SELU(),
            nn.Linear(w, w),
            nn.SELU(),
            nn.Linear(w, out_dim),
        )

    def forward(self, x):
        return self.net(x)


class ConditionalFlowMatcher:
    def __init__(self, sigma=0.0):
        self.sigma = sigma

    def compute_mu_t(self, x0, x1, t):
        t = t.reshape(-1, 1)
        return t * x1 + (1 - t) * x0

    def sample_xt(self, x0, x1, t, epsilon):
        mu_t = self.compute_mu_t(x0, x1, t)
        return mu_t + self.sigma * epsilon

    def compute_conditional_flow(self, x0, x1, t, xt):
        return x1 - x0

    def sample_location_and_conditional_flow(self, x0, x1):
        t = torch.rand(x0.shape[0]).type_as(x0)
        eps = torch.randn_like(x0)
        xt = self.sample_xt(x0, x1, t, eps)
        ut = self.compute_conditional_flow(x0, x1, t, xt)
        return t, xt, ut


@torch.no_grad()
def euler_sample(model, x0, n_steps=50):
    x = x0.clone()
    dt = 1.0 / n_steps
    for i in range(n_steps):
        t = torch.full((x.shape[0], 1), i * dt)
        x = x + dt * model(torch.cat([x, t], dim=-1))
    return x


@torch.no_grad()
def sample_quality(model, n=1000):
    gen = euler_sample(model, sample_8gaussians(n))
    ref = sample_moons(n)
    d = torch.cdist(gen, ref)
    return d.min(dim=1).values.mean().item(), d.min(dim=0).values.mean().item()


sigma = 0.1
dim = 2
batch_size = 256
n_iters = 800
model = MLP(dim=dim, time_varying=True)
optimizer = torch.optim.Adam(model.parameters())
FM = ConditionalFlowMatcher(sigma=sigma)

g2m, m2g = sample_quality(model)
print(f"before training: gen->moons {g2m:.3f}  moons->gen {m2g:.3f}")

start = time.time()
running = 0.0
for k in range(n_iters):
    optimizer.zero_grad()
    x0 = sample_8gaussians(batch_size)
    x1 = sample_moons(batch_size)
    t, xt, ut = FM.sample_location_and_conditional_flow(x0, x1)
    vt = model(torch.cat([xt, t[:, None]], dim=-1))
    loss = torch.mean((vt - ut) ** 2)
    loss.backward()
    optimizer.step()
    running += loss.item()
    if (k + 1) % 200 == 0:
        g2m, m2g = sample_quality(model)
        print(f"{k + 1}: loss {running / 200:0.3f}  gen->moons {g2m:.3f}  "
              f"moons->gen {m2g:.3f}  time {time.time() - start:0.2f}")
        running = 0.0
