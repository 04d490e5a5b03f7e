"""Human activity recognition from wrist accelerometer + gyroscope windows (6 channels,
128 samples at 50 Hz) with a small 1D-CNN, trained with PyTorch Lightning. The Trainer runs
in pure 16-bit precision so that longer recordings and a bigger model fit on the card.
"""
import logging
import math
import warnings

import lightning as L
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

warnings.filterwarnings("ignore")
logging.getLogger("lightning").setLevel(logging.ERROR)
logging.getLogger("lightning.pytorch").setLevel(logging.ERROR)
log = logging.getLogger("har")
logging.basicConfig(level=logging.INFO, format="%(message)s")

ACTIVITIES = ["walking", "upstairs", "downstairs", "sitting", "standing", "lying"]


class SensorWindows(Dataset):
    """Windows of 6-axis IMU signals; each activity has its own gait frequency / posture."""

    def __init__(self, n, win=128, seed=0):
        g = torch.Generator().manual_seed(seed)
        t = torch.arange(win) / 50.0
        self.x, self.y = [], []
        for _ in range(n):
            label = int(torch.randint(0, len(ACTIVITIES), (1,), generator=g))
            moving = label < 3
            freq = [1.8, 1.5, 2.2, 0.0, 0.0, 0.0][label]
            gravity = torch.tensor([[0.0, 0.0, 1.0], [0.1, 0.0, 1.0], [-0.1, 0.0, 1.0],
                                    [0.6, 0.0, 0.8], [0.0, 0.2, 1.0], [1.0, 0.0, 0.1]][label])
            phase = float(torch.rand(1, generator=g)) * 2 * math.pi
            acc = gravity[:, None] + (0.5 * torch.sin(2 * math.pi * freq * t + phase) if moving else 0.0)
            gyr = (0.3 * torch.cos(2 * math.pi * freq * t + phase)).expand(3, win) if moving else torch.zeros(3, win)
            sig = torch.cat([acc.expand(3, win), gyr]) + 0.05 * torch.randn(6, win, generator=g)
            self.x.append(sig.float())
            self.y.append(label)

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        return self.x[i], self.y[i]


class HARNet(nn.Module):
    def __init__(self, n_classes=6):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv1d(6, 16, 5, padding=2), nn.ReLU(),
            nn.Conv1d(16, 32, 5, padding=2), nn.ReLU(), nn.MaxPool1d(2),
            nn.Conv1d(32, 32, 5, padding=2), nn.ReLU(), nn.AdaptiveAvgPool1d(1),
        )
        self.classifier = nn.Sequential(nn.Flatten(), nn.Dropout(0.2), nn.Linear(32, 64), nn.ReLU(),
                                        nn.Linear(64, n_classes))

    def forward(self, x):
        return self.classifier(self.features(x))


class ActivityClassifier(L.LightningModule):
    def __init__(self, lr=3e-3):
        super().__init__()
        self.save_hyperparameters()
        self.net = HARNet(len(ACTIVITIES))

    def forward(self, x):
        return self.net(x)

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = F.cross_entropy(self(x), y)
        if self.global_step % 5 == 0:
            log.info(f"epoch {self.current_epoch} step {self.global_step} train_loss {loss.item():.4f}")
        return loss

    def validation_step(self, batch, batch_idx):
        x, y = batch
        logits = self(x)
        self.log("val_loss", F.cross_entropy(logits, y))
        self.log("val_acc", (logits.argmax(1) == y).float().mean())

    def on_validation_epoch_end(self):
        m = self.trainer.callback_metrics
        log.info(f"== epoch {self.current_epoch} val_loss {m['val_loss'].item():.4f} val_acc {m['val_acc'].item():.3f}")

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=self.hparams.lr)


def main():
    L.seed_everything(7, verbose=False)
    train_loader = DataLoader(SensorWindows(512, seed=1), batch_size=32, shuffle=True)
    val_loader = DataLoader(SensorWindows(128, seed=2), batch_size=64)
    model = ActivityClassifier()
    trainer = L.Trainer(max_epochs=3, accelerator="cpu", precision="16-true", logger=False,
                        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False)
    trainer.fit(model, train_loader, val_loader)


if __name__ == "__main__":
    main()
