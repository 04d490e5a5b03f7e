"""Point cloud shape classification with a SoftPool aggregation block.

Each cloud has 128 points sampled from one of four primitives (sphere, cube,
cylinder, cone) with random scale and noise. A shared per-point MLP (1x1
convs) makes point features, SoftPool sorts the points by their feature score,
keeps the top ones and mixes them with small convs into one global feature,
and a linear head classifies the shape.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)

N_POINTS = 128
N_CLASSES = 4
BATCH = 32
EPOCHS = 5


def sample_shape(label, n, g):
    if label == 0:  # sphere
        p = torch.randn(n, 3, generator=g)
        p = p / p.norm(dim=1, keepdim=True)
    elif label == 1:  # cube surface
        p = torch.rand(n, 3, generator=g) * 2 - 1
        axis = torch.randint(0, 3, (n,), generator=g)
        sign = torch.randint(0, 2, (n,), generator=g).float() * 2 - 1
        p[torch.arange(n), axis] = sign
    elif label == 2:  # cylinder
        theta = torch.rand(n, generator=g) * 2 * math.pi
        z = torch.rand(n, generator=g) * 2 - 1
        p = torch.stack([torch.cos(theta), torch.sin(theta), z], dim=1)
    else:  # cone
        theta = torch.rand(n, generator=g) * 2 * math.pi
        z = torch.rand(n, generator=g)
        r = 1 - z
        p = torch.stack([r * torch.cos(theta), r * torch.sin(theta), z * 2 - 1], dim=1)
    scale = 0.7 + 0.6 * torch.rand(1, generator=g)
    p = p * scale + 0.02 * torch.randn(n, 3, generator=g)
    return p


class ShapeDataset(Dataset):
    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        self.labels = torch.randint(0, N_CLASSES, (n,), generator=g)
        self.points = torch.stack([sample_shape(int(l), N_POINTS, g) for l in self.labels])

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, idx):
        return self.points[idx].t(), self.labels[idx]


class SoftPool(nn.Module):
    def __init__(self, regions=8, sp_ratio=4):
        super().__init__()
        self.regions = regions
        self.sp_ratio = sp_ratio

    def forward(self, x):
        size_bth, size_feat, n_pts = x.shape
        pnt_per_sort = n_pts // self.sp_ratio
        conv2d_1 = nn.Conv2d(size_feat, size_feat, kernel_size=(1, 3), stride=(1, 1)).to(x.device)
        conv2d_5 = nn.Conv2d(size_feat, size_feat, kernel_size=(self.regions, 1), stride=(1, 1)).to(x.device)

        # sort points by each of the first `regions` feature channels, keep the top ones
        sorted_feats = []
        for r in range(self.regions):
            idx = torch.argsort(x[:, r, :], dim=-1, descending=True)[:, :pnt_per_sort]
            idx = idx.unsqueeze(1).expand(-1, size_feat, -1)
            sorted_feats.append(torch.gather(x, 2, idx))
        sp_cube = torch.stack(sorted_feats, dim=2)  # B, C, regions, pnt_per_sort

        h = F.relu(conv2d_1(sp_cube))  # B, C, regions, pnt_per_sort - 2
        h = conv2d_5(h)  # B, C, 1, pnt_per_sort - 2
        return h.max(dim=-1)[0].squeeze(-1)


class PointClassifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.mlp = nn.Sequential(
            nn.Conv1d(3, 32, 1), nn.BatchNorm1d(32), nn.ReLU(),
            nn.Conv1d(32, 64, 1), nn.BatchNorm1d(64), nn.ReLU(),
        )
        self.softpool = SoftPool(regions=8, sp_ratio=4)
        self.head = nn.Linear(64, N_CLASSES)

    def forward(self, pts):
        feats = self.mlp(pts)
        g = self.softpool(feats)
        return self.head(F.relu(g))


def evaluate(model, loader):
    model.eval()
    correct = total = 0
    with torch.no_grad():
        for pts, y in loader:
            correct += (model(pts).argmax(1) == y).sum().item()
            total += len(y)
    model.train()
    return correct / total


def main():
    train_ds = ShapeDataset(800, seed=1)
    val_ds = ShapeDataset(256, seed=2)
    train_loader = DataLoader(train_ds, batch_size=BATCH, shuffle=True)
    val_loader = DataLoader(val_ds, batch_size=64)

    model = PointClassifier()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    criterion = nn.CrossEntropyLoss()

    for epoch in range(EPOCHS):
        running = 0.0
        for pts, y in train_loader:
            optimizer.zero_grad()
            loss = criterion(model(pts), y)
            loss.backward()
            optimizer.step()
            running += loss.item() * len(y)
        acc = evaluate(model, val_loader)
        print(f"epoch {epoch + 1}: train loss {running / len(train_ds):.4f}  val acc {acc:.3f}")


if __name__ == "__main__":
    main()
