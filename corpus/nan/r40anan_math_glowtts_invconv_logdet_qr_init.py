"""Glow-TTS style flow decoder: maps mel-spectrogram frames to a standard normal through
ActNorm -> invertible 1x1 conv -> affine coupling blocks, trained by maximum likelihood.
Synthetic mel frames stand in for the LJSpeech features."""
import math
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import Dataset, DataLoader

torch.manual_seed(0)
np.random.seed(0)

N_MELS = 16
N_FRAMES = 32
N_UTTS = 512
N_FLOWS = 4
HIDDEN = 64
BATCH = 32
EPOCHS = 6
LR = 1e-3


def make_mels(n, c, t):
    rng = np.random.default_rng(0)
    f = np.linspace(0, 1, c)[:, None]
    out = np.zeros((n, c, t), dtype=np.float32)
    for i in range(n):
        pitch = rng.uniform(0.1, 0.6)
        env = np.convolve(rng.random(t + 4), np.ones(5) / 5, mode="valid")[:t]
        formant = np.exp(-((f - pitch) ** 2) / 0.02) + 0.5 * np.exp(-((f - 2 * pitch) ** 2) / 0.03)
        spec = np.log(1e-2 + formant * env[None, :] * 4.0)
        out[i] = spec + 0.1 * rng.standard_normal((c, t))
    return out


class MelDataset(Dataset):
    def __init__(self, mels):
        self.mels = torch.from_numpy(mels)

    def __len__(self):
        return len(self.mels)

    def __getitem__(self, i):
        return self.mels[i]


class ActNorm(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.logs = nn.Parameter(torch.zeros(1, channels, 1))
        self.bias = nn.Parameter(torch.zeros(1, channels, 1))
        self.initialized = False

    def forward(self, x):
        if not self.initialized:
            with torch.no_grad():
                m = x.mean(dim=(0, 2), keepdim=True)
                s = x.std(dim=(0, 2), keepdim=True)
                self.bias.data.copy_(-m / s)
                self.logs.data.copy_(-torch.log(s))
            self.initialized = True
        z = x * torch.exp(self.logs) + self.bias
        logdet = torch.sum(self.logs) * x.size(2)
        return z, logdet


class InvConv(nn.Module):
    def __init__(self, channels):
        super().__init__()
        w_init = torch.linalg.qr(torch.randn(channels, channels))[0]
        self.weight = nn.Parameter(w_init)

    def forward(self, x):
        z = F.conv1d(x, self.weight.unsqueeze(-1))
        logdet = torch.logdet(self.weight) * x.size(2)
        return z, logdet


class CouplingBlock(nn.Module):
    def __init__(self, channels, hidden):
        super().__init__()
        self.start = nn.Conv1d(channels // 2, hidden, 3, padding=1)
        self.mid = nn.Conv1d(hidden, hidden, 3, padding=1)
        self.end = nn.Conv1d(hidden, channels, 1)
        self.end.weight.data.zero_()
        self.end.bias.data.zero_()

    def forward(self, x):
        x_0, x_1 = x.chunk(2, dim=1)
        h = F.relu(self.start(x_0))
        h = F.relu(self.mid(h))
        out = self.end(h)
        m, logs = out.chunk(2, dim=1)
        z_1 = m + torch.exp(logs) * x_1
        logdet = torch.sum(logs, dim=(1, 2))
        return torch.cat([x_0, z_1], 1), logdet


class FlowDecoder(nn.Module):
    def __init__(self, channels, hidden, n_flows):
        super().__init__()
        self.flows = nn.ModuleList()
        for _ in range(n_flows):
            self.flows.append(ActNorm(channels))
            self.flows.append(InvConv(channels))
            self.flows.append(CouplingBlock(channels, hidden))

    def forward(self, x):
        logdet_tot = torch.zeros(x.size(0))
        for flow in self.flows:
            x, logdet = flow(x)
            logdet_tot = logdet_tot + logdet
        return x, logdet_tot


def mle_loss(z, logdet):
    n_elem = z.size(1) * z.size(2)
    nll = 0.5 * torch.sum(z ** 2, dim=(1, 2)) + 0.5 * math.log(2 * math.pi) * n_elem - logdet
    return (nll / n_elem).mean()


mels = make_mels(N_UTTS, N_MELS, N_FRAMES)
train_ds = MelDataset(mels[:448])
val_ds = MelDataset(mels[448:])
train_loader = DataLoader(train_ds, batch_size=BATCH, shuffle=True)
val_loader = DataLoader(val_ds, batch_size=BATCH)

model = FlowDecoder(N_MELS, HIDDEN, N_FLOWS)
optimizer = torch.optim.Adam(model.parameters(), lr=LR)

step = 0
for epoch in range(EPOCHS):
    model.train()
    total = 0.0
    for mel in train_loader:
        z, logdet = model(mel)
        loss = mle_loss(z, logdet)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        total += loss.item()
        step += 1
        if step % 20 == 0:
            print(f"step {step} loss {loss.item():.4f}")
    model.eval()
    val_total = 0.0
    with torch.no_grad():
        for mel in val_loader:
            z, logdet = model(mel)
            val_total += mle_loss(z, logdet).item()
    print(f"epoch {epoch + 1} train nll {total / len(train_loader):.4f} "
          f"val nll {val_total / len(val_loader):.4f}")
