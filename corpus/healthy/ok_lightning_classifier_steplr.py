"""LightningModule classifier on synthetic 8x8 "digit" glyphs.

training_step / validation_step, Adam, and a StepLR that Lightning steps once
per epoch (the default interval), as in the Lightning optimization docs.
"""
import tempfile

import lightning as L
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset


def make_glyphs(n, num_classes=6, noise=0.8, seed=0):
    """Each class is a fixed random 8x8 binary template; samples are noisy copies."""
    g = torch.Generator().manual_seed(1234)
    templates = (torch.rand(num_classes, 8, 8, generator=g) > 0.5).float()
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, num_classes, (n,), generator=g)
    x = templates[y] + noise * torch.randn(n, 8, 8, generator=g)
    return x.unsqueeze(1), y


class LitClassifier(L.LightningModule):
    def __init__(self, num_classes=6, lr=1e-3):
        super().__init__()
        self.save_hyperparameters()
        self.epoch_losses = []
        self.model = nn.Sequential(
            nn.Flatten(),
            nn.Linear(64, 128), nn.ReLU(),
            nn.Linear(128, num_classes),
        )

    def forward(self, x):
        return self.model(x)

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = F.cross_entropy(self(x), y)
        self.log("train_loss", loss, on_step=False, on_epoch=True)
        self.epoch_losses.append(loss.item())
        return loss

    def validation_step(self, batch, batch_idx):
        x, y = batch
        logits = self(x)
        self.log("val_loss", F.cross_entropy(logits, y))
        self.log("val_acc", (logits.argmax(1) == y).float().mean())

    def on_train_epoch_end(self):
        m = self.trainer.callback_metrics
        train_loss = sum(self.epoch_losses) / len(self.epoch_losses)
        self.epoch_losses.clear()
        print(f"epoch {self.current_epoch}: train_loss {train_loss:.4f} "
              f"val_loss {m['val_loss']:.4f} val_acc {m['val_acc']:.3f} "
              f"lr {self.lr_schedulers().get_last_lr()[0]:.1e}")

    def configure_optimizers(self):
        optimizer = torch.optim.Adam(self.parameters(), lr=self.hparams.lr)
        scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=2, gamma=0.5)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "epoch"}}


def main():
    L.seed_everything(7)
    x_train, y_train = make_glyphs(1280, seed=1)
    x_val, y_val = make_glyphs(320, seed=2)
    train_loader = DataLoader(TensorDataset(x_train, y_train), batch_size=64, shuffle=True)
    val_loader = DataLoader(TensorDataset(x_val, y_val), batch_size=160)

    model = LitClassifier()
    trainer = L.Trainer(
        max_epochs=6,
        accelerator="cpu",
        devices=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        default_root_dir=tempfile.mkdtemp(),
    )
    trainer.fit(model, train_loader, val_loader)


if __name__ == "__main__":
    main()
