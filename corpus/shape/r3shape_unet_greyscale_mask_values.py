"""U-Net semantic segmentation (background / object) with CrossEntropyLoss.

Images are RGB scenes with bright elliptical objects; each comes with its mask image (as
read from the mask PNGs of a carvana-style dataset). The network predicts n_classes=2
logits per pixel (background, object).
"""
import argparse

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset, random_split


def render_sample(rng, size=64):
    yy, xx = np.mgrid[0:size, 0:size].astype(np.float32)
    cx, cy = rng.uniform(16, 48, size=2)
    ax, ay = rng.uniform(6, 14, size=2)
    r = np.sqrt(((xx - cx) / ax) ** 2 + ((yy - cy) / ay) ** 2)
    coverage = np.clip((1.15 - r) / 0.3, 0.0, 1.0)
    mask = (coverage * 255).round().astype(np.uint8)
    img = rng.normal(0.3, 0.15, size=(size, size, 3)).astype(np.float32)
    img += coverage[..., None] * np.array([0.5, 0.3, 0.1], dtype=np.float32)
    img = (np.clip(img, 0, 1) * 255).astype(np.uint8)
    return img, mask


class BasicDataset(Dataset):
    def __init__(self, n, seed=0):
        rng = np.random.default_rng(seed)
        self.samples = [render_sample(rng) for _ in range(n)]

    def __len__(self):
        return len(self.samples)

    @staticmethod
    def preprocess(img_nd):
        if img_nd.ndim == 2:
            img_nd = np.expand_dims(img_nd, axis=2)
        img_trans = img_nd.transpose((2, 0, 1))
        if img_trans.max() > 1:
            img_trans = img_trans / 255
        return img_trans

    def __getitem__(self, i):
        img, mask = self.samples[i]
        img = self.preprocess(img)
        return {
            "image": torch.from_numpy(img).type(torch.FloatTensor),
            "mask": torch.from_numpy(mask.copy()).type(torch.LongTensor),
        }


class DoubleConv(nn.Module):
    def __init__(self, in_ch, out_ch):
        super().__init__()
        self.double_conv = nn.Sequential(
            nn.Conv2d(in_ch, out_ch, 3, padding=1), nn.BatchNorm2d(out_ch), nn.ReLU(inplace=True),
            nn.Conv2d(out_ch, out_ch, 3, padding=1), nn.BatchNorm2d(out_ch), nn.ReLU(inplace=True))

    def forward(self, x):
        return self.double_conv(x)


class Up(nn.Module):
    def __init__(self, in_ch, out_ch):
        super().__init__()
        self.up = nn.ConvTranspose2d(in_ch, in_ch // 2, kernel_size=2, stride=2)
        self.conv = DoubleConv(in_ch, out_ch)

    def forward(self, x1, x2):
        x1 = self.up(x1)
        return self.conv(torch.cat([x2, x1], dim=1))


class UNet(nn.Module):
    def __init__(self, n_channels=3, n_classes=2):
        super().__init__()
        self.n_classes = n_classes
        self.inc = DoubleConv(n_channels, 16)
        self.down1 = nn.Sequential(nn.MaxPool2d(2), DoubleConv(16, 32))
        self.down2 = nn.Sequential(nn.MaxPool2d(2), DoubleConv(32, 64))
        self.up1 = Up(64, 32)
        self.up2 = Up(32, 16)
        self.outc = nn.Conv2d(16, n_classes, kernel_size=1)

    def forward(self, x):
        x1 = self.inc(x)
        x2 = self.down1(x1)
        x3 = self.down2(x2)
        x = self.up1(x3, x2)
        x = self.up2(x, x1)
        return self.outc(x)


def dice_coeff(pred, target, eps=1e-6):
    inter = (pred * target).sum()
    return (2 * inter + eps) / (pred.sum() + target.sum() + eps)


def train_net(net, epochs=3, batch_size=8, lr=1e-3, val_percent=0.1):
    dataset = BasicDataset(240)
    n_val = int(len(dataset) * val_percent)
    train_set, val_set = random_split(dataset, [len(dataset) - n_val, n_val],
                                      generator=torch.Generator().manual_seed(0))
    train_loader = DataLoader(train_set, batch_size=batch_size, shuffle=True)
    val_loader = DataLoader(val_set, batch_size=batch_size)

    optimizer = torch.optim.RMSprop(net.parameters(), lr=lr, weight_decay=1e-8, momentum=0.9)
    criterion = nn.CrossEntropyLoss() if net.n_classes > 1 else nn.BCEWithLogitsLoss()

    global_step = 0
    for epoch in range(epochs):
        net.train()
        epoch_loss = 0
        for batch in train_loader:
            imgs = batch["image"]
            true_masks = batch["mask"]
            masks_pred = net(imgs)
            loss = criterion(masks_pred, true_masks)
            epoch_loss += loss.item()

            optimizer.zero_grad()
            loss.backward()
            nn.utils.clip_grad_value_(net.parameters(), 0.1)
            optimizer.step()
            global_step += 1
            if global_step % 5 == 0:
                print(f"epoch {epoch + 1} step {global_step}: loss (batch) {loss.item():.4f}")

        net.eval()
        dice = 0.0
        with torch.no_grad():
            for batch in val_loader:
                pred = net(batch["image"]).argmax(1).float()
                dice += dice_coeff(pred, (batch["mask"] > 0).float()).item()
        print(f"epoch {epoch + 1}: train loss {epoch_loss / len(train_loader):.4f} "
              f"val dice {dice / len(val_loader):.3f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="Train the UNet on images and target masks")
    parser.add_argument("-e", "--epochs", type=int, default=3)
    parser.add_argument("-b", "--batch-size", type=int, default=8)
    parser.add_argument("-l", "--learning-rate", type=float, default=1e-3)
    args = parser.parse_args()
    torch.manual_seed(0)
    net = UNet(n_channels=3, n_classes=2)
    train_net(net, epochs=args.epochs, batch_size=args.batch_size, lr=args.learning_rate)
