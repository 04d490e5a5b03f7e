"""Stochastic Weight Averaging with PyTorch Lightning's StochasticWeightAveraging callback, as in
the Lightning docs ("Effective Training Techniques" -> Stochastic Weight Averaging):
`Trainer(callbacks=[StochasticWeightAveraging(swa_lrs=1e-2)])`.

A BatchNorm MLP classifies synthetic tabular data (12 features, 4 classes, label noise). SGD with
momentum at lr 0.1 and a per-epoch cosine schedule; from epoch 6 (swa_epoch_start=0.6) the
callback anneals the lr to swa_lrs, averages the weights at each epoch end, copies the average
into the model when fitting ends and recomputes the BatchNorm statistics with one extra pass.
"""
import os
import tempfile

import lightning as L
import torch
import torch.nn as nn
import torch.nn.functional as F
from lightning.pytorch.callbacks import Callback, StochasticWeightAveraging
from torch.utils.data import DataLoader, TensorDataset

L.seed_everything(7)


def make_data(n, seed):
    g = torch.Generator().manual_seed(seed)
    w = torch.randn(12, 4, generator=torch.Generator().manual_seed(100))
    x = torch.randn(n, 12, generator=g)
    x[:, :4] = x[:, :4] * 3 + 1.5  # unscaled columns
    logits = torch.tanh(x[:, :6]) @ w[:6] + 0.5 * (x[:, 6:] ** 2) @ w[6:]
    y = logits.argmax(dim=1)
    flip = torch.rand(n, generator=g) < 0.1
    y[flip] = torch.randint(0, 4, (int(flip.sum()),), generator=g)
    return TensorDataset(x, y)


class TabularClassifier(L.LightningModule):
    def __init__(self, lr=0.1, hidden=128):
        super().__init__()
        self.save_hyperparameters()
        self.net = nn.Sequential(
            nn.BatchNorm1d(12),
            nn.Linear(12, hidden), nn.BatchNorm1d(hidden), nn.ReLU(),
            nn.Linear(hidden, hidden), nn.BatchNorm1d(hidden), nn.ReLU(),
            nn.Linear(hidden, 4),
        )

    def forward(self, x):
        return self.net(x)

    def training_step(self, batch, batch_idx):
        x, y = batch
        logits = self(x)
        loss = F.cross_entropy(logits, y)
        self.log("train_loss", loss, on_step=False, on_epoch=True)
        self.log("train_acc", (logits.argmax(1) == y).float().mean(), on_step=False, on_epoch=True)
        return loss

    def validation_step(self, batch, batch_idx):
        x, y = batch
        logits = self(x)
        self.log("val_loss", F.cross_entropy(logits, y))
        self.log("val_acc", (logits.argmax(1) == y).float().mean())

    def configure_optimizers(self):
        optimizer = torch.optim.SGD(self.parameters(), lr=self.hparams.lr, momentum=0.9, weight_decay=1e-4)
        scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=self.trainer.max_epochs)
        return [optimizer], [scheduler]


class PrintMetrics(Callback):
    def on_train_epoch_end(self, trainer, pl_module):
        m = trainer.callback_metrics
        lr = trainer.optimizers[0].param_groups[0]["lr"]
        print(f"epoch {trainer.current_epoch:2d}  lr {lr:.4f}  train_loss {m.get('train_loss', float('nan')):.4f}  "
              f"train_acc {m.get('train_acc', float('nan')):.3f}  val_loss {m.get('val_loss', float('nan')):.4f}  "
              f"val_acc {m.get('val_acc', float('nan')):.3f}")


def main():
    train_ds = make_data(2560, seed=1)
    val_ds = make_data(1024, seed=2)
    train_loader = DataLoader(train_ds, batch_size=128, shuffle=True)
    val_loader = DataLoader(val_ds, batch_size=512)

    model = TabularClassifier()
    with tempfile.TemporaryDirectory() as root:
        trainer = L.Trainer(
            max_epochs=10,
            accelerator="cpu",
            devices=1,
            default_root_dir=root,
            callbacks=[StochasticWeightAveraging(swa_lrs=1e-2, swa_epoch_start=0.6, annealing_epochs=2),
                       PrintMetrics()],
            enable_progress_bar=False,
            enable_model_summary=False,
            enable_checkpointing=False,
            logger=False,
            num_sanity_val_steps=0,
        )
        trainer.fit(model, train_loader, val_loader)
        print("final (SWA) weights:")
        result = trainer.validate(model, val_loader, verbose=False)[0]
        print(f"val_loss {result['val_loss']:.4f}  val_acc {result['val_acc']:.3f}")


if __name__ == "__main__":
    main()
