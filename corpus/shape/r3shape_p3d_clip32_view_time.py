"""Pseudo-3D ResNet (P3D) action recognition on short video clips.

The P3D network factorises 3x3x3 convolutions into a spatial 1x3x3 and a temporal 3x1x1
convolution. The first three residual stages are 3D; the last stage is 2D, so the clip's time
axis is pooled (a 2x1x1 max-pool after each 3D stage) before the 2D stage. It is trained
on 32-frame clips of synthetic "actions" (a blob moving in one of eight directions), longer
clips giving the temporal convolutions more motion to see.
"""
import argparse
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset


class MovingBlobClips(Dataset):
    def __init__(self, n, frames=32, size=64, num_classes=8, seed=0):
        g = torch.Generator().manual_seed(seed)
        self.labels = torch.randint(0, num_classes, (n,), generator=g)
        ys, xs = torch.meshgrid(torch.arange(size).float(), torch.arange(size).float(), indexing="ij")
        clips = []
        for label in self.labels.tolist():
            angle = 2 * math.pi * label / num_classes
            cx, cy = size / 2 + 6 * torch.randn(2, generator=g)
            frames_ = []
            for t in range(frames):
                px = cx + 0.8 * t * math.cos(angle)
                py = cy + 0.8 * t * math.sin(angle)
                blob = torch.exp(-((xs - px) ** 2 + (ys - py) ** 2) / 30.0)
                frames_.append(blob)
            clip = torch.stack(frames_)  # T x H x W
            rgb = torch.stack([clip, 0.5 * clip, 1 - clip])  # 3 x T x H x W
            clips.append(rgb + 0.1 * torch.randn(rgb.shape, generator=g))
        self.clips = torch.stack(clips)

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return self.clips[i], self.labels[i]


class P3DBlock(nn.Module):
    """Bottleneck with a spatial (1x3x3) and a temporal (3x1x1) conv in the 3D stages."""

    expansion = 2

    def __init__(self, inplanes, planes, stride=1, is_3d=True):
        super().__init__()
        self.is_3d = is_3d
        out = planes * self.expansion
        if is_3d:
            self.conv1 = nn.Conv3d(inplanes, planes, 1, bias=False)
            self.bn1 = nn.BatchNorm3d(planes)
            self.conv_s = nn.Conv3d(planes, planes, (1, 3, 3), stride=(1, stride, stride), padding=(0, 1, 1), bias=False)
            self.bn_s = nn.BatchNorm3d(planes)
            self.conv_t = nn.Conv3d(planes, planes, (3, 1, 1), padding=(1, 0, 0), bias=False)
            self.bn_t = nn.BatchNorm3d(planes)
            self.conv3 = nn.Conv3d(planes, out, 1, bias=False)
            self.bn3 = nn.BatchNorm3d(out)
            self.downsample = None
            if stride != 1 or inplanes != out:
                self.downsample = nn.Sequential(
                    nn.Conv3d(inplanes, out, 1, stride=(1, stride, stride), bias=False), nn.BatchNorm3d(out))
        else:
            self.conv1 = nn.Conv2d(inplanes, planes, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(planes)
            self.conv_s = nn.Conv2d(planes, planes, 3, stride=stride, padding=1, bias=False)
            self.bn_s = nn.BatchNorm2d(planes)
            self.conv3 = nn.Conv2d(planes, out, 1, bias=False)
            self.bn3 = nn.BatchNorm2d(out)
            self.downsample = None
            if stride != 1 or inplanes != out:
                self.downsample = nn.Sequential(nn.Conv2d(inplanes, out, 1, stride=stride, bias=False),
                                                nn.BatchNorm2d(out))

    def forward(self, x):
        residual = x if self.downsample is None else self.downsample(x)
        out = F.relu(self.bn1(self.conv1(x)))
        out = F.relu(self.bn_s(self.conv_s(out)))
        if self.is_3d:
            out = F.relu(self.bn_t(self.conv_t(out)))
        out = self.bn3(self.conv3(out))
        return F.relu(out + residual)


class P3D(nn.Module):
    def __init__(self, num_classes=8, dropout=0.5):
        super().__init__()
        self.conv1_custom = nn.Conv3d(3, 16, kernel_size=(1, 7, 7), stride=(1, 2, 2), padding=(0, 3, 3), bias=False)
        self.bn1 = nn.BatchNorm3d(16)
        self.maxpool = nn.MaxPool3d(kernel_size=(2, 3, 3), stride=2, padding=(0, 1, 1))
        self.maxpool_2 = nn.MaxPool3d(kernel_size=(2, 1, 1), padding=0, stride=(2, 1, 1))
        self.layer1 = P3DBlock(16, 16, stride=1, is_3d=True)
        self.layer2 = P3DBlock(32, 32, stride=2, is_3d=True)
        self.layer3 = P3DBlock(64, 64, stride=2, is_3d=True)
        self.layer4 = P3DBlock(128, 128, stride=2, is_3d=False)
        self.avgpool = nn.AvgPool2d(kernel_size=(2, 2), stride=1)
        self.dropout = nn.Dropout(p=dropout)
        self.fc = nn.Linear(128 * P3DBlock.expansion, num_classes)

    def forward(self, x):
        x = self.conv1_custom(x)
        x = F.relu(self.bn1(x))
        x = self.maxpool(x)

        x = self.maxpool_2(self.layer1(x))
        x = self.maxpool_2(self.layer2(x))
        x = self.maxpool_2(self.layer3(x))

        sizes = x.size()
        x = x.view(-1, sizes[1], sizes[3], sizes[4])
        x = self.layer4(x)
        x = self.avgpool(x)

        x = x.view(-1, self.fc.in_features)
        x = self.fc(self.dropout(x))
        return x


def train(loader, model, criterion, optimizer, epoch):
    model.train()
    correct, seen = 0, 0
    for i, (clip, target) in enumerate(loader):
        output = model(clip)
        loss = criterion(output, target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        correct += (output.argmax(1) == target).sum().item()
        seen += target.size(0)
        if i % 5 == 0:
            print(f"Epoch: [{epoch}][{i}/{len(loader)}]  loss {loss.item():.4f}  acc {correct / seen:.3f}")


def main():
    parser = argparse.ArgumentParser(description="P3D on synthetic action clips")
    parser.add_argument("--frames", type=int, default=32)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--lr", type=float, default=0.01)
    args = parser.parse_args()

    torch.manual_seed(0)
    train_set = MovingBlobClips(96, frames=args.frames)
    loader = DataLoader(train_set, batch_size=args.batch_size, shuffle=True)
    model = P3D(num_classes=8)
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9, weight_decay=5e-4)
    for epoch in range(args.epochs):
        train(loader, model, criterion, optimizer, epoch)


if __name__ == "__main__":
    main()
