"""VGG-style convolutional network for 28x28 grayscale digit images (MNIST layout).

Adapted from the VGG16 CIFAR-10 notebook to the MNIST tutorial data: four conv blocks
(two 3x3 convolutions with "same" padding, batch norm, ReLU, 2x2 max pooling each) and a
fully connected classifier. The digits here are synthetic stand-ins: one stroke template per
class, randomly shifted, scaled and noised.
"""
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(1)

NUM_CLASSES = 10
BATCH_SIZE = 64
EPOCHS = 3
LR = 1e-3


def make_templates(generator):
    """One 28x28 stroke pattern per digit class (a few thick random line segments)."""
    templates = torch.zeros(NUM_CLASSES, 28, 28)
    yy, xx = torch.meshgrid(torch.arange(28.0), torch.arange(28.0), indexing="ij")
    for c in range(NUM_CLASSES):
        for _ in range(3):
            p0 = 6 + 16 * torch.rand(2, generator=generator)
            p1 = 6 + 16 * torch.rand(2, generator=generator)
            for t in torch.linspace(0, 1, 24):
                p = p0 + t * (p1 - p0)
                templates[c] += torch.exp(-((yy - p[0]) ** 2 + (xx - p[1]) ** 2) / 3.0)
        templates[c] = (templates[c] / templates[c].max()).clamp(0, 1)
    return templates


class SyntheticDigits(Dataset):
    def __init__(self, n, templates, seed):
        g = torch.Generator().manual_seed(seed)
        self.labels = torch.randint(0, NUM_CLASSES, (n,), generator=g)
        images = templates[self.labels].clone()
        shifts = torch.randint(-2, 3, (n, 2), generator=g)
        for i in range(n):
            images[i] = torch.roll(images[i], shifts=(int(shifts[i, 0]), int(shifts[i, 1])), dims=(0, 1))
        images = images * (0.7 + 0.3 * torch.rand(n, 1, 1, generator=g))
        images = (images + 0.15 * torch.randn(images.shape, generator=g)).clamp(0, 1)
        self.images = ((images - 0.1307) / 0.3081).unsqueeze(1)

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, idx):
        return self.images[idx], self.labels[idx]


class Net(nn.Module):
    def __init__(self):
        super(Net, self).__init__()

        # calculate same padding:
        # (w - k + 2*p)/s + 1 = o
        # => p = (s(o-1) - w + k)/2

        self.block_1 = nn.Sequential(
            nn.Conv2d(in_channels=1, out_channels=16, kernel_size=(3, 3), stride=(1, 1), padding=1),
            nn.BatchNorm2d(16),
            nn.ReLU(),
            nn.Conv2d(in_channels=16, out_channels=16, kernel_size=(3, 3), stride=(1, 1), padding=1),
            nn.BatchNorm2d(16),
            nn.ReLU(),
            nn.MaxPool2d(kernel_size=(2, 2), stride=(2, 2)),
        )
        self.block_2 = nn.Sequential(
            nn.Conv2d(in_channels=16, out_channels=32, kernel_size=(3, 3), stride=(1, 1), padding=1),
            nn.BatchNorm2d(32),
            nn.ReLU(),
            nn.Conv2d(in_channels=32, out_channels=32, kernel_size=(3, 3), stride=(1, 1), padding=1),
            nn.BatchNorm2d(32),
            nn.ReLU(),
            nn.MaxPool2d(kernel_size=(2, 2), stride=(2, 2)),
        )
        self.block_3 = nn.Sequential(
            nn.Conv2d(in_channels=32, out_channels=64, kernel_size=(3, 3), stride=(1, 1), padding=1),
            nn.BatchNorm2d(64),
            nn.ReLU(),
            nn.Conv2d(in_channels=64, out_channels=64, kernel_size=(3, 3), stride=(1, 1), padding=1),
            nn.BatchNorm2d(64),
            nn.ReLU(),
            nn.MaxPool2d(kernel_size=(2, 2), stride=(2, 2)),
        )
        self.block_4 = nn.Sequential(
            nn.Conv2d(in_channels=64, out_channels=128, kernel_size=(3, 3), stride=(1, 1), padding=1),
            nn.BatchNorm2d(128),
            nn.ReLU(),
            nn.Conv2d(in_channels=128, out_channels=128, kernel_size=(3, 3), stride=(1, 1), padding=1),
            nn.BatchNorm2d(128),
            nn.ReLU(),
            nn.MaxPool2d(kernel_size=(2, 2), stride=(2, 2)),
        )
        self.classifier = nn.Sequential(
            nn.Linear(128 * 2 * 2, 256),
            nn.ReLU(True),
            nn.Dropout(p=0.5),
            nn.Linear(256, 256),
            nn.ReLU(True),
            nn.Dropout(p=0.5),
            nn.Linear(256, NUM_CLASSES),
        )

    def forward(self, x):
        x = self.block_1(x)
        x = self.block_2(x)
        x = self.block_3(x)
        x = self.block_4(x)
        logits = self.classifier(x.view(x.size(0), -1))
        return logits


def train_epoch(model, loader, optimizer, epoch):
    model.train()
    losses = []
    for batch_idx, (data, target) in enumerate(loader):
        optimizer.zero_grad()
        output = model(data)
        loss = F.cross_entropy(output, target)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        if batch_idx % 5 == 0:
            print(f"Train Epoch: {epoch} [{batch_idx * len(data)}/{len(loader.dataset)}]  Loss: {loss.item():.4f}")
    return sum(losses) / len(losses)


def validate(model, loader):
    model.eval()
    correct, total, loss_sum = 0, 0, 0.0
    with torch.no_grad():
        for data, target in loader:
            output = model(data)
            loss_sum += F.cross_entropy(output, target, reduction="sum").item()
            correct += (output.argmax(dim=1) == target).sum().item()
            total += len(target)
    return loss_sum / total, correct / total


def main():
    templates = make_templates(torch.Generator().manual_seed(7))
    train_loader = DataLoader(SyntheticDigits(960, templates, seed=1), batch_size=BATCH_SIZE, shuffle=True)
    test_loader = DataLoader(SyntheticDigits(512, templates, seed=2), batch_size=256)

    model = Net()
    optimizer = torch.optim.Adam(model.parameters(), lr=LR)
    print(model)

    start = time.time()
    for epoch in range(1, EPOCHS + 1):
        train_loss = train_epoch(model, train_loader, optimizer, epoch)
        val_loss, val_acc = validate(model, test_loader)
        print(f"Epoch {epoch}: train loss {train_loss:.4f}  valid loss {val_loss:.4f}  valid acc {val_acc:.3f}")
    print(f"done in {time.time() - start:.1f}s")


if __name__ == "__main__":
    main()
