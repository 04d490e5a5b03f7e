"""Semantic segmentation of airborne LiDAR tiles (ground / building / high vegetation /
low vegetation) with a DGCNN (dynamic graph CNN, EdgeConv on k-nearest-neighbour graphs
recomputed in feature space), plugged into the same framework as our PointNet models.

Training: a random sample of points per tile. Evaluation: every point of the tile is
predicted, so the output can be written back to the full-resolution cloud.
"""
import argparse
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

CLASSES = ["ground", "building", "high_veg", "low_veg"]


def knn(x, k):
    inner = -2 * torch.matmul(x.transpose(2, 1), x)
    xx = torch.sum(x ** 2, dim=1, keepdim=True)
    pairwise_distance = -xx - inner - xx.transpose(2, 1)
    idx = pairwise_distance.topk(k=k, dim=-1)[1]   # (batch_size, num_points, k)
    return idx


def get_graph_feature(x, k=20, idx=None):
    batch_size = x.size(0)
    num_points = x.size(2)
    x = x.view(batch_size, -1, num_points)
    if idx is None:
        idx = knn(x, k=k)   # (batch_size, num_points, k)
    idx_base = torch.arange(0, batch_size, device=x.device).view(-1, 1, 1) * num_points
    idx = (idx + idx_base).view(-1)
    _, num_dims, _ = x.size()
    x = x.transpose(2, 1).contiguous()
    feature = x.view(batch_size * num_points, -1)[idx, :]
    feature = feature.view(batch_size, num_points, k, num_dims)
    x = x.view(batch_size, num_points, 1, num_dims).repeat(1, 1, k, 1)
    feature = torch.cat((feature - x, x), dim=3).permute(0, 3, 1, 2).contiguous()
    return feature


class DGCNNSemSeg(nn.Module):
    def __init__(self, k=16, emb_dims=256, num_classes=4, dropout=0.5):
        super().__init__()
        self.k = k
        self.conv1 = nn.Sequential(nn.Conv2d(6, 32, 1, bias=False), nn.BatchNorm2d(32), nn.LeakyReLU(0.2))
        self.conv2 = nn.Sequential(nn.Conv2d(64, 32, 1, bias=False), nn.BatchNorm2d(32), nn.LeakyReLU(0.2))
        self.conv3 = nn.Sequential(nn.Conv2d(64, 32, 1, bias=False), nn.BatchNorm2d(32), nn.LeakyReLU(0.2))
        self.conv4 = nn.Sequential(nn.Conv1d(96, emb_dims, 1, bias=False), nn.BatchNorm1d(emb_dims), nn.LeakyReLU(0.2))
        self.seg = nn.Sequential(
            nn.Conv1d(emb_dims + 96, 128, 1, bias=False), nn.BatchNorm1d(128), nn.LeakyReLU(0.2),
            nn.Dropout(dropout), nn.Conv1d(128, num_classes, 1))

    def forward(self, x):
        num_points = x.size(2)
        x1 = self.conv1(get_graph_feature(x, k=self.k)).max(dim=-1)[0]
        x2 = self.conv2(get_graph_feature(x1, k=self.k)).max(dim=-1)[0]
        x3 = self.conv3(get_graph_feature(x2, k=self.k)).max(dim=-1)[0]
        local = torch.cat((x1, x2, x3), dim=1)
        glob = self.conv4(local).max(dim=-1, keepdim=True)[0].repeat(1, 1, num_points)
        return self.seg(torch.cat((local, glob), dim=1))


def make_tile(rng, n_points):
    """One 50 m x 50 m tile: rolling terrain, a few buildings, tree crowns and shrubs."""
    xy = rng.rand(n_points, 2)
    ground_z = 0.05 * np.sin(3 * xy[:, 0]) + 0.04 * np.cos(4 * xy[:, 1])
    z = ground_z + 0.005 * rng.randn(n_points)
    label = np.zeros(n_points, dtype=np.int64)
    for _ in range(rng.randint(1, 4)):
        x0, y0 = rng.rand(2) * 0.7
        w, d, h = 0.1 + 0.15 * rng.rand(), 0.1 + 0.15 * rng.rand(), 0.15 + 0.2 * rng.rand()
        inside = (xy[:, 0] > x0) & (xy[:, 0] < x0 + w) & (xy[:, 1] > y0) & (xy[:, 1] < y0 + d)
        z[inside] = ground_z[inside] + h + 0.003 * rng.randn(inside.sum())
        label[inside] = 1
    for _ in range(rng.randint(5, 15)):
        cx, cy, r = rng.rand(), rng.rand(), 0.03 + 0.05 * rng.rand()
        dist = np.hypot(xy[:, 0] - cx, xy[:, 1] - cy)
        crown = (dist < r) & (label == 0)
        tall = rng.rand() < 0.6
        height = (0.12 + 0.15 * rng.rand()) if tall else (0.02 + 0.03 * rng.rand())
        z[crown] = ground_z[crown] + height * np.sqrt(1 - (dist[crown] / r) ** 2) + 0.01 * rng.rand(crown.sum())
        label[crown] = 2 if tall else 3
    points = np.stack([xy[:, 0], xy[:, 1], z], axis=0).astype(np.float32)
    return points, label


class LidarTiles(Dataset):
    def __init__(self, n_tiles, points_per_tile, num_points, seed):
        rng = np.random.RandomState(seed)
        self.tiles = [make_tile(rng, points_per_tile) for _ in range(n_tiles)]
        self.num_points = num_points
        self.rng = np.random.RandomState(seed + 100)

    def __len__(self):
        return len(self.tiles)

    def __getitem__(self, i):
        points, label = self.tiles[i]
        if self.num_points > 0:
            choice = self.rng.choice(points.shape[1], self.num_points, replace=False)
            points, label = points[:, choice], label[choice]
        return torch.from_numpy(points), torch.from_numpy(label)


def evaluate(model, loader):
    model.eval()
    correct, total = 0, 0
    inter = np.zeros(len(CLASSES))
    union = np.zeros(len(CLASSES))
    with torch.no_grad():
        for points, label in loader:
            pred = model(points).argmax(dim=1)
            correct += (pred == label).sum().item()
            total += label.numel()
            for c in range(len(CLASSES)):
                inter[c] += ((pred == c) & (label == c)).sum().item()
                union[c] += ((pred == c) | (label == c)).sum().item()
    return correct / total, np.mean(inter / np.maximum(union, 1))


def main():
    parser = argparse.ArgumentParser(description="DGCNN airborne LiDAR segmentation")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch_size", type=int, default=4)
    parser.add_argument("--num_points", type=int, default=1024, help="points sampled per tile for training")
    parser.add_argument("--k", type=int, default=16)
    parser.add_argument("--lr", type=float, default=1e-3)
    args = parser.parse_args()

    torch.manual_seed(1)
    train_set = LidarTiles(64, points_per_tile=16000, num_points=args.num_points, seed=1)
    test_set = LidarTiles(4, points_per_tile=16000, num_points=-1, seed=2)
    train_loader = DataLoader(train_set, batch_size=args.batch_size, shuffle=True, drop_last=True)
    test_loader = DataLoader(test_set, batch_size=1)

    model = DGCNNSemSeg(k=args.k, num_classes=len(CLASSES))
    opt = torch.optim.Adam(model.parameters(), lr=args.lr, weight_decay=1e-4)
    weights = torch.tensor([1.0, 1.5, 1.5, 2.0])

    for epoch in range(args.epochs):
        model.train()
        t0 = time.time()
        running = 0.0
        for step, (points, label) in enumerate(train_loader):
            logits = model(points)
            loss = F.cross_entropy(logits, label, weight=weights)
            opt.zero_grad()
            loss.backward()
            opt.step()
            running += loss.item()
            if step % 6 == 0:
                print(f"epoch {epoch} step {step}/{len(train_loader)} loss {loss.item():.4f}")
        print(f"epoch {epoch} train loss {running / len(train_loader):.4f} ({time.time() - t0:.1f}s)")
        acc, miou = evaluate(model, test_loader)
        print(f"epoch {epoch} test overall acc {acc:.3f} mIoU {miou:.3f}")


if __name__ == "__main__":
    main()
