"""Pre-train a Conv-4 backbone on the base classes of a mini-ImageNet-like set.

The first stage of a few-shot ensemble pipeline: plain cross-entropy over the
base classes at 84x84. Images are decoded (here: rendered) on demand by the
dataset; memoization keeps decoded images around to speed up later epochs.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)

IMAGE_SIZE = 84
NUM_CLASSES = 16
IMAGES_PER_CLASS = 180


class MiniImageNet(Dataset):
    def __init__(self, split="train", memoization=True):
        self.split = split
        self.memoization = memoization
        self.cache = {}
        g = torch.Generator().manual_seed(3)
        self.prototypes = torch.rand(NUM_CLASSES, 3, 6, 6, generator=g)
        self.labels = torch.arange(NUM_CLASSES).repeat_interleave(IMAGES_PER_CLASS)

    def __len__(self):
        return len(self.labels)

    def decode(self, idx):
        g = torch.Generator().manual_seed(idx)
        label = int(self.labels[idx])
        img = F.interpolate(self.prototypes[label][None], size=IMAGE_SIZE, mode="bilinear", align_corners=False)[0]
        img = img + 1.0 * torch.randn(3, IMAGE_SIZE, IMAGE_SIZE, generator=g)
        return (img - 0.5) / 0.25

    def __getitem__(self, idx):
        if self.memoization and idx in self.cache:
            img = self.cache[idx]
        else:
            img = self.decode(idx)
            if self.memoization:
                self.cache[idx] = img
        if torch.rand(1).item() < 0.5:
            img = img.flip(-1)
        return img, int(self.labels[idx])


def conv_block(cin, cout):
    return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU(), nn.MaxPool2d(2))


class Conv4(nn.Module):
    def __init__(self, num_classes):
        super().__init__()
        self.encoder = nn.Sequential(
            nn.Conv2d(3, 8, 3, stride=2, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
            conv_block(8, 16), conv_block(16, 32), conv_block(32, 32),
        )
        self.classifier = nn.Linear(32 * 5 * 5, num_classes)

    def forward(self, x):
        return self.classifier(self.encoder(x).flatten(1))


def main():
    train_set = MiniImageNet("train")
    train_loader = DataLoader(train_set, batch_size=64, shuffle=True)
    model = Conv4(NUM_CLASSES)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.02, momentum=0.9, nesterov=True, weight_decay=5e-4)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=2 * len(train_loader))

    step = 0
    for epoch in range(2):
        model.train()
        correct, seen, running = 0, 0, 0.0
        for images, labels in train_loader:
            logits = model(images)
            loss = F.cross_entropy(logits, labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            scheduler.step()
            running += loss.item() * len(labels)
            correct += (logits.argmax(1) == labels).sum().item()
            seen += len(labels)
            step += 1
            if step % 20 == 0:
                print(f"epoch {epoch} step {step} loss {running / seen:.4f} acc {correct / seen:.3f} cached {len(train_set.cache)}")
        print(f"epoch {epoch} done: loss {running / seen:.4f} acc {correct / seen:.3f}")


if __name__ == "__main__":
    main()
