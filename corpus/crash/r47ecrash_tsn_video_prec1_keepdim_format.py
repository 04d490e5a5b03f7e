"""TSN-style action recognition: a small 2D CNN applied to each of the sampled
segments of a clip, average consensus over the segments, cross-entropy on the
video label. Train/validate loops and meters follow the tsn-pytorch main.py.

Offline stand-in for the UCF101 frame folders: clips of 3 segments of 3x32x32
frames, 10 action classes, each class a moving coloured blob with its own
direction and speed."""
import argparse
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

parser = argparse.ArgumentParser(description="PyTorch implementation of Temporal Segment Networks")
parser.add_argument('--num_segments', type=int, default=3)
parser.add_argument('--epochs', default=4, type=int)
parser.add_argument('-b', '--batch-size', default=16, type=int)
parser.add_argument('--lr', default=0.01, type=float)
parser.add_argument('--lr_steps', default=[3], type=int, nargs="+")
parser.add_argument('--momentum', default=0.9, type=float)
parser.add_argument('--weight-decay', default=5e-4, type=float)
parser.add_argument('--clip-gradient', default=20, type=float)
parser.add_argument('--print-freq', default=20, type=int)
parser.add_argument('--eval-freq', default=1, type=int)

NUM_CLASS = 10


class TSNDataSet(Dataset):
    def __init__(self, n_videos, num_segments, seed):
        g = torch.Generator().manual_seed(seed)
        self.labels = torch.randint(0, NUM_CLASS, (n_videos,), generator=g)
        self.starts = torch.rand(n_videos, 2, generator=g) * 0.4 + 0.3
        self.noise_seed = seed
        self.num_segments = num_segments

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, index):
        g = torch.Generator().manual_seed(self.noise_seed * 7919 + index)
        label = int(self.labels[index])
        angle = 2 * np.pi * label / NUM_CLASS
        speed = 0.08 + 0.02 * (label % 3)
        yy, xx = torch.meshgrid(torch.linspace(0, 1, 32), torch.linspace(0, 1, 32), indexing='ij')
        frames = []
        for s in range(self.num_segments):
            cy = self.starts[index, 0] + speed * s * np.sin(angle)
            cx = self.starts[index, 1] + speed * s * np.cos(angle)
            blob = torch.exp(-((yy - cy) ** 2 + (xx - cx) ** 2) / 0.01)
            img = 0.3 * torch.randn(3, 32, 32, generator=g)
            img[label % 3] += blob
            frames.append(img)
        return torch.cat(frames, 0), label


class TSN(nn.Module):
    def __init__(self, num_class, num_segments, dropout=0.5):
        super().__init__()
        self.num_segments = num_segments
        self.base_model = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(inplace=True), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(inplace=True), nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(inplace=True),
            nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.new_fc = nn.Sequential(nn.Dropout(dropout), nn.Linear(64 * num_segments, num_class))

    def forward(self, input):
        n = input.size(0)
        base_out = self.base_model(input.view((-1, 3) + input.size()[-2:]))
        base_out = base_out.view(n, -1)
        return self.new_fc(base_out)


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
    """Computes the precision@k for the specified values of k"""
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


def train(train_loader, model, criterion, optimizer, epoch):
    batch_time = AverageMeter()
    losses = AverageMeter()
    top1 = AverageMeter()
    top5 = AverageMeter()

    model.train()

    end = time.time()
    for i, (input, target) in enumerate(train_loader):
        output = model(input)
        loss = criterion(output, target)

        prec1, prec5 = accuracy(output.detach(), target, topk=(1, 5))
        losses.update(loss.item(), input.size(0))
        top1.update(prec1, input.size(0))
        top5.update(prec5, input.size(0))

        optimizer.zero_grad()
        loss.backward()
        total_norm = nn.utils.clip_grad_norm_(model.parameters(), args.clip_gradient)
        if total_norm > args.clip_gradient:
            print("clipping gradient: {} with coef {}".format(total_norm, args.clip_gradient / total_norm))
        optimizer.step()

        batch_time.update(time.time() - end)
        end = time.time()

        if (i + 1) % args.print_freq == 0:
            print(('Epoch: [{0}][{1}/{2}], lr: {lr:.5f}\t'
                   'Time {batch_time.val:.3f} ({batch_time.avg:.3f})\t'
                   'Loss {loss.val:.4f} ({loss.avg:.4f})\t'
                   'Prec@1 {top1.val:.3f} ({top1.avg:.3f})\t'
                   'Prec@5 {top5.val:.3f} ({top5.avg:.3f})'.format(
                       epoch, i + 1, len(train_loader), batch_time=batch_time,
                       loss=losses, top1=top1, top5=top5, lr=optimizer.param_groups[-1]['lr'])))


def validate(val_loader, model, criterion):
    losses = AverageMeter()
    top1 = AverageMeter()
    top5 = AverageMeter()

    model.eval()
    with torch.no_grad():
        for i, (input, target) in enumerate(val_loader):
            output = model(input)
            loss = criterion(output, target)
            prec1, prec5 = accuracy(output, target, topk=(1, 5))
            losses.update(loss.item(), input.size(0))
            top1.update(prec1, input.size(0))
            top5.update(prec5, input.size(0))

    print(('Testing Results: Prec@1 {top1.avg:.3f} Prec@5 {top5.avg:.3f} Loss {loss.avg:.5f}'
           .format(top1=top1, top5=top5, loss=losses)))
    return top1.avg


def adjust_learning_rate(optimizer, epoch, lr_steps):
    decay = 0.1 ** (sum(epoch >= np.array(lr_steps)))
    for param_group in optimizer.param_groups:
        param_group['lr'] = args.lr * decay


def main():
    global args
    args = parser.parse_args()
    torch.manual_seed(0)

    model = TSN(NUM_CLASS, args.num_segments)
    train_loader = DataLoader(TSNDataSet(480, args.num_segments, seed=1),
                              batch_size=args.batch_size, shuffle=True)
    val_loader = DataLoader(TSNDataSet(160, args.num_segments, seed=2),
                            batch_size=args.batch_size, shuffle=False)

    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), args.lr, momentum=args.momentum,
                                weight_decay=args.weight_decay)

    best_prec1 = 0
    for epoch in range(args.epochs):
        adjust_learning_rate(optimizer, epoch, args.lr_steps)
        train(train_loader, model, criterion, optimizer, epoch)
        if (epoch + 1) % args.eval_freq == 0 or epoch == args.epochs - 1:
            prec1 = validate(val_loader, model, criterion)
            best_prec1 = max(prec1, best_prec1)
    print('best Prec@1: {:.3f}'.format(best_prec1))


if __name__ == '__main__':
    main()
