"""Probabilistic demand forecasting with a LightningModule: an MLP over a window of past values
predicts 7 quantiles of the next value, trained with the quantile (pinball) loss written as in
pytorch-forecasting's QuantileLoss. Reports the pinball loss and the empirical coverage of the
10%-90% prediction interval."""
import warnings
import torch
import torch.nn as nn
from torch.utils.data import Dataset, DataLoader
import lightning as L

warnings.filterwarnings("ignore")
L.seed_everything(0, verbose=False)

QUANTILES = [0.02, 0.1, 0.25, 0.5, 0.75, 0.9, 0.98]


class QuantileLoss(nn.Module):
    def __init__(self, quantiles=QUANTILES):
        super().__init__()
        self.quantiles = quantiles

    def loss(self, y_pred, target):
        losses = []
        for i, q in enumerate(self.quantiles):
            errors = target - y_pred[..., i]
            losses.append(torch.max((q - 1) * errors, q * errors).unsqueeze(-1))
        losses = 2 * torch.cat(losses, dim=2)
        return losses

    def forward(self, y_pred, target):
        return self.loss(y_pred, target).mean()


class DemandSeries(Dataset):
    def __init__(self, n_series, length, window, seed):
        g = torch.Generator().manual_seed(seed)
        t = torch.arange(length, dtype=torch.float32)
        level = 5 + 3 * torch.rand(n_series, 1, generator=g)
        season = torch.sin(2 * torch.pi * t / 12 + 6.28 * torch.rand(n_series, 1, generator=g))
        scale = 0.3 + 0.7 * (season + 1)
        noise = torch.distributions.Gamma(2.0, 2.0).sample((n_series, length)) - 1.0
        y = level + 2 * season + scale * noise
        self.x, self.y = [], []
        for s in range(n_series):
            for start in range(0, length - window - 1):
                self.x.append(y[s, start:start + window])
                self.y.append(y[s, start + window:start + window + 1])
        self.x = torch.stack(self.x)
        self.y = torch.stack(self.y)

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return self.x[i], self.y[i]


class QuantileForecaster(L.LightningModule):
    def __init__(self, window=24, hidden=64, lr=3e-3):
        super().__init__()
        self.save_hyperparameters()
        self.net = nn.Sequential(
            nn.Linear(window, hidden), nn.ReLU(),
            nn.Linear(hidden, hidden), nn.ReLU(),
            nn.Linear(hidden, len(QUANTILES)),
        )
        self.loss = QuantileLoss()

    def forward(self, x):
        out = self.net(x)
        return out.unsqueeze(1)

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = self.loss(self(x), y)
        self.log("train_loss", loss, on_epoch=True, on_step=False)
        return loss

    def validation_step(self, batch, batch_idx):
        x, y = batch
        y_pred = self(x)
        loss = self.loss(y_pred, y)
        inside = ((y >= y_pred[..., 1]) & (y <= y_pred[..., 5])).float().mean()
        self.log("val_loss", loss)
        self.log("val_coverage_80", inside)

    def on_validation_epoch_end(self):
        if self.trainer.sanity_checking:
            return
        m = self.trainer.callback_metrics
        print(f"epoch {self.current_epoch}: val_loss {float(m['val_loss']):.4f}  80% interval coverage {float(m['val_coverage_80']):.3f}")

    def on_train_epoch_end(self):
        print(f"epoch {self.current_epoch}: train_loss {float(self.trainer.callback_metrics['train_loss']):.4f}")

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=self.hparams.lr)


train_ds = DemandSeries(40, 96, 24, seed=1)
val_ds = DemandSeries(10, 96, 24, seed=2)
train_loader = DataLoader(train_ds, batch_size=128, shuffle=True)
val_loader = DataLoader(val_ds, batch_size=512)

model = QuantileForecaster()
trainer = L.Trainer(max_epochs=5, accelerator="cpu", logger=False, enable_checkpointing=False,
                    enable_progress_bar=False, enable_model_summary=False)
trainer.fit(model, train_loader, val_loader)
