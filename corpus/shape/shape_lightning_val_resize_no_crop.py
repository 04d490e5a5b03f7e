"""Texture classifier with PyTorch Lightning.

Photos come in different sizes. Training uses random 32x32 crops with horizontal flips;
evaluation resizes the shorter side like the usual ImageNet recipe. Three texture
classes: horizontal stripes, vertical stripes and checkerboard, with colour noise.
"""
import math
import tempfile

import lightning as L
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

CROP = 32
VAL_RESIZE = 36


def make_photo(label, h, w, g):
    ys = torch.arange(h).view(h, 1).float()
    xs = torch.arange(w).view(1, w).float()
    period = 4 + 2 * torch.rand(1, generator=g).item()
    if label == 0:
        pattern = torch.sin(2 * math.pi * ys / period).expand(h, w)
    elif label == 1:
        pattern = torch.sin(2 * math.pi * xs / period).expand(h, w)
    else:
        pattern = torch.sin(2 * math.pi * ys / period) * torch.sin(2 * math.pi * xs / period)
    tint = 0.5 + 0.5 * torch.rand(3, 1, 1, generator=g)
    return tint * pattern.unsqueeze(0) + 0.4 * torch.randn(3, h, w, generator=g)


def random_crop_flip(img, size):
    _, h, w = img.shape
    top = torch.randint(0, h - size + 1, (1,)).item()
    left = torch.randint(0, w - size + 1, (1,)).item()
    img = img[:, top:top + size, left:left + size]
    if torch.rand(1).item() < 0.5:
        img = img.flip(-1)
    return img


def resize_shorter_side(img, size):
    _, h, w = img.shape
    scale = size / min(h, w)
    new_hw = (round(h * scale), round(w * scale))
    return F.interpolate(img.unsqueeze(0), size=new_hw, mode="bilinear", align_corners=False).squeeze(0)


class TexturePhotos(Dataset):
    def __init__(self, n, seed, transform):
        g = torch.Generator().manual_seed(seed)
        self.labels = torch.randint(0, 3, (n,), generator=g).tolist()
        self.photos = []
        for label in self.labels:
            h = torch.randint(40, 57, (1,), generator=g).item()
            w = torch.randint(40, 65, (1,), generator=g).item()
            self.photos.append(make_photo(label, h, w, g))
        self.transform = transform

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return self.transform(self.photos[i]), self.labels[i]


class TextureNet(L.LightningModule):
    def __init__(self, lr=2e-3):
        super().__init__()
        self.save_hyperparameters()
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(32, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.head = nn.Linear(32, 3)

    def forward(self, x):
        return self.head(self.features(x))

    def training_step(self, batch, batch_idx):
        images, labels = batch
        logits = self(images)
        loss = F.cross_entropy(logits, labels)
        if batch_idx % 5 == 0:
            acc = (logits.argmax(1) == labels).float().mean()
            print(f"epoch {self.current_epoch} batch {batch_idx} loss {loss.item():.4f} acc {acc.item():.3f}")
        return loss

    def validation_step(self, batch, batch_idx):
        images, labels = batch
        logits = self(images)
        loss = F.cross_entropy(logits, labels)
        acc = (logits.argmax(1) == labels).float().mean()
        self.log("val_loss", loss, prog_bar=False)
        self.log("val_acc", acc, prog_bar=False)

    def on_validation_epoch_end(self):
        print(f"epoch {self.current_epoch} val_loss {self.trainer.callback_metrics['val_loss']:.4f}")

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=self.hparams.lr)


def main():
    L.seed_everything(7)
    train_set = TexturePhotos(256, seed=1, transform=lambda img: random_crop_flip(img, CROP))
    val_set = TexturePhotos(64, seed=2, transform=lambda img: resize_shorter_side(img, VAL_RESIZE))
    train_loader = DataLoader(train_set, batch_size=32, shuffle=True)
    val_loader = DataLoader(val_set, batch_size=32)

    model = TextureNet()
    trainer = L.Trainer(
        max_epochs=3,
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
