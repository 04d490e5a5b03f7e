"""Lesion segmentation on 2-D MRI slices with a small U-Net in Lightning. The preprocessing
follows a TorchIO pipeline: per-image z-normalisation followed by a random gamma
augmentation (log-gamma drawn from (-0.3, 0.3)), then a random flip.
"""
import tempfile

import lightning as L
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

SIZE = 48
BATCH_SIZE = 8
EPOCHS = 3


def synthetic_slice(rng):
    yy, xx = np.mgrid[:SIZE, :SIZE] / SIZE
    brain = ((yy - 0.5) ** 2 / 0.16 + (xx - 0.5) ** 2 / 0.12) < 1
    img = np.where(brain, 600 + 80 * np.sin(6 * xx + rng.uniform(0, 6)) * np.cos(5 * yy), 20.0)
    cy, cx, r = rng.uniform(0.35, 0.65), rng.uniform(0.35, 0.65), rng.uniform(0.05, 0.12)
    lesion = ((yy - cy) ** 2 + (xx - cx) ** 2) < r ** 2
    img = img + 250 * lesion + rng.normal(0, 25, size=img.shape)
    return img.astype(np.float32), lesion.astype(np.float32)


def z_normalize(img):
    return (img - img.mean()) / img.std()


def random_gamma(img, log_gamma=(-0.3, 0.3)):
    gamma = float(np.exp(np.random.uniform(*log_gamma)))
    return img ** gamma


class MRISlices(Dataset):
    def __init__(self, n, seed, augment=True):
        rng = np.random.default_rng(seed)
        self.slices = [synthetic_slice(rng) for _ in range(n)]
        self.augment = augment

    def __len__(self):
        return len(self.slices)

    def __getitem__(self, i):
        img, mask = self.slices[i]
        img = torch.from_numpy(img)[None]
        mask = torch.from_numpy(mask)[None]
        img = z_normalize(img)
        if self.augment:
            img = random_gamma(img)
            if np.random.rand() < 0.5:
                img, mask = img.flip(-1), mask.flip(-1)
        return img, mask


def block(cin, cout):
    return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU(inplace=True),
                         nn.Conv2d(cout, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU(inplace=True))


class SmallUNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc1, self.enc2, self.mid = block(1, 8), block(8, 16), block(16, 32)
        self.up2, self.dec2 = nn.ConvTranspose2d(32, 16, 2, stride=2), block(32, 16)
        self.up1, self.dec1 = nn.ConvTranspose2d(16, 8, 2, stride=2), block(16, 8)
        self.head = nn.Conv2d(8, 1, 1)

    def forward(self, x):
        e1 = self.enc1(x)
        e2 = self.enc2(F.max_pool2d(e1, 2))
        m = self.mid(F.max_pool2d(e2, 2))
        d2 = self.dec2(torch.cat([self.up2(m), e2], 1))
        d1 = self.dec1(torch.cat([self.up1(d2), e1], 1))
        return self.head(d1)


def dice_loss(logits, target, eps=1.0):
    prob = torch.sigmoid(logits)
    inter = (prob * target).sum((1, 2, 3))
    return 1 - ((2 * inter + eps) / (prob.sum((1, 2, 3)) + target.sum((1, 2, 3)) + eps)).mean()


class LesionSegmenter(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = SmallUNet()

    def training_step(self, batch, batch_idx):
        img, mask = batch
        logits = self.net(img)
        loss = F.binary_cross_entropy_with_logits(logits, mask) + dice_loss(logits, mask)
        if self.global_step % 10 == 0:
            print(f"epoch {self.current_epoch} step {self.global_step:3d} loss {loss.item():.4f}")
        return loss

    def validation_step(self, batch, batch_idx):
        img, mask = batch
        logits = self.net(img)
        dice = 1 - dice_loss(logits, mask)
        self.log("val_dice", dice, prog_bar=False)

    def on_validation_epoch_end(self):
        print(f"epoch {self.current_epoch} val_dice {self.trainer.callback_metrics['val_dice'].item():.4f}")

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=1e-3)


def main():
    L.seed_everything(3, verbose=False)
    train_loader = DataLoader(MRISlices(224, seed=0), batch_size=BATCH_SIZE, shuffle=True)
    val_loader = DataLoader(MRISlices(48, seed=1, augment=False), batch_size=BATCH_SIZE)
    trainer = L.Trainer(
        max_epochs=EPOCHS, accelerator="cpu", devices=1, logger=False, enable_checkpointing=False,
        enable_progress_bar=False, enable_model_summary=False, default_root_dir=tempfile.mkdtemp(),
        num_sanity_val_steps=0,
    )
    trainer.fit(LesionSegmenter(), train_loader, val_loader)


if __name__ == "__main__":
    main()
