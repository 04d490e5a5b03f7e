"""MSCNN (multi-scale CNN) crowd counting: regress a density map whose sum is the head count.

Architecture after Zeng et al., "Multi-scale convolutional neural networks for crowd
counting": a 9x9 stem, multi-scale blobs (MSB: parallel 9/7/5/3 convolutions concatenated),
two poolings, a 1x1 "fully connected" layer and a 1x1 density-map output layer. Training
minimises the MSE between predicted and ground-truth density maps (1/4 resolution).

Synthetic crowd scenes: 1..40 "heads" (small bright blobs) on a textured background; the
ground truth places a Gaussian of mass 1 on every head, downsampled to the output grid.
"""
import argparse
import time

import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset


def gaussian_map(points, size, sigma):
    yy, xx = np.mgrid[0:size, 0:size].astype(np.float32)
    dm = np.zeros((size, size), np.float32)
    for (y, x) in points:
        g = np.exp(-((yy - y) ** 2 + (xx - x) ** 2) / (2 * sigma ** 2))
        dm += g / g.sum()
    return dm


class CrowdDataset(Dataset):
    def __init__(self, n, img_size=32, seed=0):
        rng = np.random.RandomState(seed)
        self.imgs, self.dmaps = [], []
        yy, xx = np.mgrid[0:img_size, 0:img_size].astype(np.float32)
        for _ in range(n):
            count = rng.randint(1, 31)
            pts = rng.uniform(2, img_size - 2, size=(count, 2))
            img = 0.2 * rng.randn(img_size, img_size).astype(np.float32)
            img += 0.3 * np.sin(xx / rng.uniform(3, 8)) * np.cos(yy / rng.uniform(3, 8))
            for (y, x) in pts:
                img += 1.2 * np.exp(-((yy - y) ** 2 + (xx - x) ** 2) / 3.0)
            dm = gaussian_map(pts / 4.0, img_size // 4, sigma=1.0)
            self.imgs.append(img[None].astype(np.float32))
            self.dmaps.append(dm[None])

    def __len__(self):
        return len(self.imgs)

    def __getitem__(self, i):
        return torch.from_numpy(self.imgs[i]), torch.from_numpy(self.dmaps[i])


class MSB(nn.Module):
    def __init__(self, in_ch, out_ch, kernels=(9, 7, 5, 3)):
        super().__init__()
        self.branches = nn.ModuleList([nn.Conv2d(in_ch, out_ch, k, padding=k // 2) for k in kernels])
        self.relu = nn.ReLU(inplace=True)

    def forward(self, x):
        return self.relu(torch.cat([b(x) for b in self.branches], dim=1))


class MSCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.front = nn.Sequential(nn.Conv2d(1, 8, 9, padding=4), nn.ReLU(inplace=True))
        self.msb1 = MSB(8, 4)
        self.pool1 = nn.MaxPool2d(2)
        self.msb2 = MSB(16, 4)
        self.msb3 = MSB(16, 4)
        self.pool2 = nn.MaxPool2d(2)
        self.msb4 = MSB(16, 4, kernels=(7, 5, 3))
        self.fc = nn.Sequential(nn.Conv2d(12, 64, 1), nn.ReLU(inplace=True))
        self.density = nn.Sequential(nn.Conv2d(64, 1, 1), nn.ReLU(inplace=True))

    def forward(self, x):
        x = self.pool1(self.msb1(self.front(x)))
        x = self.pool2(self.msb3(self.msb2(x)))
        x = self.fc(self.msb4(x))
        return self.density(x)


def main():
    parser = argparse.ArgumentParser(description="MSCNN crowd counting")
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--batch_size", type=int, default=16)
    parser.add_argument("--lr", type=float, default=1e-3)
    args = parser.parse_args()
    torch.manual_seed(3)

    train_set = CrowdDataset(400, seed=1)
    test_set = CrowdDataset(80, seed=2)
    train_loader = DataLoader(train_set, batch_size=args.batch_size, shuffle=True)
    test_loader = DataLoader(test_set, batch_size=40)

    model = MSCNN()
    criterion = nn.MSELoss(reduction="sum")
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)

    for epoch in range(args.epochs):
        model.train()
        t0, epoch_loss = time.time(), 0.0
        for img, dmap in train_loader:
            pred = model(img)
            loss = criterion(pred, dmap)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            epoch_loss += loss.item()

        model.eval()
        mae, pred_sum = 0.0, 0.0
        with torch.no_grad():
            for img, dmap in test_loader:
                pred = model(img)
                mae += (pred.sum(dim=(1, 2, 3)) - dmap.sum(dim=(1, 2, 3))).abs().sum().item()
                pred_sum += pred.sum().item()
        print("epoch %d  loss %.4f  test MAE %.2f  mean predicted count %.2f  (%.1fs)" % (
            epoch, epoch_loss / len(train_loader), mae / len(test_set), pred_sum / len(test_set), time.time() - t0))


if __name__ == "__main__":
    main()
