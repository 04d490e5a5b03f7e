"""Elastic Weight Consolidation on permuted-input tasks, in the style of moskomule/ewc.pytorch
(utils.py EWC class + demo notebook: standard SGD vs EWC on permuted MNIST). MNIST is replaced by
synthetic 14x14 "digit" templates with noise; each new task applies a fixed random pixel permutation.
Both runs use Adam(lr=1e-3) here; "SGD" is the notebook's name for the plain (no-penalty) baseline.
"""
from copy import deepcopy

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F
import torch.utils.data

torch.manual_seed(0)
np.random.seed(0)

epochs = 8
lr = 1e-3
batch_size = 128
sample_size = 200
hidden_size = 100
num_task = 3
importance = 1000


def synthetic_digits(n, rng):
    trng = np.random.RandomState(7)
    templates = (trng.rand(10, 196) < 0.25).astype(np.float32)
    y = rng.randint(0, 10, size=n)
    x = 0.3 * templates[y] * (0.5 + rng.rand(n, 1)) + 0.45 * rng.randn(n, 196)
    return torch.from_numpy(x.astype(np.float32)), torch.from_numpy(y)


class PermutedDigits(torch.utils.data.Dataset):
    def __init__(self, train=True, permute_idx=None):
        rng = np.random.RandomState(1 if train else 2)
        self.data, self.targets = synthetic_digits(3000 if train else 1000, rng)
        self.data = self.data[:, permute_idx]

    def __len__(self):
        return len(self.targets)

    def __getitem__(self, i):
        return self.data[i], self.targets[i]


class MLP(nn.Module):
    def __init__(self, hidden_size=400):
        super(MLP, self).__init__()
        self.fc1 = nn.Linear(196, hidden_size)
        self.fc2 = nn.Linear(hidden_size, hidden_size)
        self.fc3 = nn.Linear(hidden_size, hidden_size)
        self.fc4 = nn.Linear(hidden_size, 10)

    def forward(self, input):
        x = F.relu(self.fc1(input))
        x = F.relu(self.fc2(x))
        x = F.relu(self.fc3(x))
        x = self.fc4(x)
        return x


# ------------------------------------------------------------------ utils.py
class EWC(object):
    def __init__(self, model: nn.Module, dataset: list):

        self.model = model
        self.dataset = dataset

        self.params = {n: p for n, p in self.model.named_parameters() if p.requires_grad}
        self._means = {}
        self._precision_matrices = self._diag_fisher()

        for n, p in deepcopy(self.params).items():
            self._means[n] = p.data

    def _diag_fisher(self):
        precision_matrices = {}
        for n, p in deepcopy(self.params).items():
            p.data.zero_()
            precision_matrices[n] = p.data

        self.model.eval()
        for input in self.dataset:
            self.model.zero_grad()
            output = self.model(input).view(1, -1)
            label = output.max(1)[1].view(-1)
            loss = F.nll_loss(F.log_softmax(output, dim=1), label)
            loss.backward()

            for n, p in self.model.named_parameters():
                precision_matrices[n].data += p.grad.data ** 2 / len(self.dataset)

        precision_matrices = {n: p for n, p in precision_matrices.items()}
        return precision_matrices

    def penalty(self, model: nn.Module):
        loss = 0
        for n, p in model.named_parameters():
            _loss = self._precision_matrices[n] * (p - self._means[n]) ** 2
            loss += _loss.sum()
        return loss


def normal_train(model, optimizer, data_loader):
    model.train()
    epoch_loss = 0
    for input, target in data_loader:
        optimizer.zero_grad()
        output = model(input)
        loss = F.cross_entropy(output, target)
        epoch_loss += loss.item()
        loss.backward()
        optimizer.step()
    return epoch_loss / len(data_loader)


def ewc_train(model, optimizer, data_loader, ewc: EWC, importance: float):
    model.train()
    epoch_loss = 0
    for input, target in data_loader:
        optimizer.zero_grad()
        output = model(input)
        loss = F.cross_entropy(output, target) + importance * ewc.penalty(model)
        epoch_loss += loss.item()
        loss.backward()
        optimizer.step()
    return epoch_loss / len(data_loader)


def test(model, data_loader):
    model.eval()
    correct = 0
    with torch.no_grad():
        for input, target in data_loader:
            output = model(input)
            correct += (F.softmax(output, dim=1).max(dim=1)[1] == target).sum().item()
    return correct / len(data_loader.dataset)


# ------------------------------------------------------------------ demo
def get_permute_digits():
    train_loader = {}
    test_loader = {}
    idx = list(range(196))
    for i in range(num_task):
        train_loader[i] = torch.utils.data.DataLoader(PermutedDigits(train=True, permute_idx=idx),
                                                      batch_size=batch_size, shuffle=True)
        test_loader[i] = torch.utils.data.DataLoader(PermutedDigits(train=False, permute_idx=idx),
                                                     batch_size=batch_size)
        random.shuffle(idx)
    return train_loader, test_loader


import random
random.seed(0)
train_loader, test_loader = get_permute_digits()


def standard_process(epochs, use_cuda=False, weight=True):
    model = MLP(hidden_size)
    optimizer = torch.optim.Adam(params=model.parameters(), lr=lr)
    loss, acc = {}, {}
    for task in range(num_task):
        loss[task] = []
        acc[task] = []
        for _ in range(epochs):
            loss[task].append(normal_train(model, optimizer, train_loader[task]))
            for sub_task in range(task + 1):
                acc[sub_task].append(test(model, test_loader[sub_task]))
        print(f"[SGD] after task {task}: loss {loss[task][0]:.4f} -> {loss[task][-1]:.4f}, acc "
              + " ".join(f"t{s}={acc[s][-1]:.3f}" for s in range(task + 1)))
    return loss, acc


def ewc_process(epochs, importance, use_cuda=False, weight=True):
    model = MLP(hidden_size)
    optimizer = torch.optim.Adam(params=model.parameters(), lr=lr)
    loss, acc, ewc = {}, {}, {}
    for task in range(num_task):
        loss[task] = []
        acc[task] = []

        if task == 0:
            for _ in range(epochs):
                loss[task].append(normal_train(model, optimizer, train_loader[task]))
                acc[task].append(test(model, test_loader[task]))
        else:
            old_tasks = []
            for sub_task in range(task):
                old_tasks = old_tasks + list(train_loader[sub_task].dataset.data.split(1))
            old_tasks = random.sample(old_tasks, k=sample_size)
            for _ in range(epochs):
                loss[task].append(ewc_train(model, optimizer, train_loader[task], EWC(model, old_tasks), importance))
                for sub_task in range(task + 1):
                    acc[sub_task].append(test(model, test_loader[sub_task]))
        print(f"[EWC] after task {task}: loss {loss[task][0]:.4f} -> {loss[task][-1]:.4f}, acc "
              + " ".join(f"t{s}={acc[s][-1]:.3f}" for s in range(task + 1)))
    return loss, acc


loss, acc = standard_process(epochs)
loss_ewc, acc_ewc = ewc_process(epochs, importance=importance)
print("final mean accuracy over tasks: SGD %.3f  EWC %.3f" % (
    np.mean([acc[t][-1] for t in range(num_task)]), np.mean([acc_ewc[t][-1] for t in range(num_task)])))
