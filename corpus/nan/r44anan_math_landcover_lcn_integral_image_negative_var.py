"""Land-cover segmentation of 8-bit aerial tiles (RGB, 40x40) with a small FCN that uses
Local Context Normalization (window-wise group norm computed from integral images)."""
import math
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import Dataset, DataLoader

torch.manual_seed(0)
np.random.seed(0)

TILE = 40
N_CLASSES = 4
BATCH_SIZE = 16
EPOCHS = 4
LR = 1e-3

CLASS_COLORS = np.array([[40, 70, 120], [150, 170, 90], [40, 90, 40], [170, 160, 150]], dtype=np.float32)
CLASS_NOISE = np.array([3.0, 8.0, 25.0, 35.0], dtype=np.float32)


class AerialTiles(Dataset):
    def __init__(self, n, seed):
        rng = np.random.default_rng(seed)
        self.images = np.zeros((n, 3, TILE, TILE), dtype=np.float32)
        self.masks = np.zeros((n, TILE, TILE), dtype=np.int64)
        yy, xx = np.mgrid[0:TILE, 0:TILE]
        for i in range(n):
            label = np.full((TILE, TILE), rng.integers(N_CLASSES))
            for _ in range(rng.integers(2, 5)):
                cy, cx, r = rng.integers(0, TILE, size=2).tolist() + [rng.integers(6, 16)]
                label[(yy - cy) ** 2 + (xx - cx) ** 2 < r * r] = rng.integers(N_CLASSES)
            img = CLASS_COLORS[label].transpose(2, 0, 1)
            img = img + rng.normal(0, 1, img.shape) * CLASS_NOISE[label][None]
            img = np.clip(np.round(img), 0, 255)
            if rng.random() < 0.3:
                edge = rng.integers(8, 20)
                img[:, :, TILE - edge:] = 0
                label[:, TILE - edge:] = 0
            self.images[i] = img
            self.masks[i] = label

    def __len__(self):
        return len(self.images)

    def __getitem__(self, i):
        return torch.from_numpy(self.images[i]), torch.from_numpy(self.masks[i])


class LocalContextNorm(nn.Module):
    def __init__(self, num_features, channels_per_group=2, window_size=(9, 9), eps=1e-5):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(1, num_features, 1, 1))
        self.bias = nn.Parameter(torch.zeros(1, num_features, 1, 1))
        self.channels_per_group = channels_per_group
        self.window_size = window_size
        self.eps = eps

    def forward(self, x):
        N, C, H, W = x.shape
        G = C // self.channels_per_group
        wh, ww = self.window_size
        with torch.no_grad():
            integral = F.pad(x.cumsum(2).cumsum(3), (1, 0, 1, 0))
            integral_sq = F.pad((x * x).cumsum(2).cumsum(3), (1, 0, 1, 0))
            sums = (integral[:, :, wh:, ww:] - integral[:, :, :-wh, ww:]
                    - integral[:, :, wh:, :-ww] + integral[:, :, :-wh, :-ww])
            squares = (integral_sq[:, :, wh:, ww:] - integral_sq[:, :, :-wh, ww:]
                       - integral_sq[:, :, wh:, :-ww] + integral_sq[:, :, :-wh, :-ww])
            sums = sums.view(N, G, self.channels_per_group, *sums.shape[2:]).sum(2)
            squares = squares.view(N, G, self.channels_per_group, *squares.shape[2:]).sum(2)
            n = wh * ww * self.channels_per_group
            means = sums / n
            var = (squares - sums * sums / n) / n
            h, w = means.shape[2:]
            pad = (math.floor((W - w) / 2), math.ceil((W - w) / 2), math.floor((H - h) / 2), math.ceil((H - h) / 2))
            means = F.pad(means, pad, mode="replicate")
            var = F.pad(var, pad, mode="replicate") + self.eps
        means = means.repeat_interleave(self.channels_per_group, dim=1)
        var = var.repeat_interleave(self.channels_per_group, dim=1)
        x = (x - means) / var.sqrt()
        return x * self.weight + self.bias


class LandCoverFCN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, padding=1)
        self.norm1 = LocalContextNorm(16)
        self.conv2 = nn.Conv2d(16, 16, 3, padding=1)
        self.norm2 = LocalContextNorm(16)
        self.classifier = nn.Conv2d(16, N_CLASSES, 1)

    def forward(self, x):
        x = F.relu(self.norm1(self.conv1(x)))
        x = F.relu(self.norm2(self.conv2(x)))
        return self.classifier(x)


train_loader = DataLoader(AerialTiles(320, seed=1), batch_size=BATCH_SIZE, shuffle=True)
val_loader = DataLoader(AerialTiles(64, seed=2), batch_size=32)

model = LandCoverFCN()
optimizer = torch.optim.Adam(model.parameters(), lr=LR)

for epoch in range(EPOCHS):
    model.train()
    total, count = 0.0, 0
    for step, (images, masks) in enumerate(train_loader):
        logits = model(images)
        loss = F.cross_entropy(logits, masks)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        total += loss.item()
        count += 1
        if step % 10 == 0:
            print(f"epoch {epoch + 1} step {step:3d} loss {loss.item():.4f}")
    model.eval()
    correct, pixels = 0, 0
    with torch.no_grad():
        for images, masks in val_loader:
            pred = model(images).argmax(1)
            correct += (pred == masks).sum().item()
            pixels += masks.numel()
    print(f"epoch {epoch + 1}: train loss {total / count:.4f}  val pixel acc {correct / pixels:.3f}")
