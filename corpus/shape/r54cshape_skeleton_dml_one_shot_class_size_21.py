"""Skeleton-based one-shot action recognition with deep metric learning.

Skeleton sequences are encoded as images (joints x frames, xyz as RGB channels) and fed to a
small ResNet-style CNN that produces a 128-d embedding; training mixes a cross-entropy
classification loss on the embedding with a triplet margin loss (mix 0.5 / 0.5), RMSprop.
The "reindexed" one-shot split keeps the 100 auxiliary action classes for training.
"""
import argparse
import random

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=3)
parser.add_argument("--batch_size", type=int, default=32)
parser.add_argument("--lr", type=float, default=1e-3)
parser.add_argument("--emb_size", type=int, default=128)
parser.add_argument("--class_size", type=int, default=21)
parser.add_argument("--mix_ml", type=float, default=0.5)
parser.add_argument("--mix_cl", type=float, default=0.5)
args = parser.parse_args()

torch.manual_seed(0)
np.random.seed(0)
random.seed(0)

NUM_JOINTS, NUM_FRAMES = 25, 16


class NTUOneShotReindex(Dataset):
    """Synthetic stand-in for the NTU-120 one-shot 'reindex' train split (100 training classes)."""

    def __init__(self, n_per_class=6, n_classes=100, seed=0):
        g = torch.Generator().manual_seed(seed)
        protos = torch.randn(n_classes, 3, NUM_JOINTS, NUM_FRAMES, generator=g)
        xs, ys = [], []
        for c in range(n_classes):
            for _ in range(n_per_class):
                xs.append(protos[c] + 0.5 * torch.randn(3, NUM_JOINTS, NUM_FRAMES, generator=g))
                ys.append(c)
        self.x = torch.stack(xs)
        self.y = torch.tensor(ys)

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        return self.x[i], self.y[i]


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.short = nn.Sequential()
        if stride != 1 or cin != cout:
            self.short = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + self.short(x))


class SkeletonEmbedder(nn.Module):
    def __init__(self, emb_size, class_size):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 32, 3, 1, 1, bias=False), nn.BatchNorm2d(32), nn.ReLU())
        self.layer1 = BasicBlock(32, 32, 1)
        self.layer2 = BasicBlock(32, 64, 2)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.embedding = nn.Linear(64, emb_size)
        self.classifier = nn.Linear(emb_size, class_size)

    def forward(self, x):
        h = self.layer2(self.layer1(self.stem(x)))
        emb = self.embedding(self.pool(h).flatten(1))
        return emb, self.classifier(emb)


def batch_hard_triplets(emb, labels, margin=0.2):
    d = torch.cdist(emb, emb)
    same = labels[:, None] == labels[None, :]
    eye = torch.eye(len(labels), dtype=torch.bool)
    pos = (d * (same & ~eye)).max(1).values
    neg = d.masked_fill(same, float("inf")).min(1).values
    return F.relu(pos - neg + margin).mean()


trainset = NTUOneShotReindex()
print("Trainset: ", len(trainset))
loader = DataLoader(trainset, batch_size=args.batch_size, shuffle=True, drop_last=True)

model = SkeletonEmbedder(args.emb_size, args.class_size)
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.RMSprop(model.parameters(), lr=args.lr)

for epoch in range(1, args.epochs + 1):
    print(f"TRAINING EPOCH {epoch}")
    model.train()
    total, correct, running = 0, 0, 0.0
    for it, (x, y) in enumerate(loader):
        emb, logits = model(x)
        emb = F.normalize(emb, dim=1)
        loss_ml = batch_hard_triplets(emb, y)
        loss_cl = criterion(logits, y)
        loss = args.mix_ml * loss_ml + args.mix_cl * loss_cl
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        running += loss.item()
        correct += (logits.argmax(1) == y).sum().item()
        total += len(y)
        if it % 5 == 0:
            print(f"epoch {epoch} iter {it} loss {loss.item():.4f} (ml {loss_ml.item():.4f} cl {loss_cl.item():.4f})")
    print(f"epoch {epoch} mean loss {running / len(loader):.4f} train acc {correct / total:.3f}")
