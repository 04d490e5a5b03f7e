"""Glow (Kingma & Dhariwal 2018) density model of 8x8 grayscale sensor-noise patches: squeeze,
then K flow steps of ActNorm -> invertible 1x1 conv -> affine coupling, a second level after a
split, NLL reported in bits per dimension.
"""
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import Dataset, DataLoader

torch.manual_seed(0)

N_BITS = 5
N_BINS = 2 ** N_BITS


class NoisePatches(Dataset):
    """Smooth blobs plus structured sensor noise, quantised to 5 bits."""

    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        yy, xx = torch.meshgrid(torch.linspace(-1, 1, 8), torch.linspace(-1, 1, 8), indexing='ij')
        cx = torch.rand(n, 1, 1, generator=g) * 1.6 - 0.8
        cy = torch.rand(n, 1, 1, generator=g) * 1.6 - 0.8
        width = 0.2 + 0.5 * torch.rand(n, 1, 1, generator=g)
        blob = torch.exp(-((xx - cx) ** 2 + (yy - cy) ** 2) / width)
        stripes = 0.15 * torch.sin(6 * xx + 6.28 * torch.rand(n, 1, 1, generator=g))
        img = 0.7 * blob + stripes + 0.05 * torch.randn(n, 8, 8, generator=g) + 0.15
        img = img.clamp(0, 1 - 1e-6)
        self.images = torch.floor(img * N_BINS).unsqueeze(1)

    def __len__(self):
        return len(self.images)

    def __getitem__(self, i):
        return self.images[i]


def preprocess(x):
    x = x / N_BINS - 0.5
    return x + torch.rand_like(x) / N_BINS


def squeeze2d(x):
    b, c, h, w = x.shape
    x = x.view(b, c, h // 2, 2, w // 2, 2).permute(0, 1, 3, 5, 2, 4)
    return x.reshape(b, c * 4, h // 2, w // 2)


class ActNorm(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.loc = nn.Parameter(torch.zeros(1, channels, 1, 1))
        self.logs = nn.Parameter(torch.zeros(1, channels, 1, 1))
        self.register_buffer('initialized', torch.tensor(0, dtype=torch.uint8))

    def forward(self, x):
        if self.initialized.item() == 0:
            with torch.no_grad():
                self.loc.data.copy_(-x.mean(dim=(0, 2, 3), keepdim=True))
                self.logs.data.copy_(torch.log(1 / (x.std(dim=(0, 2, 3), keepdim=True) + 1e-6)))
                self.initialized.fill_(1)
        h, w = x.shape[2:]
        return (x + self.loc) * torch.exp(self.logs), h * w * self.logs.sum()


class InvConv2d(nn.Module):
    def __init__(self, channels):
        super().__init__()
        weight = torch.linalg.qr(torch.randn(channels, channels))[0]
        self.weight = nn.Parameter(weight)

    def forward(self, x):
        h, w = x.shape[2:]
        out = F.conv2d(x, self.weight.unsqueeze(2).unsqueeze(3))
        logdet = h * w * torch.slogdet(self.weight)[1]
        return out, logdet


class ZeroConv2d(nn.Module):
    def __init__(self, in_ch, out_ch):
        super().__init__()
        self.conv = nn.Conv2d(in_ch, out_ch, 3, padding=1)
        self.conv.weight.data.zero_()
        self.conv.bias.data.zero_()
        self.scale = nn.Parameter(torch.zeros(1, out_ch, 1, 1))

    def forward(self, x):
        return self.conv(x) * torch.exp(self.scale * 3)


class AffineCoupling(nn.Module):
    def __init__(self, channels, hidden=128):
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv2d(channels // 2, hidden, 3, padding=1), nn.ReLU(),
            nn.Conv2d(hidden, hidden, 1), nn.ReLU(),
            ZeroConv2d(hidden, channels))

    def forward(self, x):
        in_a, in_b = x.chunk(2, 1)
        log_s, t = self.net(in_a).chunk(2, 1)
        out_b = in_b * torch.exp(log_s) + t
        logdet = log_s.flatten(1).sum(1)
        return torch.cat([in_a, out_b], 1), logdet


class FlowStep(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.actnorm = ActNorm(channels)
        self.invconv = InvConv2d(channels)
        self.coupling = AffineCoupling(channels)

    def forward(self, x):
        x, ld0 = self.actnorm(x)
        x, ld1 = self.invconv(x)
        x, ld2 = self.coupling(x)
        return x, ld0 + ld1 + ld2


def gaussian_log_p(x, mean, log_sd):
    return -0.5 * math.log(2 * math.pi) - log_sd - 0.5 * (x - mean) ** 2 / torch.exp(2 * log_sd)


class Glow(nn.Module):
    def __init__(self, n_flow=6):
        super().__init__()
        self.level1 = nn.ModuleList([FlowStep(4) for _ in range(n_flow)])
        self.prior1 = ZeroConv2d(2, 4)
        self.level2 = nn.ModuleList([FlowStep(8) for _ in range(n_flow)])
        self.prior2 = nn.Parameter(torch.zeros(1, 16, 2, 2))

    def forward(self, x):
        logdet = 0
        out = squeeze2d(x)
        for step in self.level1:
            out, ld = step(out)
            logdet = logdet + ld
        out, z1 = out.chunk(2, 1)
        mean, log_sd = self.prior1(out).chunk(2, 1)
        log_p = gaussian_log_p(z1, mean, log_sd).flatten(1).sum(1)
        out = squeeze2d(out)
        for step in self.level2:
            out, ld = step(out)
            logdet = logdet + ld
        mean, log_sd = self.prior2.expand(out.shape[0], -1, -1, -1).chunk(2, 1)
        log_p = log_p + gaussian_log_p(out, mean, log_sd).flatten(1).sum(1)
        return log_p, logdet


def bits_per_dim(log_p, logdet, n_pixel):
    loss = -math.log(N_BINS) * n_pixel + logdet + log_p
    return (-loss / (math.log(2) * n_pixel)).mean()


def main():
    train_set = NoisePatches(4096, seed=1)
    val_set = NoisePatches(1000, seed=2)
    train_loader = DataLoader(train_set, batch_size=64, shuffle=True, drop_last=True)
    val_loader = DataLoader(val_set, batch_size=500)
    n_pixel = 8 * 8

    model = Glow()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)

    start = time.time()
    step = 0
    for epoch in range(1, 3):
        for images in train_loader:
            x = preprocess(images)
            log_p, logdet = model(x)
            loss = bits_per_dim(log_p, logdet, n_pixel)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            if step % 10 == 0:
                print(f"epoch {epoch} step {step:4d} nll {loss.item():.4f} bpd")
            step += 1
        model.eval()
        with torch.no_grad():
            val = sum(bits_per_dim(*model(preprocess(b)), n_pixel).item() * len(b)
                      for b in val_loader) / len(val_set)
        model.train()
        print(f"epoch {epoch} val nll {val:.4f} bpd ({time.time() - start:.1f}s)")


if __name__ == "__main__":
    main()
