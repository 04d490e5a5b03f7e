"""Speech enhancement: a small 1-D conv denoiser trained with a learned perceptual audio metric.

The metric (a stand-in for a pip-installed perceptual metric such as CDPAM) is a frozen conv
feature network; its forward takes numpy waveforms, as the package's API does, and returns the
feature distance between the reference and the degraded signal.

Synthetic data: clean "speech" is a sum of a few harmonic partials with a slow envelope,
noisy = clean + white noise at 0-10 dB SNR.
"""
import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)
np.random.seed(0)

SEG = 1024
SR = 8000


class NoisySpeech(Dataset):
    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        t = torch.arange(SEG) / SR
        self.clean, self.noisy = [], []
        for _ in range(n):
            f0 = 100 + 150 * torch.rand(1, generator=g)
            sig = torch.zeros(SEG)
            for k in range(1, 5):
                amp = torch.rand(1, generator=g) / k
                sig += amp * torch.sin(2 * math.pi * k * f0 * t + 6.28 * torch.rand(1, generator=g))
            env = 0.5 + 0.5 * torch.sin(2 * math.pi * (1 + 3 * torch.rand(1, generator=g)) * t)
            sig = 0.5 * sig * env / sig.abs().max()
            snr_db = 10 * torch.rand(1, generator=g)
            noise = torch.randn(SEG, generator=g)
            noise = noise * sig.pow(2).mean().sqrt() / (10 ** (snr_db / 20))
            self.clean.append(sig.unsqueeze(0))
            self.noisy.append((sig + noise).unsqueeze(0))

    def __len__(self):
        return len(self.clean)

    def __getitem__(self, i):
        return self.noisy[i], self.clean[i]


class PerceptualMetric(nn.Module):
    """Learned deep feature distance between two waveforms (numpy in, scalar tensor out)."""

    def __init__(self):
        super().__init__()
        g = torch.Generator().manual_seed(1234)
        chans = [1, 16, 32, 32]
        self.layers = nn.ModuleList()
        for cin, cout in zip(chans[:-1], chans[1:]):
            conv = nn.Conv1d(cin, cout, 15, stride=2, padding=7)
            with torch.no_grad():
                conv.weight.copy_(torch.randn(conv.weight.shape, generator=g) / math.sqrt(cin * 15))
                conv.bias.zero_()
            self.layers.append(conv)
        self.eval()

    def features(self, x):
        feats = [x]
        for conv in self.layers:
            x = F.leaky_relu(conv(x), 0.2)
            feats.append(x)
        return feats

    def forward(self, wav_ref, wav_out):
        wav_ref = torch.as_tensor(wav_ref, dtype=torch.float32)
        wav_out = torch.as_tensor(wav_out, dtype=torch.float32)
        dist = 0.0
        for fr, fo in zip(self.features(wav_ref), self.features(wav_out)):
            dist = dist + (fr - fo).abs().mean()
        return dist


class Denoiser(nn.Module):
    def __init__(self, ch=24):
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv1d(1, ch, 9, padding=4), nn.ReLU(),
            nn.Conv1d(ch, ch, 9, padding=4), nn.ReLU(),
            nn.Conv1d(ch, ch, 9, padding=4), nn.ReLU(),
            nn.Conv1d(ch, 1, 9, padding=4),
        )

    def forward(self, noisy):
        return noisy - self.net(noisy)


def snr_db(est, clean):
    return (10 * torch.log10(clean.pow(2).sum(-1) / (est - clean).pow(2).sum(-1))).mean().item()


def main():
    train_loader = DataLoader(NoisySpeech(800, seed=0), batch_size=16, shuffle=True)
    val_set = NoisySpeech(128, seed=1)
    val_noisy = torch.stack(val_set.noisy)
    val_clean = torch.stack(val_set.clean)

    model = Denoiser()
    loss_fn = PerceptualMetric()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    print(f"input SNR {snr_db(val_noisy, val_clean):.2f} dB")

    for epoch in range(2):
        model.train()
        total, n = 0.0, 0
        for i, (noisy, clean) in enumerate(train_loader):
            enhanced = model(noisy)
            loss = loss_fn.forward(clean.cpu().numpy(), enhanced.detach().cpu().numpy())
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total += loss.item()
            n += 1
            if i % 20 == 0:
                print(f"epoch {epoch} step {i}: perceptual loss {loss.item():.4f}")
        model.eval()
        with torch.no_grad():
            val_out = model(val_noisy)
            val_loss = loss_fn(val_clean.numpy(), val_out.numpy()).item()
        print(f"epoch {epoch}: train loss {total / n:.4f}  val loss {val_loss:.4f}  "
              f"val SNR {snr_db(val_out, val_clean):.2f} dB")


if __name__ == "__main__":
    main()
