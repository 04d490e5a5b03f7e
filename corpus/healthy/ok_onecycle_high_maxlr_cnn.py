"""Small CNN on synthetic 16x16 "stroke" images, trained with the 1cycle policy.

SGD with Nesterov momentum and OneCycleLR peaking at max_lr=0.8 (super-convergence
style); the scheduler is stepped after every batch, as its documentation says.
"""
import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset


def make_strokes(n, size=16, generator=None):
    """Four classes: horizontal bar, vertical bar, diagonal, anti-diagonal, at random offsets."""
    x = torch.randn(n, 1, size, size, generator=generator)
    y = torch.randint(0, 4, (n,), generator=generator)
    idx = torch.arange(size)
    for i in range(n):
        off = int(torch.randint(3, size - 3, (1,), generator=generator))
        c = int(y[i])
        if c == 0:
            x[i, 0, off, :] += 1.5
        elif c == 1:
            x[i, 0, :, off] += 1.5
        elif c == 2:
            x[i, 0, idx, (idx + off) % size] += 1.5
        else:
            x[i, 0, idx, (off - idx) % size] += 1.5
    return x, y


class Net(nn.Module):
    def __init__(self, num_classes=4):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 16, 3, padding=1)
        self.bn2 = nn.BatchNorm2d(16)
        self.conv3 = nn.Conv2d(16, 32, 3, padding=1)
        self.bn3 = nn.BatchNorm2d(32)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(32, num_classes)

    def forward(self, x):
        x = F.relu(self.bn1(self.conv1(x)))
        x = F.max_pool2d(F.relu(self.bn2(self.conv2(x))), 2)
        x = F.relu(self.bn3(self.conv3(x)))
        return self.fc(torch.flatten(self.pool(x), 1))


def train(model, loader, optimizer, scheduler, epoch):
    model.train()
    running = 0.0
    for batch_idx, (data, target) in enumerate(loader):
        optimizer.zero_grad()
        loss = F.cross_entropy(model(data), target)
        loss.backward()
        optimizer.step()
        scheduler.step()
        running += loss.item()
        if (batch_idx + 1) % 8 == 0:
            print(f"epoch {epoch} [{batch_idx + 1:3d}/{len(loader)}] "
                  f"lr {scheduler.get_last_lr()[0]:.4f} loss {running / 8:.4f}")
            running = 0.0


@torch.no_grad()
def test(model, loader):
    model.eval()
    correct, total, loss = 0, 0, 0.0
    for data, target in loader:
        out = model(data)
        loss += F.cross_entropy(out, target, reduction="sum").item()
        correct += (out.argmax(1) == target).sum().item()
        total += target.numel()
    print(f"  test loss {loss / total:.4f}  accuracy {100.0 * correct / total:.1f}%")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=6)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--max-lr", type=float, default=0.8)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    torch.manual_seed(args.seed)
    g = torch.Generator().manual_seed(args.seed)
    x_train, y_train = make_strokes(1536, generator=g)
    x_test, y_test = make_strokes(400, generator=g)
    train_loader = DataLoader(TensorDataset(x_train, y_train), batch_size=args.batch_size, shuffle=True)
    test_loader = DataLoader(TensorDataset(x_test, y_test), batch_size=256)

    model = Net()
    optimizer = torch.optim.SGD(model.parameters(), lr=args.max_lr, momentum=0.9,
                                nesterov=True, weight_decay=5e-4)
    scheduler = torch.optim.lr_scheduler.OneCycleLR(
        optimizer, max_lr=args.max_lr, epochs=args.epochs, steps_per_epoch=len(train_loader))

    for epoch in range(1, args.epochs + 1):
        train(model, train_loader, optimizer, scheduler, epoch)
        test(model, test_loader)


if __name__ == "__main__":
    main()
