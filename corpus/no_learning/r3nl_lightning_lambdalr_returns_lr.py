"""Activity recognition from windowed accelerometer features with a Lightning MLP.

Each sample is 30 summary features of a sensor window (means, energies, ...);
the four activities (sit, stand, walk, run) move the features in different
directions, with subject-to-subject noise on top. A LambdaLR schedule decays
the learning rate by epoch.
"""
import tempfile

import lightning as L
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.optim.lr_scheduler import LambdaLR
from torch.utils.data import DataLoader, TensorDataset

ACTIVITIES = ["sit", "stand", "walk", "run"]


def make_windows(n, seed):
    g = torch.Generator().manual_seed(seed)
    centers = torch.randn(len(ACTIVITIES), 30, generator=torch.Generator().manual_seed(11)) * 0.6
    y = torch.randint(0, len(ACTIVITIES), (n,), generator=g)
    subject = torch.randn(n, 30, generator=g)
    x = centers[y] + subject
    x = x + 0.3 * torch.sin(2.0 * x)
    return x, y


class ActivityMLP(L.LightningModule):
    def __init__(self, n_features=30, hidden=64, n_classes=4, lr=1e-3, gamma=0.95):
        super().__init__()
        self.save_hyperparameters()
        self.net = nn.Sequential(
            nn.Linear(n_features, hidden), nn.ReLU(),
            nn.Linear(hidden, hidden), nn.ReLU(),
            nn.Linear(hidden, n_classes),
        )

    def forward(self, x):
        return self.net(x)

    def training_step(self, batch, batch_idx):
        x, y = batch
        logits = self(x)
        loss = F.cross_entropy(logits, y)
        acc = (logits.argmax(1) == y).float().mean()
        self.log("train_loss", loss)
        if self.global_step % 20 == 0:
            lr = self.trainer.optimizers[0].param_groups[0]["lr"]
            print(f"epoch {self.current_epoch} step {self.global_step:4d}  loss {loss.item():.4f}  acc {acc.item():.3f}  lr {lr:.2e}")
        return loss

    def validation_step(self, batch, batch_idx):
        x, y = batch
        logits = self(x)
        self.log("val_loss", F.cross_entropy(logits, y))
        self.log("val_acc", (logits.argmax(1) == y).float().mean())

    def on_validation_epoch_end(self):
        m = self.trainer.callback_metrics
        if "val_loss" in m:
            print(f"== epoch {self.current_epoch}: val_loss {m['val_loss']:.4f}  val_acc {m['val_acc']:.3f}")

    def configure_optimizers(self):
        optimizer = torch.optim.Adam(self.parameters(), lr=self.hparams.lr)
        scheduler = LambdaLR(optimizer, lr_lambda=lambda epoch: self.hparams.lr * self.hparams.gamma ** epoch)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "epoch"}}


def main():
    L.seed_everything(42)
    x_train, y_train = make_windows(6000, seed=0)
    x_val, y_val = make_windows(1000, seed=1)
    train_loader = DataLoader(TensorDataset(x_train, y_train), batch_size=128, shuffle=True)
    val_loader = DataLoader(TensorDataset(x_val, y_val), batch_size=500)

    model = ActivityMLP()
    trainer = L.Trainer(
        max_epochs=5,
        accelerator="cpu",
        devices=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        num_sanity_val_steps=0,
        default_root_dir=tempfile.mkdtemp(),
    )
    trainer.fit(model, train_loader, val_loader)


if __name__ == "__main__":
    main()
