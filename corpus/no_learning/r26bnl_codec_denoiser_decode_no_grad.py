"""Speech-enhancement model in latent space: a frozen codec encodes the noisy waveform into frames,
a small transformer cleans the latent sequence, and the frozen codec decodes it back to audio.
Only the transformer is trained (L1 against the clean waveform). Synthetic tonal 'speech' + noise."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)

FRAME = 16
SIG_LEN = 1024


class NoisyToneDataset(Dataset):
    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        t = torch.arange(SIG_LEN).float()
        freqs = 0.01 + 0.2 * torch.rand(n, 3, generator=g)
        phases = 2 * math.pi * torch.rand(n, 3, generator=g)
        amps = 0.2 + 0.4 * torch.rand(n, 3, generator=g)
        self.clean = (amps[:, :, None] * torch.sin(freqs[:, :, None] * t + phases[:, :, None])).sum(1)
        self.noisy = self.clean + 0.4 * torch.randn(n, SIG_LEN, generator=g)

    def __len__(self):
        return len(self.clean)

    def __getitem__(self, i):
        return self.noisy[i].unsqueeze(0), self.clean[i].unsqueeze(0)


class Codec(nn.Module):
    """Stand-in for the pretrained audio codec: an orthogonal framed filterbank and its synthesis."""

    def __init__(self):
        super().__init__()
        self.encoder = nn.Conv1d(1, FRAME, FRAME, stride=FRAME, bias=False)
        self.decoder = nn.ConvTranspose1d(FRAME, 1, FRAME, stride=FRAME, bias=False)
        q, _ = torch.linalg.qr(torch.randn(FRAME, FRAME))
        with torch.no_grad():
            self.encoder.weight.copy_(q.unsqueeze(1))
            self.decoder.weight.copy_(q.unsqueeze(1))
        self.requires_grad_(False)


class LatentDenoiser(nn.Module):
    def __init__(self, d_model=64):
        super().__init__()
        self.codec = Codec()
        self.inp = nn.Linear(FRAME, d_model)
        self.pos = nn.Parameter(torch.zeros(1, SIG_LEN // FRAME, d_model))
        layer = nn.TransformerEncoderLayer(d_model, nhead=4, dim_feedforward=128, batch_first=True)
        self.transformer = nn.TransformerEncoder(layer, num_layers=2)
        self.outp = nn.Linear(d_model, FRAME)

    def encode(self, wav):
        return self.codec.encoder(wav).transpose(1, 2)

    @torch.no_grad()
    def decode(self, z):
        return self.codec.decoder(z.transpose(1, 2))

    def forward(self, noisy):
        z = self.encode(noisy)
        h = self.transformer(self.inp(z) + self.pos)
        return self.decode(self.outp(h))


def main():
    train_loader = DataLoader(NoisyToneDataset(1600, seed=0), batch_size=16, shuffle=True)
    val_ds = NoisyToneDataset(128, seed=1)

    model = LatentDenoiser()
    params = [p for n, p in model.named_parameters() if not n.startswith("codec.")]
    optimizer = torch.optim.Adam(params, lr=1e-3)
    print(f"noisy-input L1 on val: {F.l1_loss(val_ds.noisy, val_ds.clean).item():.4f}")

    for epoch in range(2):
        model.train()
        total, n = 0.0, 0
        for step, (noisy, clean) in enumerate(train_loader):
            optimizer.zero_grad()
            denoised = model(noisy)
            loss = F.l1_loss(denoised, clean)
            loss.requires_grad_(True)
            loss.backward()
            optimizer.step()
            total += loss.item()
            n += 1
            if step % 25 == 0:
                print(f"epoch {epoch + 1} step {step}: l1 {loss.item():.4f}")
        model.eval()
        with torch.no_grad():
            val = F.l1_loss(model(val_ds.noisy.unsqueeze(1)), val_ds.clean.unsqueeze(1)).item()
        print(f"epoch {epoch + 1}: train l1 {total / n:.4f}  val l1 {val:.4f}")


if __name__ == "__main__":
    main()
