"""Rainfall-runoff modelling over many gauged basins: an LSTM reads a year-long
window of daily forcings (precipitation, temperature, radiation, vapour pressure)
plus static basin attributes and predicts the discharge of the last day, trained with
a per-basin NSE loss (as in neuralhydrology) under PyTorch Lightning.
"""
import logging
import warnings

import lightning as L
import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset

warnings.filterwarnings("ignore")
logging.getLogger("lightning").setLevel(logging.ERROR)
logging.getLogger("lightning.pytorch").setLevel(logging.ERROR)

CONFIG = {
    "seq_length": 120,
    "hidden_size": 64,
    "batch_size": 64,
    "learning_rate": 2.0,
    "epochs": 4,
    "n_basins": 40,
    "days": 900,
}


def simulate_basins(n_basins, days, seed=0):
    rng = np.random.default_rng(seed)
    basins = []
    for b in range(n_basins):
        area = rng.uniform(0.5, 3.0)
        k = rng.uniform(0.02, 0.2)
        t = np.arange(days)
        temp = 10 + 12 * np.sin(2 * np.pi * (t - 100) / 365) + rng.normal(0, 2, days)
        prcp = rng.gamma(0.6, 6.0, days) * (rng.random(days) < 0.45)
        srad = 200 + 120 * np.sin(2 * np.pi * (t - 80) / 365) + rng.normal(0, 20, days)
        vp = 800 + 40 * temp + rng.normal(0, 50, days)
        storage, q = 0.0, np.zeros(days)
        for d in range(days):
            storage += prcp[d] - 0.02 * max(temp[d], 0)
            storage = max(storage, 0.0)
            q[d] = k * storage * area
            storage -= q[d] / area
        forcings = np.stack([prcp, temp, srad, vp], axis=1)
        basins.append({"x_d": forcings, "x_s": np.array([area, k]), "y": q})
    return basins


class CamelsLikeDataset(Dataset):
    def __init__(self, basins, seq_length):
        self.seq_length = seq_length
        all_x = np.concatenate([b["x_d"] for b in basins])
        self.mean, self.std = all_x.mean(0), all_x.std(0)
        self.samples = []
        for b in basins:
            x_d = (b["x_d"] - self.mean) / self.std
            q_std = b["y"].std() + 1e-6
            for end in range(seq_length, len(b["y"]), 7):
                self.samples.append((x_d[end - seq_length:end], b["x_s"], b["y"][end - 1], q_std))

    def __len__(self):
        return len(self.samples)

    def __getitem__(self, i):
        x_d, x_s, y, q_std = self.samples[i]
        return {"x_d": torch.tensor(x_d, dtype=torch.float32), "x_s": torch.tensor(x_s, dtype=torch.float32),
                "y": torch.tensor([y], dtype=torch.float32), "per_basin_target_stds": torch.tensor([q_std], dtype=torch.float32)}


class CudaLSTMModule(L.LightningModule):
    def __init__(self, cfg):
        super().__init__()
        self.save_hyperparameters(cfg)
        self.lstm = nn.LSTM(input_size=4 + 2, hidden_size=cfg["hidden_size"], batch_first=True)
        self.dropout = nn.Dropout(0.4)
        self.head = nn.Linear(cfg["hidden_size"], 1)

    def forward(self, x_d, x_s):
        x = torch.cat([x_d, x_s.unsqueeze(1).expand(-1, x_d.size(1), -1)], dim=-1)
        lstm_output, _ = self.lstm(x)
        return self.head(self.dropout(lstm_output[:, -1]))

    def nse_loss(self, y_hat, y, q_stds, eps=0.1):
        squared_error = (y_hat - y) ** 2
        weights = 1 / (q_stds + eps) ** 2
        return torch.mean(weights * squared_error)

    def training_step(self, batch, batch_idx):
        y_hat = self(batch["x_d"], batch["x_s"])
        loss = self.nse_loss(y_hat, batch["y"], batch["per_basin_target_stds"])
        self.log("train_loss", loss, prog_bar=True)
        if self.global_step % 10 == 0:
            print(f"epoch {self.current_epoch} step {self.global_step} loss {loss.item():.4f}")
        return loss

    def validation_step(self, batch, batch_idx):
        y_hat = self(batch["x_d"], batch["x_s"])
        self.log("val_loss", self.nse_loss(y_hat, batch["y"], batch["per_basin_target_stds"]))

    def on_validation_epoch_end(self):
        print(f"epoch {self.current_epoch} val_loss {self.trainer.callback_metrics['val_loss'].item():.4f}")

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=self.hparams.learning_rate, momentum=0.9)


def main():
    L.seed_everything(0, verbose=False)
    basins = simulate_basins(CONFIG["n_basins"], CONFIG["days"], seed=1)
    train_set = CamelsLikeDataset(basins[:32], CONFIG["seq_length"])
    val_set = CamelsLikeDataset(basins[32:], CONFIG["seq_length"])
    train_loader = DataLoader(train_set, batch_size=CONFIG["batch_size"], shuffle=True, drop_last=True)
    val_loader = DataLoader(val_set, batch_size=256)

    model = CudaLSTMModule(CONFIG)
    trainer = L.Trainer(max_epochs=CONFIG["epochs"], accelerator="cpu", devices=1, logger=False,
                        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                        limit_train_batches=50, num_sanity_val_steps=0)
    trainer.fit(model, train_loader, val_loader)


if __name__ == "__main__":
    main()
