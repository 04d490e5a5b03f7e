"""Train a small SqueezeNet (fire modules, conv classifier + avg pool) on CIFAR-like 10-class images."""
import argparse
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.utils.data import DataLoader, Dataset

parser = argparse.ArgumentParser('Options for training SqueezeNet in pytorch')
parser.add_argument('--batch-size', type=int, default=64, metavar='N', help='batch size of train')
parser.add_argument('--epoch', type=int, default=5, metavar='N', help='number of epochs to train for')
parser.add_argument('--learning-rate', type=float, default=0.01, metavar='LR', help='learning rate')
parser.add_argument('--momentum', type=float, default=0.9, metavar='M')
parser.add_argument('--num-classes', type=int, default=10)
parser.add_argument('--log-schedule', type=int, default=5, metavar='N')
parser.add_argument('--seed', type=int, default=1)
args = parser.parse_args()

torch.manual_seed(args.seed)


class SyntheticCIFAR(Dataset):
    """Class-dependent colour blobs on noise, 3x16x16."""

    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        self.targets = torch.randint(0, 10, (n,), generator=g)
        protos = torch.randn(10, 3, 4, 4, generator=torch.Generator().manual_seed(123))
        protos = F.interpolate(protos, size=(16, 16), mode='bilinear', align_corners=False)
        self.data = protos[self.targets] * 1.5 + torch.randn(n, 3, 16, 16, generator=g)

    def __len__(self):
        return len(self.targets)

    def __getitem__(self, idx):
        img = self.data[idx]
        if torch.rand(1).item() < 0.5:
            img = torch.flip(img, dims=[2])
        return img, self.targets[idx]


train_loader = DataLoader(SyntheticCIFAR(1000, 0), batch_size=args.batch_size, shuffle=True)
test_loader = DataLoader(SyntheticCIFAR(256, 1), batch_size=args.batch_size, shuffle=False)


class fire(nn.Module):
    def __init__(self, inplanes, squeeze_planes, expand_planes):
        super(fire, self).__init__()
        self.conv1 = nn.Conv2d(inplanes, squeeze_planes, kernel_size=1, stride=1)
        self.relu1 = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(squeeze_planes, expand_planes, kernel_size=1, stride=1)
        self.conv3 = nn.Conv2d(squeeze_planes, expand_planes, kernel_size=3, stride=1, padding=1)
        self.relu2 = nn.ReLU(inplace=True)

    def forward(self, x):
        x = self.relu1(self.conv1(x))
        out = torch.cat([self.conv2(x), self.conv3(x)], 1)
        return self.relu2(out)


class SqueezeNet(nn.Module):
    def __init__(self):
        super(SqueezeNet, self).__init__()
        self.conv1 = nn.Conv2d(3, 32, kernel_size=3, stride=1, padding=1)
        self.bn1 = nn.BatchNorm2d(32)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool1 = nn.MaxPool2d(kernel_size=2, stride=2)  # 8
        self.fire2 = fire(32, 8, 16)
        self.fire3 = fire(32, 8, 16)
        self.maxpool2 = nn.MaxPool2d(kernel_size=2, stride=2)  # 4
        self.fire4 = fire(32, 16, 32)
        self.conv2 = nn.Conv2d(64, 10, kernel_size=1, stride=1)
        self.avg_pool = nn.AvgPool2d(kernel_size=4, stride=4)
        self.softmax = nn.LogSoftmax(dim=1)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                n = m.kernel_size[0] * m.kernel_size[1] * m.out_channels
                m.weight.data.normal_(0, math.sqrt(2. / n))
            elif isinstance(m, nn.BatchNorm2d):
                m.weight.data.fill_(1)
                m.bias.data.zero_()

    def forward(self, x):
        x = self.maxpool1(self.relu(self.bn1(self.conv1(x))))
        x = self.fire2(x)
        x = self.fire3(x)
        x = self.maxpool2(x)
        x = self.fire4(x)
        x = self.conv2(x)
        x = self.avg_pool(x)
        x = x.view(-1, 10)
        return self.softmax(x)


net = SqueezeNet()
optimizer = optim.SGD(net.parameters(), lr=args.learning_rate, momentum=args.momentum, weight_decay=5e-4)


def train(epoch):
    correct = 0
    net.train()
    for b_idx, (data, targets) in enumerate(train_loader):
        optimizer.zero_grad()
        scores = net(data)
        scores = scores.view(args.batch_size, args.num_classes)
        loss = F.nll_loss(scores, targets)

        pred = scores.data.max(1)[1]
        correct += pred.eq(targets.data).sum().item()

        loss.backward()
        optimizer.step()

        if b_idx % args.log_schedule == 0:
            print('Train Epoch: {} [{}/{} ({:.0f}%)]\tLoss: {:.6f}'.format(
                epoch, (b_idx + 1) * len(data), len(train_loader.dataset),
                100. * (b_idx + 1) * len(data) / len(train_loader.dataset), loss.item()))

    train_accuracy = correct / float(len(train_loader.dataset))
    print("training accuracy ({:.2f}%)".format(100 * train_accuracy))
    return train_accuracy * 100.0


def val():
    correct = 0
    net.eval()
    with torch.no_grad():
        for data, target in test_loader:
            score = net(data)
            pred = score.max(1)[1]
            correct += pred.eq(target).sum().item()
    val_accuracy = 100.0 * correct / len(test_loader.dataset)
    print("predicted {} out of {}, accuracy = {:.2f}".format(correct, len(test_loader.dataset), val_accuracy))
    return val_accuracy


if __name__ == '__main__':
    train_acc, val_acc = [], []
    for i in range(1, args.epoch + 1):
        train_acc.append(train(i))
        val_acc.append(val())
