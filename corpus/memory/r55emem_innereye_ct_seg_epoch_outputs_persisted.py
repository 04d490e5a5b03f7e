"""Head-and-neck CT organ-at-risk segmentation, InnerEye style.

A small 2D UNet segments 15 organs at risk (plus background) in 48x48 CT slices. Each epoch runs
training and validation through train_or_validate_epoch, which collects the posteriors and
labels of every batch so the epoch's mean Dice can be computed; model_train keeps the results
of every epoch in a ModelTrainingResults object that is returned at the end.
"""
import math
import time
from dataclasses import dataclass, field
from typing import Dict, List

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(3)

SLICE = 48
NUM_CLASSES = 16


class CTSliceDataset(Dataset):
    """Synthetic CT slices: each structure is a disk with its own intensity, on a noisy background."""

    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        yy, xx = torch.meshgrid(torch.linspace(-1, 1, SLICE), torch.linspace(-1, 1, SLICE), indexing="ij")
        hu = torch.linspace(-1.0, 1.0, NUM_CLASSES)
        self.images, self.labels = [], []
        for _ in range(n):
            label = torch.zeros(SLICE, SLICE, dtype=torch.long)
            for k in torch.randperm(NUM_CLASSES - 1, generator=g)[:6] + 1:
                cy, cx = (1.6 * (torch.rand(2, generator=g) - 0.5)).tolist()
                r = 0.12 + 0.15 * torch.rand(1, generator=g).item()
                label[(yy - cy) ** 2 + (xx - cx) ** 2 < r ** 2] = k
            image = hu[label] + 0.2 * torch.randn(SLICE, SLICE, generator=g)
            self.images.append(image.unsqueeze(0))
            self.labels.append(label)

    def __len__(self):
        return len(self.images)

    def __getitem__(self, idx):
        return self.images[idx], self.labels[idx]


def conv_block(cin, cout):
    return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU(inplace=True))


class UNet2D(nn.Module):
    def __init__(self, base=4):
        super().__init__()
        self.enc1 = conv_block(1, base)
        self.enc2 = conv_block(base, 2 * base)
        self.up = nn.ConvTranspose2d(2 * base, base, 2, stride=2)
        self.dec1 = conv_block(2 * base, base)
        self.head = nn.Conv2d(base, NUM_CLASSES, 1)

    def forward(self, x):
        e1 = self.enc1(x)
        e2 = self.enc2(F.max_pool2d(e1, 2))
        d1 = self.dec1(torch.cat([self.up(e2), e1], dim=1))
        return self.head(d1)


@dataclass
class ModelOutputsAndMetricsForEpoch:
    posteriors: List[torch.Tensor] = field(default_factory=list)
    labels: List[torch.Tensor] = field(default_factory=list)
    losses: List[float] = field(default_factory=list)
    metrics: Dict[str, float] = field(default_factory=dict)

    def compute_metrics(self):
        preds = torch.cat(self.posteriors).argmax(1)
        labels = torch.cat(self.labels)
        dice = []
        for k in range(1, NUM_CLASSES):
            inter = ((preds == k) & (labels == k)).sum().item()
            total = (preds == k).sum().item() + (labels == k).sum().item()
            dice.append(2 * inter / max(total, 1))
        self.metrics["dice"] = sum(dice) / len(dice)
        self.metrics["loss"] = sum(self.losses) / len(self.losses)


@dataclass
class ModelTrainingResults:
    train_results_per_epoch: List = field(default_factory=list)
    val_results_per_epoch: List = field(default_factory=list)
    learning_rates_per_epoch: List[float] = field(default_factory=list)


def train_or_validate_epoch(model, loader, optimizer, in_training_mode):
    model.train(in_training_mode)
    results = ModelOutputsAndMetricsForEpoch()
    with torch.set_grad_enabled(in_training_mode):
        for images, labels in loader:
            logits = model(images)
            loss = F.cross_entropy(logits, labels)
            if in_training_mode:
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
            results.posteriors.append(torch.softmax(logits.detach(), dim=1))
            results.labels.append(labels)
            results.losses.append(loss.item())
    results.compute_metrics()
    return results


def model_train(num_epochs=8, batch_size=8, lr=3e-3):
    train_ds = CTSliceDataset(192, seed=1)
    val_ds = CTSliceDataset(64, seed=2)
    train_loader = DataLoader(train_ds, batch_size=batch_size, shuffle=True)
    val_loader = DataLoader(val_ds, batch_size=batch_size)
    model = UNet2D()
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda e: 0.5 * (1 + math.cos(math.pi * e / num_epochs)))

    training_results = ModelTrainingResults()
    for epoch in range(num_epochs):
        t0 = time.time()
        train_epoch_results = train_or_validate_epoch(model, train_loader, optimizer, True)
        training_results.train_results_per_epoch.append(train_epoch_results)
        val_epoch_results = train_or_validate_epoch(model, val_loader, optimizer, False)
        training_results.val_results_per_epoch.append(val_epoch_results)
        training_results.learning_rates_per_epoch.append(scheduler.get_last_lr()[0])
        scheduler.step()
        tm, vm = train_epoch_results.metrics, val_epoch_results.metrics
        print(f"epoch {epoch} train loss {tm['loss']:.4f} dice {tm['dice']:.3f} | "
              f"val loss {vm['loss']:.4f} dice {vm['dice']:.3f} ({time.time() - t0:.1f}s)")
    return training_results


if __name__ == "__main__":
    results = model_train()
    print(f"final val dice {results.val_results_per_epoch[-1].metrics['dice']:.3f}")
