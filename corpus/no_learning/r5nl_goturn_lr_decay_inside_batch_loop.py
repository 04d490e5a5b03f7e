"""GOTURN-style tracker (pygoturn): two conv streams look at the previous and the current crop,
their features are concatenated and a fully connected regressor predicts the object's box in
the current crop (coordinates scaled to 0..10). L1 loss summed over the batch, SGD, and the
learning rate is decayed by gamma every lr_decay_step epochs.

Synthetic video: a textured square moves a few pixels between two frames.
"""
import argparse

import numpy as np
import torch
import torch.nn as nn
import torch.optim as optim
from torch.utils.data import DataLoader, Dataset

parser = argparse.ArgumentParser(description='GOTURN Training')
parser.add_argument('-n', '--num-epochs', default=9, type=int, help='number of total epochs to run')
parser.add_argument('-b', '--batch-size', default=32, type=int, help='batch size')
parser.add_argument('-lr', '--learning-rate', default=1e-4, type=float, help='initial learning rate')
parser.add_argument('--momentum', default=0.9, type=float, help='momentum')
parser.add_argument('--gamma', default=0.1, type=float, help='learning rate decay factor')
parser.add_argument('--lr-decay-step', default=2, type=int, help='epochs after which learning rate decays')
parser.add_argument('-seed', '--manual-seed', default=800, type=int, help='set manual seed value')


class MovingSquares(Dataset):
    def __init__(self, n, size=32, seed=0):
        rng = np.random.RandomState(seed)
        self.prev = np.zeros((n, 3, size, size), np.float32)
        self.curr = np.zeros((n, 3, size, size), np.float32)
        self.bb = np.zeros((n, 4), np.float32)
        for i in range(n):
            w, h = rng.randint(8, 14, size=2)
            texture = rng.rand(3, h, w).astype(np.float32)
            x0, y0 = (size - w) // 2, (size - h) // 2
            dx, dy = rng.randint(-6, 7, size=2)
            self.prev[i] = 0.2 * rng.rand(3, size, size)
            self.curr[i] = 0.2 * rng.rand(3, size, size)
            self.prev[i, :, y0:y0 + h, x0:x0 + w] = texture
            self.curr[i, :, y0 + dy:y0 + dy + h, x0 + dx:x0 + dx + w] = texture
            self.bb[i] = np.array([x0 + dx, y0 + dy, x0 + dx + w, y0 + dy + h]) / size * 10

    def __len__(self):
        return len(self.bb)

    def __getitem__(self, idx):
        return {'previmg': self.prev[idx], 'currimg': self.curr[idx], 'currbb': self.bb[idx]}


class GoNet(nn.Module):
    def __init__(self):
        super(GoNet, self).__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, 5, padding=2), nn.ReLU(inplace=True), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(inplace=True), nn.MaxPool2d(2),
            nn.Conv2d(32, 32, 3, padding=1), nn.ReLU(inplace=True), nn.MaxPool2d(2))
        self.classifier = nn.Sequential(
            nn.Linear(32 * 4 * 4 * 2, 256), nn.ReLU(inplace=True), nn.Dropout(0.1),
            nn.Linear(256, 256), nn.ReLU(inplace=True), nn.Dropout(0.1),
            nn.Linear(256, 4))

    def forward(self, x, y):
        x1 = self.features(x).view(x.size(0), -1)
        x2 = self.features(y).view(y.size(0), -1)
        x = torch.cat((x1, x2), 1)
        return self.classifier(x)


def exp_lr_scheduler(optimizer, init_lr, gamma):
    """Decay learning rate by a factor of gamma."""
    lr = init_lr * gamma
    for param_group in optimizer.param_groups:
        param_group['lr'] = lr
    return optimizer, lr


def train_model(model, dataloader, criterion, optimizer, args):
    lr = args.learning_rate
    itr = 0
    while itr < args.num_epochs:
        model.train()
        running_loss = 0.0
        for i, data in enumerate(dataloader):
            if itr > 0 and itr % args.lr_decay_step == 0:
                optimizer, lr = exp_lr_scheduler(optimizer, lr, args.gamma)
            x1, x2, y = data['previmg'], data['currimg'], data['currbb']
            optimizer.zero_grad()
            output = model(x1, x2)
            loss = criterion(output, y)
            loss.backward()
            optimizer.step()
            running_loss += loss.item()
            if i % 5 == 0:
                print('[training] epoch = %d, i = %d, loss = %f, lr = %g' % (itr, i, loss.item(), lr))
        print('epoch %d: mean loss per box = %.4f' % (itr, running_loss / len(dataloader.dataset)))
        itr += 1
    return model


def main():
    args = parser.parse_args()
    np.random.seed(args.manual_seed)
    torch.manual_seed(args.manual_seed)
    dataloader = DataLoader(MovingSquares(512), batch_size=args.batch_size, shuffle=True)
    net = GoNet()
    loss_fn = torch.nn.L1Loss(reduction='sum')
    optimizer = optim.SGD(net.parameters(), lr=args.learning_rate, momentum=args.momentum, weight_decay=0.0005)
    train_model(net, dataloader, loss_fn, optimizer, args)


if __name__ == "__main__":
    main()
