"""A small instant-NGP style NeRF: frequency-encoded positions, an MLP whose forward runs in half
precision for speed (fp32 master weights, fp16 compute, like a tiny-cuda-nn network built with
TCNN_HALF_PRECISION), exponential density activation, volume rendering along camera rays,
photometric MSE against renders of a synthetic scene."""
import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
rng = np.random.default_rng(0)

N_SAMPLES = 32
NEAR, FAR = 2.0, 6.0


def scene_field(x):
    """Ground-truth radiance field: a red sphere and a blue box floating over a grey floor slab."""
    d_sphere = (x - torch.tensor([0.3, 0.0, 0.2])).norm(dim=-1) - 0.6
    q = (x - torch.tensor([-0.5, 0.4, -0.3])).abs() - torch.tensor([0.35, 0.35, 0.35])
    d_box = q.clamp(min=0).norm(dim=-1) + q.max(-1).values.clamp(max=0)
    d_floor = (x[..., 2] + 0.8).abs() - 0.05
    sigma = 2000.0 * (torch.sigmoid(-d_sphere * 30) + torch.sigmoid(-d_box * 30) + torch.sigmoid(-d_floor * 30))
    rgb = (torch.sigmoid(-d_sphere * 30)[..., None] * torch.tensor([0.9, 0.2, 0.2])
           + torch.sigmoid(-d_box * 30)[..., None] * torch.tensor([0.2, 0.3, 0.9])
           + torch.sigmoid(-d_floor * 30)[..., None] * torch.tensor([0.6, 0.6, 0.6]))
    return sigma, rgb.clamp(0, 1)


def camera_rays(n):
    theta = torch.tensor(rng.uniform(0, 2 * math.pi, n), dtype=torch.float32)
    phi = torch.tensor(rng.uniform(0.2, 1.2, n), dtype=torch.float32)
    origin = 4.0 * torch.stack([torch.cos(theta) * torch.cos(phi), torch.sin(theta) * torch.cos(phi), torch.sin(phi)], -1)
    target = torch.tensor(rng.uniform(-1, 1, (n, 3)), dtype=torch.float32) * 0.9
    direction = F.normalize(target - origin, dim=-1)
    return origin, direction


def render(field_fn, origin, direction, stratified=True):
    t = torch.linspace(NEAR, FAR, N_SAMPLES)
    t = t.expand(origin.shape[0], N_SAMPLES)
    if stratified:
        t = t + torch.rand_like(t) * (FAR - NEAR) / N_SAMPLES
    pts = origin[:, None] + direction[:, None] * t[..., None]
    sigma, rgb = field_fn(pts)
    delta = torch.cat([t[:, 1:] - t[:, :-1], torch.full_like(t[:, :1], 1e10)], -1)
    alpha = 1 - torch.exp(-sigma * delta)
    trans = torch.cumprod(torch.cat([torch.ones_like(alpha[:, :1]), 1 - alpha + 1e-10], -1), -1)[:, :-1]
    weights = alpha * trans
    return (weights[..., None] * rgb).sum(1) + (1 - weights.sum(1, keepdim=True))


def make_dataset(n_rays):
    origin, direction = camera_rays(n_rays)
    with torch.no_grad():
        color = render(scene_field, origin, direction, stratified=False)
    return origin, direction, color


class FrequencyEncoding(nn.Module):
    def __init__(self, n_freq=6):
        super().__init__()
        self.register_buffer("freqs", 2.0 ** torch.arange(n_freq) * math.pi)

    def forward(self, x):
        xb = x[..., None] * self.freqs
        return torch.cat([x, torch.sin(xb).flatten(-2), torch.cos(xb).flatten(-2)], -1)


class NGPField(nn.Module):
    def __init__(self, width=64):
        super().__init__()
        self.encoding = FrequencyEncoding()
        self.mlp = nn.Sequential(nn.Linear(39, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU(),
                                 nn.Linear(width, width), nn.ReLU(), nn.Linear(width, 4))

    def forward(self, x):
        with torch.autocast(device_type=x.device.type, dtype=torch.float16):
            h = self.mlp(self.encoding(x))
        sigma = torch.exp(h[..., 0])
        rgb = torch.sigmoid(h[..., 1:])
        return sigma, rgb


def main():
    origin, direction, color = make_dataset(8192)
    val = make_dataset(1024)
    field = NGPField()
    optimizer = torch.optim.Adam(field.parameters(), lr=2e-3, betas=(0.9, 0.99), eps=1e-15)
    batch = 512

    step = 0
    for epoch in range(10):
        perm = torch.randperm(len(origin))
        for i in range(0, len(origin), batch):
            idx = perm[i:i + batch]
            pred = render(field, origin[idx], direction[idx])
            loss = F.mse_loss(pred.float(), color[idx])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            step += 1
            if step % 10 == 0:
                psnr = -10 * math.log10(loss.item())
                print(f"step {step:4d}  loss {loss.item():.5f}  psnr {psnr:.2f}")
        with torch.no_grad():
            vpred = render(field, val[0], val[1], stratified=False)
            vmse = F.mse_loss(vpred.float(), val[2]).item()
        print(f"epoch {epoch}  val mse {vmse:.5f}")


if __name__ == "__main__":
    main()
