"""Heartbeat classifier (1-D CNN, 5 beat types) trained with PyTorch Lightning.

Manual optimization is used so the gradients can be clipped by hand before each update, as in
the "Manual optimization" section of the Lightning docs. The beats are generated here: a
class-specific mixture of Gaussian bumps plus baseline wander and noise.
"""
import math

import lightning as L
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

N_CLASSES = 5
LENGTH = 128


class BeatCNN(nn.Module):
    def __init__(self, n_classes):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv1d(1, 16, 7, padding=3), nn.BatchNorm1d(16), nn.ReLU(), nn.MaxPool1d(2),
            nn.Conv1d(16, 32, 5, padding=2), nn.BatchNorm1d(32), nn.ReLU(), nn.MaxPool1d(2),
            nn.Conv1d(32, 32, 3, padding=1), nn.BatchNorm1d(32), nn.ReLU(),
            nn.AdaptiveAvgPool1d(1),
        )
        self.classifier = nn.Linear(32, n_classes)

    def forward(self, x):
        return self.classifier(self.features(x).flatten(1))


class LitBeatClassifier(L.LightningModule):
    def __init__(self, lr=1e-3):
        super().__init__()
        self.save_hyperparameters()
        self.model = BeatCNN(N_CLASSES)
        self.automatic_optimization = False
        self.train_losses = []

    def compute_loss(self, batch):
        x, y = batch
        return F.cross_entropy(self.model(x), y)

    def training_step(self, batch, batch_idx):
        opt = self.optimizers()
        opt.zero_grad()
        loss = self.compute_loss(batch)
        self.manual_backward(loss)
        self.clip_gradients(opt, gradient_clip_val=1.0, gradient_clip_algorithm="norm")
        self.train_losses.append(loss.item())
        self.log("train_loss", loss, prog_bar=True)

    def validation_step(self, batch, batch_idx):
        x, y = batch
        logits = self.model(x)
        self.log("val_loss", F.cross_entropy(logits, y))
        self.log("val_acc", (logits.argmax(1) == y).float().mean())

    def on_validation_epoch_end(self):
        if self.trainer.sanity_checking:
            return
        m = self.trainer.callback_metrics
        train_loss = sum(self.train_losses) / max(len(self.train_losses), 1)
        self.train_losses = []
        print("epoch %d  train loss %.4f  val loss %.4f  val acc %.3f"
              % (self.current_epoch, train_loss, m["val_loss"].item(), m["val_acc"].item()))

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=self.hparams.lr)


def make_beats(n, seed):
    g = torch.Generator().manual_seed(seed)
    t = torch.linspace(0, 1, LENGTH)
    centers = torch.tensor([[0.3, 0.5, 0.7], [0.2, 0.45, 0.8], [0.35, 0.5, 0.6],
                            [0.25, 0.55, 0.75], [0.4, 0.5, 0.9]])
    heights = torch.tensor([[0.3, 1.0, 0.4], [0.2, -0.8, 0.5], [0.5, 1.2, -0.3],
                            [-0.3, 0.9, 0.6], [0.4, 0.7, 0.7]])
    y = torch.randint(0, N_CLASSES, (n,), generator=g)
    jitter = 0.02 * torch.randn(n, 3, generator=g)
    c = centers[y] + jitter
    h = heights[y] * (1 + 0.15 * torch.randn(n, 1, generator=g))
    x = (h[:, :, None] * torch.exp(-((t[None, None, :] - c[:, :, None]) ** 2) / 0.001)).sum(1)
    wander = 0.2 * torch.sin(2 * math.pi * (t[None, :] * torch.rand(n, 1, generator=g) * 2
                                            + torch.rand(n, 1, generator=g)))
    x = x + wander + 0.1 * torch.randn(n, LENGTH, generator=g)
    return x.unsqueeze(1), y


def main():
    L.seed_everything(0, verbose=False)
    x_train, y_train = make_beats(2560, seed=1)
    x_val, y_val = make_beats(640, seed=2)
    train_loader = DataLoader(TensorDataset(x_train, y_train), batch_size=64, shuffle=True)
    val_loader = DataLoader(TensorDataset(x_val, y_val), batch_size=256)

    model = LitBeatClassifier(lr=3e-3)
    trainer = L.Trainer(max_epochs=5, accelerator="cpu", devices=1, logger=False,
                        enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False, num_sanity_val_steps=0)
    trainer.fit(model, train_loader, val_loader)


if __name__ == "__main__":
    main()
