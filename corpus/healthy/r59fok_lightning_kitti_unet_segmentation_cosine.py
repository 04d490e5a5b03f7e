"""Semantic segmentation of street scenes with a U-Net in Lightning, after Lightning's
domain template examples/pytorch/domain_templates/semantic_segmentation.py (KITTI, SegModel,
Adam + CosineAnnealingLR), scaled down to small synthetic KITTI-style frames.

The frames are drawn in the script: sky, buildings, vegetation, road, sidewalk, poles and cars,
with KITTI label ids in the masks (the ego-vehicle strip at the bottom and "unlabeled" pixels use
void ids). encode_segmap maps the 19 valid ids to train ids 0..18 and the void ids to 250, which
cross-entropy ignores.
"""
import random

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset

from lightning.pytorch import LightningModule, Trainer, seed_everything

seed_everything(1234)

DEFAULT_VOID_LABELS = (0, 1, 2, 3, 4, 5, 6, 9, 10, 14, 15, 16, 18, 29, 30, -1)
DEFAULT_VALID_LABELS = (7, 8, 11, 12, 13, 17, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 31, 32, 33)

ROAD, SIDEWALK, BUILDING, POLE, VEGETATION, SKY, CAR, UNLABELED, EGO = 7, 8, 11, 17, 21, 23, 26, 0, 1
COLOURS = {ROAD: (0.35, 0.33, 0.36), SIDEWALK: (0.62, 0.55, 0.58), BUILDING: (0.45, 0.30, 0.25),
           POLE: (0.75, 0.75, 0.70), VEGETATION: (0.20, 0.50, 0.15), SKY: (0.45, 0.65, 0.95),
           CAR: (0.10, 0.10, 0.55), UNLABELED: (0.05, 0.05, 0.05), EGO: (0.15, 0.15, 0.15)}


def render_kitti_frame(rng, h=32, w=48):
    """One synthetic frame and its label-id mask (both uint8, like the PNGs in training/)."""
    mask = np.full((h, w), SKY, dtype=np.uint8)
    horizon = rng.integers(11, 16)
    for x0 in range(0, w, 8):
        top = rng.integers(2, horizon - 1)
        kind = BUILDING if rng.random() < 0.6 else VEGETATION
        mask[top:horizon, x0:x0 + 8] = kind
    mask[horizon:, :] = SIDEWALK
    vp = rng.integers(14, 34)
    for y in range(horizon, h):
        half = int((y - horizon + 1) * rng.uniform(1.3, 1.5))
        mask[y, max(0, vp - half):min(w, vp + half)] = ROAD
    for _ in range(rng.integers(1, 3)):
        px = rng.integers(2, w - 2)
        mask[rng.integers(3, 8):horizon + 3, px:px + 1] = POLE
    for _ in range(rng.integers(1, 4)):
        cw, ch = rng.integers(5, 10), rng.integers(4, 7)
        cx, cy = rng.integers(0, w - cw), rng.integers(horizon + 1, h - 6)
        mask[cy:cy + ch, cx:cx + cw] = CAR
    if rng.random() < 0.5:
        ux = rng.integers(0, w - 6)
        mask[horizon - 3:horizon, ux:ux + 6] = UNLABELED
    mask[h - 3:, :] = EGO
    img = np.zeros((h, w, 3), dtype=np.float32)
    for label, colour in COLOURS.items():
        img[mask == label] = colour
    img *= rng.uniform(0.7, 1.3)
    img += rng.normal(0.0, 0.06, size=img.shape)
    return (np.clip(img, 0, 1) * 255).astype(np.uint8), mask


class KITTI(Dataset):
    """KITTI-style dataset: 80/20 train/valid split by a fixed random.Random, masks encoded with encode_segmap."""

    def __init__(self, frames, split, void_labels=DEFAULT_VOID_LABELS, valid_labels=DEFAULT_VALID_LABELS,
                 transform=None):
        self.void_labels = void_labels
        self.valid_labels = valid_labels
        self.ignore_index = 250
        self.class_map = dict(zip(self.valid_labels, range(len(self.valid_labels))))
        self.transform = transform
        self.split = split

        random_inst = random.Random(12345)
        n_items = len(frames)
        idxs = random_inst.sample(range(n_items), n_items // 5)
        if self.split == "train":
            idxs = [idx for idx in range(n_items) if idx not in idxs]
        self.items = [frames[i] for i in idxs]

    def __len__(self):
        return len(self.items)

    def __getitem__(self, idx):
        img, mask = self.items[idx]
        mask = self.encode_segmap(mask.copy())
        if self.transform:
            img = self.transform(img)
        return img, mask

    def encode_segmap(self, mask):
        for voidc in self.void_labels:
            mask[mask == voidc] = self.ignore_index
        for validc in self.valid_labels:
            mask[mask == validc] = self.class_map[validc]
        mask[mask > 18] = self.ignore_index
        return mask


class Normalize:
    def __init__(self, mean, std):
        self.mean = torch.tensor(mean).view(3, 1, 1)
        self.std = torch.tensor(std).view(3, 1, 1)

    def __call__(self, img):
        x = torch.from_numpy(img).permute(2, 0, 1).float() / 255.0
        return (x - self.mean) / self.std


class DoubleConv(nn.Module):
    def __init__(self, in_ch, out_ch):
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv2d(in_ch, out_ch, kernel_size=3, padding=1),
            nn.BatchNorm2d(out_ch),
            nn.ReLU(inplace=True),
            nn.Conv2d(out_ch, out_ch, kernel_size=3, padding=1),
            nn.BatchNorm2d(out_ch),
            nn.ReLU(inplace=True),
        )

    def forward(self, x):
        return self.net(x)


class Down(nn.Module):
    def __init__(self, in_ch, out_ch):
        super().__init__()
        self.net = nn.Sequential(nn.MaxPool2d(kernel_size=2, stride=2), DoubleConv(in_ch, out_ch))

    def forward(self, x):
        return self.net(x)


class Up(nn.Module):
    def __init__(self, in_ch, out_ch, bilinear=False):
        super().__init__()
        if bilinear:
            self.upsample = nn.Sequential(
                nn.Upsample(scale_factor=2, mode="bilinear", align_corners=True),
                nn.Conv2d(in_ch, in_ch // 2, kernel_size=1),
            )
        else:
            self.upsample = nn.ConvTranspose2d(in_ch, in_ch // 2, kernel_size=2, stride=2)
        self.conv = DoubleConv(in_ch, out_ch)

    def forward(self, x1, x2):
        x1 = self.upsample(x1)
        diff_h = x2.shape[2] - x1.shape[2]
        diff_w = x2.shape[3] - x1.shape[3]
        x1 = F.pad(x1, [diff_w // 2, diff_w - diff_w // 2, diff_h // 2, diff_h - diff_h // 2])
        x = torch.cat([x2, x1], dim=1)
        return self.conv(x)


class UNet(nn.Module):
    def __init__(self, num_classes=19, num_layers=5, features_start=64, bilinear=False):
        super().__init__()
        self.num_layers = num_layers
        layers = [DoubleConv(3, features_start)]
        feats = features_start
        for _ in range(num_layers - 1):
            layers.append(Down(feats, feats * 2))
            feats *= 2
        for _ in range(num_layers - 1):
            layers.append(Up(feats, feats // 2, bilinear))
            feats //= 2
        layers.append(nn.Conv2d(feats, num_classes, kernel_size=1))
        self.layers = nn.ModuleList(layers)

    def forward(self, x):
        xi = [self.layers[0](x)]
        for layer in self.layers[1:self.num_layers]:
            xi.append(layer(xi[-1]))
        for i, layer in enumerate(self.layers[self.num_layers:-1]):
            xi[-1] = layer(xi[-1], xi[-2 - i])
        return self.layers[-1](xi[-1])


class SegModel(LightningModule):
    """U-Net trained with cross-entropy (ignore_index=250), Adam and cosine annealing."""

    def __init__(self, frames, batch_size=8, lr=1e-3, num_layers=3, features_start=8, bilinear=False):
        super().__init__()
        self.batch_size = batch_size
        self.lr = lr
        self.net = UNet(num_classes=19, num_layers=num_layers, features_start=features_start, bilinear=bilinear)
        self.transform = Normalize(mean=[0.35675976, 0.37380189, 0.3764753],
                                   std=[0.32064945, 0.32098866, 0.32325324])
        self.trainset = KITTI(frames, split="train", transform=self.transform)
        self.validset = KITTI(frames, split="valid", transform=self.transform)
        self.val_confusion = torch.zeros(19, 19, dtype=torch.long)
        self.epoch_losses = []
        self.val_summary = ""

    def forward(self, x):
        return self.net(x)

    def training_step(self, batch, batch_nb):
        img, mask = batch
        img = img.float()
        mask = mask.long()
        out = self(img)
        loss = F.cross_entropy(out, mask, ignore_index=250)
        self.log("train_loss", loss, on_step=False, on_epoch=True)
        self.epoch_losses.append(loss.item())
        return loss

    def validation_step(self, batch, batch_idx):
        img, mask = batch
        img = img.float()
        mask = mask.long()
        out = self(img)
        val_loss = F.cross_entropy(out, mask, ignore_index=250)
        self.log("val_loss", val_loss, prog_bar=True)
        pred = out.argmax(1)
        keep = mask != 250
        self.val_confusion += torch.bincount(mask[keep] * 19 + pred[keep], minlength=19 * 19).view(19, 19)

    def on_validation_epoch_end(self):
        conf = self.val_confusion.float()
        present = conf.sum(1) > 0
        iou = conf.diag() / (conf.sum(0) + conf.sum(1) - conf.diag()).clamp(min=1)
        pix_acc = conf.diag().sum() / conf.sum()
        self.val_summary = (f"val_loss {self.trainer.callback_metrics['val_loss']:.4f}  "
                            f"pixel_acc {pix_acc:.3f}  mIoU {iou[present].mean():.3f}")
        self.val_confusion.zero_()

    def on_train_epoch_start(self):
        self.epoch_lr = self.trainer.optimizers[0].param_groups[0]["lr"]

    def on_train_epoch_end(self):
        print(f"epoch {self.current_epoch}: lr {self.epoch_lr:.2e}  train_loss {np.mean(self.epoch_losses):.4f}  "
              f"{self.val_summary}")
        self.epoch_losses.clear()

    def configure_optimizers(self):
        opt = torch.optim.Adam(self.net.parameters(), lr=self.lr)
        sch = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=10)
        return [opt], [sch]

    def train_dataloader(self):
        return DataLoader(self.trainset, batch_size=self.batch_size, shuffle=True)

    def val_dataloader(self):
        return DataLoader(self.validset, batch_size=self.batch_size, shuffle=False)


def main():
    rng = np.random.default_rng(0)
    frames = [render_kitti_frame(rng) for _ in range(200)]
    model = SegModel(frames, batch_size=8, lr=1e-3, num_layers=3, features_start=8)
    trainer = Trainer(
        max_epochs=10,
        accelerator="cpu",
        devices=1,
        enable_progress_bar=False,
        logger=False,
        enable_checkpointing=False,
        enable_model_summary=False,
        num_sanity_val_steps=0,
    )
    trainer.fit(model)


if __name__ == "__main__":
    main()
