"""Probabilistic forecaster (Gaussian output head) in Lightning.

An MLP reads 48 past values of a seasonal series and predicts a Gaussian (loc, scale) for each
of the next 24 steps, trained with the Gaussian negative log-likelihood. For monitoring, the
predictive quantiles are estimated from Monte-Carlo samples, and the outputs of every training
step are collected to report the epoch's average loss, MAE and 80% interval coverage in
on_train_epoch_end (Lightning 2 removed training_epoch_end).
"""
import math
import tempfile

import lightning as L
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(21)

CONTEXT, HORIZON = 48, 24
QUANTILES = torch.tensor([0.1, 0.5, 0.9])


class SeasonalWindows(Dataset):
    def __init__(self, n_series=40, length=200):
        t = torch.arange(length, dtype=torch.float32)
        period = torch.randint(12, 30, (n_series, 1)).float()
        phase = 2 * math.pi * torch.rand(n_series, 1)
        amp = 0.5 + torch.rand(n_series, 1)
        trend = 0.004 * torch.randn(n_series, 1) * t
        self.series = amp * torch.sin(2 * math.pi * t / period + phase) + trend + 0.1 * torch.randn(n_series, length)
        self.index = [(s, start) for s in range(n_series) for start in range(0, length - CONTEXT - HORIZON, 2)]

    def __len__(self):
        return len(self.index)

    def __getitem__(self, i):
        s, start = self.index[i]
        window = self.series[s, start:start + CONTEXT + HORIZON]
        return window[:CONTEXT], window[CONTEXT:]


class GaussianForecaster(L.LightningModule):
    def __init__(self, hidden_size=128, n_samples=100, learning_rate=1e-3):
        super().__init__()
        self.save_hyperparameters()
        self.trunk = nn.Sequential(nn.Linear(CONTEXT, hidden_size), nn.ReLU(), nn.Linear(hidden_size, hidden_size),
                                   nn.ReLU())
        self.loc = nn.Linear(hidden_size, HORIZON)
        self.scale = nn.Linear(hidden_size, HORIZON)
        self.training_step_outputs = []

    def forward(self, context):
        level = context[:, -1:]
        h = self.trunk(context - level)
        return {"prediction": self.loc(h) + level, "scale": F.softplus(self.scale(h)) + 1e-3}

    def step(self, x, y):
        out = self(x)
        loss = F.gaussian_nll_loss(out["prediction"], y, out["scale"] ** 2)
        log = {"loss": loss, "n_samples": x.size(0)}
        return log, out

    def training_step(self, batch, batch_idx):
        x, y = batch
        log, out = self.step(x, y)
        samples = torch.distributions.Normal(out["prediction"], out["scale"]).rsample((self.hparams.n_samples,))
        quantiles = torch.quantile(samples, QUANTILES, dim=0)
        log["mae"] = (quantiles[1] - y).abs().mean()
        log["coverage"] = ((y >= quantiles[0]) & (y <= quantiles[2])).float().mean()
        log["quantiles"] = quantiles
        self.training_step_outputs.append(log)
        if batch_idx % 20 == 0:
            print(f"epoch {self.current_epoch} batch {batch_idx}: nll {log['loss'].item():.4f}")
        return log

    def on_train_epoch_end(self):
        outputs = self.training_step_outputs
        n = sum(o["n_samples"] for o in outputs)
        avg_loss = sum(o["loss"] * o["n_samples"] for o in outputs) / n
        avg_mae = sum(o["mae"] * o["n_samples"] for o in outputs) / n
        coverage = sum(o["coverage"] * o["n_samples"] for o in outputs) / n
        self.log("train_loss_epoch", avg_loss)
        print(f"epoch {self.current_epoch}: mean nll {avg_loss.item():.4f}, MAE {avg_mae.item():.4f}, "
              f"80% interval coverage {coverage.item():.2f}")
        self.training_step_outputs.clear()

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=self.hparams.learning_rate)


if __name__ == "__main__":
    dataset = SeasonalWindows()
    loader = DataLoader(dataset, batch_size=64, shuffle=True)
    print(f"{len(dataset)} windows, {len(loader)} batches per epoch")
    model = GaussianForecaster()
    trainer = L.Trainer(max_epochs=2, accelerator="cpu", devices=1, logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False,
                        default_root_dir=tempfile.mkdtemp())
    trainer.fit(model, loader)
