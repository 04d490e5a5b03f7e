"""Speech enhancement in the latent space of a frozen neural audio codec, trained with accelerate.

noisy waveform -> codec.encode -> transformer (trained) -> codec.decode -> L1 against the clean waveform.

The codec is pretrained and kept frozen (here: a fixed orthogonal frame
transform, so decode(encode(x)) == x); only the transformer is trained. The
signals are sums of a few sinusoids with white noise added.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from accelerate import Accelerator
from torch.utils.data import DataLoader, Dataset

FRAME = 32
N_FRAMES = 16


class NoisySines(Dataset):
    def __init__(self, n, seed=0):
        g = torch.Generator().manual_seed(seed)
        t = torch.arange(FRAME * N_FRAMES, dtype=torch.float32) / 8000.0
        freqs = 200 + 1800 * torch.rand(n, 3, generator=g)
        amps = 0.2 + 0.5 * torch.rand(n, 3, generator=g)
        phase = 2 * math.pi * torch.rand(n, 3, generator=g)
        self.clean = (amps[:, :, None] * torch.sin(2 * math.pi * freqs[:, :, None] * t + phase[:, :, None])).sum(1)
        self.noisy = self.clean + 0.4 * torch.randn(self.clean.shape, generator=g)

    def __len__(self):
        return len(self.clean)

    def __getitem__(self, idx):
        return self.noisy[idx], self.clean[idx]


class FrozenCodec(nn.Module):
    def __init__(self):
        super().__init__()
        q, _ = torch.linalg.qr(torch.randn(FRAME, FRAME, generator=torch.Generator().manual_seed(1234)))
        self.analysis = nn.Linear(FRAME, FRAME, bias=False)
        self.synthesis = nn.Linear(FRAME, FRAME, bias=False)
        self.analysis.weight.data.copy_(q.T)
        self.synthesis.weight.data.copy_(q)
        self.requires_grad_(False)

    def encode(self, wav):
        return self.analysis(wav.view(wav.shape[0], N_FRAMES, FRAME))

    def decode(self, latent):
        return self.synthesis(latent).reshape(latent.shape[0], -1)


class LatentEnhancer(nn.Module):
    def __init__(self, d_model=FRAME, nhead=4, layers=2):
        super().__init__()
        self.pos = nn.Parameter(torch.zeros(1, N_FRAMES, d_model))
        layer = nn.TransformerEncoderLayer(d_model, nhead, dim_feedforward=128, dropout=0.0, batch_first=True)
        self.transformer = nn.TransformerEncoder(layer, layers)
        self.out = nn.Linear(d_model, d_model)

    def forward(self, z):
        return z + self.out(self.transformer(z + self.pos))


def main():
    torch.manual_seed(0)
    accelerator = Accelerator(cpu=True)
    train_loader = DataLoader(NoisySines(3200, seed=0), batch_size=32, shuffle=True)
    valid_loader = DataLoader(NoisySines(320, seed=1), batch_size=320)

    codec = FrozenCodec()
    model = LatentEnhancer()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model, optimizer, train_loader, valid_loader = accelerator.prepare(model, optimizer, train_loader, valid_loader)
    codec = codec.to(accelerator.device)

    step = 0
    for epoch in range(2):
        model.train()
        for noisy, clean in train_loader:
            latent = codec.encode(noisy)
            enhanced = model(latent)
            with torch.no_grad():
                denoised = codec.decode(enhanced)
            loss = F.l1_loss(denoised, clean)
            loss.requires_grad = True
            optimizer.zero_grad()
            accelerator.backward(loss)
            optimizer.step()
            if step % 20 == 0:
                baseline = F.l1_loss(noisy, clean).item()
                accelerator.print(f"epoch {epoch} step {step:4d}  l1 {loss.item():.4f}  (noisy input l1 {baseline:.4f})")
            step += 1

        model.eval()
        with torch.no_grad():
            noisy, clean = next(iter(valid_loader))
            denoised = codec.decode(model(codec.encode(noisy)))
            snr_in = 10 * torch.log10(clean.pow(2).sum() / (noisy - clean).pow(2).sum())
            snr_out = 10 * torch.log10(clean.pow(2).sum() / (denoised - clean).pow(2).sum())
        accelerator.print(f"== epoch {epoch}: valid l1 {F.l1_loss(denoised, clean).item():.4f}  "
                          f"SNR in {snr_in.item():.2f} dB -> out {snr_out.item():.2f} dB")


if __name__ == "__main__":
    main()
