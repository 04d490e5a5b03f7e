"""Salient object detection with an auxiliary depth head (RGB input, depth supervision).

A small encoder-decoder predicts a saliency map and a depth map from the RGB image; the
saliency head is trained with BCE and the depth head with a smooth-L1 loss against the
ground-truth depth map. Synthetic scenes: one bright object in front of a tilted background
plane; the depth of the object and the tilt of the plane change from scene to scene.
"""
import argparse
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

SIZE = 48


class RGBDSalientDataset(Dataset):
    def __init__(self, n, seed):
        rng = np.random.RandomState(seed)
        yy, xx = np.mgrid[0:SIZE, 0:SIZE].astype(np.float32) / SIZE
        self.images, self.masks, self.depths = [], [], []
        for _ in range(n):
            cx, cy = rng.uniform(0.3, 0.7, size=2)
            rx, ry = rng.uniform(0.1, 0.25, size=2)
            mask = (((xx - cx) / rx) ** 2 + ((yy - cy) / ry) ** 2 < 1).astype(np.float32)
            gx, gy = rng.uniform(-0.5, 0.5, size=2)
            background = 0.6 + gx * (xx - 0.5) + gy * (yy - 0.5)
            depth = np.where(mask > 0, rng.uniform(0.05, 0.35), background).astype(np.float32)
            color = rng.uniform(0.5, 1.0, size=3)
            image = np.stack([0.3 * (1 - depth) + color[c] * mask for c in range(3)])
            image += 0.05 * rng.randn(3, SIZE, SIZE)
            self.images.append(image.astype(np.float32))
            self.masks.append(mask[None])
            self.depths.append(depth)

    def __len__(self):
        return len(self.images)

    def __getitem__(self, idx):
        return (torch.from_numpy(self.images[idx]), torch.from_numpy(self.masks[idx]),
                torch.from_numpy(self.depths[idx]))


def conv_block(cin, cout, stride=1):
    return nn.Sequential(nn.Conv2d(cin, cout, 3, stride, 1), nn.BatchNorm2d(cout), nn.ReLU(inplace=True))


class SaliencyDepthNet(nn.Module):
    def __init__(self, ch=16):
        super().__init__()
        self.enc1 = conv_block(3, ch)
        self.enc2 = conv_block(ch, 2 * ch, stride=2)
        self.enc3 = conv_block(2 * ch, 4 * ch, stride=2)
        self.dec2 = conv_block(4 * ch + 2 * ch, 2 * ch)
        self.dec1 = conv_block(2 * ch + ch, ch)
        self.sal_head = nn.Conv2d(ch, 1, 1)
        self.depth_head = nn.Conv2d(ch, 1, 1)

    def forward(self, x):
        e1 = self.enc1(x)
        e2 = self.enc2(e1)
        e3 = self.enc3(e2)
        d2 = self.dec2(torch.cat([F.interpolate(e3, scale_factor=2, mode="bilinear"), e2], 1))
        d1 = self.dec1(torch.cat([F.interpolate(d2, scale_factor=2, mode="bilinear"), e1], 1))
        return self.sal_head(d1), torch.sigmoid(self.depth_head(d1))


class Trainer:
    def __init__(self, model, optimizer, train_loader, val_loader, depth_weight=1.0):
        self.model = model
        self.optim = optimizer
        self.train_loader = train_loader
        self.val_loader = val_loader
        self.depth_weight = depth_weight
        self.iteration = 0

    def train_epoch(self, epoch):
        self.model.train()
        for img, target, depth in self.train_loader:
            sal, pred_depth = self.model(img)
            loss_sal = F.binary_cross_entropy_with_logits(sal, target)
            loss_depth = F.smooth_l1_loss(pred_depth, depth)
            loss = loss_sal + self.depth_weight * loss_depth
            self.optim.zero_grad()
            loss.backward()
            self.optim.step()
            if self.iteration % 20 == 0:
                print(f"epoch {epoch} iter {self.iteration:4d} loss {loss.item():.4f} "
                      f"(sal {loss_sal.item():.4f} depth {loss_depth.item():.4f})")
            self.iteration += 1

    @torch.no_grad()
    def validate(self, epoch):
        self.model.eval()
        mae_sal = mae_depth = n = 0.0
        for img, target, depth in self.val_loader:
            sal, pred_depth = self.model(img)
            mae_sal += (torch.sigmoid(sal) - target).abs().mean(dim=(1, 2, 3)).sum().item()
            mae_depth += (pred_depth[:, 0] - depth).abs().mean(dim=(1, 2)).sum().item()
            n += img.size(0)
        print(f"epoch {epoch}: val saliency MAE {mae_sal / n:.4f} depth MAE {mae_depth / n:.4f}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch_size", type=int, default=8)
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--seed", type=int, default=3)
    args = parser.parse_args()
    torch.manual_seed(args.seed)

    train_loader = DataLoader(RGBDSalientDataset(384, seed=1), batch_size=args.batch_size,
                              shuffle=True, num_workers=2)
    val_loader = DataLoader(RGBDSalientDataset(64, seed=2), batch_size=32)
    model = SaliencyDepthNet()
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    trainer = Trainer(model, optimizer, train_loader, val_loader)
    for epoch in range(args.epochs):
        start = time.time()
        trainer.train_epoch(epoch)
        trainer.validate(epoch)
        print(f"epoch {epoch} took {time.time() - start:.1f}s")


if __name__ == "__main__":
    main()
