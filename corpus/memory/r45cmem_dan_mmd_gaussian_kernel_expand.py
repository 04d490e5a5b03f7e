"""DAN (deep adaptation network) on a synthetic two-domain image task.

Source images are labelled, target images are not; the classifier is trained with
cross-entropy on the source batch plus a multi-kernel MMD between the pooled source and
target features of the backbone.
"""
import argparse
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

parser = argparse.ArgumentParser()
parser.add_argument("--batch_size", type=int, default=128)
parser.add_argument("--epochs", type=int, default=4)
parser.add_argument("--lr", type=float, default=0.01)
parser.add_argument("--momentum", type=float, default=0.9)
parser.add_argument("--l2_decay", type=float, default=5e-4)
parser.add_argument("--num_classes", type=int, default=10)
args = parser.parse_args()

torch.manual_seed(8)


class DomainImages(Dataset):
    def __init__(self, n, prototypes, shift, seed):
        g = torch.Generator().manual_seed(seed)
        self.labels = torch.randint(0, prototypes.shape[0], (n,), generator=g)
        noise = 1.5 * torch.randn(n, 3, 16, 16, generator=g)
        self.images = prototypes[self.labels] + noise + shift

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, idx):
        return self.images[idx], self.labels[idx]


prototypes = torch.randn(args.num_classes, 3, 16, 16)
shift = 0.4 * torch.randn(1, 3, 1, 1)
source_set = DomainImages(1024, prototypes, 0.0, seed=1)
target_set = DomainImages(1024, prototypes, shift, seed=2)
target_test = DomainImages(512, prototypes, shift, seed=3)

source_loader = DataLoader(source_set, batch_size=args.batch_size, shuffle=True, drop_last=True)
target_loader = DataLoader(target_set, batch_size=args.batch_size, shuffle=True, drop_last=True)
test_loader = DataLoader(target_test, batch_size=256)


def guassian_kernel(source, target, kernel_mul=2.0, kernel_num=5, fix_sigma=None):
    n_samples = int(source.size()[0]) + int(target.size()[0])
    total = torch.cat([source, target], dim=0)
    total0 = total.unsqueeze(0).expand(int(total.size(0)), int(total.size(0)), int(total.size(1)))
    total1 = total.unsqueeze(1).expand(int(total.size(0)), int(total.size(0)), int(total.size(1)))
    L2_distance = ((total0 - total1) ** 2).sum(2)
    if fix_sigma:
        bandwidth = fix_sigma
    else:
        bandwidth = torch.sum(L2_distance.data) / (n_samples ** 2 - n_samples)
    bandwidth /= kernel_mul ** (kernel_num // 2)
    bandwidth_list = [bandwidth * (kernel_mul ** i) for i in range(kernel_num)]
    kernel_val = [torch.exp(-L2_distance / bandwidth_temp) for bandwidth_temp in bandwidth_list]
    return sum(kernel_val)


def mmd_rbf_noaccelerate(source, target, kernel_mul=2.0, kernel_num=5, fix_sigma=None):
    batch_size = int(source.size()[0])
    kernels = guassian_kernel(source, target, kernel_mul=kernel_mul, kernel_num=kernel_num, fix_sigma=fix_sigma)
    XX = kernels[:batch_size, :batch_size]
    YY = kernels[batch_size:, batch_size:]
    XY = kernels[:batch_size, batch_size:]
    YX = kernels[batch_size:, :batch_size]
    loss = torch.mean(XX + YY - XY - YX)
    return loss


class Backbone(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 32, 3, stride=2, padding=1)
        self.bn1 = nn.BatchNorm2d(32)
        self.conv2 = nn.Conv2d(32, 64, 3, stride=2, padding=1)
        self.bn2 = nn.BatchNorm2d(64)
        self.conv3 = nn.Conv2d(64, 2048, 1, stride=2)
        self.bn3 = nn.BatchNorm2d(2048)
        self.avgpool = nn.AdaptiveAvgPool2d(1)

    def forward(self, x):
        x = F.relu(self.bn1(self.conv1(x)))
        x = F.relu(self.bn2(self.conv2(x)))
        x = F.relu(self.bn3(self.conv3(x)))
        return self.avgpool(x).flatten(1)


class DANNet(nn.Module):
    def __init__(self, num_classes=10):
        super().__init__()
        self.sharedNet = Backbone()
        self.cls_fc = nn.Linear(2048, num_classes)

    def forward(self, source, target=None):
        loss = 0
        source = self.sharedNet(source)
        if self.training and target is not None:
            target = self.sharedNet(target)
            loss += mmd_rbf_noaccelerate(source, target)
        source = self.cls_fc(source)
        return source, loss


def test(model):
    model.eval()
    correct = 0
    with torch.no_grad():
        for data, label in test_loader:
            pred, _ = model(data)
            correct += (pred.argmax(1) == label).sum().item()
    return correct / len(target_test)


model = DANNet(num_classes=args.num_classes)
optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum,
                            weight_decay=args.l2_decay)

print(f"source {len(source_set)} target {len(target_set)} batch_size {args.batch_size}")
start = time.time()
step = 0
for epoch in range(1, args.epochs + 1):
    model.train()
    lambd = 2 / (1 + math.exp(-10 * epoch / args.epochs)) - 1
    total_cls, total_mmd = 0.0, 0.0
    for (src, src_label), (tgt, _) in zip(source_loader, target_loader):
        optimizer.zero_grad()
        src_pred, mmd_loss = model(src, tgt)
        cls_loss = F.cross_entropy(src_pred, src_label)
        loss = cls_loss + lambd * mmd_loss
        loss.backward()
        optimizer.step()
        step += 1
        total_cls += cls_loss.item()
        total_mmd += mmd_loss.item()
        if step % 4 == 0:
            print(f"  step {step} cls_loss {cls_loss.item():.4f} mmd_loss {mmd_loss.item():.4f}")
    n = len(source_loader)
    acc = test(model)
    print(f"epoch {epoch} cls_loss {total_cls / n:.4f} mmd_loss {total_mmd / n:.4f} "
          f"target acc {acc:.3f} ({time.time() - start:.1f}s)")
