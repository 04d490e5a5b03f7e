"""Point-cloud shape classification with a Point Transformer layer.

Synthetic ModelNet-style shapes (sphere, cube, cylinder, cone, torus, ...) are sampled as 512-point
clouds with a random rotation about the up axis, anisotropic scale and jitter. The network embeds xyz, runs one
Point Transformer layer (vector self-attention with a relative position encoding, Zhao et al. 2021,
following point_transformer_pytorch), max-pools over the points and classifies the shape.
"""
import argparse
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

parser = argparse.ArgumentParser()
parser.add_argument("--num-points", type=int, default=512)
parser.add_argument("--batch-size", type=int, default=4)
parser.add_argument("--epochs", type=int, default=3)
parser.add_argument("--lr", type=float, default=1e-2)
args = parser.parse_args()

torch.manual_seed(0)

CLASSES = ["sphere", "cube", "cylinder", "cone", "torus", "plane", "capsule", "pyramid"]


def sample_shape(kind, n, g):
    u = torch.rand(n, generator=g)
    w = torch.rand(n, generator=g)
    if kind == "sphere":
        p = torch.randn(n, 3, generator=g)
        return p / p.norm(dim=1, keepdim=True)
    if kind == "cube":
        p = torch.rand(n, 3, generator=g) * 2 - 1
        face = torch.randint(0, 3, (n,), generator=g)
        sign = torch.randint(0, 2, (n,), generator=g).float() * 2 - 1
        p[torch.arange(n), face] = sign
        return p
    if kind == "cylinder":
        t = 2 * math.pi * u
        return torch.stack([torch.cos(t), torch.sin(t), 2 * w - 1], 1)
    if kind == "cone":
        t = 2 * math.pi * u
        r = 1 - w
        return torch.stack([r * torch.cos(t), r * torch.sin(t), 2 * w - 1], 1)
    if kind == "torus":
        t, s = 2 * math.pi * u, 2 * math.pi * w
        return torch.stack([(1 + 0.35 * torch.cos(s)) * torch.cos(t),
                            (1 + 0.35 * torch.cos(s)) * torch.sin(t), 0.35 * torch.sin(s)], 1)
    if kind == "plane":
        return torch.stack([2 * u - 1, 2 * w - 1, 0.02 * torch.randn(n, generator=g)], 1)
    if kind == "capsule":
        t = 2 * math.pi * u
        z = 3 * w - 1.5
        r = torch.where(z.abs() > 1, torch.sqrt((1 - (z.abs() - 1) ** 2 / 0.25).clamp(min=0)), torch.ones_like(z))
        return torch.stack([0.5 * r * torch.cos(t), 0.5 * r * torch.sin(t), z], 1)
    # pyramid: square base + four triangular faces
    a, b = 2 * u - 1, 2 * w - 1
    h = torch.rand(n, generator=g)
    side = torch.randint(0, 5, (n,), generator=g)
    p = torch.stack([a * (1 - h), b * (1 - h), 2 * h - 1], 1)
    p[side == 4] = torch.stack([a, b, -torch.ones(n)], 1)[side == 4]
    return p


def random_rotation(g):
    t = 2 * math.pi * torch.rand(1, generator=g).item()
    c, s = math.cos(t), math.sin(t)
    return torch.tensor([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])


class ShapeClouds(Dataset):
    def __init__(self, n_per_class, num_points, seed):
        g = torch.Generator().manual_seed(seed)
        self.points, self.labels = [], []
        for label, kind in enumerate(CLASSES):
            for _ in range(n_per_class):
                p = sample_shape(kind, num_points, g)
                p = p * (0.7 + 0.6 * torch.rand(3, generator=g))
                p = p @ random_rotation(g).T + 0.01 * torch.randn(num_points, 3, generator=g)
                p = p - p.mean(0)
                p = p / p.norm(dim=1).max()
                self.points.append(p)
                self.labels.append(label)

    def __len__(self):
        return len(self.points)

    def __getitem__(self, idx):
        return self.points[idx], self.labels[idx]


def index_points(points, idx):
    # points: b x n x c, idx: b x n x k  ->  b x n x k x c
    b = points.shape[0]
    batch = torch.arange(b).view(b, 1, 1)
    return points[batch, idx]


class PointTransformerLayer(nn.Module):
    def __init__(self, *, dim, pos_mlp_hidden_dim=64, attn_mlp_hidden_mult=4, num_neighbors=None):
        super().__init__()
        self.num_neighbors = num_neighbors
        self.to_qkv = nn.Linear(dim, dim * 3, bias=False)
        self.pos_mlp = nn.Sequential(
            nn.Linear(3, pos_mlp_hidden_dim),
            nn.ReLU(),
            nn.Linear(pos_mlp_hidden_dim, dim),
        )
        self.attn_mlp = nn.Sequential(
            nn.Linear(dim, dim * attn_mlp_hidden_mult),
            nn.ReLU(),
            nn.Linear(dim * attn_mlp_hidden_mult, dim),
        )

    def forward(self, x, pos):
        n, num_neighbors = x.shape[1], self.num_neighbors
        q, k, v = self.to_qkv(x).chunk(3, dim=-1)

        if num_neighbors is not None and num_neighbors < n:
            dist = torch.cdist(pos, pos)
            idx = dist.topk(num_neighbors, dim=-1, largest=False).indices
            rel_pos = pos[:, :, None, :] - index_points(pos, idx)
            qk_rel = q[:, :, None, :] - index_points(k, idx)
            v = index_points(v, idx)
        else:
            rel_pos = pos[:, :, None, :] - pos[:, None, :, :]
            qk_rel = q[:, :, None, :] - k[:, None, :, :]
            v = v[:, None, :, :].expand(-1, n, -1, -1)

        rel_pos_emb = self.pos_mlp(rel_pos)
        v = v + rel_pos_emb
        sim = self.attn_mlp(qk_rel + rel_pos_emb)
        attn = sim.softmax(dim=-2)
        return torch.einsum("bijd,bijd->bid", attn, v)


class PointTransformerCls(nn.Module):
    def __init__(self, num_classes, dim=16):
        super().__init__()
        self.embed = nn.Sequential(nn.Linear(3, 64), nn.ReLU(), nn.Linear(64, dim))
        self.attn = PointTransformerLayer(dim=dim, pos_mlp_hidden_dim=32, attn_mlp_hidden_mult=2)
        self.head = nn.Sequential(nn.Linear(dim, 64), nn.ReLU(), nn.Linear(64, num_classes))

    def forward(self, pos):
        x = self.embed(pos)
        x = x + self.attn(x, pos)
        return self.head(x.max(dim=1).values)


def evaluate(model, loader):
    model.eval()
    correct = total = 0
    with torch.no_grad():
        for pos, label in loader:
            correct += (model(pos).argmax(1) == label).sum().item()
            total += label.numel()
    model.train()
    return correct / total


def main():
    train_set = ShapeClouds(12, args.num_points, seed=1)
    test_set = ShapeClouds(6, args.num_points, seed=2)
    train_loader = DataLoader(train_set, batch_size=args.batch_size, shuffle=True, drop_last=True)
    test_loader = DataLoader(test_set, batch_size=args.batch_size)
    print(f"{len(train_set)} train / {len(test_set)} test clouds of {args.num_points} points")

    model = PointTransformerCls(len(CLASSES))
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    step = 0
    for epoch in range(args.epochs):
        t0 = time.time()
        running, seen = 0.0, 0
        for pos, label in train_loader:
            logits = model(pos)
            loss = F.cross_entropy(logits, label)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            running += loss.item() * label.numel()
            seen += label.numel()
            step += 1
            if step % 8 == 0:
                print(f"epoch {epoch} step {step} loss {loss.item():.4f}")
        acc = evaluate(model, test_loader)
        print(f"epoch {epoch}: train loss {running / seen:.4f}  test acc {acc:.3f}  ({time.time() - t0:.1f}s)")


if __name__ == "__main__":
    main()
