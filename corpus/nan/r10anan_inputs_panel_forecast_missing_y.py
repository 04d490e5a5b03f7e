"""Multi-series forecasting with an MLP (neuralforecast-style) and a small Trainer with callbacks.

The panel is in long format, one row per (unique_id, ds, y), like the dataframe the
forecasting library takes: 12 hourly sensor series of 600 readings each.  Windows of
`input_size` past values predict the next `h` values; each window is scaled by its own
mean and std before the MLP, and the MAE is computed on the scaled target.  Training runs
under bfloat16 autocast on CPU.
"""
import logging
import math

import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset

logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
log = logging.getLogger("mlp_forecast")


def load_panel(n_series=12, n_obs=600, seed=0):
    """Rows of the exported sensor table; readings lost during export come back empty."""
    rng = np.random.default_rng(seed)
    rows = []
    for uid in range(n_series):
        t = np.arange(n_obs)
        level = rng.uniform(20, 40)
        y = level + 5 * np.sin(2 * np.pi * t / 24 + rng.uniform(0, 6)) + 0.02 * t + rng.normal(0, 0.5, n_obs)
        lost = rng.random(n_obs) < 0.01
        for ds, value, is_lost in zip(t, y, lost):
            rows.append({"unique_id": f"sensor_{uid}", "ds": int(ds), "y": None if is_lost else float(value)})
    return rows


class WindowsDataset(Dataset):
    def __init__(self, rows, input_size, h, split, val_size):
        series = {}
        for r in rows:
            series.setdefault(r["unique_id"], []).append((r["ds"], r["y"]))
        self.windows = []
        for uid, obs in series.items():
            obs.sort()
            y = np.array([np.nan if v is None else v for _, v in obs], dtype=np.float32)
            cut = len(y) - val_size
            starts = range(0, cut - input_size - h + 1) if split == "train" else \
                range(cut - input_size, len(y) - input_size - h + 1, h)
            for s in starts:
                self.windows.append(y[s:s + input_size + h])
        self.input_size = input_size

    def __len__(self):
        return len(self.windows)

    def __getitem__(self, i):
        return self.windows[i]


def collate_windows(windows, input_size):
    w = torch.from_numpy(np.stack(windows))
    return {"insample_y": w[:, :input_size], "outsample_y": w[:, input_size:]}


class MLP(nn.Module):
    def __init__(self, input_size, h, hidden_size=256, num_layers=2):
        super().__init__()
        layers = [nn.Linear(input_size, hidden_size), nn.ReLU()]
        for _ in range(num_layers - 1):
            layers += [nn.Linear(hidden_size, hidden_size), nn.ReLU()]
        self.mlp = nn.Sequential(*layers)
        self.out = nn.Linear(hidden_size, h)

    def forward(self, insample_y):
        return self.out(self.mlp(insample_y))


class Callback:
    def on_epoch_end(self, trainer, epoch, logs):
        pass


class PrintMetrics(Callback):
    def on_epoch_end(self, trainer, epoch, logs):
        log.info("epoch %d  train_loss=%.4f  valid_loss=%.4f", epoch, logs["train_loss"], logs["valid_loss"])


class EarlyStopping(Callback):
    def __init__(self, patience=3):
        self.patience, self.best, self.bad = patience, math.inf, 0

    def on_epoch_end(self, trainer, epoch, logs):
        if logs["valid_loss"] < self.best:
            self.best, self.bad = logs["valid_loss"], 0
        else:
            self.bad += 1
            if self.bad >= self.patience:
                log.info("early stopping at epoch %d", epoch)
                trainer.should_stop = True


class Trainer:
    def __init__(self, model, lr=1e-3, max_epochs=10, callbacks=()):
        self.model = model
        self.optimizer = torch.optim.Adam(model.parameters(), lr=lr)
        self.max_epochs = max_epochs
        self.callbacks = list(callbacks)
        self.should_stop = False

    @staticmethod
    def scale(batch):
        x = batch["insample_y"]
        loc = x.mean(dim=1, keepdim=True)
        scale = x.std(dim=1, keepdim=True).clamp_min(1e-3)
        return (x - loc) / scale, (batch["outsample_y"] - loc) / scale

    def step(self, batch):
        x, target = self.scale(batch)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            y_hat = self.model(x)
        return (y_hat.float() - target).abs().mean()

    def fit(self, train_loader, valid_loader):
        for epoch in range(self.max_epochs):
            self.model.train()
            total, n = 0.0, 0
            for batch in train_loader:
                self.optimizer.zero_grad()
                loss = self.step(batch)
                loss.backward()
                self.optimizer.step()
                total, n = total + loss.item(), n + 1
            self.model.eval()
            with torch.no_grad():
                valid = np.mean([self.step(b).item() for b in valid_loader])
            logs = {"train_loss": total / n, "valid_loss": float(valid)}
            for cb in self.callbacks:
                cb.on_epoch_end(self, epoch, logs)
            if self.should_stop:
                break


def main():
    torch.manual_seed(1)
    input_size, h = 48, 12
    rows = load_panel()
    train_ds = WindowsDataset(rows, input_size, h, "train", val_size=96)
    valid_ds = WindowsDataset(rows, input_size, h, "valid", val_size=96)
    collate = lambda w: collate_windows(w, input_size)
    train_loader = DataLoader(train_ds, batch_size=64, shuffle=True, collate_fn=collate, num_workers=2)
    valid_loader = DataLoader(valid_ds, batch_size=64, collate_fn=collate)
    log.info("%d train windows, %d valid windows", len(train_ds), len(valid_ds))

    model = MLP(input_size, h)
    trainer = Trainer(model, lr=1e-3, max_epochs=3, callbacks=[PrintMetrics(), EarlyStopping()])
    trainer.fit(train_loader, valid_loader)


if __name__ == "__main__":
    main()
