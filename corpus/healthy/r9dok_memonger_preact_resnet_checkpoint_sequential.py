"""Memory-optimised pre-activation ResNet trained with gradient checkpointing, after the
prigoyal/pytorch_memonger tutorial and its models/optimized/resnet_new.py: every bottleneck block
is appended directly to `self.features` so that checkpoint_sequential can cut the network into
segments; the segments are re-run during backward instead of storing their activations. As in
the tutorial, the input is re-wrapped as a leaf that requires grad so the re-entrant checkpoint
keeps the autograd tape connected. The training loop follows pytorch/examples imagenet/main.py
(SGD 0.1, momentum 0.9, wd 1e-4, step decay), on synthetic 16x16 "CIFAR-like" shape images.
"""
import argparse
import math
import time
from collections import OrderedDict

import torch
import torch.nn as nn
import torch.utils.data
from torch.utils.checkpoint import checkpoint_sequential


class PreActBottleneck(nn.Module):
    expansion = 4

    def __init__(self, inplanes, planes, stride=1, downsample=None):
        super(PreActBottleneck, self).__init__()
        self.bn1 = nn.BatchNorm2d(inplanes)
        self.relu1 = nn.ReLU(inplace=True)
        self.conv1 = nn.Conv2d(inplanes, planes, kernel_size=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.relu2 = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(planes, planes, kernel_size=3, stride=stride, padding=1, bias=False)
        self.bn3 = nn.BatchNorm2d(planes)
        self.relu3 = nn.ReLU(inplace=True)
        self.conv3 = nn.Conv2d(planes, planes * 4, kernel_size=1, bias=False)
        self.downsample = downsample
        self.stride = stride

    def forward(self, x):
        residual = x
        out = self.bn1(x)
        out = self.relu1(out)
        out = self.conv1(out)
        out = self.bn2(out)
        out = self.relu2(out)
        out = self.conv2(out)
        out = self.bn3(out)
        out = self.relu3(out)
        out = self.conv3(out)

        if self.downsample is not None:
            residual = self.downsample(x)

        out += residual
        return out


class PreActResNet(nn.Module):
    def __init__(self, block, layers, num_classes=10, chunks=3):
        self.inplanes = 16
        super(PreActResNet, self).__init__()
        self.chunks = chunks

        self.features = nn.Sequential(OrderedDict([
            ("conv1", nn.Conv2d(3, 16, kernel_size=3, stride=1, padding=1, bias=False)),
            ("bn1", nn.BatchNorm2d(16)),
            ("relu1", nn.ReLU(inplace=True)),
        ]))

        self._make_layer(block, 8, layers[0], stage=1)
        self._make_layer(block, 16, layers[1], stride=2, stage=2)
        self._make_layer(block, 32, layers[2], stride=2, stage=3)
        self.features.add_module("bn2", nn.BatchNorm2d(32 * block.expansion))
        self.features.add_module("relu2", nn.ReLU(inplace=True))
        self.features.add_module("avgpool", nn.AvgPool2d(4, stride=1))
        self.fc = nn.Linear(32 * block.expansion, num_classes)

        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                n = m.kernel_size[0] * m.kernel_size[1] * m.out_channels
                m.weight.data.normal_(0, math.sqrt(2.0 / n))
            elif isinstance(m, nn.BatchNorm2d):
                m.weight.data.fill_(1)
                m.bias.data.zero_()

    def _make_layer(self, block, planes, blocks, stride=1, stage=1):
        downsample = None
        if stride != 1 or self.inplanes != planes * block.expansion:
            downsample = nn.Sequential(
                nn.BatchNorm2d(self.inplanes),
                nn.Conv2d(self.inplanes, planes * block.expansion, kernel_size=1, stride=stride, bias=False),
            )

        self.features.add_module("PreActBottleneck_%d_%d" % (stage, 0), block(self.inplanes, planes, stride, downsample))
        self.inplanes = planes * block.expansion
        for i in range(1, blocks):
            self.features.add_module("PreActBottleneck_%d_%d" % (stage, i), block(self.inplanes, planes))

    def forward(self, x):
        input_var = x.detach().requires_grad_()
        input_var = checkpoint_sequential(self.features, self.chunks, input_var, use_reentrant=True)
        input_var = input_var.view(input_var.size(0), -1)
        input_var = self.fc(input_var)
        return input_var


class ShapesDataset(torch.utils.data.Dataset):
    """Noisy coloured squares, discs, crosses, rings, bars and triangles on a 16x16 canvas."""

    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        self.targets = torch.randint(0, 6, (n,), generator=g)
        yy, xx = torch.meshgrid(torch.arange(16.0), torch.arange(16.0), indexing="ij")
        cy = 5 + 6 * torch.rand(n, generator=g)
        cx = 5 + 6 * torch.rand(n, generator=g)
        r = 2.5 + 2 * torch.rand(n, generator=g)
        dy = yy[None] - cy[:, None, None]
        dx = xx[None] - cx[:, None, None]
        rr = r[:, None, None]
        dist = (dx ** 2 + dy ** 2).sqrt()
        masks = torch.stack([
            (dx.abs() < rr) & (dy.abs() < rr),
            dist < rr,
            ((dx.abs() < 1) & (dy.abs() < rr)) | ((dy.abs() < 1) & (dx.abs() < rr)),
            (dist < rr) & (dist > rr - 1.5),
            (dy.abs() < 1) & (dx.abs() < rr + 2),
            (dy > -rr) & (dy < rr) & (dx.abs() < (dy + rr) / 2),
        ], dim=1).float()
        shape = masks[torch.arange(n), self.targets]
        color = 0.5 + torch.rand(n, 3, 1, 1, generator=g)
        self.data = color * shape[:, None] + 0.4 * torch.randn(n, 3, 16, 16, generator=g)

    def __len__(self):
        return len(self.targets)

    def __getitem__(self, i):
        return self.data[i], self.targets[i]


class AverageMeter(object):
    """Computes and stores the average and current value"""

    def __init__(self):
        self.reset()

    def reset(self):
        self.val = 0
        self.avg = 0
        self.sum = 0
        self.count = 0

    def update(self, val, n=1):
        self.val = val
        self.sum += val * n
        self.count += n
        self.avg = self.sum / self.count


def accuracy(output, target, topk=(1,)):
    with torch.no_grad():
        maxk = max(topk)
        batch_size = target.size(0)
        _, pred = output.topk(maxk, 1, True, True)
        pred = pred.t()
        correct = pred.eq(target.view(1, -1).expand_as(pred))
        res = []
        for k in topk:
            correct_k = correct[:k].reshape(-1).float().sum(0, keepdim=True)
            res.append(correct_k.mul_(100.0 / batch_size))
        return res


def train(train_loader, model, criterion, optimizer, epoch, args):
    losses = AverageMeter()
    top1 = AverageMeter()
    model.train()
    for i, (images, target) in enumerate(train_loader):
        output = model(images)
        loss = criterion(output, target)

        acc1, = accuracy(output, target, topk=(1,))
        losses.update(loss.item(), images.size(0))
        top1.update(acc1[0].item(), images.size(0))

        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

        if i % args.print_freq == 0:
            print(f"Epoch: [{epoch}][{i:2d}/{len(train_loader)}]  Loss {losses.val:.4f} ({losses.avg:.4f})  "
                  f"Acc@1 {top1.val:6.2f} ({top1.avg:6.2f})")
    return losses.avg


def validate(val_loader, model, criterion):
    losses = AverageMeter()
    top1 = AverageMeter()
    model.eval()
    with torch.no_grad():
        for images, target in val_loader:
            output = model(images)
            loss = criterion(output, target)
            acc1, = accuracy(output, target, topk=(1,))
            losses.update(loss.item(), images.size(0))
            top1.update(acc1[0].item(), images.size(0))
    print(f" * Acc@1 {top1.avg:.3f}  Loss {losses.avg:.4f}")
    return top1.avg


def adjust_learning_rate(optimizer, epoch, args):
    """Sets the learning rate to the initial LR decayed by 10 every args.lr_step epochs"""
    lr = args.lr * (0.1 ** (epoch // args.lr_step))
    for param_group in optimizer.param_groups:
        param_group["lr"] = lr


def main():
    parser = argparse.ArgumentParser(description="PyTorch training with checkpointed PreActResNet")
    parser.add_argument("--epochs", default=5, type=int)
    parser.add_argument("-b", "--batch-size", default=64, type=int)
    parser.add_argument("--lr", "--learning-rate", default=0.1, type=float)
    parser.add_argument("--lr-step", default=3, type=int)
    parser.add_argument("--momentum", default=0.9, type=float)
    parser.add_argument("--wd", "--weight-decay", default=1e-4, type=float, dest="weight_decay")
    parser.add_argument("--chunks", default=3, type=int, help="number of checkpoint segments")
    parser.add_argument("-p", "--print-freq", default=5, type=int)
    parser.add_argument("--seed", default=0, type=int)
    args = parser.parse_args()

    torch.manual_seed(args.seed)
    model = PreActResNet(PreActBottleneck, [1, 1, 1], num_classes=6, chunks=args.chunks)
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), args.lr, momentum=args.momentum, weight_decay=args.weight_decay)

    train_loader = torch.utils.data.DataLoader(ShapesDataset(1024, seed=1), batch_size=args.batch_size, shuffle=True)
    val_loader = torch.utils.data.DataLoader(ShapesDataset(384, seed=2), batch_size=256, shuffle=False)

    best_acc1 = 0
    for epoch in range(args.epochs):
        start = time.time()
        adjust_learning_rate(optimizer, epoch, args)
        train_loss = train(train_loader, model, criterion, optimizer, epoch, args)
        acc1 = validate(val_loader, model, criterion)
        best_acc1 = max(acc1, best_acc1)
        print(f"epoch {epoch} done in {time.time() - start:.1f}s: train loss {train_loss:.4f}  val acc {acc1:.2f}  "
              f"best {best_acc1:.2f}")


if __name__ == "__main__":
    main()
