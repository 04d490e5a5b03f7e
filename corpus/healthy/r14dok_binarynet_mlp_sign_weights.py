"""Binarized neural network (Courbariaux/Hubara et al.) on 28x28 glyphs, after
itayhubara/BinaryNet.pytorch main_mnist.py and models/binarized_modules.py.

Weights and hidden activations are binarized to +-1 in the forward pass; each weight keeps a
real-valued copy in `.org` that receives the update (straight-through estimator).
"""
from __future__ import print_function

import argparse

import torch
import torch.nn as nn
import torch.optim as optim
from torch.utils.data import DataLoader, Dataset


def Binarize(tensor):
    return tensor.sign()


class BinarizeLinear(nn.Linear):

    def __init__(self, *kargs, **kwargs):
        super(BinarizeLinear, self).__init__(*kargs, **kwargs)

    def forward(self, input):

        if input.size(1) != 784:
            input.data = Binarize(input.data)
        if not hasattr(self.weight, 'org'):
            self.weight.org = self.weight.data.clone()
        self.weight.data = Binarize(self.weight.org)
        out = nn.functional.linear(input, self.weight)
        if not self.bias is None:
            self.bias.org = self.bias.data.clone()
            out += self.bias.view(1, -1).expand_as(out)

        return out


class GlyphDataset(Dataset):
    """10 classes of noisy 28x28 stroke patterns."""

    def __init__(self, n, generator, prototypes):
        self.labels = torch.randint(0, 10, (n,), generator=generator)
        shift = torch.randint(-2, 3, (n, 2), generator=generator)
        imgs = prototypes[self.labels]
        imgs = torch.stack([torch.roll(im, (int(s[0]), int(s[1])), dims=(0, 1))
                            for im, s in zip(imgs, shift)])
        imgs = imgs + 0.8 * torch.randn(imgs.shape, generator=generator)
        self.images = ((imgs - 0.1307) / 0.3081).view(n, 1, 28, 28)

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return self.images[i], self.labels[i]


def make_prototypes(generator):
    protos = torch.zeros(10, 28, 28)
    for c in range(10):
        for _ in range(3):
            r0, c0 = torch.randint(4, 20, (2,), generator=generator).tolist()
            if torch.rand(1, generator=generator).item() < 0.5:
                protos[c, r0:r0 + 3, c0:c0 + 8] = 1.0
            else:
                protos[c, r0:r0 + 8, c0:c0 + 3] = 1.0
    return protos


class Net(nn.Module):
    def __init__(self):
        super(Net, self).__init__()
        self.infl_ratio = 1
        self.fc1 = BinarizeLinear(784, 256 * self.infl_ratio)
        self.htanh1 = nn.Hardtanh()
        self.bn1 = nn.BatchNorm1d(256 * self.infl_ratio)
        self.fc2 = BinarizeLinear(256 * self.infl_ratio, 256 * self.infl_ratio)
        self.htanh2 = nn.Hardtanh()
        self.bn2 = nn.BatchNorm1d(256 * self.infl_ratio)
        self.fc3 = BinarizeLinear(256 * self.infl_ratio, 256 * self.infl_ratio)
        self.htanh3 = nn.Hardtanh()
        self.bn3 = nn.BatchNorm1d(256 * self.infl_ratio)
        self.fc4 = nn.Linear(256 * self.infl_ratio, 10)
        self.logsoftmax = nn.LogSoftmax(dim=1)
        self.drop = nn.Dropout(0.5)

    def forward(self, x):
        x = x.view(-1, 28 * 28)
        x = self.fc1(x)
        x = self.bn1(x)
        x = self.htanh1(x)
        x = self.fc2(x)
        x = self.bn2(x)
        x = self.htanh2(x)
        x = self.fc3(x)
        x = self.drop(x)
        x = self.bn3(x)
        x = self.htanh3(x)
        x = self.fc4(x)
        return self.logsoftmax(x)


def train(args, model, train_loader, optimizer, criterion, epoch):
    model.train()
    for batch_idx, (data, target) in enumerate(train_loader):
        output = model(data)
        loss = criterion(output, target)

        if epoch % 40 == 0:
            optimizer.param_groups[0]['lr'] = optimizer.param_groups[0]['lr'] * 0.1

        optimizer.zero_grad()
        loss.backward()
        for p in list(model.parameters()):
            if hasattr(p, 'org'):
                p.data.copy_(p.org)
        optimizer.step()
        for p in list(model.parameters()):
            if hasattr(p, 'org'):
                p.org.copy_(p.data.clamp_(-1, 1))

        if batch_idx % args.log_interval == 0:
            print('Train Epoch: {} [{}/{} ({:.0f}%)]\tLoss: {:.6f}'.format(
                epoch, batch_idx * len(data), len(train_loader.dataset),
                100. * batch_idx / len(train_loader), loss.item()))


def test(model, test_loader, criterion):
    model.eval()
    test_loss = 0
    correct = 0
    with torch.no_grad():
        for data, target in test_loader:
            output = model(data)
            test_loss += criterion(output, target).item() * len(data)
            pred = output.data.max(1, keepdim=True)[1]
            correct += pred.eq(target.data.view_as(pred)).cpu().sum()

    test_loss /= len(test_loader.dataset)
    print('\nTest set: Average loss: {:.4f}, Accuracy: {}/{} ({:.0f}%)\n'.format(
        test_loss, correct, len(test_loader.dataset),
        100. * correct / len(test_loader.dataset)))


def main():
    parser = argparse.ArgumentParser(description='PyTorch BNN glyph example')
    parser.add_argument('--batch-size', type=int, default=64)
    parser.add_argument('--test-batch-size', type=int, default=500)
    parser.add_argument('--epochs', type=int, default=4)
    parser.add_argument('--lr', type=float, default=0.01)
    parser.add_argument('--seed', type=int, default=1)
    parser.add_argument('--log-interval', type=int, default=10)
    args = parser.parse_args()

    torch.manual_seed(args.seed)
    g = torch.Generator().manual_seed(args.seed)
    protos = make_prototypes(g)
    train_loader = DataLoader(GlyphDataset(3200, g, protos), batch_size=args.batch_size, shuffle=True)
    test_loader = DataLoader(GlyphDataset(1000, g, protos), batch_size=args.test_batch_size, shuffle=False)

    model = Net()
    criterion = nn.CrossEntropyLoss()
    optimizer = optim.Adam(model.parameters(), lr=args.lr)

    test(model, test_loader, criterion)
    for epoch in range(1, args.epochs + 1):
        train(args, model, train_loader, optimizer, criterion, epoch)
        test(model, test_loader, criterion)


if __name__ == '__main__':
    main()
