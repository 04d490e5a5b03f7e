"""LightningModule regressor with ReduceLROnPlateau monitored on the validation loss.

configure_optimizers returns {"optimizer": ..., "lr_scheduler": {"scheduler":
ReduceLROnPlateau(...), "monitor": "val_loss"}} as in the LightningModule docs;
Lightning steps the scheduler after each validation with the logged val_loss.
The model is an MLP with BatchNorm1d and Dropout, trained with MSE on a synthetic
tabular regression whose targets carry Gaussian noise (std 0.3): the validation
loss flattens after a few epochs, and the plateau scheduler halves the rate.
"""
import tempfile

import lightning as L
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset


def make_tabular(n, n_features=8, noise=0.3, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, n_features, generator=g)
    y = 1.5 * torch.sin(x[:, 0]) + 0.5 * x[:, 1] ** 2 - x[:, 2] + 0.8 * x[:, 3] * x[:, 4]
    y = y + noise * torch.randn(n, generator=g)
    return x, y


class LitRegressor(L.LightningModule):
    def __init__(self, n_features=8, hidden=64, lr=3e-3, weight_decay=1e-4):
        super().__init__()
        self.save_hyperparameters()
        self.net = nn.Sequential(
            nn.Linear(n_features, hidden),
            nn.BatchNorm1d(hidden),
            nn.ReLU(),
            nn.Dropout(0.1),
            nn.Linear(hidden, hidden),
            nn.BatchNorm1d(hidden),
            nn.ReLU(),
            nn.Linear(hidden, 1),
        )

    def forward(self, x):
        return self.net(x).squeeze(-1)

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = F.mse_loss(self(x), y)
        self.log("train_loss", loss, on_step=False, on_epoch=True)
        return loss

    def validation_step(self, batch, batch_idx):
        x, y = batch
        y_hat = self(x)
        self.log("val_loss", F.mse_loss(y_hat, y), prog_bar=True)
        self.log("val_mae", F.l1_loss(y_hat, y))

    def on_train_epoch_end(self):
        m = self.trainer.callback_metrics
        lr = self.optimizers().param_groups[0]["lr"]
        print(f"epoch {self.current_epoch:2d}: train_loss {m['train_loss']:.4f} "
              f"val_loss {m['val_loss']:.4f} val_mae {m['val_mae']:.4f} lr {lr:.2e}")

    def configure_optimizers(self):
        optimizer = torch.optim.Adam(self.parameters(), lr=self.hparams.lr,
                                     weight_decay=self.hparams.weight_decay)
        scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer, mode="min", factor=0.5, patience=1)
        return {
            "optimizer": optimizer,
            "lr_scheduler": {
                "scheduler": scheduler,
                "monitor": "val_loss",
                "interval": "epoch",
                "frequency": 1,
            },
        }


def main():
    L.seed_everything(42)
    x_train, y_train = make_tabular(1024, seed=1)
    x_val, y_val = make_tabular(512, seed=2)
    mean, std = x_train.mean(0), x_train.std(0)
    x_train, x_val = (x_train - mean) / std, (x_val - mean) / std

    train_loader = DataLoader(TensorDataset(x_train, y_train), batch_size=64, shuffle=True)
    val_loader = DataLoader(TensorDataset(x_val, y_val), batch_size=256)

    model = LitRegressor()
    trainer = L.Trainer(
        max_epochs=16,
        accelerator="cpu",
        devices=1,
        enable_checkpointing=False,
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        default_root_dir=tempfile.mkdtemp(),
    )
    trainer.fit(model, train_loader, val_loader)


if __name__ == "__main__":
    main()
