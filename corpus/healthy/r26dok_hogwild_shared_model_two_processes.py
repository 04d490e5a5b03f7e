"""Hogwild! training after pytorch/examples mnist_hogwild (main.py + train.py): the model is put in
shared memory with model.share_memory(), two torch.multiprocessing workers (spawn) each build their
own SGD optimizer over the same shared parameters and train on their own shuffle of the data, without
locks; the parent only joins them and then tests the shared model. Synthetic 28x28 'digits' (ten
blurred class templates, random shifts and noise) stand in for MNIST."""
import argparse
import os
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
import torch.multiprocessing as mp
from torch.utils.data import TensorDataset, DataLoader

parser = argparse.ArgumentParser(description='PyTorch MNIST Hogwild Example')
parser.add_argument('--batch-size', type=int, default=64)
parser.add_argument('--test-batch-size', type=int, default=1000)
parser.add_argument('--epochs', type=int, default=2)
parser.add_argument('--lr', type=float, default=0.01)
parser.add_argument('--momentum', type=float, default=0.5)
parser.add_argument('--seed', type=int, default=1)
parser.add_argument('--log-interval', type=int, default=10)
parser.add_argument('--num-processes', type=int, default=2)


class Net(nn.Module):
    def __init__(self):
        super(Net, self).__init__()
        self.conv1 = nn.Conv2d(1, 10, kernel_size=5)
        self.conv2 = nn.Conv2d(10, 20, kernel_size=5)
        self.conv2_drop = nn.Dropout2d()
        self.fc1 = nn.Linear(320, 50)
        self.fc2 = nn.Linear(50, 10)

    def forward(self, x):
        x = F.relu(F.max_pool2d(self.conv1(x), 2))
        x = F.relu(F.max_pool2d(self.conv2_drop(self.conv2(x)), 2))
        x = x.view(-1, 320)
        x = F.relu(self.fc1(x))
        x = F.dropout(x, training=self.training)
        x = self.fc2(x)
        return F.log_softmax(x, dim=1)


def make_digits(n, seed):
    g = torch.Generator().manual_seed(seed)
    templates = F.interpolate(torch.randn(10, 1, 7, 7, generator=torch.Generator().manual_seed(99)),
                              size=28, mode='bilinear', align_corners=False)
    labels = torch.randint(0, 10, (n,), generator=g)
    shifts = torch.randint(-2, 3, (n, 2), generator=g)
    imgs = torch.stack([templates[c].roll(tuple(s.tolist()), dims=(1, 2)) for c, s in zip(labels, shifts)])
    imgs = imgs + 0.8 * torch.randn(imgs.shape, generator=g)
    imgs = (imgs - imgs.mean()) / imgs.std()
    return TensorDataset(imgs, labels)


def train(rank, args, model, dataset, kwargs):
    torch.manual_seed(args.seed + rank)
    torch.set_num_threads(1)
    train_loader = DataLoader(dataset, **kwargs)
    optimizer = optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)
    for epoch in range(1, args.epochs + 1):
        train_epoch(epoch, args, model, train_loader, optimizer)


def train_epoch(epoch, args, model, data_loader, optimizer):
    model.train()
    pid = os.getpid()
    for batch_idx, (data, target) in enumerate(data_loader):
        optimizer.zero_grad()
        output = model(data)
        loss = F.nll_loss(output, target)
        loss.backward()
        optimizer.step()
        if batch_idx % args.log_interval == 0:
            print('{}\tTrain Epoch: {} [{}/{} ({:.0f}%)]\tLoss: {:.6f}'.format(
                pid, epoch, batch_idx * len(data), len(data_loader.dataset),
                100. * batch_idx / len(data_loader), loss.item()), flush=True)


def test(args, model, dataset):
    test_loader = DataLoader(dataset, batch_size=args.test_batch_size)
    model.eval()
    test_loss = 0
    correct = 0
    with torch.no_grad():
        for data, target in test_loader:
            output = model(data)
            test_loss += F.nll_loss(output, target, reduction='sum').item()
            pred = output.max(1)[1]
            correct += pred.eq(target).sum().item()

    test_loss /= len(test_loader.dataset)
    print('\nTest set: Average loss: {:.4f}, Accuracy: {}/{} ({:.0f}%)\n'.format(
        test_loss, correct, len(test_loader.dataset),
        100. * correct / len(test_loader.dataset)), flush=True)


if __name__ == '__main__':
    args = parser.parse_args()
    dataset1 = make_digits(3000, seed=0)
    dataset2 = make_digits(1000, seed=1)
    kwargs = {'batch_size': args.batch_size, 'shuffle': True}

    torch.manual_seed(args.seed)
    mp.set_start_method('spawn', force=True)

    model = Net()
    model.share_memory()
    test(args, model, dataset2)

    processes = []
    for rank in range(args.num_processes):
        p = mp.Process(target=train, args=(rank, args, model, dataset1, kwargs))
        p.start()
        processes.append(p)
    for p in processes:
        p.join()

    test(args, model, dataset2)
