"""Semantic segmentation with a small fully convolutional network and a Trainer class.

Synthetic scenes: noisy gray images with a few brighter rectangles; the
target marks every pixel that belongs to a rectangle (2 classes). The
network is a stack of conv-BN-ReLU blocks with a 1x1 score layer.
"""
import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(1337)
np.random.seed(1337)


class RectangleScenes(Dataset):
    def __init__(self, n, size=16, seed=0):
        rng = np.random.RandomState(seed)
        self.imgs = np.zeros((n, 1, size, size), np.float32)
        self.lbls = np.zeros((n, size, size), np.int64)
        for k in range(n):
            for _ in range(rng.randint(1, 3)):
                h, w = rng.randint(3, 8, 2)
                y, x = rng.randint(0, size - h), rng.randint(0, size - w)
                self.lbls[k, y:y + h, x:x + w] = 1
            self.imgs[k, 0] = 0.6 * self.lbls[k] + rng.normal(0, 0.5, (size, size))

    def __len__(self):
        return len(self.imgs)

    def __getitem__(self, i):
        return torch.from_numpy(self.imgs[i]), torch.from_numpy(self.lbls[i])


class FCN(nn.Module):
    def __init__(self, n_class=2, width=12, depth=7):
        super(FCN, self).__init__()
        layers = []
        in_ch = 1
        for _ in range(depth):
            layers += [nn.Conv2d(in_ch, width, 3, padding=1), nn.BatchNorm2d(width), nn.ReLU(inplace=True)]
            in_ch = width
        self.features = nn.Sequential(*layers)
        self.score = nn.Conv2d(width, n_class, 1)

    def forward(self, x):
        return self.score(self.features(x))


def cross_entropy2d(input, target, size_average=True):
    n, c, h, w = input.size()
    log_p = F.log_softmax(input, dim=1)
    log_p = log_p.transpose(1, 2).transpose(2, 3).contiguous().view(-1, c)
    loss = F.nll_loss(log_p, target.view(-1), reduction='sum')
    if size_average:
        loss /= target.numel()
    return loss


def label_accuracy_score(label_trues, label_preds, n_class):
    hist = np.bincount(n_class * label_trues.ravel() + label_preds.ravel(), minlength=n_class ** 2).reshape(n_class, n_class)
    acc = np.diag(hist).sum() / hist.sum()
    with np.errstate(divide='ignore', invalid='ignore'):
        iu = np.diag(hist) / (hist.sum(axis=1) + hist.sum(axis=0) - np.diag(hist))
    return acc, np.nanmean(iu)


class Trainer(object):

    def __init__(self, model, optimizer, train_loader, val_loader, max_iter, interval_validate=None):
        self.model = model
        self.optim = optimizer
        self.train_loader = train_loader
        self.val_loader = val_loader
        if interval_validate is None:
            self.interval_validate = len(self.train_loader)
        else:
            self.interval_validate = interval_validate
        self.epoch = 0
        self.iteration = 0
        self.max_iter = max_iter
        self.best_mean_iu = 0

    def validate(self):
        self.model.eval()
        n_class = 2
        val_loss = 0
        label_trues, label_preds = [], []
        with torch.no_grad():
            for data, target in self.val_loader:
                score = self.model(data)
                val_loss += cross_entropy2d(score, target).item()
                label_preds.append(score.argmax(dim=1).numpy())
                label_trues.append(target.numpy())
        acc, mean_iu = label_accuracy_score(np.concatenate(label_trues), np.concatenate(label_preds), n_class)
        val_loss /= len(self.val_loader)
        self.best_mean_iu = max(self.best_mean_iu, mean_iu)
        print('[validate] iteration=%d loss=%.4f acc=%.4f mean_iu=%.4f' % (self.iteration, val_loss, acc, mean_iu))

    def train_epoch(self):
        self.model.train()
        for batch_idx, (data, target) in enumerate(self.train_loader):
            iteration = batch_idx + self.epoch * len(self.train_loader)
            self.iteration = iteration

            if self.iteration % self.interval_validate == 0:
                self.validate()

            self.optim.zero_grad()
            score = self.model(data)
            loss = cross_entropy2d(score, target)
            if np.isnan(float(loss.item())):
                raise ValueError('loss is nan while training')
            loss.backward()
            self.optim.step()

            if self.iteration % 10 == 0:
                lbl_pred = score.argmax(dim=1).numpy()
                acc, mean_iu = label_accuracy_score(target.numpy(), lbl_pred, n_class=2)
                print('epoch=%d iteration=%d loss=%.4f acc=%.4f mean_iu=%.4f' % (
                    self.epoch, self.iteration, loss.item(), acc, mean_iu))

            if self.iteration >= self.max_iter:
                break

    def train(self):
        max_epoch = int(math.ceil(1. * self.max_iter / len(self.train_loader)))
        for epoch in range(max_epoch):
            self.epoch = epoch
            self.train_epoch()
            if self.iteration >= self.max_iter:
                break
        self.validate()


def main():
    train_loader = DataLoader(RectangleScenes(800, seed=0), batch_size=16, shuffle=True)
    val_loader = DataLoader(RectangleScenes(160, seed=1), batch_size=80, shuffle=False)
    model = FCN()
    optim = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4)
    trainer = Trainer(model=model, optimizer=optim, train_loader=train_loader, val_loader=val_loader, max_iter=150)
    trainer.train()


if __name__ == '__main__':
    main()
