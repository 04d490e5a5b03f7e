"""PatchTST-style forecaster for next-day realised volatility (pred_len = 1).

Synthetic daily returns of an asset with stochastic volatility; the target series is the
log realised volatility (5-day window). The model sees the last SEQ_LEN days, splits them into
patches, embeds them, runs a Transformer encoder and a flatten head to PRED_LEN outputs (RevIN
normalisation per window). Chronological train / validation split, naive persistence baseline.
"""
import math

import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(11)
np.random.seed(11)

SEQ_LEN = 64
PRED_LEN = 1
PATCH_LEN = 8
STRIDE = 8
D_MODEL = 32
N_HEADS = 4
N_LAYERS = 2
BATCH_SIZE = 64
EPOCHS = 5
LR = 1e-3


def simulate_log_vol(n_days, rng):
    h = np.zeros(n_days)
    for t in range(1, n_days):
        h[t] = 0.97 * h[t - 1] + 0.25 * rng.normal()
    sigma = 0.01 * np.exp(h)
    returns = sigma * rng.normal(size=n_days)
    rv = np.sqrt(np.convolve(returns ** 2, np.ones(5) / 5, mode="same"))
    return np.log(rv + 1e-6).astype(np.float32)


class VolWindowDataset(Dataset):
    def __init__(self, series, start, end):
        self.series = series
        self.index = np.arange(max(start, SEQ_LEN), end - PRED_LEN + 1)

    def __len__(self):
        return len(self.index)

    def __getitem__(self, i):
        t = self.index[i]
        x = self.series[t - SEQ_LEN:t]
        if PRED_LEN == 1:
            y = self.series[t]
        else:
            y = self.series[t:t + PRED_LEN]
        return torch.from_numpy(x.copy()), torch.tensor(y)


class PatchTST(nn.Module):
    def __init__(self):
        super().__init__()
        self.n_patches = (SEQ_LEN - PATCH_LEN) // STRIDE + 1
        self.patch_embed = nn.Linear(PATCH_LEN, D_MODEL)
        self.pos_embed = nn.Parameter(torch.randn(1, self.n_patches, D_MODEL) * 0.02)
        layer = nn.TransformerEncoderLayer(D_MODEL, N_HEADS, dim_feedforward=64, dropout=0.1,
                                           batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, N_LAYERS)
        self.head = nn.Linear(self.n_patches * D_MODEL, PRED_LEN)

    def forward(self, x):
        mean = x.mean(dim=1, keepdim=True)
        std = x.std(dim=1, keepdim=True) + 1e-5
        x = (x - mean) / std
        patches = x.unfold(1, PATCH_LEN, STRIDE)
        z = self.patch_embed(patches) + self.pos_embed
        z = self.encoder(z)
        out = self.head(z.flatten(start_dim=1))
        return out * std + mean


rng = np.random.default_rng(3)
series = simulate_log_vol(3000, rng)
split = 2400
train_ds = VolWindowDataset(series, 0, split)
val_ds = VolWindowDataset(series, split, len(series))
train_loader = DataLoader(train_ds, batch_size=BATCH_SIZE, shuffle=True)
val_loader = DataLoader(val_ds, batch_size=256)
print(f"train windows {len(train_ds)}, val windows {len(val_ds)}, target var {series[split:].var():.4f}")

model = PatchTST()
criterion = nn.MSELoss()
optimizer = torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=1e-4)


def evaluate():
    model.eval()
    preds, trues, lasts = [], [], []
    with torch.no_grad():
        for x_batch, y_batch in val_loader:
            pred = model(x_batch)
            preds.append(pred.numpy().reshape(-1))
            trues.append(y_batch.numpy().reshape(-1))
            lasts.append(x_batch[:, -1].numpy())
    preds, trues, lasts = map(np.concatenate, (preds, trues, lasts))
    mse = np.mean((preds - trues) ** 2)
    naive = np.mean((lasts - trues) ** 2)
    return mse, naive, preds.std()


for epoch in range(EPOCHS):
    model.train()
    running, n = 0.0, 0
    for step, (x_batch, y_batch) in enumerate(train_loader):
        pred = model(x_batch)
        loss = criterion(pred, y_batch)
        optimizer.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        running += loss.item() * len(x_batch)
        n += len(x_batch)
    mse, naive, spread = evaluate()
    print(f"epoch {epoch}: train loss {running / n:.4f}  "
          f"val MSE {mse:.4f} (naive {naive:.4f})  val RMSE {math.sqrt(mse):.4f}  pred std {spread:.3f}")
