"""Camera-trap frame classifier (empty / deer / fox / boar) with PyTorch Lightning.

Frames come from different cameras with very different exposure, so every frame is min-max
scaled to [0, 1] on its own when it is loaded. Synthetic frames: grey 32x32 uint8 images with
a textured background and an animal-shaped blob; a few night frames where the IR flash did
not fire are stored as they came off the camera.
"""
import lightning.pytorch as pl
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

CLASSES = ["empty", "deer", "fox", "boar"]


def make_frames(n=2400, size=32, seed=0):
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:size, 0:size]
    frames = np.zeros((n, size, size), dtype=np.uint8)
    labels = rng.integers(0, len(CLASSES), n)
    for i in range(n):
        gain = rng.uniform(0.2, 1.0)
        offset = rng.uniform(0, 60)
        img = offset + gain * (90 + 25 * rng.standard_normal((size, size)))
        c = labels[i]
        if c > 0:
            cy, cx = rng.integers(8, size - 8, 2)
            ry, rx = [(6, 10), (4, 4), (5, 8)][c - 1]
            blob = ((yy - cy) / ry) ** 2 + ((xx - cx) / rx) ** 2 < 1
            img[blob] += gain * 120
        frames[i] = np.clip(img, 0, 255).astype(np.uint8)
    flash_failed = rng.random(n) < 0.0015
    frames[flash_failed] = 0
    labels[flash_failed] = 0
    return frames, labels


class CameraTrapDataset(Dataset):
    def __init__(self, frames, labels):
        self.frames = frames
        self.labels = labels

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, idx):
        img = torch.from_numpy(self.frames[idx]).float().unsqueeze(0)
        img = (img - img.min()) / (img.max() - img.min())
        return img, int(self.labels[idx])


class FrameClassifier(pl.LightningModule):
    def __init__(self, lr=1e-3):
        super().__init__()
        self.save_hyperparameters()
        self.conv1 = nn.Conv2d(1, 16, 3, padding=1)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.conv3 = nn.Conv2d(32, 64, 3, padding=1)
        self.head = nn.Linear(64 * 4 * 4, len(CLASSES))

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = F.max_pool2d(F.relu(self.conv3(x)), 2)
        return self.head(x.flatten(1))

    def training_step(self, batch, batch_idx):
        x, y = batch
        logits = self(x)
        loss = F.cross_entropy(logits, y)
        acc = (logits.argmax(1) == y).float().mean()
        self.log("train_loss", loss)
        if batch_idx % 5 == 0:
            print(f"epoch {self.current_epoch} step {batch_idx:3d}  loss {loss.item():.4f}  acc {acc.item():.3f}")
        return loss

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=self.hparams.lr)


if __name__ == "__main__":
    pl.seed_everything(0)
    frames, labels = make_frames()
    print(f"{len(frames)} frames, class counts {np.bincount(labels, minlength=len(CLASSES)).tolist()}")
    loader = DataLoader(CameraTrapDataset(frames, labels), batch_size=32, shuffle=True)
    model = FrameClassifier()
    trainer = pl.Trainer(max_epochs=1, accelerator="cpu", devices=1, logger=False,
                         enable_checkpointing=False, enable_progress_bar=False,
                         enable_model_summary=False)
    trainer.fit(model, loader)
