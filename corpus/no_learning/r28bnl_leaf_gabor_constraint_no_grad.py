"""Learnable audio frontend (LEAF-style Gabor filterbank), fitted to the log filterbank energies
of a reference analyser on generated audio (tone mixtures, chirps and noise).

Frontend: complex Gabor filters with learnable centre frequency / bandwidth (clipped by a
constraint), squared modulus, learnable Gaussian lowpass pooling, log compression.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)

SAMPLE_RATE = 16000
N_SAMPLES = 2000
N_FILTERS = 16
KERNEL_SIZE = 129
STRIDE = 80


def gabor_filters(kernel, size):
    t = torch.arange(-(size // 2), (size + 1) // 2, dtype=kernel.dtype)
    denominator = 1.0 / (math.sqrt(2 * math.pi) * kernel[:, 1])
    gaussian = torch.exp(torch.outer(1.0 / (2.0 * kernel[:, 1] ** 2), -t ** 2))
    sinusoid = torch.exp(1j * torch.outer(kernel[:, 0], t))
    return denominator.unsqueeze(1) * sinusoid * gaussian


def mel_init(n_filters, size, sample_rate, min_freq=200.0, max_freq=4000.0):
    mels = torch.linspace(2595 * math.log10(1 + min_freq / 700), 2595 * math.log10(1 + max_freq / 700), n_filters)
    hz = 700 * (10 ** (mels / 2595) - 1)
    mu = 2 * math.pi * hz / sample_rate
    fwhm = torch.full((n_filters,), 1.5 * size / 8)
    sigma = fwhm * math.sqrt(2 * math.log(2)) / math.pi
    return torch.stack([mu, sigma], dim=1)


class GaborConstraint(nn.Module):
    def __init__(self, kernel_size):
        super().__init__()
        self._kernel_size = kernel_size

    def forward(self, kernel):
        with torch.no_grad():
            mu_lower = 0.
            mu_upper = math.pi
            sigma_lower = 4 * math.sqrt(2 * math.log(2)) / math.pi
            sigma_upper = self._kernel_size * math.sqrt(2 * math.log(2)) / math.pi
            clipped_mu = torch.clamp(kernel[:, 0], mu_lower, mu_upper)
            clipped_sigma = torch.clamp(kernel[:, 1], sigma_lower, sigma_upper)
            return torch.stack([clipped_mu, clipped_sigma], dim=1)


class GaborConv1D(nn.Module):
    def __init__(self, n_filters, kernel_size, init):
        super().__init__()
        self._kernel_size = kernel_size
        self._kernel = nn.Parameter(init.clone())
        self._constraint = GaborConstraint(kernel_size)

    def forward(self, x):
        kernel = self._constraint(self._kernel)
        filters = gabor_filters(kernel, self._kernel_size)
        real_filters = torch.cat([filters.real, filters.imag], dim=0).unsqueeze(1)
        return F.conv1d(x, real_filters, padding=self._kernel_size // 2)


class GaussianLowpass(nn.Module):
    def __init__(self, n_filters, kernel_size, stride):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride
        self.width = nn.Parameter(torch.full((n_filters,), 0.4))

    def forward(self, x):
        width = self.width.clamp(2.0 / self.kernel_size, 0.5)
        t = torch.arange(self.kernel_size, dtype=x.dtype)
        t = (t - 0.5 * (self.kernel_size - 1)) / (0.5 * (self.kernel_size - 1))
        windows = torch.exp(-0.5 * (t.unsqueeze(0) / width.unsqueeze(1)) ** 2)
        windows = windows / windows.sum(dim=1, keepdim=True)
        return F.conv1d(x, windows.unsqueeze(1), stride=self.stride, groups=x.size(1),
                        padding=self.kernel_size // 2)


class Leaf(nn.Module):
    def __init__(self, n_filters=N_FILTERS, init=None):
        super().__init__()
        init = mel_init(n_filters, KERNEL_SIZE, SAMPLE_RATE) if init is None else init
        self._complex_conv = GaborConv1D(n_filters, KERNEL_SIZE, init)
        self._pooling = GaussianLowpass(n_filters, 2 * STRIDE + 1, STRIDE)
        self.n_filters = n_filters

    def forward(self, x):
        out = self._complex_conv(x)
        out = out[:, :self.n_filters] ** 2 + out[:, self.n_filters:] ** 2
        out = self._pooling(out)
        return torch.log(out + 1e-5)


class ToneMixtures(Dataset):
    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        t = torch.arange(N_SAMPLES) / SAMPLE_RATE
        self.audio = torch.zeros(n, 1, N_SAMPLES)
        for i in range(n):
            n_tones = int(torch.randint(1, 4, (1,), generator=g))
            for _ in range(n_tones):
                f0 = 150 + 4500 * torch.rand(1, generator=g)
                slope = 2000 * (torch.rand(1, generator=g) - 0.5)
                amp = 0.2 + 0.8 * torch.rand(1, generator=g)
                self.audio[i, 0] += amp * torch.sin(2 * math.pi * (f0 * t + 0.5 * slope * t ** 2))
            self.audio[i, 0] += 0.05 * torch.randn(N_SAMPLES, generator=g)

    def __len__(self):
        return len(self.audio)

    def __getitem__(self, i):
        return self.audio[i]


def main():
    reference_init = mel_init(N_FILTERS, KERNEL_SIZE, SAMPLE_RATE, min_freq=400.0, max_freq=6000.0)
    reference_init[:, 1] *= 0.6
    reference = Leaf(init=reference_init).eval()

    train_loader = DataLoader(ToneMixtures(480, seed=0), batch_size=16, shuffle=True)
    val_audio = ToneMixtures(96, seed=1).audio
    with torch.no_grad():
        val_target = reference(val_audio)

    model = Leaf()
    optimizer = torch.optim.Adam(model.parameters(), lr=0.005)

    for epoch in range(4):
        model.train()
        total, n = 0.0, 0
        for audio in train_loader:
            with torch.no_grad():
                target = reference(audio)
            loss = F.mse_loss(model(audio), target)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total += loss.item()
            n += 1
        model.eval()
        with torch.no_grad():
            val_loss = F.mse_loss(model(val_audio), val_target).item()
        centre_hz = model._complex_conv._kernel[:, 0] * SAMPLE_RATE / (2 * math.pi)
        print(f"epoch {epoch}: train loss {total / n:.4f}  val loss {val_loss:.4f}  "
              f"centre freqs {centre_hz[0]:.0f}..{centre_hz[-1]:.0f} Hz")


if __name__ == "__main__":
    main()
