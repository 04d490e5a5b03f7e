"""Daily sales forecasting with an LSTM (darts-RNNModel-like: input_chunk_length days of
history plus the day-of-week/price covariates -> next output_chunk_length days), trained
with PyTorch Lightning. The sales export (one row per day with a recorded sale) is put on
the regular daily calendar of the price list, min-max scaled and cut into windows.
"""
import logging
import warnings

import lightning as L
import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset

warnings.filterwarnings("ignore")
logging.getLogger("lightning.pytorch").setLevel(logging.ERROR)

INPUT_CHUNK = 28
OUTPUT_CHUNK = 7


def load_store_data(n_days=900, seed=3):
    """Stand-in for the store's exports: the daily price list, and the sales CSV with
    one row per day that had a recorded sale."""
    rng = np.random.default_rng(seed)
    t = np.arange(n_days)
    price = 4.0 + 0.5 * np.sin(2 * np.pi * t / 180) + rng.normal(0, 0.05, n_days)
    units = (120 + 30 * np.sin(2 * np.pi * t / 7) + 20 * np.sin(2 * np.pi * t / 365)
             - 15 * (price - 4.0) + rng.normal(0, 6, n_days))
    kept = rng.random(n_days) > 0.02
    sales = [{"day": int(d), "units": float(u)} for d, u in zip(t[kept], units[kept])]
    return sales, price


class MinMaxScaler:
    def fit(self, x):
        self.lo = np.nanmin(x, axis=0)
        self.hi = np.nanmax(x, axis=0)
        return self

    def transform(self, x):
        return (x - self.lo) / (self.hi - self.lo)


def to_daily_frame(sales, price):
    n = len(price)
    frame = {"units": np.full(n, np.nan), "price": price, "dow": np.arange(n) % 7}
    idx = np.array([r["day"] for r in sales])
    frame["units"][idx] = [r["units"] for r in sales]
    return frame


class WindowDataset(Dataset):
    def __init__(self, target, covariates):
        self.target = torch.tensor(target, dtype=torch.float32)
        self.cov = torch.tensor(covariates, dtype=torch.float32)
        self.starts = list(range(0, len(target) - INPUT_CHUNK - OUTPUT_CHUNK + 1))

    def __len__(self):
        return len(self.starts)

    def __getitem__(self, i):
        s = self.starts[i]
        past = torch.cat([self.target[s:s + INPUT_CHUNK, None], self.cov[s:s + INPUT_CHUNK]], dim=1)
        future_cov = self.cov[s + INPUT_CHUNK:s + INPUT_CHUNK + OUTPUT_CHUNK]
        y = self.target[s + INPUT_CHUNK:s + INPUT_CHUNK + OUTPUT_CHUNK]
        return past, future_cov, y


class RNNForecaster(L.LightningModule):
    def __init__(self, n_cov, hidden_dim=32, n_rnn_layers=1, lr=1e-3):
        super().__init__()
        self.save_hyperparameters()
        self.rnn = nn.LSTM(1 + n_cov, hidden_dim, n_rnn_layers, batch_first=True)
        self.head = nn.Linear(hidden_dim + OUTPUT_CHUNK * n_cov, OUTPUT_CHUNK)
        self.criterion = nn.MSELoss()

    def forward(self, past, future_cov):
        _, (h, _) = self.rnn(past)
        return self.head(torch.cat([h[-1], future_cov.flatten(1)], dim=1))

    def training_step(self, batch, batch_idx):
        past, future_cov, y = batch
        loss = self.criterion(self(past, future_cov), y)
        self.log("train_loss", loss, prog_bar=True)
        if self.global_step % 10 == 0:
            print(f"epoch {self.current_epoch} step {self.global_step} train_loss {loss.item():.5f}")
        return loss

    def validation_step(self, batch, batch_idx):
        past, future_cov, y = batch
        self.log("val_loss", self.criterion(self(past, future_cov), y))

    def on_validation_epoch_end(self):
        print(f"epoch {self.current_epoch} val_loss {self.trainer.callback_metrics['val_loss'].item():.5f}")

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=self.hparams.lr)


def main():
    L.seed_everything(42, verbose=False)
    frame = to_daily_frame(*load_store_data())
    n = len(frame["units"])
    split = int(0.8 * n)
    dow = np.eye(7)[frame["dow"]]
    cov = np.concatenate([frame["price"][:, None], dow], axis=1)

    scaler_y = MinMaxScaler().fit(frame["units"][:split])
    scaler_p = MinMaxScaler().fit(cov[:split, :1])
    target = scaler_y.transform(frame["units"])
    cov[:, :1] = scaler_p.transform(cov[:, :1])

    train_set = WindowDataset(target[:split], cov[:split])
    val_set = WindowDataset(target[split - INPUT_CHUNK:], cov[split - INPUT_CHUNK:])
    train_loader = DataLoader(train_set, batch_size=32, shuffle=True)
    val_loader = DataLoader(val_set, batch_size=64)

    model = RNNForecaster(n_cov=cov.shape[1])
    trainer = L.Trainer(max_epochs=5, accelerator="cpu", devices=1, logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, num_sanity_val_steps=0)
    trainer.fit(model, train_loader, val_loader)


if __name__ == "__main__":
    main()
