"""RevNet (reversible residual network) on a CIFAR-10-like task, re-implemented after
tbung/pytorch-revnet: reversible units y1 = x1 + F(x2), y2 = x2 + G(y1) with pre-activation
residual functions (BN-ReLU-conv-BN-ReLU-conv), the first unit of each group without the
leading activation and with avg-pool downsampling / zero-channel padding of the shortcut,
avg-pool + fc on top. Plain autograd here instead of the repo's memory-saving Function.

Training settings of the repo's train_cifar.py: SGD with momentum 0.9 and weight decay 1e-4
at args.lr * 10, StepLR(50, 0.1), batch 128. The data is generated: 16x16 colour images of ten
texture/colour classes instead of CIFAR-10, and the network is narrowed to fit a CPU.
"""
import argparse
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.optim.lr_scheduler import StepLR
from torch.utils.data import DataLoader, TensorDataset

parser = argparse.ArgumentParser()
parser.add_argument("--batch-size", default=128, type=int, help="size of the mini-batches")
parser.add_argument("--epochs", default=2, type=int, help="number of epochs")
parser.add_argument("--lr", default=0.1, type=float, help="initial learning rate")
parser.add_argument("--clip", default=0, type=float, help="maximal gradient norm")
parser.add_argument("--weight-decay", default=1e-4, type=float, help="weight decay factor")


def possible_downsample(x, in_channels, out_channels, stride):
    out = x
    if stride > 1:
        out = F.avg_pool2d(out, 3, stride, 1)
    if in_channels < out_channels:
        pad = torch.zeros(out.size(0), (out_channels - in_channels) // 2, out.size(2), out.size(3))
        out = torch.cat([pad, out, pad], dim=1)
    return out


class Residual(nn.Module):
    """Pre-activation residual function used for F and G."""

    def __init__(self, in_channels, out_channels, stride=1, no_activation=False):
        super(Residual, self).__init__()
        self.no_activation = no_activation
        if not no_activation:
            self.bn1 = nn.BatchNorm2d(in_channels)
        self.conv1 = nn.Conv2d(in_channels, out_channels, 3, stride, padding=1)
        self.bn2 = nn.BatchNorm2d(out_channels)
        self.conv2 = nn.Conv2d(out_channels, out_channels, 3, 1, padding=1)
        stdv1 = 1 / math.sqrt(in_channels * 3 * 3)
        stdv2 = 1 / math.sqrt(out_channels * 3 * 3)
        self.conv1.weight.data.uniform_(-stdv1, stdv1)
        self.conv1.bias.data.uniform_(-stdv1, stdv1)
        self.conv2.weight.data.uniform_(-stdv2, stdv2)
        self.conv2.bias.data.uniform_(-stdv2, stdv2)
        for bn in [m for m in (getattr(self, "bn1", None), self.bn2) if m is not None]:
            bn.weight.data.uniform_()
            bn.bias.data.zero_()

    def forward(self, x):
        out = x
        if not self.no_activation:
            out = F.relu(self.bn1(out))
        out = self.conv1(out)
        out = F.relu(self.bn2(out))
        return self.conv2(out)


class RevBlock(nn.Module):
    def __init__(self, in_channels, out_channels, stride=1, no_activation=False):
        super(RevBlock, self).__init__()
        self.in_channels = in_channels // 2
        self.out_channels = out_channels // 2
        self.stride = stride
        self.f = Residual(self.in_channels, self.out_channels, stride, no_activation)
        self.g = Residual(self.out_channels, self.out_channels)

    def forward(self, x):
        x1, x2 = torch.chunk(x, 2, dim=1)
        x1_ = possible_downsample(x1, self.in_channels, self.out_channels, self.stride)
        x2_ = possible_downsample(x2, self.in_channels, self.out_channels, self.stride)
        y1 = self.f(x2) + x1_
        y2 = self.g(y1) + x2_
        return torch.cat([y1, y2], dim=1)


class RevNet(nn.Module):
    def __init__(self, units, filters, strides, classes):
        super(RevNet, self).__init__()
        self.name = self.__class__.__name__
        self.layers = nn.ModuleList()
        self.layers.append(nn.Conv2d(3, filters[0], 3, padding=1))
        self.layers.append(nn.BatchNorm2d(filters[0]))
        for i, group_i in enumerate(units):
            self.layers.append(RevBlock(filters[i], filters[i + 1], stride=strides[i], no_activation=True))
            for unit in range(1, group_i):
                self.layers.append(RevBlock(filters[i + 1], filters[i + 1]))
        self.fc = nn.Linear(filters[-1], classes)

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        x = F.avg_pool2d(x, x.size(2))
        x = x.view(x.size(0), -1)
        return self.fc(x)


def revnet38():
    model = RevNet(units=[3, 3, 3], filters=[16, 16, 32, 64], strides=[1, 2, 2], classes=10)
    model.name = "revnet38"
    return model


def make_images(n, seed):
    """Ten classes: a class colour plus an oriented stripe texture, random phase, noise."""
    g = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, 10, (n,), generator=g)
    yy, xx = torch.meshgrid(torch.arange(16.0), torch.arange(16.0), indexing="ij")
    colours = torch.rand(10, 3, generator=torch.Generator().manual_seed(99))
    angles = (labels.float() * math.pi / 10)[:, None, None]
    phase = torch.rand(n, 1, 1, generator=g) * 2 * math.pi
    stripes = torch.sin(0.9 * (xx * torch.cos(angles) + yy * torch.sin(angles)) + phase)
    images = colours[labels][:, :, None, None] * (0.6 + 0.4 * stripes[:, None])
    images = images + 0.25 * torch.randn(n, 3, 16, 16, generator=g)
    mean = images.mean(dim=(0, 2, 3), keepdim=True)
    std = images.std(dim=(0, 2, 3), keepdim=True)
    return (images - mean) / std, labels


def train(epoch, model, criterion, optimizer, trainloader, clip):
    model.train()
    train_loss = 0
    correct = 0
    total = 0
    for i, (inputs, labels) in enumerate(trainloader):
        optimizer.zero_grad()
        outputs = model(inputs)
        loss = criterion(outputs, labels)
        loss.backward()
        if clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        optimizer.step()

        train_loss += loss.item()
        _, predicted = torch.max(outputs.data, 1)
        total += labels.size(0)
        correct += predicted.eq(labels).sum().item()
        if i % 3 == 0:
            print("{:3d} [{:3d}/{}] loss {:.3f} acc {:2.1f}%".format(
                epoch, i, len(trainloader), train_loss / (i + 1), 100 * correct / total))
    return train_loss, 100 * correct / total


def validate(model, valloader):
    correct = 0
    total = 0
    model.eval()
    with torch.no_grad():
        for images, labels in valloader:
            outputs = model(images)
            _, predicted = torch.max(outputs.data, 1)
            total += labels.size(0)
            correct += (predicted == labels).sum().item()
    return 100 * correct / total


def main():
    args = parser.parse_args()
    torch.manual_seed(0)

    model = revnet38()
    criterion = nn.CrossEntropyLoss()
    optimizer = optim.SGD(model.parameters(), lr=args.lr * 10,
                          momentum=0.9, weight_decay=args.weight_decay)
    scheduler = StepLR(optimizer, step_size=50, gamma=0.1)

    print("Prepairing data...")
    x_train, y_train = make_images(1536, seed=0)
    x_val, y_val = make_images(256, seed=1)
    trainloader = DataLoader(TensorDataset(x_train, y_train), batch_size=args.batch_size, shuffle=True)
    valloader = DataLoader(TensorDataset(x_val, y_val), batch_size=256, shuffle=False)

    print("\nTraining model...")
    for epoch in range(args.epochs):
        loss, train_acc = train(epoch, model, criterion, optimizer, trainloader, args.clip)
        scheduler.step()
        val_acc = validate(model, valloader)
        print('Accuracy: {}%'.format(val_acc))


if __name__ == "__main__":
    main()
