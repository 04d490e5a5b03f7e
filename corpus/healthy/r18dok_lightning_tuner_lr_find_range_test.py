"""Tabular churn classifier in Lightning whose learning rate comes from the built-in LR range
test: Tuner(trainer).lr_find() trains for up to 100 batches while raising the rate
exponentially from 1e-5 to 10, stops once the loss blows past 4x its best, restores the initial
weights, and writes the suggested rate into `self.lr`; then trainer.fit trains with it and a
cosine schedule.
"""
import tempfile
import time

import lightning.pytorch as pl
import torch
import torch.nn as nn
import torch.nn.functional as F
from lightning.pytorch.tuner import Tuner
from torch.utils.data import DataLoader, Dataset


class ChurnDataset(Dataset):
    """Synthetic customer table: 14 numeric features, churn depends non-linearly on a few."""

    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        x = torch.randn(n, 14, generator=g)
        tenure, charges, calls, contract = x[:, 0], x[:, 1], x[:, 2], x[:, 3]
        logit = 1.8 * charges - 1.5 * tenure + 1.2 * torch.relu(calls) * (contract < 0).float() \
            + 0.8 * torch.sin(2.0 * x[:, 4]) - 0.3
        p = torch.sigmoid(2.0 * logit)
        self.x = x * torch.linspace(0.5, 3.0, 14) + torch.linspace(-1.0, 2.0, 14)
        self.y = torch.bernoulli(p, generator=g).long()

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        return self.x[i], self.y[i]


class ChurnDataModule(pl.LightningDataModule):
    def __init__(self, batch_size=64):
        super().__init__()
        self.batch_size = batch_size

    def setup(self, stage=None):
        self.train_set = ChurnDataset(2560, seed=0)
        self.val_set = ChurnDataset(640, seed=1)
        mean, std = self.train_set.x.mean(0), self.train_set.x.std(0)
        self.train_set.x = (self.train_set.x - mean) / std
        self.val_set.x = (self.val_set.x - mean) / std

    def train_dataloader(self):
        return DataLoader(self.train_set, batch_size=self.batch_size, shuffle=True)

    def val_dataloader(self):
        return DataLoader(self.val_set, batch_size=256)


class ChurnClassifier(pl.LightningModule):
    def __init__(self, lr=1e-3, hidden=64, max_epochs=5):
        super().__init__()
        self.save_hyperparameters()
        self.lr = lr
        self.net = nn.Sequential(
            nn.Linear(14, hidden), nn.ReLU(),
            nn.Linear(hidden, hidden), nn.ReLU(),
            nn.Dropout(0.1),
            nn.Linear(hidden, 2),
        )

    def forward(self, x):
        return self.net(x)

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = F.cross_entropy(self(x), y)
        self.log("train_loss", loss, prog_bar=True, on_step=True, on_epoch=True)
        return loss

    def validation_step(self, batch, batch_idx):
        x, y = batch
        logits = self(x)
        self.log("val_loss", F.cross_entropy(logits, y), prog_bar=True)
        self.log("val_acc", (logits.argmax(-1) == y).float().mean(), prog_bar=True)

    def on_train_epoch_end(self):
        m = self.trainer.callback_metrics
        if "val_loss" in m:
            print(f"epoch {self.current_epoch}: train_loss {m['train_loss_epoch']:.4f}  "
                  f"val_loss {m['val_loss']:.4f}  val_acc {m['val_acc']:.3f}  "
                  f"lr {self.trainer.optimizers[0].param_groups[0]['lr']:.5f}")

    def configure_optimizers(self):
        optimizer = torch.optim.SGD(self.parameters(), lr=self.lr, momentum=0.9, nesterov=True)
        scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=self.hparams.max_epochs)
        return {"optimizer": optimizer, "lr_scheduler": scheduler}


def main():
    pl.seed_everything(7)
    start = time.time()
    max_epochs = 5
    with tempfile.TemporaryDirectory() as root:
        dm = ChurnDataModule(batch_size=64)
        model = ChurnClassifier(lr=0.01, max_epochs=max_epochs)
        trainer = pl.Trainer(max_epochs=max_epochs, accelerator="cpu", devices=1, logger=False,
                             enable_checkpointing=False, enable_progress_bar=False,
                             enable_model_summary=False, default_root_dir=root)

        tuner = Tuner(trainer)
        lr_finder = tuner.lr_find(model, datamodule=dm, min_lr=1e-5, max_lr=10.0, num_training=100)
        losses = lr_finder.results["loss"]
        lrs = lr_finder.results["lr"]
        for i in range(0, len(losses), 10):
            print(f"  range test batch {i:3d}  lr {lrs[i]:.2e}  smoothed loss {losses[i]:.4f}")
        print(f"lr range test stopped after {len(losses)} batches at lr {lrs[-1]:.2e}, "
              f"smoothed loss {losses[-1]:.4f} (best {min(losses):.4f})")
        print(f"suggested lr {lr_finder.suggestion():.5f}; model.lr is now {model.lr:.5f}")

        trainer.fit(model, datamodule=dm)
        print(f"final val_acc {trainer.callback_metrics['val_acc']:.3f}")
    print(f"done in {time.time() - start:.1f}s")


if __name__ == "__main__":
    main()
