"""PyTorch MNIST example (pytorch/examples mnist/main.py), run offline.

The MNIST download is replaced by synthetic 28x28 "seven-segment" digits drawn
in the script (random stroke width, shift and pixel noise). The network, the
log_softmax + F.nll_loss loss, Adadelta at lr=1.0 and the StepLR(gamma=0.7)
stepped once per epoch are as in the example; the conv net is narrower.
"""
import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.optim.lr_scheduler import StepLR
from torch.utils.data import Dataset, DataLoader

# segments: a top, b upper-right, c lower-right, d bottom, e lower-left, f upper-left, g middle
SEGMENTS = {
    0: "abcdef", 1: "bc", 2: "abged", 3: "abgcd", 4: "fgbc",
    5: "afgcd", 6: "afgedc", 7: "abc", 8: "abcdefg", 9: "abcdfg",
}


def draw_digit(digit, g):
    img = torch.zeros(28, 28)
    w = int(torch.randint(2, 4, (1,), generator=g))
    top, left, h, wd = 4, 8, 20, 12
    mid = top + h // 2
    boxes = {
        "a": (top, top + w, left, left + wd),
        "d": (top + h - w, top + h, left, left + wd),
        "g": (mid - w // 2, mid - w // 2 + w, left, left + wd),
        "f": (top, mid, left, left + w),
        "e": (mid, top + h, left, left + w),
        "b": (top, mid, left + wd - w, left + wd),
        "c": (mid, top + h, left + wd - w, left + wd),
    }
    for s in SEGMENTS[digit]:
        r0, r1, c0, c1 = boxes[s]
        img[r0:r1, c0:c1] = 1.0
    dy, dx = (int(v) for v in torch.randint(-3, 4, (2,), generator=g))
    img = torch.roll(img, shifts=(dy, dx), dims=(0, 1))
    img = img + 0.25 * torch.randn(28, 28, generator=g)
    return img.clamp(0.0, 1.0)


class SyntheticDigits(Dataset):
    """Stands in for torchvision.datasets.MNIST(..., transform=Normalize((0.1307,), (0.3081,)))."""

    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        self.targets = torch.randint(0, 10, (n,), generator=g)
        self.data = torch.stack([draw_digit(int(t), g) for t in self.targets])
        self.mean, self.std = 0.1307, 0.3081

    def __len__(self):
        return len(self.targets)

    def __getitem__(self, idx):
        img = (self.data[idx].unsqueeze(0) - self.mean) / self.std
        return img, self.targets[idx]


class Net(nn.Module):
    def __init__(self):
        super(Net, self).__init__()
        self.conv1 = nn.Conv2d(1, 8, 3, 1)
        self.conv2 = nn.Conv2d(8, 16, 3, 1)
        self.dropout1 = nn.Dropout(0.25)
        self.dropout2 = nn.Dropout(0.5)
        self.fc1 = nn.Linear(2304, 64)
        self.fc2 = nn.Linear(64, 10)

    def forward(self, x):
        x = self.conv1(x)
        x = F.relu(x)
        x = self.conv2(x)
        x = F.relu(x)
        x = F.max_pool2d(x, 2)
        x = self.dropout1(x)
        x = torch.flatten(x, 1)
        x = self.fc1(x)
        x = F.relu(x)
        x = self.dropout2(x)
        x = self.fc2(x)
        output = F.log_softmax(x, dim=1)
        return output


def train(args, model, device, train_loader, optimizer, epoch):
    model.train()
    for batch_idx, (data, target) in enumerate(train_loader):
        data, target = data.to(device), target.to(device)
        optimizer.zero_grad()
        output = model(data)
        loss = F.nll_loss(output, target)
        loss.backward()
        optimizer.step()
        if batch_idx % args.log_interval == 0:
            print('Train Epoch: {} [{}/{} ({:.0f}%)]\tLoss: {:.6f}'.format(
                epoch, batch_idx * len(data), len(train_loader.dataset),
                100. * batch_idx / len(train_loader), loss.item()))


def test(model, device, test_loader):
    model.eval()
    test_loss = 0
    correct = 0
    with torch.no_grad():
        for data, target in test_loader:
            data, target = data.to(device), target.to(device)
            output = model(data)
            test_loss += F.nll_loss(output, target, reduction='sum').item()  # sum up batch loss
            pred = output.argmax(dim=1, keepdim=True)  # get the index of the max log-probability
            correct += pred.eq(target.view_as(pred)).sum().item()

    test_loss /= len(test_loader.dataset)

    print('\nTest set: Average loss: {:.4f}, Accuracy: {}/{} ({:.0f}%)\n'.format(
        test_loss, correct, len(test_loader.dataset),
        100. * correct / len(test_loader.dataset)))


def main():
    parser = argparse.ArgumentParser(description='PyTorch MNIST Example')
    parser.add_argument('--batch-size', type=int, default=64, metavar='N')
    parser.add_argument('--test-batch-size', type=int, default=500, metavar='N')
    parser.add_argument('--epochs', type=int, default=4, metavar='N')
    parser.add_argument('--lr', type=float, default=1.0, metavar='LR')
    parser.add_argument('--gamma', type=float, default=0.7, metavar='M')
    parser.add_argument('--seed', type=int, default=1, metavar='S')
    parser.add_argument('--log-interval', type=int, default=10, metavar='N')
    args = parser.parse_args()

    torch.manual_seed(args.seed)
    device = torch.device("cpu")

    dataset1 = SyntheticDigits(2560, seed=0)
    dataset2 = SyntheticDigits(1000, seed=1)
    train_loader = DataLoader(dataset1, batch_size=args.batch_size, shuffle=True)
    test_loader = DataLoader(dataset2, batch_size=args.test_batch_size)

    model = Net().to(device)
    optimizer = optim.Adadelta(model.parameters(), lr=args.lr)

    scheduler = StepLR(optimizer, step_size=1, gamma=args.gamma)
    for epoch in range(1, args.epochs + 1):
        train(args, model, device, train_loader, optimizer, epoch)
        test(model, device, test_loader)
        scheduler.step()


if __name__ == '__main__':
    main()
