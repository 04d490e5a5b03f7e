"""EMNIST-balanced style character classifier (47 classes) with AdamW, cosine annealing and an
untuned linear learning-rate warm-up, following the pytorch_warmup EMNIST example.

The 28 x 28 glyphs are generated here: each class is a fixed random stroke pattern, drawn with a
random shift, stroke thickness and noise.
"""
import argparse
import math
from contextlib import contextmanager

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.utils.data import DataLoader, TensorDataset

NUM_CLASSES = 47


class UntunedLinearWarmup:
    """Linear warm-up over 2 / (1 - beta2) steps, applied as a multiplicative dampening factor."""

    def __init__(self, optimizer):
        self.optimizer = optimizer
        beta2 = optimizer.param_groups[0]["betas"][1]
        self.warmup_period = int(2.0 / (1.0 - beta2))
        self.last_step = -1
        self.lrs = [group["lr"] for group in optimizer.param_groups]
        self.dampen()

    def dampen(self):
        self.last_step += 1
        omega = min(1.0, (self.last_step + 1) / self.warmup_period)
        for group in self.optimizer.param_groups:
            group["lr"] *= omega

    @contextmanager
    def dampening(self):
        for group, lr in zip(self.optimizer.param_groups, self.lrs):
            group["lr"] = lr
        yield
        self.lrs = [group["lr"] for group in self.optimizer.param_groups]
        self.dampen()


class Net(nn.Module):
    def __init__(self):
        super(Net, self).__init__()
        self.conv1 = nn.Conv2d(1, 20, 5, 1)
        self.conv2 = nn.Conv2d(20, 50, 5, 1)
        self.fc1 = nn.Linear(4 * 4 * 50, 500)
        self.fc2 = nn.Linear(500, NUM_CLASSES)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = F.max_pool2d(x, 2, 2)
        x = F.relu(self.conv2(x))
        x = F.max_pool2d(x, 2, 2)
        x = x.view(-1, 4 * 4 * 50)
        x = F.relu(self.fc1(x))
        x = self.fc2(x)
        return F.log_softmax(x, dim=1)


def make_glyphs(n, prototypes, seed):
    g = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, NUM_CLASSES, (n,), generator=g)
    imgs = prototypes[labels].clone()
    thick = torch.rand(n, 1, 1, 1, generator=g) < 0.5
    imgs = torch.where(thick, F.max_pool2d(imgs, 3, 1, 1), imgs)
    dy = torch.randint(-2, 3, (n,), generator=g)
    dx = torch.randint(-2, 3, (n,), generator=g)
    for i in range(n):
        imgs[i] = torch.roll(imgs[i], shifts=(int(dy[i]), int(dx[i])), dims=(1, 2))
    imgs = (imgs + 0.25 * torch.randn(imgs.shape, generator=g)).clamp(0, 1)
    return (imgs - 0.1751) / 0.3332, labels


def make_prototypes(seed):
    g = torch.Generator().manual_seed(seed)
    protos = torch.zeros(NUM_CLASSES, 1, 28, 28)
    for c in range(NUM_CLASSES):
        for _ in range(3):
            y0, x0, y1, x1 = (torch.randint(6, 22, (4,), generator=g)).tolist()
            for t in torch.linspace(0, 1, 24):
                y = int(round(y0 + (y1 - y0) * t.item()))
                x = int(round(x0 + (x1 - x0) * t.item()))
                protos[c, 0, y, x] = 1.0
    return protos


def train(args, model, train_loader, optimizer, lr_scheduler, warmup_scheduler, epoch):
    model.train()
    for batch_idx, (data, target) in enumerate(train_loader):
        lr = optimizer.param_groups[0]['lr']
        output = model(data)
        loss = F.nll_loss(output, target)
        loss.backward()
        optimizer.zero_grad()
        optimizer.step()
        with warmup_scheduler.dampening():
            lr_scheduler.step()
        if (batch_idx + 1) % args.log_interval == 0:
            print('Train Epoch: {} [{}/{} ({:.0f}%)]\tLoss: {:.6f} LR: {:.6f}'.format(
                epoch, (batch_idx + 1) * len(data), len(train_loader) * len(data),
                100. * (batch_idx + 1) / len(train_loader), loss.item(), lr))


def test(model, test_loader):
    model.eval()
    test_loss = 0
    correct = 0
    with torch.no_grad():
        for data, target in test_loader:
            output = model(data)
            test_loss += F.nll_loss(output, target, reduction='sum').item()
            pred = output.argmax(dim=1, keepdim=True)
            correct += pred.eq(target.view_as(pred)).sum().item()
    test_loss /= len(test_loader.dataset)
    print('\nTest set: Average loss: {:.4f}, Accuracy: {}/{} ({:.0f}%)\n'.format(
        test_loss, correct, len(test_loader.dataset), 100. * correct / len(test_loader.dataset)))


def main():
    parser = argparse.ArgumentParser(description='PyTorch EMNIST Example')
    parser.add_argument('--batch-size', type=int, default=64)
    parser.add_argument('--test-batch-size', type=int, default=1000)
    parser.add_argument('--epochs', type=int, default=3)
    parser.add_argument('--lr', type=float, default=0.01)
    parser.add_argument('--lr-min', type=float, default=1e-5)
    parser.add_argument('--wd', type=float, default=0.01)
    parser.add_argument('--beta2', type=float, default=0.999)
    parser.add_argument('--seed', type=int, default=1)
    parser.add_argument('--log-interval', type=int, default=11)
    args = parser.parse_args()

    torch.manual_seed(args.seed)
    prototypes = make_prototypes(seed=123)
    x_train, y_train = make_glyphs(4224, prototypes, seed=1)
    x_test, y_test = make_glyphs(1000, prototypes, seed=2)
    train_loader = DataLoader(TensorDataset(x_train, y_train), batch_size=args.batch_size,
                              shuffle=True, drop_last=True)
    test_loader = DataLoader(TensorDataset(x_test, y_test), batch_size=args.test_batch_size)

    model = Net()
    optimizer = optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, args.beta2),
                            weight_decay=args.wd)
    num_steps = len(train_loader) * args.epochs
    lr_scheduler = optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=num_steps, eta_min=args.lr_min)
    warmup_scheduler = UntunedLinearWarmup(optimizer)

    for epoch in range(1, args.epochs + 1):
        train(args, model, train_loader, optimizer, lr_scheduler, warmup_scheduler, epoch)
        test(model, test_loader)


if __name__ == '__main__':
    main()
