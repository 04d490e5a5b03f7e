"""Building-footprint segmentation on synthetic aerial tiles with Lightning + torchmetrics.

A small encoder-decoder predicts a per-pixel building probability. Validation scores the
pixel-wise average precision and IoU of the whole validation set with torchmetrics metric
objects that are updated in every validation step and computed at the end of the epoch.
"""
import tempfile

import lightning.pytorch as pl
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset
from torchmetrics.classification import BinaryAveragePrecision, BinaryJaccardIndex

TILE = 256


class AerialTiles(Dataset):
    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        self.images = torch.empty(n, 3, TILE, TILE)
        self.masks = torch.zeros(n, 1, TILE, TILE)
        for i in range(n):
            ground = 0.4 + 0.1 * torch.randn(3, TILE, TILE, generator=g)
            for _ in range(int(torch.randint(3, 8, (1,), generator=g))):
                x0, y0 = torch.randint(0, TILE - 40, (2,), generator=g).tolist()
                w, h = torch.randint(12, 40, (2,), generator=g).tolist()
                self.masks[i, 0, y0:y0 + h, x0:x0 + w] = 1.0
                ground[:, y0:y0 + h, x0:x0 + w] = torch.tensor([0.8, 0.7, 0.6]).view(3, 1, 1)
            self.images[i] = ground + 0.1 * torch.randn(3, TILE, TILE, generator=g)

    def __len__(self):
        return len(self.images)

    def __getitem__(self, i):
        return self.images[i], self.masks[i]


class SegModel(pl.LightningModule):
    def __init__(self, lr=2e-3):
        super().__init__()
        self.save_hyperparameters()
        self.enc1 = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU())
        self.enc2 = nn.Sequential(nn.MaxPool2d(2), nn.Conv2d(8, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU())
        self.dec = nn.Sequential(nn.ConvTranspose2d(16, 8, 2, stride=2), nn.ReLU())
        self.head = nn.Conv2d(16, 1, 1)
        self.val_ap = BinaryAveragePrecision()
        self.val_iou = BinaryJaccardIndex()

    def forward(self, x):
        e1 = self.enc1(x)
        d = self.dec(self.enc2(e1))
        return self.head(torch.cat([e1, d], dim=1))

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = F.binary_cross_entropy_with_logits(self(x), y)
        self.log("train_loss", loss, prog_bar=True)
        return loss

    def validation_step(self, batch, batch_idx):
        x, y = batch
        logits = self(x)
        loss = F.binary_cross_entropy_with_logits(logits, y)
        probs = torch.sigmoid(logits)
        self.val_ap.update(probs, y.int())
        self.val_iou.update(probs, y.int())
        self.log("val_loss", loss)

    def on_validation_epoch_end(self):
        ap = self.val_ap.compute()
        iou = self.val_iou.compute()
        self.log("val_ap", ap)
        self.log("val_iou", iou)
        print(f"epoch {self.current_epoch}: val AP {ap:.4f}  val IoU {iou:.4f}")

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=self.hparams.lr)


if __name__ == "__main__":
    pl.seed_everything(0)
    train_loader = DataLoader(AerialTiles(64, seed=0), batch_size=8, shuffle=True)
    val_loader = DataLoader(AerialTiles(48, seed=1), batch_size=16)
    trainer = pl.Trainer(max_epochs=10, accelerator="cpu", devices=1, logger=False,
                         enable_checkpointing=False, enable_progress_bar=False,
                         default_root_dir=tempfile.mkdtemp())
    trainer.fit(SegModel(), train_loader, val_loader)
