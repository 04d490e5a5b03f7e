"""SimCLR pre-training on short environmental-sound clips (8 kHz mono). Two random views of
every clip (random crop, gain, background noise) go through a small log-mel CNN encoder and a
projection head; the contrastive objective is the NT-Xent loss from pl_bolts.
"""
import logging
import math
import warnings

import lightning as L
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

warnings.filterwarnings("ignore")
logging.getLogger("lightning").setLevel(logging.ERROR)
logging.getLogger("lightning.pytorch").setLevel(logging.ERROR)

SR = 8000
CLIP = 8000
CROP = 4096
N_FFT = 256
HOP = 128
N_MELS = 32


def mel_filterbank(n_mels=N_MELS, n_fft=N_FFT, sr=SR):
    def hz_to_mel(f):
        return 2595.0 * math.log10(1.0 + f / 700.0)

    mels = torch.linspace(hz_to_mel(0.0), hz_to_mel(sr / 2), n_mels + 2)
    hz = 700.0 * (10 ** (mels / 2595.0) - 1.0)
    bins = torch.linspace(0, sr / 2, n_fft // 2 + 1)
    fb = torch.zeros(n_mels, n_fft // 2 + 1)
    for m in range(n_mels):
        lo, c, hi = hz[m], hz[m + 1], hz[m + 2]
        up = (bins - lo) / (c - lo)
        down = (hi - bins) / (hi - c)
        fb[m] = torch.clamp(torch.minimum(up, down), min=0.0)
    return fb


class SoundClips(Dataset):
    """Synthetic clips of 8 sound classes: harmonic tones, chirps, clicks and noise bursts."""

    def __init__(self, n, seed=0):
        g = torch.Generator().manual_seed(seed)
        t = torch.arange(CLIP) / SR
        self.clips = []
        for _ in range(n):
            kind = int(torch.randint(0, 8, (1,), generator=g))
            f0 = 150.0 + 600.0 * float(torch.rand(1, generator=g))
            if kind < 3:
                wave = sum(torch.sin(2 * math.pi * f0 * (k + 1) * t) / (k + 1) for k in range(kind + 2))
            elif kind < 5:
                rate = 400.0 * (kind - 2)
                wave = torch.sin(2 * math.pi * (f0 + rate * t) * t)
            elif kind == 5:
                wave = torch.zeros(CLIP)
                period = int(SR / (4 + 8 * float(torch.rand(1, generator=g))))
                wave[::period] = 1.0
                wave = torch.conv1d(wave.view(1, 1, -1), torch.hann_window(31).view(1, 1, -1), padding=15).view(-1)
            else:
                env = (torch.sin(2 * math.pi * (2 + kind) * t) > 0).float()
                wave = env * torch.randn(CLIP, generator=g)
            wave = wave / wave.abs().max().clamp(min=1e-3)
            self.clips.append(0.5 * wave + 0.01 * torch.randn(CLIP, generator=g))
        self.fb = mel_filterbank()
        self.window = torch.hann_window(N_FFT)

    def __len__(self):
        return len(self.clips)

    def view(self, wave):
        start = int(torch.randint(0, CLIP - CROP + 1, (1,)))
        x = wave[start:start + CROP] * (0.3 + 1.4 * torch.rand(1))
        x = x + 0.02 * torch.rand(1) * torch.randn(CROP)
        spec = torch.stft(x, N_FFT, HOP, window=self.window, return_complex=True).abs() ** 2
        return torch.log(self.fb @ spec + 1e-6).unsqueeze(0)

    def __getitem__(self, i):
        wave = self.clips[i]
        return self.view(wave), self.view(wave)


class Encoder(nn.Module):
    def __init__(self, out_dim=256):
        super().__init__()
        chans = [1, 16, 32, 64]
        layers = []
        for cin, cout in zip(chans[:-1], chans[1:]):
            layers += [nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU(), nn.MaxPool2d(2)]
        self.features = nn.Sequential(*layers)
        self.fc = nn.Linear(64, out_dim)

    def forward(self, x):
        h = self.features(x)
        return F.relu(self.fc(h.mean(dim=(2, 3))))


class Projection(nn.Module):
    def __init__(self, input_dim=256, hidden_dim=512, output_dim=128):
        super().__init__()
        self.model = nn.Sequential(
            nn.Linear(input_dim, hidden_dim, bias=False),
            nn.BatchNorm1d(hidden_dim),
            nn.ReLU(),
            nn.Linear(hidden_dim, output_dim, bias=True),
        )

    def forward(self, x):
        return self.model(x)


def nt_xent_loss(out_1, out_2, temperature):
    out = torch.cat([out_1, out_2], dim=0)
    n_samples = len(out)
    cov = torch.mm(out, out.t().contiguous())
    sim = torch.exp(cov / temperature)
    mask = ~torch.eye(n_samples, device=sim.device).bool()
    neg = sim.masked_select(mask).view(n_samples, -1).sum(dim=-1)
    pos = torch.exp(torch.sum(out_1 * out_2, dim=-1) / temperature)
    pos = torch.cat([pos, pos], dim=0)
    loss = -torch.log(pos / neg).mean()
    return loss


class AudioSimCLR(L.LightningModule):
    def __init__(self, lr=1e-3, temperature=0.5, weight_decay=1e-6):
        super().__init__()
        self.save_hyperparameters()
        self.encoder = Encoder()
        self.projection = Projection()

    def forward(self, x):
        h = self.encoder(x)
        return h, self.projection(h)

    def training_step(self, batch, batch_idx):
        x1, x2 = batch
        _, z1 = self(x1)
        _, z2 = self(x2)
        loss = nt_xent_loss(z1, z2, self.hparams.temperature)
        if self.global_step % 10 == 0:
            print(f"epoch {self.current_epoch} step {self.global_step} train_ntx_loss {loss.item():.4f}")
        return loss

    def validation_step(self, batch, batch_idx):
        x1, x2 = batch
        _, z1 = self(x1)
        _, z2 = self(x2)
        loss = nt_xent_loss(z1, z2, self.hparams.temperature)
        self.log("val_loss", loss, prog_bar=False)

    def on_validation_epoch_end(self):
        if not self.trainer.sanity_checking:
            print(f"== epoch {self.current_epoch} val_loss {self.trainer.callback_metrics['val_loss'].item():.4f}")

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=self.hparams.lr, weight_decay=self.hparams.weight_decay)


def main():
    L.seed_everything(0, verbose=False)
    train_loader = DataLoader(SoundClips(768, seed=1), batch_size=64, shuffle=True, drop_last=True)
    val_loader = DataLoader(SoundClips(128, seed=2), batch_size=64)
    model = AudioSimCLR()
    trainer = L.Trainer(max_epochs=5, accelerator="cpu", logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False)
    trainer.fit(model, train_loader, val_loader)


if __name__ == "__main__":
    main()
