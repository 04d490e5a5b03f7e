"""Snapshot ensemble (Huang et al., ICLR 2017) of a small LeNet on synthetic 16x16 glyphs:
one network is trained with a cosine learning rate that restarts every cycle, a snapshot is
taken at the end of every cycle, and the ensemble averages the snapshots' softmax outputs."""
import copy
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)
device = torch.device("cpu")


class GlyphDataset(Dataset):
    def __init__(self, n, prototypes, noise=0.6, seed=0):
        g = torch.Generator().manual_seed(seed)
        self.targets = torch.randint(0, prototypes.shape[0], (n,), generator=g)
        imgs = prototypes[self.targets] - 0.4
        flip = torch.rand(imgs.shape, generator=g) < 0.15
        imgs = torch.where(flip, -imgs, imgs)
        self.data = imgs + noise * torch.randn(imgs.shape, generator=g)

    def __len__(self):
        return len(self.targets)

    def __getitem__(self, idx):
        return self.data[idx], self.targets[idx]


prototypes = (torch.rand(10, 1, 16, 16) > 0.6).float()
train_loader = DataLoader(GlyphDataset(2560, prototypes, seed=1), batch_size=64, shuffle=True)
test_loader = DataLoader(GlyphDataset(1000, prototypes, seed=2), batch_size=250)


class LeNet5(nn.Module):
    def __init__(self):
        super(LeNet5, self).__init__()
        self.conv1 = nn.Conv2d(1, 8, 3, padding=1)
        self.conv2 = nn.Conv2d(8, 16, 3, padding=1)
        self.fc1 = nn.Linear(16 * 4 * 4, 64)
        self.fc2 = nn.Linear(64, 10)

    def forward(self, x):
        out = F.max_pool2d(F.relu(self.conv1(x)), 2)
        out = F.max_pool2d(F.relu(self.conv2(out)), 2)
        out = out.view(out.size(0), -1)
        out = F.relu(self.fc1(out))
        return self.fc2(out)


def set_lr(optimizer, iteration, n_iters_per_estimator, init_lr, lr_clip=None):
    """Cosine annealing inside one cycle, equation (2) of the paper."""
    lr = 0.5 * init_lr * (
        1 + math.cos(math.pi * (iteration % n_iters_per_estimator) / n_iters_per_estimator)
    )
    if lr_clip:
        lr = max(lr_clip[0], min(lr, lr_clip[1]))
    for param_group in optimizer.param_groups:
        param_group["lr"] = lr
    return lr


def ensemble_forward(estimators, x):
    proba = torch.zeros(x.size(0), 10)
    for estimator in estimators:
        proba += F.softmax(estimator(x), dim=1) / len(estimators)
    return proba


def evaluate(models, loader):
    correct = 0
    for m in models:
        m.eval()
    with torch.no_grad():
        for data, target in loader:
            pred = ensemble_forward(models, data).max(1)[1]
            correct += pred.eq(target).sum().item()
    for m in models:
        m.train()
    return 100.0 * correct / len(loader.dataset)


n_estimators = 5
epochs = 5
init_lr = 0.01
log_interval = 5

estimator_ = LeNet5().to(device)
optimizer = torch.optim.Adam(estimator_.parameters(), lr=init_lr, weight_decay=5e-4)
criterion = nn.CrossEntropyLoss()

estimators = []
n_iters_per_epoch = len(train_loader)
n_iters_per_estimator = epochs * n_iters_per_epoch // n_estimators
total_iters = 0
counter = 0
start = time.time()

for epoch in range(epochs):
    for batch_idx, (data, target) in enumerate(train_loader):
        data, target = data.to(device), target.to(device)

        lr = set_lr(optimizer, total_iters, n_iters_per_estimator, init_lr)

        output = estimator_(data)
        loss = criterion(output, target)

        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

        total_iters += 1

        if batch_idx % log_interval == 0:
            print("Estimator: {} | Epoch: {:03d} | Batch: {:03d} | lr: {:.4f} | Loss: {:.5f}".format(
                counter, epoch, batch_idx, lr, loss.item()))

        if total_iters % n_iters_per_estimator == 0:
            snapshot = copy.deepcopy(estimator_)
            estimators.append(snapshot)
            counter += 1
            single_acc = evaluate([estimator_], test_loader)
            ens_acc = evaluate(estimators, test_loader)
            print("Snapshot {} taken at iteration {} | snapshot acc: {:.2f} % | "
                  "ensemble of {} acc: {:.2f} %".format(
                      counter, total_iters, single_acc, len(estimators), ens_acc))

print("Finished {} iterations in {:.1f}s".format(total_iters, time.time() - start))
print("Final ensemble test accuracy: {:.2f} %".format(evaluate(estimators, test_loader)))
