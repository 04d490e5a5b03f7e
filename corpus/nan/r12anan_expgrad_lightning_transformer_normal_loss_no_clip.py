"""Probabilistic demand forecasting for many store/item series with a small transformer
(pytorch-forecasting style: EncoderNormalizer on each window, decoder queries for the
prediction horizon, Normal distribution output trained with its negative log-likelihood)
under PyTorch Lightning.
"""
import logging
import math
import warnings

import lightning as L
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

warnings.filterwarnings("ignore")
logging.getLogger("lightning.pytorch").setLevel(logging.ERROR)

MAX_ENCODER_LENGTH = 24
MAX_PREDICTION_LENGTH = 6
EPS = float(np.finfo(np.float16).eps)


def make_series(n_series=40, length=150, seed=0):
    rng = np.random.default_rng(seed)
    t = np.arange(length)
    series = []
    for i in range(n_series):
        level = rng.uniform(20, 200)
        y = level * (1 + 0.3 * np.sin(2 * np.pi * t / 7 + rng.uniform(0, 6))) + rng.normal(0, 0.05 * level, length)
        if i == 17:
            y = np.zeros(length)
            y[70:74] = rng.uniform(50, 150)
        series.append(np.clip(y, 0, None))
    return series


class EncoderNormalizedWindows(Dataset):
    def __init__(self, series):
        self.samples = []
        for y in series:
            for s in range(0, len(y) - MAX_ENCODER_LENGTH - MAX_PREDICTION_LENGTH + 1, 2):
                enc = y[s:s + MAX_ENCODER_LENGTH]
                dec = y[s + MAX_ENCODER_LENGTH:s + MAX_ENCODER_LENGTH + MAX_PREDICTION_LENGTH]
                center = enc.mean() + EPS
                scale = enc.std() + EPS
                self.samples.append(((enc - center) / scale, (dec - center) / scale))

    def __len__(self):
        return len(self.samples)

    def __getitem__(self, i):
        enc, dec = self.samples[i]
        return torch.tensor(enc, dtype=torch.float32)[:, None], torch.tensor(dec, dtype=torch.float32)


class PositionalEncoding(nn.Module):
    def __init__(self, d_model, max_len=64):
        super().__init__()
        pos = torch.arange(max_len)[:, None]
        div = torch.exp(torch.arange(0, d_model, 2) * (-math.log(10000.0) / d_model))
        pe = torch.zeros(max_len, d_model)
        pe[:, 0::2] = torch.sin(pos * div)
        pe[:, 1::2] = torch.cos(pos * div)
        self.register_buffer("pe", pe)

    def forward(self, x):
        return x + self.pe[: x.size(1)]


class TransformerForecaster(L.LightningModule):
    def __init__(self, d_model=32, n_heads=4, n_layers=2, learning_rate=0.01):
        super().__init__()
        self.save_hyperparameters()
        self.input_proj = nn.Linear(1, d_model)
        self.pos = PositionalEncoding(d_model)
        self.encoder = nn.TransformerEncoder(
            nn.TransformerEncoderLayer(d_model, n_heads, 4 * d_model, dropout=0.1, batch_first=True), n_layers)
        self.decoder_queries = nn.Parameter(torch.randn(MAX_PREDICTION_LENGTH, d_model) * 0.1)
        self.cross_attn = nn.MultiheadAttention(d_model, n_heads, batch_first=True)
        self.output_layer = nn.Linear(d_model, 2)

    def forward(self, x):
        memory = self.encoder(self.pos(self.input_proj(x)))
        q = self.decoder_queries.expand(x.size(0), -1, -1)
        h, _ = self.cross_attn(q, memory, memory)
        out = self.output_layer(h)
        loc, scale = out[..., 0], F.softplus(out[..., 1]) + 1e-3
        return loc, scale

    def normal_loss(self, loc, scale, y):
        return F.gaussian_nll_loss(loc, y, scale ** 2, full=True)

    def training_step(self, batch, batch_idx):
        x, y = batch
        loc, scale = self(x)
        loss = self.normal_loss(loc, scale, y)
        self.log("train_loss", loss, prog_bar=True)
        if batch_idx % 10 == 0:
            print(f"epoch {self.current_epoch} step {self.global_step} train_loss {loss.item():.4f}")
        return loss

    def validation_step(self, batch, batch_idx):
        x, y = batch
        loc, scale = self(x)
        self.log("val_loss", self.normal_loss(loc, scale, y))
        self.log("val_mae", (loc - y).abs().mean())

    def on_validation_epoch_end(self):
        m = self.trainer.callback_metrics
        print(f"epoch {self.current_epoch} val_loss {m['val_loss'].item():.4f} val_mae {m['val_mae'].item():.4f}")

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=self.hparams.learning_rate, momentum=0.9)


def main():
    L.seed_everything(8, verbose=False)
    series = make_series()
    train_series = [s[:120] for s in series]
    val_series = [s[90:] for s in series]
    train_loader = DataLoader(EncoderNormalizedWindows(train_series), batch_size=64, shuffle=True)
    val_loader = DataLoader(EncoderNormalizedWindows(val_series), batch_size=256)

    model = TransformerForecaster()
    trainer = L.Trainer(
        max_epochs=3,
        accelerator="cpu",
        devices=1,
        limit_train_batches=40,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        num_sanity_val_steps=0,
    )
    trainer.fit(model, train_loader, val_loader)


if __name__ == "__main__":
    main()
