"""VGG-style CNN for 10-class digit images (1x28x28).

The network was written with "same" padding in every conv block and four 2x2 max-pools,
the classifier sits on top of the flattened feature map. Digits are synthetic: each class
lights up its own stroke pattern on top of noise.
"""
import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset


class SyntheticDigits(Dataset):
    def __init__(self, n, num_classes=10, seed=0):
        g = torch.Generator().manual_seed(seed)
        self.labels = torch.randint(0, num_classes, (n,), generator=g)
        protos = torch.zeros(num_classes, 1, 28, 28)
        for c in range(num_classes):
            r = 3 + 2 * c
            protos[c, 0, r:r + 3, 4:24] = 1.0
            protos[c, 0, 4:24, r:r + 3] = 0.5
        noise = 0.3 * torch.randn(n, 1, 28, 28, generator=g)
        self.images = protos[self.labels] + noise

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, idx):
        return self.images[idx], self.labels[idx]


class Net(nn.Module):
    def __init__(self, num_classes=10):
        super(Net, self).__init__()

        # calculate same padding:
        # (w - k + 2*p)/s + 1 = o
        # => p = (s(o-1) - w + k)/2

        self.block_1 = nn.Sequential(
            nn.Conv2d(in_channels=1, out_channels=16, kernel_size=(3, 3), stride=(1, 1),
                      # (1(32-1)- 32 + 3)/2 = 1
                      padding=1),
            nn.BatchNorm2d(16),
            nn.ReLU(),
            nn.Conv2d(16, 16, kernel_size=(3, 3), stride=(1, 1), padding=1),
            nn.BatchNorm2d(16),
            nn.ReLU(),
            nn.MaxPool2d(kernel_size=(2, 2), stride=(2, 2)),
        )
        self.block_2 = nn.Sequential(
            nn.Conv2d(16, 32, kernel_size=(3, 3), stride=(1, 1), padding=1),
            nn.BatchNorm2d(32),
            nn.ReLU(),
            nn.Conv2d(32, 32, kernel_size=(3, 3), stride=(1, 1), padding=1),
            nn.BatchNorm2d(32),
            nn.ReLU(),
            nn.MaxPool2d(kernel_size=(2, 2), stride=(2, 2)),
        )
        self.block_3 = nn.Sequential(
            nn.Conv2d(32, 64, kernel_size=(3, 3), stride=(1, 1), padding=1),
            nn.BatchNorm2d(64),
            nn.ReLU(),
            nn.Conv2d(64, 64, kernel_size=(3, 3), stride=(1, 1), padding=1),
            nn.BatchNorm2d(64),
            nn.ReLU(),
            nn.MaxPool2d(kernel_size=(2, 2), stride=(2, 2)),
        )
        self.block_4 = nn.Sequential(
            nn.Conv2d(64, 128, kernel_size=(3, 3), stride=(1, 1), padding=1),
            nn.BatchNorm2d(128),
            nn.ReLU(),
            nn.Conv2d(128, 128, kernel_size=(3, 3), stride=(1, 1), padding=1),
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
            nn.Linear(256, num_classes),
        )

    def forward(self, x):
        x = self.block_1(x)
        x = self.block_2(x)
        x = self.block_3(x)
        x = self.block_4(x)
        x = x.view(x.size(0), -1)
        logits = self.classifier(x)
        return logits


def train_epoch(model, loader, optimizer, epoch, log_every):
    model.train()
    running, correct, seen = 0.0, 0, 0
    for batch_idx, (data, target) in enumerate(loader):
        optimizer.zero_grad()
        output = model(data)
        loss = F.cross_entropy(output, target)
        loss.backward()
        optimizer.step()
        running += loss.item() * data.size(0)
        correct += (output.argmax(1) == target).sum().item()
        seen += data.size(0)
        if batch_idx % log_every == 0:
            print(f"epoch {epoch} [{seen}/{len(loader.dataset)}] loss {loss.item():.4f}")
    print(f"epoch {epoch}: train loss {running / seen:.4f} acc {correct / seen:.3f}")


def main():
    parser = argparse.ArgumentParser(description="VGG blocks on digits")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--log-every", type=int, default=5)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()

    torch.manual_seed(args.seed)
    train_set = SyntheticDigits(1024, seed=args.seed)
    loader = DataLoader(train_set, batch_size=args.batch_size, shuffle=True)

    model = Net(num_classes=10)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    for epoch in range(1, args.epochs + 1):
        train_epoch(model, loader, optimizer, epoch, args.log_every)


if __name__ == "__main__":
    main()
