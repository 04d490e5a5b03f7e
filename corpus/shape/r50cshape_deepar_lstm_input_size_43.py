"""DeepAR-style probabilistic forecaster for hourly electricity load (pytorch-ts style).

The LSTM sees lagged targets, time features, a series embedding and the log scale at
every step, and is trained with a Gaussian negative log-likelihood.
"""
import math
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import Dataset, DataLoader

torch.manual_seed(0)
np.random.seed(0)

NUM_SERIES = 8
SERIES_LEN = 1500
CONTEXT_LENGTH = 24
PREDICTION_LENGTH = 24
LAGS_SEQ = [1, 2, 3, 4, 5, 6, 7, 12, 24, 48, 72]
NUM_TIME_FEAT = 4
EMBEDDING_DIM = 3


def make_series():
    t = np.arange(SERIES_LEN)
    data = []
    for i in range(NUM_SERIES):
        level = 50 + 30 * i
        daily = 0.3 * level * np.sin(2 * np.pi * (t + 3 * i) / 24)
        weekly = 0.1 * level * np.sin(2 * np.pi * t / 168)
        noise = 0.05 * level * np.random.randn(SERIES_LEN)
        data.append(level + daily + weekly + noise)
    return np.stack(data).astype(np.float32)


def time_features(start, length):
    idx = np.arange(start, start + length)
    hour = (idx % 24) / 23.0 - 0.5
    dow = ((idx // 24) % 7) / 6.0 - 0.5
    dom = ((idx // 24) % 30) / 29.0 - 0.5
    doy = ((idx // 24) % 365) / 364.0 - 0.5
    return np.stack([hour, dow, dom, doy], axis=-1).astype(np.float32)


class WindowDataset(Dataset):
    def __init__(self, series, num_windows, lo, hi):
        self.series = series
        self.history = max(LAGS_SEQ) + CONTEXT_LENGTH + PREDICTION_LENGTH
        rng = np.random.RandomState(lo)
        self.items = [(rng.randint(NUM_SERIES), rng.randint(lo, hi - self.history)) for _ in range(num_windows)]

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        sid, start = self.items[i]
        window = self.series[sid, start:start + self.history]
        feat = time_features(start, self.history)
        return torch.tensor(window), torch.tensor(feat), torch.tensor(sid)


class DeepARNetwork(nn.Module):
    def __init__(self, input_size, num_cells=40, num_layers=2, dropout_rate=0.1):
        super().__init__()
        self.embedder = nn.Embedding(NUM_SERIES, EMBEDDING_DIM)
        self.rnn = nn.LSTM(input_size=input_size, hidden_size=num_cells, num_layers=num_layers,
                           dropout=dropout_rate, batch_first=True)
        self.proj_mu = nn.Linear(num_cells, 1)
        self.proj_sigma = nn.Linear(num_cells, 1)

    def unroll(self, past_target, time_feat, series_id):
        T = CONTEXT_LENGTH + PREDICTION_LENGTH
        max_lag = max(LAGS_SEQ)
        scale = past_target[:, max_lag:max_lag + CONTEXT_LENGTH].abs().mean(dim=1, keepdim=True) + 1.0
        scaled = past_target / scale
        lags = torch.stack([scaled[:, max_lag - l:max_lag - l + T] for l in LAGS_SEQ], dim=-1)
        emb = self.embedder(series_id).unsqueeze(1).expand(-1, T, -1)
        log_scale = scale.log().unsqueeze(1).expand(-1, T, -1)
        inputs = torch.cat([lags, time_feat[:, max_lag:], emb, log_scale], dim=-1)
        outputs, _ = self.rnn(inputs)
        target = scaled[:, max_lag:]
        return outputs, target

    def forward(self, past_target, time_feat, series_id):
        outputs, target = self.unroll(past_target, time_feat, series_id)
        mu = self.proj_mu(outputs).squeeze(-1)
        sigma = F.softplus(self.proj_sigma(outputs)).squeeze(-1) + 1e-3
        nll = 0.5 * ((target - mu) / sigma) ** 2 + sigma.log() + 0.5 * math.log(2 * math.pi)
        return nll.mean(), mu, target


series = make_series()
train_ds = WindowDataset(series, 1600, 0, 1200)
val_ds = WindowDataset(series, 256, 1200 - 100, SERIES_LEN)
train_loader = DataLoader(train_ds, batch_size=32, shuffle=True)
val_loader = DataLoader(val_ds, batch_size=64)

net = DeepARNetwork(input_size=43, num_cells=40, num_layers=2, dropout_rate=0.1)
optimizer = torch.optim.Adam(net.parameters(), lr=1e-3)
print(f"parameters: {sum(p.numel() for p in net.parameters())}")

step = 0
for epoch in range(4):
    net.train()
    running = 0.0
    for past_target, time_feat, sid in train_loader:
        optimizer.zero_grad()
        loss, _, _ = net(past_target, time_feat, sid)
        loss.backward()
        nn.utils.clip_grad_norm_(net.parameters(), 10.0)
        optimizer.step()
        step += 1
        running += loss.item()
        if step % 10 == 0:
            print(f"epoch {epoch} step {step} nll {running / 10:.4f}")
            running = 0.0
    net.eval()
    with torch.no_grad():
        nlls, maes = [], []
        for past_target, time_feat, sid in val_loader:
            loss, mu, target = net(past_target, time_feat, sid)
            nlls.append(loss.item())
            maes.append((mu[:, CONTEXT_LENGTH:] - target[:, CONTEXT_LENGTH:]).abs().mean().item())
    print(f"epoch {epoch} val nll {np.mean(nlls):.4f} val scaled mae {np.mean(maes):.4f}")
